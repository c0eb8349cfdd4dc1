/* pe_relu_s8, pe_relu6_s8, pe_relu_f32, pe_relu6_f32 - standalone activations, bit-exact with
 * TFLM's RELU (int8: requantize, then clamp at the output zero point) and RELU6 (int8: clamp
 * in the input's quantization, no requantization). */
#include "pe_kernels.h"
#include "pe_requant.h"

void pe_relu_s8(const pe_requant_params *params, int32_t size, const int8_t *input,
                int8_t *output)
{
    pe_quantize_s8_s8(params, size, input, output);
}

void pe_relu6_s8(const pe_activation *params, int32_t size, const int8_t *input,
                 int8_t *output)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = input[i];
        output[i] = (int8_t)(v > params->max ? params->max : (v < params->min ? params->min : v));
    }
}

void pe_relu_f32(int32_t size, const float *input, float *output)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = input[i] < 0.0f ? 0.0f : input[i];
    }
}

void pe_relu6_f32(int32_t size, const float *input, float *output)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const float v = input[i];
        output[i] = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
    }
}
