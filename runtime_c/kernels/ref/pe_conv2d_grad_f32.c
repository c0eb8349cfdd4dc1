/* pe_conv2d_grad_input_f32, pe_conv2d_grad_weight_f32, pe_depthwise_conv2d_grad_input_f32,
 * pe_depthwise_conv2d_grad_weight_f32 - fp32 convolution gradients with the summation orders
 * of docs/training.md (codegen/golden/train_conv.py *_f32), float32 from +0.0:
 *
 *   conv2d dx[n,ih,iw,c]  = sum over (kh, kw, o in c's group) of dy[n,oh,ow,o] * w_r[o,kh,kw,c']
 *   dw dx[n,ih,iw,c]      = sum over (kh, kw, m) of dy[n,oh,ow,c*M+m] * w_r[0,kh,kw,c*M+m]
 *   conv2d dw[j,kh,kw,c]  = sum over (n, oh, ow) of dy[n,oh,ow,o_j] * x_r[n,ih,iw,c'']
 *   dw dw[0,kh,kw,j]      = sum over (n, oh, ow) of dy[n,oh,ow,o_j] * x_r[n,ih,iw,o_j/M]
 *
 * w_r = float32(w_q) * scale[o], x_r = float32(x_q + input_offset) * input_scale; (oh, ow)
 * is the output position that reaches (ih, iw) through tap (kh, kw), when there is one
 * (ih = oh * stride - pad + kh * dilation); padding taps are skipped.
 */
#include "pe_train_kernels.h"
#include "pe_window.h"

void pe_conv2d_grad_input_f32(const pe_context *ctx, const pe_conv_grad_params *params,
                              const float *filter_scale, const pe_dims *dy_dims,
                              const float *dy, const pe_dims *filter_dims,
                              const int8_t *filter, const pe_dims *dx_dims, float *dx)
{
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t k_c = filter_dims->c;
    const int32_t groups = dx_dims->c / k_c;
    const int32_t out_c_per_group = out_c / groups;
    int32_t n, ih, iw, c, ky, kx, o;
    (void)ctx;

    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < dx_dims->c; ++c) {
                    const int32_t group = c / k_c;
                    const int32_t ci = c % k_c;
                    const int32_t o0 = group * out_c_per_group;
                    float acc = 0.0f;
                    for (ky = 0; ky < k_h; ++ky) {
                        const int32_t oy = pe_tap_source(ih, ky, params->stride.h,
                                                         params->padding.h,
                                                         params->dilation.h, out_h);
                        if (oy < 0) {
                            continue;
                        }
                        for (kx = 0; kx < k_w; ++kx) {
                            const int32_t ox = pe_tap_source(iw, kx, params->stride.w,
                                                             params->padding.w,
                                                             params->dilation.w, out_w);
                            const float *g;
                            if (ox < 0) {
                                continue;
                            }
                            g = dy + ((n * out_h + oy) * out_w + ox) * out_c;
                            for (o = o0; o < o0 + out_c_per_group; ++o) {
                                const float w_r =
                                    (float)filter[((o * k_h + ky) * k_w + kx) * k_c + ci]
                                    * filter_scale[o];
                                acc = acc + g[o] * w_r;
                            }
                        }
                    }
                    dx[((n * dx_dims->h + ih) * dx_dims->w + iw) * dx_dims->c + c] = acc;
                }
            }
        }
    }
}

void pe_conv2d_grad_weight_f32(const pe_context *ctx,
                               const pe_conv_grad_weight_params_f32 *params,
                               const int32_t *channels, const pe_dims *x_dims, const int8_t *x,
                               const pe_dims *dy_dims, const float *dy, const pe_dims *dw_dims,
                               float *dw)
{
    const int32_t in_h = x_dims->h;
    const int32_t in_w = x_dims->w;
    const int32_t in_c = x_dims->c;
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_h = dw_dims->h;
    const int32_t k_w = dw_dims->w;
    const int32_t k_c = dw_dims->c;
    const int32_t out_c_per_group = out_c / (in_c / k_c);
    int32_t j, ky, kx, ci, n, oy, ox;
    (void)ctx;

    for (j = 0; j < dw_dims->n; ++j) {
        const int32_t o = channels != 0 ? channels[j] : j;
        const int32_t c0 = (o / out_c_per_group) * k_c;
        for (ky = 0; ky < k_h; ++ky) {
            for (kx = 0; kx < k_w; ++kx) {
                for (ci = 0; ci < k_c; ++ci) {
                    float acc = 0.0f;
                    for (n = 0; n < dy_dims->n; ++n) {
                        for (oy = 0; oy < out_h; ++oy) {
                            const int32_t iy = oy * params->stride.h - params->padding.h
                                               + ky * params->dilation.h;
                            if (iy < 0 || iy >= in_h) {
                                continue;
                            }
                            for (ox = 0; ox < out_w; ++ox) {
                                const int32_t ix = ox * params->stride.w - params->padding.w
                                                   + kx * params->dilation.w;
                                float x_r;
                                if (ix < 0 || ix >= in_w) {
                                    continue;
                                }
                                x_r = (float)(x[((n * in_h + iy) * in_w + ix) * in_c + c0 + ci]
                                              + params->input_offset) * params->input_scale;
                                acc = acc + dy[((n * out_h + oy) * out_w + ox) * out_c + o] * x_r;
                            }
                        }
                    }
                    dw[((j * k_h + ky) * k_w + kx) * k_c + ci] = acc;
                }
            }
        }
    }
}

void pe_depthwise_conv2d_grad_input_f32(const pe_context *ctx,
                                        const pe_dw_conv_grad_params *params,
                                        const float *filter_scale, const pe_dims *dy_dims,
                                        const float *dy, const pe_dims *filter_dims,
                                        const int8_t *filter, const pe_dims *dx_dims,
                                        float *dx)
{
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t mult = params->ch_mult;
    int32_t n, ih, iw, c, ky, kx, m;
    (void)ctx;

    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < dx_dims->c; ++c) {
                    float acc = 0.0f;
                    for (ky = 0; ky < k_h; ++ky) {
                        const int32_t oy = pe_tap_source(ih, ky, params->stride.h,
                                                         params->padding.h,
                                                         params->dilation.h, out_h);
                        if (oy < 0) {
                            continue;
                        }
                        for (kx = 0; kx < k_w; ++kx) {
                            const int32_t ox = pe_tap_source(iw, kx, params->stride.w,
                                                             params->padding.w,
                                                             params->dilation.w, out_w);
                            const float *g;
                            if (ox < 0) {
                                continue;
                            }
                            g = dy + ((n * out_h + oy) * out_w + ox) * out_c;
                            for (m = 0; m < mult; ++m) {
                                const int32_t o = c * mult + m;
                                const float w_r = (float)filter[(ky * k_w + kx) * out_c + o]
                                                  * filter_scale[o];
                                acc = acc + g[o] * w_r;
                            }
                        }
                    }
                    dx[((n * dx_dims->h + ih) * dx_dims->w + iw) * dx_dims->c + c] = acc;
                }
            }
        }
    }
}

void pe_depthwise_conv2d_grad_weight_f32(const pe_context *ctx,
                                         const pe_dw_conv_grad_weight_params_f32 *params,
                                         const int32_t *channels, const pe_dims *x_dims,
                                         const int8_t *x, const pe_dims *dy_dims,
                                         const float *dy, const pe_dims *dw_dims, float *dw)
{
    const int32_t in_h = x_dims->h;
    const int32_t in_w = x_dims->w;
    const int32_t in_c = x_dims->c;
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_h = dw_dims->h;
    const int32_t k_w = dw_dims->w;
    const int32_t count = dw_dims->c;
    int32_t ky, kx, j, n, oy, ox;
    (void)ctx;

    for (ky = 0; ky < k_h; ++ky) {
        for (kx = 0; kx < k_w; ++kx) {
            for (j = 0; j < count; ++j) {
                const int32_t o = channels != 0 ? channels[j] : j;
                const int32_t c = o / params->ch_mult;
                float acc = 0.0f;
                for (n = 0; n < dy_dims->n; ++n) {
                    for (oy = 0; oy < out_h; ++oy) {
                        const int32_t iy = oy * params->stride.h - params->padding.h
                                           + ky * params->dilation.h;
                        if (iy < 0 || iy >= in_h) {
                            continue;
                        }
                        for (ox = 0; ox < out_w; ++ox) {
                            const int32_t ix = ox * params->stride.w - params->padding.w
                                               + kx * params->dilation.w;
                            float x_r;
                            if (ix < 0 || ix >= in_w) {
                                continue;
                            }
                            x_r = (float)(x[((n * in_h + iy) * in_w + ix) * in_c + c]
                                          + params->input_offset) * params->input_scale;
                            acc = acc + dy[((n * out_h + oy) * out_w + ox) * out_c + o] * x_r;
                        }
                    }
                }
                dw[(ky * k_w + kx) * count + j] = acc;
            }
        }
    }
}
