/* pe_avg_pool2d_grad_s8, pe_max_pool2d_grad_s8 - int8 pooling gradients, integer only
 * (codegen/golden/train_grads.py avg_pool2d_grad_i8, max_pool2d_grad_i8):
 *
 *   avg: RECIP = (2^Q + count / 2) / count per window (C division, Q = recip_bits);
 *        acc[n,ih,iw,c] = sum over the windows reaching (ih, iw) of dy_q * RECIP;
 *        (dx, e_dx) = normalise(acc, e - Q)
 *   max: acc = sum of the dy_q routed to (ih, iw) (first maximum of each window);
 *        (dx, e_dx) = normalise(acc, e)
 *
 * acc is computed twice (its extremes, then the values).
 */
#include "pe_grad_fixed.h"
#include "pe_pool2d_grad.h"
#include "pe_train_kernels.h"

static int32_t pe_avg_acc(const pe_avg_pool_grad_params *params, const pe_dims *dy_dims,
                          const int8_t *dy, const pe_dims *filter_dims, const pe_dims *dx_dims,
                          int32_t n, int32_t ih, int32_t iw, int32_t c)
{
    const int32_t unit = (int32_t)1 << params->recip_bits;
    int32_t acc = 0;
    int32_t fy, fx;
    for (fy = 0; fy < filter_dims->h; ++fy) {
        const int32_t oy = pe_pool_window(ih, fy, params->stride.h, params->padding.h,
                                          dy_dims->h);
        int32_t rows;
        if (oy < 0) {
            continue;
        }
        rows = pe_pool_taps(oy * params->stride.h - params->padding.h, filter_dims->h,
                            dx_dims->h);
        for (fx = 0; fx < filter_dims->w; ++fx) {
            const int32_t ox = pe_pool_window(iw, fx, params->stride.w, params->padding.w,
                                              dy_dims->w);
            int32_t count;
            if (ox < 0) {
                continue;
            }
            count = rows * pe_pool_taps(ox * params->stride.w - params->padding.w,
                                        filter_dims->w, dx_dims->w);
            if (count > 0) {
                acc += dy[((n * dy_dims->h + oy) * dy_dims->w + ox) * dy_dims->c + c]
                       * ((unit + count / 2) / count);
            }
        }
    }
    return acc;
}

void pe_avg_pool2d_grad_s8(const pe_context *ctx, const pe_avg_pool_grad_params *params,
                           const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                           const pe_dims *filter_dims, const pe_dims *dx_dims, int8_t *dx,
                           int32_t *dx_exp)
{
    pe_range range = pe_range_zero();
    int32_t shift;
    int32_t n, ih, iw, c;
    int8_t *out = dx;
    (void)ctx;

    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < dx_dims->c; ++c) {
                    pe_range_add(&range, pe_avg_acc(params, dy_dims, dy, filter_dims, dx_dims,
                                                    n, ih, iw, c));
                }
            }
        }
    }
    shift = pe_normalise_shift(pe_range_max_abs(&range));
    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < dx_dims->c; ++c) {
                    *out++ = pe_normalise_value(pe_avg_acc(params, dy_dims, dy, filter_dims,
                                                           dx_dims, n, ih, iw, c), shift);
                }
            }
        }
    }
    *dx_exp = *dy_exp - params->recip_bits + shift;
}

static int32_t pe_max_acc(const pe_pool_grad_params *params, const pe_dims *dy_dims,
                          const int8_t *dy, const int8_t *x, const pe_dims *filter_dims,
                          const pe_dims *dx_dims, int32_t n, int32_t ih, int32_t iw, int32_t c)
{
    int32_t acc = 0;
    int32_t fy, fx;
    for (fy = 0; fy < filter_dims->h; ++fy) {
        const int32_t oy = pe_pool_window(ih, fy, params->stride.h, params->padding.h,
                                          dy_dims->h);
        if (oy < 0) {
            continue;
        }
        for (fx = 0; fx < filter_dims->w; ++fx) {
            const int32_t ox = pe_pool_window(iw, fx, params->stride.w, params->padding.w,
                                              dy_dims->w);
            if (ox < 0) {
                continue;
            }
            if (pe_pool_argmax(params, x, dx_dims, filter_dims, n, oy, ox, c)
                == fy * filter_dims->w + fx) {
                acc += dy[((n * dy_dims->h + oy) * dy_dims->w + ox) * dy_dims->c + c];
            }
        }
    }
    return acc;
}

void pe_max_pool2d_grad_s8(const pe_context *ctx, const pe_pool_grad_params *params,
                           const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                           const int8_t *x, const pe_dims *filter_dims, const pe_dims *dx_dims,
                           int8_t *dx, int32_t *dx_exp)
{
    pe_range range = pe_range_zero();
    int32_t shift;
    int32_t n, ih, iw, c;
    int8_t *out = dx;
    (void)ctx;

    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < dx_dims->c; ++c) {
                    pe_range_add(&range, pe_max_acc(params, dy_dims, dy, x, filter_dims,
                                                    dx_dims, n, ih, iw, c));
                }
            }
        }
    }
    shift = pe_normalise_shift(pe_range_max_abs(&range));
    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < dx_dims->h; ++ih) {
            for (iw = 0; iw < dx_dims->w; ++iw) {
                for (c = 0; c < dx_dims->c; ++c) {
                    *out++ = pe_normalise_value(pe_max_acc(params, dy_dims, dy, x, filter_dims,
                                                           dx_dims, n, ih, iw, c), shift);
                }
            }
        }
    }
    *dx_exp = *dy_exp + shift;
}
