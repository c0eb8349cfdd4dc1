/* pe_pad_s8, pe_pad_f32 - constant padding of a 4-D tensor (before = params->before,
 * after = whatever output_dims leaves). */
#include "pe_kernels.h"

/* Whether output coordinate o lies in the copied (input) part of a dimension. */
static int pe_pad_inside(int32_t o, int32_t before, int32_t extent)
{
    return o >= before && o < before + extent;
}

void pe_pad_s8(const pe_pad_params *params, const pe_dims *input_dims, const int8_t *input,
               const pe_dims *output_dims, int8_t *output)
{
    const pe_dims *b = &params->before;
    int32_t n, h, w, c;
    for (n = 0; n < output_dims->n; ++n) {
        for (h = 0; h < output_dims->h; ++h) {
            for (w = 0; w < output_dims->w; ++w) {
                const int row = pe_pad_inside(n, b->n, input_dims->n)
                                && pe_pad_inside(h, b->h, input_dims->h)
                                && pe_pad_inside(w, b->w, input_dims->w);
                for (c = 0; c < output_dims->c; ++c) {
                    *output++ = row && pe_pad_inside(c, b->c, input_dims->c)
                        ? input[(((n - b->n) * input_dims->h + h - b->h) * input_dims->w
                                 + w - b->w) * input_dims->c + c - b->c]
                        : (int8_t)params->pad_value;
                }
            }
        }
    }
}

void pe_pad_f32(const pe_pad_params_f32 *params, const pe_dims *input_dims, const float *input,
                const pe_dims *output_dims, float *output)
{
    const pe_dims *b = &params->before;
    int32_t n, h, w, c;
    for (n = 0; n < output_dims->n; ++n) {
        for (h = 0; h < output_dims->h; ++h) {
            for (w = 0; w < output_dims->w; ++w) {
                const int row = pe_pad_inside(n, b->n, input_dims->n)
                                && pe_pad_inside(h, b->h, input_dims->h)
                                && pe_pad_inside(w, b->w, input_dims->w);
                for (c = 0; c < output_dims->c; ++c) {
                    *output++ = row && pe_pad_inside(c, b->c, input_dims->c)
                        ? input[(((n - b->n) * input_dims->h + h - b->h) * input_dims->w
                                 + w - b->w) * input_dims->c + c - b->c]
                        : params->pad_value;
                }
            }
        }
    }
}
