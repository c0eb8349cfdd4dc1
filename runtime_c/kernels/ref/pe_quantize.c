/* pe_quantize_f32_s8, pe_quantize_s8_s8, pe_dequantize_s8_f32 - bit-exact with TFLM's
 * AffineQuantize, Requantize and Dequantize. */
#include "pe_kernels.h"
#include "pe_requant.h"

/* round(v) half away from zero for |v| < 2^23, where a float has a fraction (no libm). */
static float pe_round_half_away_f32(float v)
{
    const float a = v < 0.0f ? -v : v;
    float r;
    if (!(a < 8388608.0f)) {
        return v;                       /* already an integer (or NaN / inf) */
    }
    r = (float)(int32_t)a;              /* trunc; a - r is exact */
    if (a - r >= 0.5f) {
        r += 1.0f;
    }
    return v < 0.0f ? -r : r;
}

void pe_quantize_f32_s8(const pe_affine_params_f32 *params, int32_t size, const float *input,
                        int8_t *output)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const float q = pe_round_half_away_f32(input[i] / params->scale);
        int32_t value;
        if (q != q) {
            value = 0;                  /* NaN */
        } else if (q >= 256.0f) {
            value = 256;                /* saturates below, whatever the zero point */
        } else if (q <= -256.0f) {
            value = -256;
        } else {
            value = (int32_t)q;
        }
        output[i] = (int8_t)pe_offset_clamp_s32(value, params->zero_point, INT8_MIN,
                                                INT8_MAX);
    }
}

void pe_quantize_s8_s8(const pe_requant_params *params, int32_t size, const int8_t *input,
                       int8_t *output)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t value = pe_multiply_by_quantized_multiplier(
            (int32_t)input[i] + params->input_offset, params->multiplier, params->shift);
        output[i] = (int8_t)pe_offset_clamp_s32(value, params->output_offset,
                                                params->activation.min,
                                                params->activation.max);
    }
}

void pe_dequantize_s8_f32(const pe_affine_params_f32 *params, int32_t size,
                          const int8_t *input, float *output)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        /* |q - zp| < 2^9 and scale has 24 bits: the product is rounded once, in float32
         * exactly as the double product TFLM rounds to float. */
        output[i] = params->scale * (float)((int32_t)input[i] - params->zero_point);
    }
}
