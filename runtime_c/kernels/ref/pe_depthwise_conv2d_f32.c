/* pe_depthwise_conv2d_f32 - float32 depthwise convolution with a depth multiplier
 * (TFLite reference order: taps in float32, then bias, then the clamp). */
#include "pe_kernels.h"
#include "pe_float.h"

void pe_depthwise_conv2d_f32(const pe_context *ctx, const pe_dw_conv_params_f32 *params,
                             const pe_dims *input_dims, const float *input,
                             const pe_dims *filter_dims, const float *filter, const float *bias,
                             const pe_dims *output_dims, float *output)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t ch_mult = params->ch_mult;
    int32_t b, oy, ox, ic, m, ky, kx;
    (void)ctx;

    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                for (ic = 0; ic < in_c; ++ic) {
                    for (m = 0; m < ch_mult; ++m) {
                        const int32_t oc = ic * ch_mult + m;
                        float acc = 0.0f;
                        for (ky = 0; ky < k_h; ++ky) {
                            const int32_t iy = iy0 + ky * params->dilation.h;
                            if (iy < 0 || iy >= in_h) {
                                continue;
                            }
                            for (kx = 0; kx < k_w; ++kx) {
                                const int32_t ix = ix0 + kx * params->dilation.w;
                                if (ix < 0 || ix >= in_w) {
                                    continue;
                                }
                                acc += input[((b * in_h + iy) * in_w + ix) * in_c + ic]
                                       * filter[(ky * k_w + kx) * out_c + oc];
                            }
                        }
                        if (bias != 0) {
                            acc += bias[oc];
                        }
                        output[((b * out_h + oy) * out_w + ox) * out_c + oc] =
                            pe_clamp_f32(acc, params->activation.min, params->activation.max);
                    }
                }
            }
        }
    }
}
