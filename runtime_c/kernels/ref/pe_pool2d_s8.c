/* pe_avg_pool2d_s8, pe_max_pool2d_s8 - int8 pooling, bit-exact with TFLM's reference
 * AveragePool / MaxPool: windows are clipped to the image (padding taps are not counted). */
#include "pe_kernels.h"
#include "pe_window.h"
#include "pe_requant.h"

void pe_avg_pool2d_s8(const pe_context *ctx, const pe_pool_params *params,
                      const pe_dims *input_dims, const int8_t *input,
                      const pe_dims *filter_dims, const pe_dims *output_dims, int8_t *output)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    int32_t b, oy, ox, c, fy, fx;
    (void)ctx;

    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            int32_t fy0, fy1;
            pe_window(iy0, filter_dims->h, in_h, &fy0, &fy1);
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                int32_t fx0, fx1, count;
                pe_window(ix0, filter_dims->w, in_w, &fx0, &fx1);
                count = (fy1 - fy0) * (fx1 - fx0);
                for (c = 0; c < ch; ++c) {
                    int32_t acc = 0;
                    int32_t value = 0;
                    for (fy = fy0; fy < fy1; ++fy) {
                        for (fx = fx0; fx < fx1; ++fx) {
                            acc += input[((b * in_h + iy0 + fy) * in_w + ix0 + fx) * ch + c];
                        }
                    }
                    /* Rounding half away from zero with C's truncating division. */
                    if (count > 0) {
                        value = acc > 0 ? (acc + count / 2) / count
                                        : (acc - count / 2) / count;
                    }
                    output[((b * out_h + oy) * out_w + ox) * ch + c] = (int8_t)pe_clamp_s32(
                        value, params->activation.min, params->activation.max);
                }
            }
        }
    }
}

void pe_max_pool2d_s8(const pe_context *ctx, const pe_pool_params *params,
                      const pe_dims *input_dims, const int8_t *input,
                      const pe_dims *filter_dims, const pe_dims *output_dims, int8_t *output)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    int32_t b, oy, ox, c, fy, fx;
    (void)ctx;

    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            int32_t fy0, fy1;
            pe_window(iy0, filter_dims->h, in_h, &fy0, &fy1);
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                int32_t fx0, fx1;
                pe_window(ix0, filter_dims->w, in_w, &fx0, &fx1);
                for (c = 0; c < ch; ++c) {
                    int32_t max = INT8_MIN;
                    for (fy = fy0; fy < fy1; ++fy) {
                        for (fx = fx0; fx < fx1; ++fx) {
                            const int32_t v =
                                input[((b * in_h + iy0 + fy) * in_w + ix0 + fx) * ch + c];
                            max = v > max ? v : max;
                        }
                    }
                    output[((b * out_h + oy) * out_w + ox) * ch + c] = (int8_t)pe_clamp_s32(
                        max, params->activation.min, params->activation.max);
                }
            }
        }
    }
}
