/* pe_avg_pool2d_grad_f32, pe_max_pool2d_grad_f32 - fp32 pooling gradients
 * (codegen/golden/train_grads.py), float32 from +0.0, summed over the taps (kh, kw)
 * ascending through which windows reach each input element:
 *
 *   avg: dx[n,ih,iw,c] = sum of dy[n,oh,ow,c] / float32(count[oh,ow])  (in-image taps)
 *   max: dx[n,ih,iw,c] = sum of dy[n,oh,ow,c] over windows whose first maximum is (ih, iw)
 */
#include "pe_pool2d_grad.h"
#include "pe_train_kernels.h"

void pe_avg_pool2d_grad_f32(const pe_context *ctx, const pe_pool_grad_params *params,
                            const pe_dims *dy_dims, const float *dy, const pe_dims *filter_dims,
                            const pe_dims *dx_dims, float *dx)
{
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t ch = dx_dims->c;
    int32_t n, ih, iw, c, fy, fx;
    (void)ctx;

    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < ch; ++c) {
                    float acc = 0.0f;
                    for (fy = 0; fy < filter_dims->h; ++fy) {
                        const int32_t oy = pe_pool_window(ih, fy, params->stride.h,
                                                          params->padding.h, out_h);
                        int32_t rows;
                        if (oy < 0) {
                            continue;
                        }
                        rows = pe_pool_taps(oy * params->stride.h - params->padding.h,
                                            filter_dims->h, dx_dims->h);
                        for (fx = 0; fx < filter_dims->w; ++fx) {
                            const int32_t ox = pe_pool_window(iw, fx, params->stride.w,
                                                              params->padding.w, out_w);
                            int32_t count;
                            if (ox < 0) {
                                continue;
                            }
                            count = rows * pe_pool_taps(ox * params->stride.w
                                                        - params->padding.w,
                                                        filter_dims->w, dx_dims->w);
                            acc = acc + dy[((n * out_h + oy) * out_w + ox) * ch + c]
                                        / (float)count;
                        }
                    }
                    dx[((n * dx_dims->h + ih) * dx_dims->w + iw) * ch + c] = acc;
                }
            }
        }
    }
}

void pe_max_pool2d_grad_f32(const pe_context *ctx, const pe_pool_grad_params *params,
                            const pe_dims *dy_dims, const float *dy, const int8_t *x,
                            const pe_dims *filter_dims, const pe_dims *dx_dims, float *dx)
{
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t ch = dx_dims->c;
    int32_t n, ih, iw, c, fy, fx;
    (void)ctx;

    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < ch; ++c) {
                    float acc = 0.0f;
                    for (fy = 0; fy < filter_dims->h; ++fy) {
                        const int32_t oy = pe_pool_window(ih, fy, params->stride.h,
                                                          params->padding.h, out_h);
                        if (oy < 0) {
                            continue;
                        }
                        for (fx = 0; fx < filter_dims->w; ++fx) {
                            const int32_t ox = pe_pool_window(iw, fx, params->stride.w,
                                                              params->padding.w, out_w);
                            if (ox < 0) {
                                continue;
                            }
                            if (pe_pool_argmax(params, x, dx_dims, filter_dims, n, oy, ox, c)
                                == fy * filter_dims->w + fx) {
                                acc = acc + dy[((n * out_h + oy) * out_w + ox) * ch + c];
                            }
                        }
                    }
                    dx[((n * dx_dims->h + ih) * dx_dims->w + iw) * ch + c] = acc;
                }
            }
        }
    }
}
