/* pe_add_f32, pe_mul_f32 - float32 ADD and MUL with 4-D broadcasting and a fused clamp. */
#include "pe_broadcast.h"
#include "pe_float.h"
#include "pe_kernels.h"

void pe_add_f32(const pe_activation_f32 *params, const pe_dims *input1_dims,
                const float *input1, const pe_dims *input2_dims, const float *input2,
                const pe_dims *output_dims, float *output)
{
    const pe_dims s1 = pe_broadcast_strides(input1_dims);
    const pe_dims s2 = pe_broadcast_strides(input2_dims);
    int32_t n, h, w, c;
    for (n = 0; n < output_dims->n; ++n) {
        for (h = 0; h < output_dims->h; ++h) {
            for (w = 0; w < output_dims->w; ++w) {
                for (c = 0; c < output_dims->c; ++c) {
                    *output++ = pe_clamp_f32(input1[pe_broadcast_offset(&s1, n, h, w, c)]
                                             + input2[pe_broadcast_offset(&s2, n, h, w, c)],
                                             params->min, params->max);
                }
            }
        }
    }
}

void pe_mul_f32(const pe_activation_f32 *params, const pe_dims *input1_dims,
                const float *input1, const pe_dims *input2_dims, const float *input2,
                const pe_dims *output_dims, float *output)
{
    const pe_dims s1 = pe_broadcast_strides(input1_dims);
    const pe_dims s2 = pe_broadcast_strides(input2_dims);
    int32_t n, h, w, c;
    for (n = 0; n < output_dims->n; ++n) {
        for (h = 0; h < output_dims->h; ++h) {
            for (w = 0; w < output_dims->w; ++w) {
                for (c = 0; c < output_dims->c; ++c) {
                    *output++ = pe_clamp_f32(input1[pe_broadcast_offset(&s1, n, h, w, c)]
                                             * input2[pe_broadcast_offset(&s2, n, h, w, c)],
                                             params->min, params->max);
                }
            }
        }
    }
}
