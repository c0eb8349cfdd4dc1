/* pe_pad_grad_f32, pe_concat_grad_f32, pe_reshape_grad_f32 - fp32 gradients of the data
 * movement ops (codegen/golden/train_grads.py pad_grad, concat_grad, reshape_grad): dx is a
 * slice of dy, copied value for value. */
#include "pe_train_kernels.h"

void pe_pad_grad_f32(const pe_pad_grad_params *params, const pe_dims *dy_dims, const float *dy,
                     const pe_dims *dx_dims, float *dx)
{
    const pe_dims *b = &params->before;
    int32_t n, h, w, c;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                const float *src = dy + (((n + b->n) * dy_dims->h + h + b->h) * dy_dims->w
                                         + w + b->w) * dy_dims->c + b->c;
                for (c = 0; c < dx_dims->c; ++c) {
                    *dx++ = src[c];
                }
            }
        }
    }
}

void pe_concat_grad_f32(const pe_concat_grad_params *params, const float *dy, float *dx)
{
    int32_t o, i;
    for (o = 0; o < params->outer_size; ++o) {
        const float *src = dy + o * params->dy_inner_size + params->offset;
        for (i = 0; i < params->dx_inner_size; ++i) {
            *dx++ = src[i];
        }
    }
}

void pe_reshape_grad_f32(int32_t size, const float *dy, float *dx)
{
    int32_t i;
    if (dy == dx) {
        return;
    }
    for (i = 0; i < size; ++i) {
        dx[i] = dy[i];
    }
}
