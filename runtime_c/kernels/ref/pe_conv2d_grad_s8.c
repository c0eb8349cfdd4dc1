/* pe_conv2d_grad_input_s8, pe_conv2d_grad_weight_s8, pe_depthwise_conv2d_grad_input_s8,
 * pe_depthwise_conv2d_grad_weight_s8 - int8 convolution gradients, integer only
 * (codegen/golden/train_conv.py *_i8):
 *
 * grad_input:  dys[n,oh,ow,o] = MBQM(dy_q << b, M_o, k_o)          (b = prescale_shift)
 *              acc[n,ih,iw,c] = sum over the fp32 kernel's taps of dys * w_q   (int32)
 *              (dx, e_dx) = rescale(acc, e - b, output_multiplier, output_shift)
 * grad_weight: dw[j,kh,kw,c] = sum over in-image (n, oh, ow) of (x_q + input_offset) * dy_q,
 *              int32, exponent e (the code generator checks N*OH*OW*255*127 < 2^31).
 *
 * acc is computed twice (its extremes, then the values): no int32 copy of dx is kept.
 */
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"
#include "pe_window.h"

static int32_t pe_prescale(int32_t dy, const pe_grad_input_quant *quant, int32_t o)
{
    return pe_multiply_by_quantized_multiplier(dy * (1 << quant->prescale_shift),
                                               quant->multiplier[o], quant->shift[o]);
}

/* acc of one dx element of a (grouped) conv2d. */
static int32_t pe_conv_acc(const pe_conv_grad_params *params, const pe_grad_input_quant *quant,
                           const pe_dims *dy_dims, const int8_t *dy,
                           const pe_dims *filter_dims, const int8_t *filter, int32_t groups,
                           int32_t n, int32_t ih, int32_t iw, int32_t c)
{
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t k_c = filter_dims->c;
    const int32_t per_group = out_c / groups;
    const int32_t o0 = (c / k_c) * per_group;
    const int32_t ci = c % k_c;
    int32_t acc = 0;
    int32_t ky, kx, o;
    for (ky = 0; ky < k_h; ++ky) {
        const int32_t oy = pe_tap_source(ih, ky, params->stride.h, params->padding.h,
                                         params->dilation.h, out_h);
        if (oy < 0) {
            continue;
        }
        for (kx = 0; kx < k_w; ++kx) {
            const int32_t ox = pe_tap_source(iw, kx, params->stride.w, params->padding.w,
                                             params->dilation.w, out_w);
            const int8_t *g;
            if (ox < 0) {
                continue;
            }
            g = dy + ((n * out_h + oy) * out_w + ox) * out_c;
            for (o = o0; o < o0 + per_group; ++o) {
                acc += pe_prescale(g[o], quant, o)
                       * filter[((o * k_h + ky) * k_w + kx) * k_c + ci];
            }
        }
    }
    return acc;
}

void pe_conv2d_grad_input_s8(const pe_context *ctx, const pe_conv_grad_params *params,
                             const pe_grad_input_quant *quant, const pe_dims *dy_dims,
                             const int8_t *dy, const int32_t *dy_exp,
                             const pe_dims *filter_dims, const int8_t *filter,
                             const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const int32_t groups = dx_dims->c / filter_dims->c;
    const int32_t e = *dy_exp;
    pe_range range = pe_range_zero();
    pe_rescale_plan plan = {0, 0};
    int32_t n, ih, iw, c, pass;
    (void)ctx;

    for (pass = 0; pass < 2; ++pass) {
        int8_t *out = dx;
        if (pass == 1) {
            plan = pe_rescale_plan_make(&range, quant->output_multiplier);
        }
        for (n = 0; n < dx_dims->n; ++n) {
            for (ih = 0; ih < dx_dims->h; ++ih) {
                for (iw = 0; iw < dx_dims->w; ++iw) {
                    for (c = 0; c < dx_dims->c; ++c) {
                        const int32_t acc = pe_conv_acc(params, quant, dy_dims, dy,
                                                        filter_dims, filter, groups, n, ih,
                                                        iw, c);
                        if (pass == 0) {
                            pe_range_add(&range, acc);
                        } else {
                            *out++ = pe_rescale_value(acc, quant->output_multiplier, &plan);
                        }
                    }
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(e - quant->prescale_shift, quant->output_shift, &plan);
}

void pe_conv2d_grad_weight_s8(const pe_context *ctx, const pe_conv_grad_weight_params *params,
                              const int32_t *channels, const pe_dims *x_dims, const int8_t *x,
                              const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                              const pe_dims *dw_dims, int32_t *dw, int32_t *dw_exp)
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
                    int32_t acc = 0;
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
                                if (ix < 0 || ix >= in_w) {
                                    continue;
                                }
                                acc += (x[((n * in_h + iy) * in_w + ix) * in_c + c0 + ci]
                                        + params->input_offset)
                                       * dy[((n * out_h + oy) * out_w + ox) * out_c + o];
                            }
                        }
                    }
                    dw[((j * k_h + ky) * k_w + kx) * k_c + ci] = acc;
                }
            }
        }
    }
    *dw_exp = *dy_exp;
}

/* acc of one dx element of a depthwise convolution. */
static int32_t pe_dw_acc(const pe_dw_conv_grad_params *params, const pe_grad_input_quant *quant,
                         const pe_dims *dy_dims, const int8_t *dy, const pe_dims *filter_dims,
                         const int8_t *filter, int32_t n, int32_t ih, int32_t iw, int32_t c)
{
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_w = filter_dims->w;
    const int32_t mult = params->ch_mult;
    int32_t acc = 0;
    int32_t ky, kx, m;
    for (ky = 0; ky < filter_dims->h; ++ky) {
        const int32_t oy = pe_tap_source(ih, ky, params->stride.h, params->padding.h,
                                         params->dilation.h, out_h);
        if (oy < 0) {
            continue;
        }
        for (kx = 0; kx < k_w; ++kx) {
            const int32_t ox = pe_tap_source(iw, kx, params->stride.w, params->padding.w,
                                             params->dilation.w, out_w);
            const int8_t *g;
            if (ox < 0) {
                continue;
            }
            g = dy + ((n * out_h + oy) * out_w + ox) * out_c;
            for (m = 0; m < mult; ++m) {
                const int32_t o = c * mult + m;
                acc += pe_prescale(g[o], quant, o) * filter[(ky * k_w + kx) * out_c + o];
            }
        }
    }
    return acc;
}

void pe_depthwise_conv2d_grad_input_s8(const pe_context *ctx,
                                       const pe_dw_conv_grad_params *params,
                                       const pe_grad_input_quant *quant,
                                       const pe_dims *dy_dims, const int8_t *dy,
                                       const int32_t *dy_exp, const pe_dims *filter_dims,
                                       const int8_t *filter, const pe_dims *dx_dims,
                                       int8_t *dx, int32_t *dx_exp)
{
    const int32_t e = *dy_exp;
    pe_range range = pe_range_zero();
    pe_rescale_plan plan = {0, 0};
    int32_t n, ih, iw, c, pass;
    (void)ctx;

    for (pass = 0; pass < 2; ++pass) {
        int8_t *out = dx;
        if (pass == 1) {
            plan = pe_rescale_plan_make(&range, quant->output_multiplier);
        }
        for (n = 0; n < dx_dims->n; ++n) {
            for (ih = 0; ih < dx_dims->h; ++ih) {
                for (iw = 0; iw < dx_dims->w; ++iw) {
                    for (c = 0; c < dx_dims->c; ++c) {
                        const int32_t acc = pe_dw_acc(params, quant, dy_dims, dy, filter_dims,
                                                      filter, n, ih, iw, c);
                        if (pass == 0) {
                            pe_range_add(&range, acc);
                        } else {
                            *out++ = pe_rescale_value(acc, quant->output_multiplier, &plan);
                        }
                    }
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(e - quant->prescale_shift, quant->output_shift, &plan);
}

void pe_depthwise_conv2d_grad_weight_s8(const pe_context *ctx,
                                        const pe_dw_conv_grad_weight_params *params,
                                        const int32_t *channels, const pe_dims *x_dims,
                                        const int8_t *x, const pe_dims *dy_dims,
                                        const int8_t *dy, const int32_t *dy_exp,
                                        const pe_dims *dw_dims, int32_t *dw, int32_t *dw_exp)
{
    const int32_t in_h = x_dims->h;
    const int32_t in_w = x_dims->w;
    const int32_t in_c = x_dims->c;
    const int32_t out_h = dy_dims->h;
    const int32_t out_w = dy_dims->w;
    const int32_t out_c = dy_dims->c;
    const int32_t k_w = dw_dims->w;
    const int32_t count = dw_dims->c;
    int32_t ky, kx, j, n, oy, ox;
    (void)ctx;

    for (ky = 0; ky < dw_dims->h; ++ky) {
        for (kx = 0; kx < k_w; ++kx) {
            for (j = 0; j < count; ++j) {
                const int32_t o = channels != 0 ? channels[j] : j;
                const int32_t c = o / params->ch_mult;
                int32_t acc = 0;
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
                            if (ix < 0 || ix >= in_w) {
                                continue;
                            }
                            acc += (x[((n * in_h + iy) * in_w + ix) * in_c + c]
                                    + params->input_offset)
                                   * dy[((n * out_h + oy) * out_w + ox) * out_c + o];
                        }
                    }
                }
                dw[(ky * k_w + kx) * count + j] = acc;
            }
        }
    }
    *dw_exp = *dy_exp;
}
