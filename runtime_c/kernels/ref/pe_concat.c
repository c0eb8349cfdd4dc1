/* pe_concat_s8, pe_concat_f32 - CONCATENATION along one axis: outer_size rounds, each
 * copying every input's next inner block in turn; the fused activation clamps (int8
 * concatenation does not rescale: inputs share the output's quantization). */
#include "pe_float.h"
#include "pe_kernels.h"
#include "pe_requant.h"

void pe_concat_s8(const pe_concat_params *params, int32_t num_inputs,
                  const int32_t *input_inner_sizes, const int8_t *const *inputs,
                  int8_t *output)
{
    int32_t o, k, i;
    for (o = 0; o < params->outer_size; ++o) {
        for (k = 0; k < num_inputs; ++k) {
            const int32_t inner = input_inner_sizes[k];
            const int8_t *in = inputs[k] + o * inner;
            for (i = 0; i < inner; ++i) {
                *output++ = (int8_t)pe_clamp_s32(in[i], params->activation.min,
                                                 params->activation.max);
            }
        }
    }
}

void pe_concat_f32(const pe_concat_params_f32 *params, int32_t num_inputs,
                   const int32_t *input_inner_sizes, const float *const *inputs,
                   float *output)
{
    int32_t o, k, i;
    for (o = 0; o < params->outer_size; ++o) {
        for (k = 0; k < num_inputs; ++k) {
            const int32_t inner = input_inner_sizes[k];
            const float *in = inputs[k] + o * inner;
            for (i = 0; i < inner; ++i) {
                *output++ = pe_clamp_f32(in[i], params->activation.min,
                                         params->activation.max);
            }
        }
    }
}
