/* pe_add_s8 - int8 ADD with 4-D broadcasting, bit-exact with TFLM's reference AddElementwise
 * / BroadcastAdd4DSlow. */
#include "pe_broadcast.h"
#include "pe_kernels.h"
#include "pe_requant.h"

static int8_t pe_add_one_s8(const pe_add_params *p, int32_t a, int32_t b)
{
    const int32_t scaled1 = pe_multiply_by_quantized_multiplier(
        pe_shl_wrap_s32(a + p->input1_offset, p->left_shift), p->input1_multiplier,
        p->input1_shift);
    const int32_t scaled2 = pe_multiply_by_quantized_multiplier(
        pe_shl_wrap_s32(b + p->input2_offset, p->left_shift), p->input2_multiplier,
        p->input2_shift);
    const int32_t sum = pe_add_wrap_s32(scaled1, scaled2);
    const int32_t out = pe_multiply_by_quantized_multiplier(sum, p->output_multiplier,
                                                            p->output_shift);
    return (int8_t)pe_offset_clamp_s32(out, p->output_offset, p->activation.min,
                                       p->activation.max);
}

void pe_add_s8(const pe_add_params *params, const pe_dims *input1_dims, const int8_t *input1,
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
                    *output++ = pe_add_one_s8(params,
                                              input1[pe_broadcast_offset(&s1, n, h, w, c)],
                                              input2[pe_broadcast_offset(&s2, n, h, w, c)]);
                }
            }
        }
    }
}
