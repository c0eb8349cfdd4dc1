/* pe_depthwise_conv2d_s8 - int8 depthwise convolution with a depth multiplier, bit-exact
 * with TFLM's reference DepthwiseConvPerChannel. */
#include "pe_kernels.h"
#include "pe_requant.h"

void pe_depthwise_conv2d_s8(const pe_context *ctx, const pe_dw_conv_params *params,
                            const pe_per_channel_quant *quant, const pe_dims *input_dims,
                            const int8_t *input, const pe_dims *filter_dims,
                            const int8_t *filter, const int32_t *bias,
                            const pe_dims *output_dims, int8_t *output)
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
                        uint32_t acc = 0u;      /* wrapping int32 accumulator */
                        int32_t value;
                        for (ky = 0; ky < k_h; ++ky) {
                            const int32_t iy = iy0 + ky * params->dilation.h;
                            if (iy < 0 || iy >= in_h) {
                                continue;
                            }
                            for (kx = 0; kx < k_w; ++kx) {
                                const int32_t ix = ix0 + kx * params->dilation.w;
                                int32_t x;
                                int32_t w;
                                if (ix < 0 || ix >= in_w) {
                                    continue;
                                }
                                x = input[((b * in_h + iy) * in_w + ix) * in_c + ic];
                                w = filter[(ky * k_w + kx) * out_c + oc];
                                acc += (uint32_t)(w * (x + params->input_offset));
                            }
                        }
                        if (bias != 0) {
                            acc += (uint32_t)bias[oc];
                        }
                        value = pe_multiply_by_quantized_multiplier(
                            pe_s32_from_u32(acc), quant->multiplier[oc], quant->shift[oc]);
                        value = pe_offset_clamp_s32(value, params->output_offset,
                                                    params->activation.min,
                                                    params->activation.max);
                        output[((b * out_h + oy) * out_w + ox) * out_c + oc] = (int8_t)value;
                    }
                }
            }
        }
    }
}
