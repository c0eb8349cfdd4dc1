/* pe_conv2d_f32 - float32 2-D convolution (grouped when input_dims->c > filter_dims->c),
 * TFLite reference order: taps summed in float32, then bias, then the clamp. */
#include "pe_kernels.h"
#include "pe_float.h"

void pe_conv2d_f32(const pe_context *ctx, const pe_conv_params_f32 *params,
                   const pe_dims *input_dims, const float *input, const pe_dims *filter_dims,
                   const float *filter, const float *bias, const pe_dims *output_dims,
                   float *output)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t k_c = filter_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t groups = in_c / k_c;
    const int32_t out_c_per_group = out_c / groups;
    int32_t b, oy, ox, oc, ky, kx, ic;
    (void)ctx;

    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                for (oc = 0; oc < out_c; ++oc) {
                    const int32_t group = oc / out_c_per_group;
                    float acc = 0.0f;
                    for (ky = 0; ky < k_h; ++ky) {
                        const int32_t iy = iy0 + ky * params->dilation.h;
                        if (iy < 0 || iy >= in_h) {
                            continue;
                        }
                        for (kx = 0; kx < k_w; ++kx) {
                            const int32_t ix = ix0 + kx * params->dilation.w;
                            const float *x;
                            const float *w;
                            if (ix < 0 || ix >= in_w) {
                                continue;
                            }
                            x = input + ((b * in_h + iy) * in_w + ix) * in_c + group * k_c;
                            w = filter + ((oc * k_h + ky) * k_w + kx) * k_c;
                            for (ic = 0; ic < k_c; ++ic) {
                                acc += x[ic] * w[ic];
                            }
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
