/* The arm backend's fp32 backward kernels: the ref kernels' signatures plus "_arm", bit-exact
 * with them and with the golden model (the same float32 products and sums in the same order,
 * docs/training.md), with the float work in pe_arm_f32.h's eight-wide loops (VLDM + VMLA on
 * cores with an FPU). codegen/backends/arm.py sends them only the configurations below; the
 * rest stays on ref.
 *
 *   convolutions with one group (any kernel, stride, padding, dilation) and fully connected:
 *     grad input   dx[p, c] = sum over (tap, o) of dy * w_r: w_r rows converted into the
 *                  scratch buffer a tap, a block of output channels and eight input channels
 *                  at a time, dx accumulating across taps and blocks (the same order);
 *   pointwise conv (1x1, stride 1, no padding, dilation 1, one group) and fully connected:
 *     grad weight  dw[j, c] = sum over p of dy[p, o_j] * x_r[p, c]: x_r of four positions at a
 *                  time in the scratch buffer, dw accumulating in place;
 *   depthwise (multiplier 1) grad input: per input pixel and eight channels, the in-image taps
 *     in (kh, kw) order, w_r of eight channels in the scratch buffer; written over dy (dx ==
 *     dy: stride 1, the same shape, top padding below the kernel height) with the dy rows
 *     still to be read (k_h - pad_h of them, eight channels) kept in a ring in the scratch;
 *   average pooling grad with windows that do not overlap: each input element receives at most
 *     one term, 0.0f + dy / count.
 *
 * w_r = float(w) * scale[o]; x_r = float(x + input_offset) * input_scale, as ref. */
#include "pe_arm_f32.h"
#include "pe_arm_kernels.h"
#include "pe_window.h"

enum { PE_ARM_OB = 64 };                 /* output channels per block of the grad-input buffer */

static const float pe_arm_zero8[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};

/* w_r rows o0 .. o0 + ob - 1, input channels c0 .. c0 + cw - 1 (cw <= 8; zeros after), as ob
 * rows of eight floats in b. */
static void pe_arm_wr_block(float *b, const int8_t *w, const float *scale, int32_t o0,
                            int32_t ob, int32_t c0, int32_t cw, int32_t in_c)
{
    int32_t o, j;
    for (o = 0; o < ob; ++o, b += 8) {
        const int8_t *row = w + (o0 + o) * in_c + c0;
        const float s = scale[o0 + o];
        if (cw == 8) {
            b[0] = (float)row[0] * s;
            b[1] = (float)row[1] * s;
            b[2] = (float)row[2] * s;
            b[3] = (float)row[3] * s;
            b[4] = (float)row[4] * s;
            b[5] = (float)row[5] * s;
            b[6] = (float)row[6] * s;
            b[7] = (float)row[7] * s;
        } else {
            for (j = 0; j < 8; ++j) {
                b[j] = j < cw ? (float)row[j] * s : 0.0f;
            }
        }
    }
}

/* dx[p, c0 .. c0 + cw - 1] += sum over the block's ob channels of g[p * stride + o] * w_r
 * (buf, pe_arm_wr_block) for p < rows, from +0.0f when first. */
static void pe_arm_dx_rows(float *dx, const float *g, int32_t stride, const float *buf,
                           int32_t rows, int32_t ob, int32_t c0, int32_t cw, int32_t in_c,
                           int32_t first)
{
    int32_t p, j;
    for (p = 0; p < rows; ++p) {
        float *out = dx + p * in_c + c0;
        if (cw == 8) {
            pe_arm_f32_axpy8(first ? pe_arm_zero8 : out, out, g + p * stride, buf, ob);
        } else {
            float acc[8];
            for (j = 0; j < 8; ++j) {
                acc[j] = (first || j >= cw) ? 0.0f : out[j];
            }
            pe_arm_f32_axpy8(acc, acc, g + p * stride, buf, ob);
            for (j = 0; j < cw; ++j) {
                out[j] = acc[j];
            }
        }
    }
}

/* dx[p, c] = sum over o of dy[p, o] * (float(w[o, c]) * scale[o]) for p < rows, c < in_c */
static void pe_arm_dx_f32(float *buf, const float *dy, const int8_t *w, const float *scale,
                          float *dx, int32_t rows, int32_t out_c, int32_t in_c)
{
    int32_t c0, o0;
    if (rows == 1) {                 /* one position: convert the weights on the way */
        for (c0 = 0; c0 + 8 <= in_c; c0 += 8) {
            pe_arm_f32_axpy8_s8(pe_arm_zero8, dx + c0, dy, w + c0, in_c, scale, out_c);
        }
        if (c0 == in_c) {
            return;
        }
    } else {
        c0 = 0;
    }
    for (; c0 < in_c; c0 += 8) {
        const int32_t cw = in_c - c0 < 8 ? in_c - c0 : 8;
        for (o0 = 0; o0 < out_c; o0 += PE_ARM_OB) {
            const int32_t ob = out_c - o0 < PE_ARM_OB ? out_c - o0 : PE_ARM_OB;
            pe_arm_wr_block(buf, w, scale, o0, ob, c0, cw, in_c);
            pe_arm_dx_rows(dx, dy + o0, out_c, buf, rows, ob, c0, cw, in_c, o0 == 0);
        }
    }
}

/* dw[j, c] = sum over p of dy[p, o_j] * (float(x[p, c] + offset) * x_scale), from +0.0f */
static void pe_arm_dw_f32(float *buf, const int8_t *x, int32_t offset, float x_scale,
                          const float *dy, const int32_t *channels, float *dw, int32_t rows,
                          int32_t out_c, int32_t in_c, int32_t count)
{
    const int32_t c8 = (in_c + 7) & ~7;
    const int32_t full = in_c & ~7;
    int32_t p0, j, c, k;
    for (j = 0; j < count * in_c; ++j) {
        dw[j] = 0.0f;
    }
    for (p0 = 0; p0 < rows; p0 += 4) {
        const int32_t np = rows - p0 < 4 ? rows - p0 : 4;
        for (k = 0; k < np; ++k) {
            const int8_t *xp = x + (p0 + k) * in_c;
            for (c = 0; c < in_c; ++c) {
                buf[k * c8 + c] = (float)((int32_t)xp[c] + offset) * x_scale;
            }
        }
        for (j = 0; j < count; ++j) {
            const int32_t o = channels != 0 ? channels[j] : j;
            float *row = dw + j * in_c;
            float g[4];
            for (k = 0; k < np; ++k) {
                g[k] = dy[(p0 + k) * out_c + o];
            }
            if (np == 4) {
                for (c = 0; c < full; c += 8) {
                    pe_arm_f32_axpy8x4(row + c, g, buf + c, buf + c8 + c, buf + 2 * c8 + c,
                                       buf + 3 * c8 + c);
                }
            } else {
                c = 0;
            }
            for (; c < in_c; ++c) {
                float a = row[c];
                for (k = 0; k < np; ++k) {
                    a = a + g[k] * buf[k * c8 + c];
                }
                row[c] = a;
            }
        }
    }
}

/* k x k convolution (one group): dx[n, ih, iw, c] = sum over (kh, kw, o) ascending of
 * dy[n, oh, ow, o] * w_r[o, kh, kw, c] over the taps that reach (ih, iw). dx starts at +0.0f
 * and accumulates tap by tap and, within a tap, block of output channels by block: the same
 * order. The scratch buffer holds one tap's w_r for a block of output channels and eight input
 * channels, then the output column of each input column for the current tap (int16). */
void pe_conv2d_grad_input_f32_arm(const pe_context *ctx, const pe_conv_grad_params *params,
                                  const float *filter_scale, const pe_dims *dy_dims,
                                  const float *dy, const pe_dims *filter_dims,
                                  const int8_t *filter, const pe_dims *dx_dims, float *dx)
{
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w, in_c = dx_dims->c;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w, out_c = dy_dims->c;
    float *const buf = (float *)ctx->buf;
    int16_t *const ox_of = (int16_t *)(buf + (out_c < PE_ARM_OB ? out_c : PE_ARM_OB) * 8);
    const int32_t total = dx_dims->n * in_h * in_w * in_c;
    int32_t i, c0, ky, kx, o0, o, j, n, ih, iw;
    if (k_h == 1 && k_w == 1 && params->stride.h == 1 && params->stride.w == 1 &&
        params->padding.h == 0 && params->padding.w == 0) {
        pe_arm_dx_f32(buf, dy, filter, filter_scale, dx, dy_dims->n * out_h * out_w, out_c,
                      in_c);
        return;
    }
    for (i = 0; i < total; ++i) {
        dx[i] = 0.0f;
    }
    for (c0 = 0; c0 < in_c; c0 += 8) {
        const int32_t cw = in_c - c0 < 8 ? in_c - c0 : 8;
        for (ky = 0; ky < k_h; ++ky) {
            for (kx = 0; kx < k_w; ++kx) {
                for (iw = 0; iw < in_w; ++iw) {
                    ox_of[iw] = (int16_t)pe_tap_source(iw, kx, params->stride.w,
                                                           params->padding.w,
                                                           params->dilation.w, out_w);
                }
                for (o0 = 0; o0 < out_c; o0 += PE_ARM_OB) {
                    const int32_t ob = out_c - o0 < PE_ARM_OB ? out_c - o0 : PE_ARM_OB;
                    for (o = 0; o < ob; ++o) {
                        const int8_t *row = filter + (((o0 + o) * k_h + ky) * k_w + kx) * in_c
                                            + c0;
                        const float sc = filter_scale[o0 + o];
                        for (j = 0; j < 8; ++j) {
                            buf[8 * o + j] = j < cw ? (float)row[j] * sc : 0.0f;
                        }
                    }
                    for (n = 0; n < dx_dims->n; ++n) {
                        for (ih = 0; ih < in_h; ++ih) {
                            const int32_t oy = pe_tap_source(ih, ky, params->stride.h,
                                                                 params->padding.h,
                                                                 params->dilation.h, out_h);
                            if (oy < 0) {
                                continue;
                            }
                            for (iw = 0; iw < in_w; ++iw) {
                                const int32_t ox = ox_of[iw];
                                float *out;
                                const float *g;
                                if (ox < 0) {
                                    continue;
                                }
                                out = dx + ((n * in_h + ih) * in_w + iw) * in_c + c0;
                                g = dy + ((n * out_h + oy) * out_w + ox) * out_c + o0;
                                if (cw == 8) {
                                    pe_arm_f32_axpy8(out, out, g, buf, ob);
                                } else {
                                    float acc[8];
                                    for (j = 0; j < 8; ++j) {
                                        acc[j] = j < cw ? out[j] : 0.0f;
                                    }
                                    pe_arm_f32_axpy8(acc, acc, g, buf, ob);
                                    for (j = 0; j < cw; ++j) {
                                        out[j] = acc[j];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

void pe_fully_connected_grad_input_f32_arm(const pe_context *ctx, const float *filter_scale,
                                           const pe_dims *dy_dims, const float *dy,
                                           const pe_dims *filter_dims, const int8_t *filter,
                                           const pe_dims *dx_dims, float *dx)
{
    (void)filter_dims;
    pe_arm_dx_f32((float *)ctx->buf, dy, filter, filter_scale, dx, dy_dims->n, dy_dims->c,
                  dx_dims->c);
}

void pe_conv2d_grad_weight_f32_arm(const pe_context *ctx,
                                   const pe_conv_grad_weight_params_f32 *params,
                                   const int32_t *channels, const pe_dims *x_dims,
                                   const int8_t *x, const pe_dims *dy_dims, const float *dy,
                                   const pe_dims *dw_dims, float *dw)
{
    pe_arm_dw_f32((float *)ctx->buf, x, params->input_offset, params->input_scale, dy,
                  channels, dw, x_dims->n * x_dims->h * x_dims->w, dy_dims->c, x_dims->c,
                  dw_dims->n);
}

void pe_fully_connected_grad_weight_f32_arm(const pe_context *ctx,
                                            const pe_fc_grad_weight_params_f32 *params,
                                            const int32_t *channels, const pe_dims *x_dims,
                                            const int8_t *x, const pe_dims *dy_dims,
                                            const float *dy, const pe_dims *dw_dims, float *dw)
{
    pe_arm_dw_f32((float *)ctx->buf, x, params->input_offset, params->input_scale, dy,
                  channels, dw, x_dims->n, dy_dims->c, x_dims->c, dw_dims->n);
}

/* -- depthwise grad input ---------------------------------------------------------------- */

/* The taps of one direction that reach input coordinate i: the first (k0) and how many (the
 * next ones follow every `stride` taps, their output coordinate one lower each). */
static void pe_arm_tap_run(int32_t i, int32_t k, int32_t stride, int32_t pad, int32_t out_size,
                           int32_t *k0, int32_t *count)
{
    int32_t t, n = 0, first = -1;
    for (t = 0; t < k; ++t) {
        if (pe_tap_source(i, t, stride, pad, 1, out_size) >= 0) {
            first = first < 0 ? t : first;
            ++n;
        }
    }
    *k0 = first;
    *count = n;
}

void pe_depthwise_conv2d_grad_input_f32_arm(const pe_context *ctx,
                                            const pe_dw_conv_grad_params *params,
                                            const float *filter_scale, const pe_dims *dy_dims,
                                            const float *dy, const pe_dims *filter_dims,
                                            const int8_t *filter, const pe_dims *dx_dims,
                                            float *dx)
{
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w, chans = dx_dims->c;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w;
    const int32_t sh = params->stride.h, sw = params->stride.w;
    float *const wr = (float *)ctx->buf;
    int16_t *const kx0_of = (int16_t *)(wr + k_h * k_w * 8);   /* per iw: first tap, count */
    int16_t *const nx_of = kx0_of + in_w;
    /* in place (dx == dy, codegen/backends/arm.py grants it for stride 1, the same shape and
     * pad_h < k_h): dy rows ih - ring_n + 1 .. ih of the block's channels, row r in slot
     * r % ring_n (in_w x 8 floats); rows below ih come from there, rows above from dy */
    float *const ring = (float *)(nx_of + in_w);
    const int inplace = (const void *)dx == (const void *)dy;
    const int32_t ring_n = k_h - params->padding.h;
    int32_t n, c0, ih, iw, ky, j, t;
    for (iw = 0; iw < in_w; ++iw) {
        int32_t k0, cnt;
        pe_arm_tap_run(iw, k_w, sw, params->padding.w, out_w, &k0, &cnt);
        kx0_of[iw] = (int16_t)k0;
        nx_of[iw] = (int16_t)cnt;
    }
    for (c0 = 0; c0 < chans; c0 += 8) {
        const int32_t cw = chans - c0 < 8 ? chans - c0 : 8;
        for (t = 0; t < k_h * k_w; ++t) {
            for (j = 0; j < 8; ++j) {
                wr[8 * t + j] = j < cw ? (float)filter[t * chans + c0 + j] * filter_scale[c0 + j]
                                       : 0.0f;
            }
        }
        for (n = 0; n < dx_dims->n; ++n) {
            const float *dyn = dy + n * out_h * out_w * chans;
            for (ih = 0; ih < in_h; ++ih) {
                int32_t ky0, ny;
                pe_arm_tap_run(ih, k_h, sh, params->padding.h, out_h, &ky0, &ny);
                if (inplace) {                 /* row ih before dx row ih overwrites it */
                    float *slot = ring + (ih % ring_n) * in_w * 8;
                    for (iw = 0; iw < in_w; ++iw) {
                        for (j = 0; j < cw; ++j) {
                            slot[iw * 8 + j] = dyn[(ih * out_w + iw) * chans + c0 + j];
                        }
                    }
                }
                for (iw = 0; iw < in_w; ++iw) {
                    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
                    float *out = dx + ((n * in_h + ih) * in_w + iw) * chans + c0;
                    const int32_t kx0 = kx0_of[iw], nx = nx_of[iw];
                    if (nx > 0 && cw == 8) {
                        const int32_t ox0 = (iw + params->padding.w - kx0) / sw;
                        for (ky = 0; ky < ny; ++ky) {
                            const int32_t kyy = ky0 + ky * sh;
                            const int32_t oy = (ih + params->padding.h - kyy) / sh;
                            const int ringed = inplace && oy <= ih;
                            const float *g = ringed ? ring + ((oy % ring_n) * in_w + ox0) * 8
                                                    : dyn + (oy * out_w + ox0) * chans + c0;
                            pe_arm_f32_taps8(acc, g, ringed ? -8 : -chans,
                                             wr + 8 * (kyy * k_w + kx0), 8 * sw, nx);
                        }
                    } else if (nx > 0) {
                        /* a last block of fewer than eight channels: the same sums in C */
                        const int32_t ox0 = (iw + params->padding.w - kx0) / sw;
                        int32_t kx;
                        for (ky = 0; ky < ny; ++ky) {
                            const int32_t kyy = ky0 + ky * sh;
                            const int32_t oy = (ih + params->padding.h - kyy) / sh;
                            for (kx = 0; kx < nx; ++kx) {
                                const float *g = inplace && oy <= ih
                                    ? ring + ((oy % ring_n) * in_w + ox0 - kx) * 8
                                    : dyn + (oy * out_w + ox0 - kx) * chans + c0;
                                const float *wk = wr + 8 * (kyy * k_w + kx0 + kx * sw);
                                for (j = 0; j < cw; ++j) {
                                    acc[j] = acc[j] + g[j] * wk[j];
                                }
                            }
                        }
                    }
                    for (j = 0; j < cw; ++j) {
                        out[j] = acc[j];
                    }
                }
            }
        }
    }
}

/* -- average pooling grad, windows that do not overlap -------------------------------------- */

/* taps of a window starting at `start` (may be negative) of size k inside [0, size) */
static int32_t pe_arm_taps(int32_t start, int32_t k, int32_t size)
{
    const int32_t lo = start < 0 ? 0 : start;
    const int32_t hi = start + k > size ? size : start + k;
    return hi > lo ? hi - lo : 0;
}

void pe_avg_pool2d_grad_f32_arm(const pe_context *ctx, const pe_pool_grad_params *params,
                                const pe_dims *dy_dims, const float *dy,
                                const pe_dims *filter_dims, const pe_dims *dx_dims, float *dx)
{
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w, ch = dx_dims->c;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    const int32_t f_h = filter_dims->h, f_w = filter_dims->w;
    const int32_t total = dx_dims->n * in_h * in_w * ch;
    int32_t n, oy, ox, iy, ix, c, i;
    (void)ctx;
    for (i = 0; i < total; ++i) {
        dx[i] = 0.0f;
    }
    for (n = 0; n < dx_dims->n; ++n) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t y0 = oy * params->stride.h - params->padding.h;
            const int32_t rows = pe_arm_taps(y0, f_h, in_h);
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t x0 = ox * params->stride.w - params->padding.w;
                const int32_t count = rows * pe_arm_taps(x0, f_w, in_w);
                const float *g = dy + ((n * out_h + oy) * out_w + ox) * ch;
                if (count == 0) {
                    continue;
                }
                for (iy = y0 < 0 ? 0 : y0; iy < y0 + f_h && iy < in_h; ++iy) {
                    for (ix = x0 < 0 ? 0 : x0; ix < x0 + f_w && ix < in_w; ++ix) {
                        float *out = dx + ((n * in_h + iy) * in_w + ix) * ch;
                        for (c = 0; c < ch; ++c) {
                            out[c] = 0.0f + g[c] / (float)count;
                        }
                    }
                }
            }
        }
    }
}

/* The classifier head's fused backward (pe_train_kernels.h pe_pool_conv_grad_f32), a block of
 * output channels at a time: the block's dy rows made once from the mask and g / count (dy
 * itself never exists) and summed into the bias gradient, then the input gradient as the
 * pointwise one above, every eight input channels' w_r and sums. For each dx
 * element the blocks come in channel order, as in pe_arm_dx_f32: the same sums. Scratch: the
 * w_r block, q = g / count, the block's dy rows (rows x 64 floats). */
void pe_pool_conv_grad_f32_arm(const pe_context *ctx, const float *filter_scale,
                               const float *g, const uint8_t *mask, const int8_t *filter,
                               const pe_dims *dx_dims, int32_t n_out, float *dx, float *db)
{
    const int32_t positions = dx_dims->h * dx_dims->w, rows = dx_dims->n * positions;
    const int32_t in_c = dx_dims->c;
    const float count = (float)positions;
    float *const buf = (float *)ctx->buf;
    float *const q = buf + 8 * PE_ARM_OB;
    float *const dyb = q + dx_dims->n * n_out;
    int32_t i, p, o, o0, c0;
    for (i = 0; i < dx_dims->n * n_out; ++i) {
        q[i] = g[i] / count;
    }
    for (o0 = 0; o0 < n_out; o0 += PE_ARM_OB) {
        const int32_t ob = n_out - o0 < PE_ARM_OB ? n_out - o0 : PE_ARM_OB;
        for (p = 0; p < rows; ++p) {        /* the block's dy rows; db sums them in row order */
            const float *qn = q + (p / positions) * n_out + o0;
            float *d = dyb + p * ob;
            for (o = 0; o < ob; ++o) {
                i = p * n_out + o0 + o;
                d[o] = ((mask[i >> 3] >> (i & 7)) & 1u) != 0u ? 0.0f + qn[o] : 0.0f;
                db[o0 + o] = (p == 0 ? 0.0f : db[o0 + o]) + d[o];
            }
        }
        for (c0 = 0; c0 < in_c; c0 += 8) {
            const int32_t cw = in_c - c0 < 8 ? in_c - c0 : 8;
            pe_arm_wr_block(buf, filter, filter_scale, o0, ob, c0, cw, in_c);
            pe_arm_dx_rows(dx, dyb, ob, buf, rows, ob, c0, cw, in_c, o0 == 0);
        }
    }
}
