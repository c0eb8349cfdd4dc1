/* pe_mul_s8 - int8 MUL with 4-D broadcasting, bit-exact with TFLM's reference Mul /
 * BroadcastMul4DSlow. */
#include "pe_broadcast.h"
#include "pe_kernels.h"
#include "pe_requant.h"

void pe_mul_s8(const pe_mul_params *params, const pe_dims *input1_dims, const int8_t *input1,
               const pe_dims *input2_dims, const int8_t *input2, const pe_dims *output_dims,
               int8_t *output)
{
    const pe_dims s1 = pe_broadcast_strides(input1_dims);
    const pe_dims s2 = pe_broadcast_strides(input2_dims);
    int32_t n, h, w, c;
    for (n = 0; n < output_dims->n; ++n) {
        for (h = 0; h < output_dims->h; ++h) {
            for (w = 0; w < output_dims->w; ++w) {
                for (c = 0; c < output_dims->c; ++c) {
                    const int32_t a = input1[pe_broadcast_offset(&s1, n, h, w, c)];
                    const int32_t b = input2[pe_broadcast_offset(&s2, n, h, w, c)];
                    const int32_t product = (a + params->input1_offset)
                                            * (b + params->input2_offset);
                    const int32_t out = pe_multiply_by_quantized_multiplier(
                        product, params->output_multiplier, params->output_shift);
                    *output++ = (int8_t)pe_offset_clamp_s32(out, params->output_offset,
                                                            params->activation.min,
                                                            params->activation.max);
                }
            }
        }
    }
}
