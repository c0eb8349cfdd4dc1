/* pe_pad_grad_s8, pe_concat_grad_s8, pe_reshape_grad_s8 - int8 gradients of the data
 * movement ops: q is sliced / copied, the exponent passes through unchanged. */
#include "pe_train_kernels.h"

void pe_pad_grad_s8(const pe_pad_grad_params *params, const pe_dims *dy_dims, const int8_t *dy,
                    const int32_t *dy_exp, const pe_dims *dx_dims, int8_t *dx,
                    int32_t *dx_exp)
{
    const pe_dims *b = &params->before;
    int32_t n, h, w, c;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                const int8_t *src = dy + (((n + b->n) * dy_dims->h + h + b->h) * dy_dims->w
                                          + w + b->w) * dy_dims->c + b->c;
                for (c = 0; c < dx_dims->c; ++c) {
                    *dx++ = src[c];
                }
            }
        }
    }
    *dx_exp = *dy_exp;
}

void pe_concat_grad_s8(const pe_concat_grad_params *params, const int8_t *dy,
                       const int32_t *dy_exp, int8_t *dx, int32_t *dx_exp)
{
    int32_t o, i;
    for (o = 0; o < params->outer_size; ++o) {
        const int8_t *src = dy + o * params->dy_inner_size + params->offset;
        for (i = 0; i < params->dx_inner_size; ++i) {
            *dx++ = src[i];
        }
    }
    *dx_exp = *dy_exp;
}

void pe_reshape_grad_s8(int32_t size, const int8_t *dy, const int32_t *dy_exp, int8_t *dx,
                        int32_t *dx_exp)
{
    int32_t i;
    if (dy != dx) {
        for (i = 0; i < size; ++i) {
            dx[i] = dy[i];
        }
    }
    *dx_exp = *dy_exp;
}
