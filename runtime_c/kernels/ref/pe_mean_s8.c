/* pe_mean_s8 - int8 MEAN over the dimensions that output_dims reduces to 1, bit-exact with
 * TFLM's QuantizedMeanOrSum (1/count folded into the multiplier ahead of time). */
#include "pe_kernels.h"
#include "pe_requant.h"

void pe_mean_s8(const pe_mean_params *params, const pe_dims *input_dims, const int8_t *input,
                const pe_dims *output_dims, int8_t *output)
{
    /* A dimension is reduced when the output has 1 there: it is then walked in full. */
    const int32_t rn = output_dims->n == 1 ? input_dims->n : 1;
    const int32_t rh = output_dims->h == 1 ? input_dims->h : 1;
    const int32_t rw = output_dims->w == 1 ? input_dims->w : 1;
    const int32_t rc = output_dims->c == 1 ? input_dims->c : 1;
    int32_t on, oh, ow, oc, n, h, w, c;
    for (on = 0; on < output_dims->n; ++on) {
        for (oh = 0; oh < output_dims->h; ++oh) {
            for (ow = 0; ow < output_dims->w; ++ow) {
                for (oc = 0; oc < output_dims->c; ++oc) {
                    uint32_t acc = 0u;          /* wrapping int32 sum of (x - zero point) */
                    int32_t value;
                    for (n = 0; n < rn; ++n) {
                        for (h = 0; h < rh; ++h) {
                            for (w = 0; w < rw; ++w) {
                                for (c = 0; c < rc; ++c) {
                                    const int32_t x = input[
                                        (((on + n) * input_dims->h + oh + h) * input_dims->w
                                         + ow + w) * input_dims->c + oc + c];
                                    acc += (uint32_t)(x + params->input_offset);
                                }
                            }
                        }
                    }
                    value = pe_multiply_by_quantized_multiplier(
                        pe_s32_from_u32(acc), params->multiplier, params->shift);
                    *output++ = (int8_t)pe_offset_clamp_s32(value, params->output_offset,
                                                            INT8_MIN, INT8_MAX);
                }
            }
        }
    }
}
