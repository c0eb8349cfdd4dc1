/* The int8 backward on HVX (integer only; codegen/golden/train_conv.py, train_grads.py): the
 * ref kernels' results bit for bit.
 *
 * pe_conv2d_grad_input_s8_hvx: the transposed
 * convolution as a dot product of rows over 32 input channels a vector, on vdmpy (two
 * int16 x int16 products per lane). A dx pixel's row holds, per tap (ky, kx), the prescaled
 * gradients dys = MBQM(dy << b, M_o, k_o) of the dy pixel the tap reaches (0 where none does),
 * O rounded up to even; the weights are packed as int16 pairs (w[o][tap][c], w[o+1][tap][c])
 * per lane (codegen/backends/hvx.py pack_grad_input_weights; at run time in the scratch when
 * training changes them). |dys| <= 127 * 2^b and b is chosen so that no partial sum leaves
 * int32, so vdmpy's saturation never acts. Two passes as the ref kernel: the accumulators'
 * range (the rescale's plan), then the values.
 *
 * pe_conv2d_grad_weight_s8_hvx: dw[j][tap][c] = sum
 * over the output positions p of (x[p, tap] + off) * dy[p][o_j] on vrmpy: four positions per
 * lane (x rows interleaved four by four, as unsigned x + 128) times the four dy values of a
 * trained channel as the scalar; the correction (off - 128) * sum_p dy[p][o_j] is added at the
 * end (padding taps hold the input's zero point, whose x + off is 0, like the ref kernel's
 * skipped taps). (The FC gradients: pe_fully_connected_hvx.c.)
 *
 * pe_bias_grad_s8_hvx: column sums. pe_avg_pool2d_grad_s8_hvx: windows that do not overlap
 * (each dx value reached by at most one window): dy * RECIP, normalised, written to the
 * window's in-image positions, 0 elsewhere.
 */
#include "pe_grad_fixed.h"
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"
#include "pe_window.h"

enum {
    PE_HVX_DW_ROWS = 16           /* depthwise input gradients: windows up to 16 rows */
};

/* -- input gradients ------------------------------------------------------------------------ */
typedef struct {
    int32_t k_h, k_w, s_h, s_w, p_h, p_w, d_h, d_w;
} pe_hvx_geometry;

/* Pack the weights (OHWI, C input channels) as the int16 pairs the kernel reads. */
static void pe_hvx_pack_grad_input(int16_t *dst, const int8_t *w, int32_t out_c, int32_t taps,
                                   int32_t c_n)
{
    const int32_t o2 = (out_c + 1) & ~1;
    const int32_t pairs = taps * o2 / 2;
    const int32_t blocks = (c_n + 31) / 32;
    int32_t cb, j, i;
    for (cb = 0; cb < blocks; ++cb) {
        for (j = 0; j < pairs; ++j) {
            const int32_t t = (2 * j) / o2, o = (2 * j) % o2;
            int16_t *d = dst + (cb * pairs + j) * 64;
            for (i = 0; i < 32; ++i) {
                const int32_t c = cb * 32 + i;
                d[2 * i] = (int16_t)(c < c_n && o < out_c ? w[(o * taps + t) * c_n + c] : 0);
                d[2 * i + 1] = (int16_t)(c < c_n && o + 1 < out_c
                                         ? w[((o + 1) * taps + t) * c_n + c] : 0);
            }
        }
    }
}

static void pe_hvx_grad_input(const pe_context *ctx, const pe_hvx_geometry *g,
                              const pe_grad_input_quant *quant, const int32_t *pre,
                              const int16_t *packed, const pe_dims *dy_dims, const int8_t *dy,
                              const int32_t *dy_exp, const int8_t *filter,
                              const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const int32_t out_c = dy_dims->c, c_n = dx_dims->c;
    const int32_t taps = g->k_h * g->k_w;
    const int32_t o2 = (out_c + 1) & ~1;
    const int32_t pairs = taps * o2 / 2;
    const int32_t blocks = (c_n + 31) / 32;
    const int32_t pixels = dx_dims->n * dx_dims->h * dx_dims->w;
    const int32_t row_elems = taps * o2;
    uint8_t *scratch = (uint8_t *)pe_hvx_align(ctx->buf);
    int16_t *rows;
    pe_hvx_range range = pe_hvx_range_zero();
    pe_hvx_rescale rs = pe_hvx_rescale_make(0, 0, 0);
    pe_rescale_plan plan = {0, 0};
    int32_t pass, p;
    if (packed == 0) {
        pe_hvx_pack_grad_input((int16_t *)scratch, filter, out_c, taps, c_n);
        packed = (const int16_t *)scratch;
        scratch += blocks * pairs * 128;
    }
    rows = (int16_t *)scratch;
    for (pass = 0; pass < 2; ++pass) {
        if (pass == 1) {
            pe_range r;
            r.lo = pe_hvx_min_lane(range.lo);
            r.hi = pe_hvx_max_lane(range.hi);
            plan = pe_rescale_plan_make(&r, quant->output_multiplier);
            rs = pe_hvx_rescale_make(plan.left, quant->output_multiplier, plan.right);
        }
        pe_hvx_pos at = {0, 0, 0};
        for (p = 0; p < pixels; p += 4) {
            const int32_t n = pixels - p < 4 ? pixels - p : 4;
            const pe_hvx_word *r[4];
            int32_t q, cb, j;
            for (q = 0; q < 4; ++q) {
                const int32_t b = at.b, ih = at.y, iw = at.x;      /* past n: row n - 1 again */
                int16_t *row = rows + q * row_elems;
                int32_t ky, kx;
                for (ky = 0; ky < g->k_h; ++ky) {
                    const int32_t oy = pe_tap_source(ih, ky, g->s_h, g->p_h, g->d_h, dy_dims->h);
                    for (kx = 0; kx < g->k_w; ++kx) {
                        const int32_t ox = pe_tap_source(iw, kx, g->s_w, g->p_w, g->d_w,
                                                         dy_dims->w);
                        int16_t *dst = row + (ky * g->k_w + kx) * o2;
                        if (oy < 0 || ox < 0) {
                            pe_hvx_fill(dst, 0, 2 * o2);
                        } else {
                            pe_hvx_prescale_row(dy + ((b * dy_dims->h + oy) * dy_dims->w + ox)
                                            * out_c, out_c, pre, dst);
                        }
                    }
                }
                r[q] = (const pe_hvx_word *)row;
                if (q + 1 < n) {
                    pe_hvx_pos_next(&at, dx_dims->h, dx_dims->w);
                }
            }
            pe_hvx_pos_next(&at, dx_dims->h, dx_dims->w);
            for (cb = 0; cb < blocks; cb += 2) {
                const int two = cb + 1 < blocks;
                const int16_t *pa = packed + cb * pairs * 64;
                const int16_t *pb = two ? pa + pairs * 64 : pa;
                HVX_Vector a00 = Q6_V_vzero(), a01 = a00, a10 = a00, a11 = a00;
                HVX_Vector a20 = a00, a21 = a00, a30 = a00, a31 = a00;
                HVX_Vector acc[4][2];
                for (j = 0; j < pairs; ++j) {
                    const HVX_Vector w0 = pe_hvx_loadu(pa + j * 64);
                    const HVX_Vector w1 = pe_hvx_loadu(pb + j * 64);
                    a00 = Q6_Vw_vdmpyacc_VwVhRh_sat(a00, w0, r[0][j]);
                    a01 = Q6_Vw_vdmpyacc_VwVhRh_sat(a01, w1, r[0][j]);
                    a10 = Q6_Vw_vdmpyacc_VwVhRh_sat(a10, w0, r[1][j]);
                    a11 = Q6_Vw_vdmpyacc_VwVhRh_sat(a11, w1, r[1][j]);
                    a20 = Q6_Vw_vdmpyacc_VwVhRh_sat(a20, w0, r[2][j]);
                    a21 = Q6_Vw_vdmpyacc_VwVhRh_sat(a21, w1, r[2][j]);
                    a30 = Q6_Vw_vdmpyacc_VwVhRh_sat(a30, w0, r[3][j]);
                    a31 = Q6_Vw_vdmpyacc_VwVhRh_sat(a31, w1, r[3][j]);
                }
                acc[0][0] = a00, acc[0][1] = a01, acc[1][0] = a10, acc[1][1] = a11;
                acc[2][0] = a20, acc[2][1] = a21, acc[3][0] = a30, acc[3][1] = a31;
                for (q = 0; q < n; ++q) {
                    if (pass == 0) {
                        pe_hvx_range_add(&range, acc[q][0]);
                        pe_hvx_range_add(&range, acc[q][1]);
                    } else {
                        const int32_t left = c_n - cb * 32;
                        pe_hvx_store_n(dx + (p + q) * c_n + cb * 32,
                                       pe_hvx_bytes2(pe_hvx_rescale_value(acc[q][0], &rs),
                                                     pe_hvx_rescale_value(acc[q][1], &rs)),
                                       left < 64 ? left : 64);
                    }
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp - quant->prescale_shift, quant->output_shift, &plan);
}

void pe_conv2d_grad_input_s8_hvx(const pe_context *ctx, const pe_conv_grad_params *params,
                                 const pe_grad_input_quant *quant, const int32_t *pre,
                                 const int16_t *packed, const pe_dims *dy_dims,
                                 const int8_t *dy, const int32_t *dy_exp,
                                 const pe_dims *filter_dims, const int8_t *filter,
                                 const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    pe_hvx_geometry g;
    g.k_h = filter_dims->h, g.k_w = filter_dims->w;
    g.s_h = params->stride.h, g.s_w = params->stride.w;
    g.p_h = params->padding.h, g.p_w = params->padding.w;
    g.d_h = params->dilation.h, g.d_w = params->dilation.w;
    pe_hvx_grad_input(ctx, &g, quant, pre, packed, dy_dims, dy, dy_exp, filter, dx_dims, dx,
                      dx_exp);
}

/* -- depthwise input gradients ---------------------------------------------------------------
 * dx[ih][iw][c] = sum over the taps (ky, kx) that reach it of dys[oy][ox][c] * w[ky][kx][c]:
 * 64 channels a vector (int16 products, vmpy(Vu.h, Vv.h) into even and odd words). The dy
 * rows are prescaled into a ring of k_h slots (row stride: C rounded up to 64, the pad 0) as
 * the window first needs them; the weights are widened from the filter as it is. */
void pe_depthwise_conv2d_grad_input_s8_hvx(const pe_context *ctx,
                                           const pe_dw_conv_grad_params *params,
                                           const pe_grad_input_quant *quant,
                                           const int32_t *pre, const pe_dims *dy_dims,
                                           const int8_t *dy, const int32_t *dy_exp,
                                           const pe_dims *filter_dims, const int8_t *filter,
                                           const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const int32_t c_n = dx_dims->c, k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t c64 = (c_n + 63) & ~63;
    const int32_t row_elems = dy_dims->w * c64;
    int16_t *ring = (int16_t *)pe_hvx_align(ctx->buf);
    int32_t held[PE_HVX_DW_ROWS];
    pe_hvx_range range = pe_hvx_range_zero();
    pe_hvx_rescale rs = pe_hvx_rescale_make(0, 0, 0);
    pe_rescale_plan plan = {0, 0};
    int32_t pass, b, ih, iw, c0, ky, kx, i;
    for (pass = 0; pass < 2; ++pass) {
        if (pass == 1) {
            pe_range lim;
            lim.lo = pe_hvx_min_lane(range.lo);
            lim.hi = pe_hvx_max_lane(range.hi);
            plan = pe_rescale_plan_make(&lim, quant->output_multiplier);
            rs = pe_hvx_rescale_make(plan.left, quant->output_multiplier, plan.right);
        }
        for (b = 0; b < dx_dims->n; ++b) {
            for (i = 0; i < k_h; ++i) {
                held[i] = -1;                       /* ring slot i holds dy row held[i] */
            }
            for (ih = 0; ih < dx_dims->h; ++ih) {
                int32_t oys[PE_HVX_DW_ROWS], slot[PE_HVX_DW_ROWS];
                for (ky = 0; ky < k_h; ++ky) {
                    oys[ky] = pe_tap_source(ih, ky, params->stride.h, params->padding.h,
                                            params->dilation.h, dy_dims->h);
                }
                for (ky = 0; ky < k_h; ++ky) {      /* the ring slot of each needed row */
                    int32_t s = -1, j;
                    if (oys[ky] < 0) {
                        continue;
                    }
                    for (i = 0; i < k_h && s < 0; ++i) {
                        s = held[i] == oys[ky] ? i : -1;
                    }
                    for (i = 0; i < k_h && s < 0; ++i) {       /* a slot no tap needs */
                        int used = 0;
                        for (j = 0; j < k_h; ++j) {
                            used |= held[i] >= 0 && held[i] == oys[j];
                        }
                        if (!used) {
                            int16_t *row = ring + i * row_elems;
                            int32_t ox;
                            pe_hvx_fill(row, 0, 2 * row_elems);
                            for (ox = 0; ox < dy_dims->w; ++ox) {
                                pe_hvx_prescale_row(dy + ((b * dy_dims->h + oys[ky]) * dy_dims->w
                                                          + ox) * c_n, c_n, pre, row + ox * c64);
                            }
                            held[i] = oys[ky];
                            s = i;
                        }
                    }
                    slot[ky] = s;
                }
                for (iw = 0; iw < dx_dims->w; ++iw) {
                    for (c0 = 0; c0 < c_n; c0 += 64) {
                        const int32_t len = c_n - c0 < 64 ? c_n - c0 : 64;
                        HVX_VectorPair acc = Q6_W_vcombine_VV(Q6_V_vzero(), Q6_V_vzero());
                        for (ky = 0; ky < k_h; ++ky) {
                            const int16_t *row;
                            if (oys[ky] < 0) {
                                continue;
                            }
                            row = ring + slot[ky] * row_elems + c0;
                            for (kx = 0; kx < k_w; ++kx) {
                                const int32_t ox = pe_tap_source(iw, kx, params->stride.w,
                                                                 params->padding.w,
                                                                 params->dilation.w,
                                                                 dy_dims->w);
                                HVX_Vector w;
                                if (ox < 0) {
                                    continue;
                                }
                                w = Q6_V_lo_W(Q6_Wh_vunpack_Vb(pe_hvx_load_n(
                                    filter + (ky * k_w + kx) * c_n + c0, len)));
                                acc = Q6_Ww_vmpyacc_WwVhVh(acc, pe_hvx_loadu(row + ox * c64),
                                                           w);
                            }
                        }
                        if (pass == 0) {
                            pe_hvx_range_add(&range, Q6_V_lo_W(acc));
                            pe_hvx_range_add(&range, Q6_V_hi_W(acc));
                        } else {
                            const HVX_Vector h = Q6_Vh_vasr_VwVwR_sat(
                                pe_hvx_rescale_value(Q6_V_hi_W(acc), &rs),
                                pe_hvx_rescale_value(Q6_V_lo_W(acc), &rs), 0);
                            pe_hvx_store_n(dx + ((b * dx_dims->h + ih) * dx_dims->w + iw) * c_n
                                           + c0, Q6_Vb_vpack_VhVh_sat(h, h), len);
                        }
                    }
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp - quant->prescale_shift, quant->output_shift, &plan);
}

/* -- weight gradients ----------------------------------------------------------------------- */
static void pe_hvx_grad_weight(const pe_context *ctx, const pe_hvx_geometry *g,
                               int32_t input_offset, const int32_t *channels,
                               const pe_dims *x_dims, const int8_t *x, const pe_dims *dy_dims,
                               const int8_t *dy, int32_t count, int32_t *dw)
{
    const int32_t c_n = x_dims->c, out_c = dy_dims->c;
    const int32_t taps = g->k_h * g->k_w;
    const int32_t positions = dy_dims->n * dy_dims->h * dy_dims->w;
    const int32_t blocks = (c_n + 31) / 32;
    int32_t *sums = (int32_t *)pe_hvx_align(ctx->buf);
    int8_t *zrow = (int8_t *)(sums + ((out_c + 127) & ~127));
    const HVX_Vector flip = Q6_V_vsplat_R((int32_t)0x80808080u);
    int32_t t, j0, cb, p;
    pe_hvx_column_sums(dy, positions, out_c, sums);
    pe_hvx_fill(zrow, -input_offset, blocks * 32 + 128);
    for (t = 0; t < taps; ++t) {
        const int32_t ky = t / g->k_w, kx = t % g->k_w;
        for (j0 = 0; j0 < count; j0 += 4) {
            const int32_t nj = count - j0 < 4 ? count - j0 : 4;
            int32_t o[4], q;
            for (q = 0; q < 4; ++q) {
                const int32_t jj = j0 + (q < nj ? q : 0);
                o[q] = channels != 0 ? channels[jj] : jj;
            }
            for (cb = 0; cb < blocks; cb += 2) {
                HVX_Vector acc[4][2];
                for (q = 0; q < 4; ++q) {
                    acc[q][0] = Q6_V_vzero();
                    acc[q][1] = Q6_V_vzero();
                }
                pe_hvx_pos at = {0, 0, 0};
                for (p = 0; p < positions; p += 4) {
                    const int32_t np = positions - p < 4 ? positions - p : 4;
                    HVX_Vector xr[4], xt[2];
                    uint32_t d[4] = {0u, 0u, 0u, 0u};
                    int32_t k;
                    for (k = 0; k < 4; ++k) {
                        const int8_t *src = zrow;
                        if (k < np) {
                            const int32_t pos = p + k;
                            const int32_t b = at.b, oy = at.y, ox = at.x;
                            const int32_t iy = oy * g->s_h - g->p_h + ky * g->d_h;
                            const int32_t ix = ox * g->s_w - g->p_w + kx * g->d_w;
                            if (iy >= 0 && iy < x_dims->h && ix >= 0 && ix < x_dims->w) {
                                src = x + ((b * x_dims->h + iy) * x_dims->w + ix) * c_n;
                            }
                            for (q = 0; q < 4; ++q) {
                                d[q] |= (uint32_t)(uint8_t)dy[pos * out_c + o[q]] << (8 * k);
                            }
                            pe_hvx_pos_next(&at, dy_dims->h, dy_dims->w);
                        }
                        xr[k] = pe_hvx_load(src + cb * 32, c_n - cb * 32 < 64
                                            ? c_n - cb * 32 : 64);
                    }
                    pe_hvx_interleave4(xr[0], xr[1], xr[2], xr[3], xt);
                    xt[0] = Q6_V_vxor_VV(xt[0], flip);
                    xt[1] = Q6_V_vxor_VV(xt[1], flip);
                    for (q = 0; q < 4; ++q) {
                        acc[q][0] = Q6_Vw_vrmpyacc_VwVubRb(acc[q][0], xt[0], (int32_t)d[q]);
                        acc[q][1] = Q6_Vw_vrmpyacc_VwVubRb(acc[q][1], xt[1], (int32_t)d[q]);
                    }
                }
                for (q = 0; q < nj; ++q) {
                    /* wraps like the accumulator: the sum is an int32 */
                    const HVX_Vector fix = Q6_V_vsplat_R((int32_t)((uint32_t)(input_offset - 128)
                                                                   * (uint32_t)sums[o[q]]));
                    int32_t *row = dw + ((j0 + q) * taps + t) * c_n + cb * 32;
                    const int32_t left = c_n - cb * 32;
                    pe_hvx_store(row, Q6_Vw_vadd_VwVw(acc[q][0], fix),
                                 4 * (left < 32 ? left : 32));
                    if (left > 32) {
                        pe_hvx_store(row + 32, Q6_Vw_vadd_VwVw(acc[q][1], fix),
                                     4 * (left - 32 < 32 ? left - 32 : 32));
                    }
                }
            }
        }
    }
}

void pe_conv2d_grad_weight_s8_hvx(const pe_context *ctx,
                                  const pe_conv_grad_weight_params *params,
                                  const int32_t *channels, const pe_dims *x_dims,
                                  const int8_t *x, const pe_dims *dy_dims, const int8_t *dy,
                                  const int32_t *dy_exp, const pe_dims *dw_dims, int32_t *dw,
                                  int32_t *dw_exp)
{
    pe_hvx_geometry g;
    g.k_h = dw_dims->h, g.k_w = dw_dims->w;
    g.s_h = params->stride.h, g.s_w = params->stride.w;
    g.p_h = params->padding.h, g.p_w = params->padding.w;
    g.d_h = params->dilation.h, g.d_w = params->dilation.w;
    pe_hvx_grad_weight(ctx, &g, params->input_offset, channels, x_dims, x, dy_dims, dy,
                       dw_dims->n, dw);
    *dw_exp = *dy_exp;
}

/* -- depthwise weight gradients --------------------------------------------------------------
 * dw[ky][kx][j] = sum over the output positions whose tap (ky, kx) lies in the image of
 * (x + off) * dy at channel c_j: every channel a lane (64 a vector, int16 x + off and dy
 * widened in order, vmpy into even and odd words, interleaved back into channel order),
 * the trained ones picked from the sums (scratch: 64 int32), all of them stored as vectors;
 * chunks of 64 channels without a trained one are skipped. Depth multiplier 1. */
void pe_depthwise_conv2d_grad_weight_s8_hvx(const pe_context *ctx,
                                            const pe_dw_conv_grad_weight_params *params,
                                            const int32_t *channels, const pe_dims *x_dims,
                                            const int8_t *x, const pe_dims *dy_dims,
                                            const int8_t *dy, const int32_t *dy_exp,
                                            const pe_dims *dw_dims, int32_t *dw,
                                            int32_t *dw_exp)
{
    const int32_t c_n = x_dims->c, k_w = dw_dims->w, count = dw_dims->c;
    const HVX_Vector off = Q6_Vh_vsplat_R(params->input_offset);
    int32_t *sums = (int32_t *)pe_hvx_align(ctx->buf);
    int32_t ky, kx, c0, j, b, oy, ox, jc = 0;
    for (c0 = 0; c0 < c_n; c0 += 64) {
        /* chunk outer, taps inner: the trained channels of the chunk, [jc, je), once */
        const int32_t len = c_n - c0 < 64 ? c_n - c0 : 64;
        int32_t je = channels != 0 ? jc : c0 + len;
        if (channels != 0) {
            while (je < count && channels[je] < c0 + len) {
                ++je;
            }
            if (je == jc) {
                continue;                       /* no trained channel here */
            }
        }
        for (ky = 0; ky < dw_dims->h; ++ky) {
            for (kx = 0; kx < k_w; ++kx) {
                int32_t *out = dw + (ky * k_w + kx) * count;
                HVX_VectorPair acc = Q6_W_vcombine_VV(Q6_V_vzero(), Q6_V_vzero());
                for (b = 0; b < dy_dims->n; ++b) {
                    for (oy = 0; oy < dy_dims->h; ++oy) {
                        const int32_t iy = oy * params->stride.h - params->padding.h
                                           + ky * params->dilation.h;
                        if (iy < 0 || iy >= x_dims->h) {
                            continue;
                        }
                        for (ox = 0; ox < dy_dims->w; ++ox) {
                            const int32_t ix = ox * params->stride.w - params->padding.w
                                               + kx * params->dilation.w;
                            HVX_Vector xv, gv;
                            if (ix < 0 || ix >= x_dims->w) {
                                continue;
                            }
                            xv = Q6_V_lo_W(Q6_Wh_vunpack_Vb(pe_hvx_load_n(
                                x + ((b * x_dims->h + iy) * x_dims->w + ix) * c_n + c0, len)));
                            gv = Q6_V_lo_W(Q6_Wh_vunpack_Vb(pe_hvx_load_n(
                                dy + ((b * dy_dims->h + oy) * dy_dims->w + ox) * c_n + c0,
                                len)));
                            acc = Q6_Ww_vmpyacc_WwVhVh(acc, Q6_Vh_vadd_VhVh(xv, off), gv);
                        }
                    }
                }
                /* lo: channels c0 + 2i, hi: c0 + 2i + 1; interleaved: channel order */
                acc = Q6_W_vshuff_VVR(Q6_V_hi_W(acc), Q6_V_lo_W(acc), -4);
                if (channels == 0) {
                    pe_hvx_store(out + c0, Q6_V_lo_W(acc), 4 * (len < 32 ? len : 32));
                    if (len > 32) {
                        pe_hvx_store(out + c0 + 32, Q6_V_hi_W(acc), 4 * (len - 32));
                    }
                    continue;
                }
                ((pe_hvx_block *)sums)[0] = Q6_V_lo_W(acc);
                ((pe_hvx_block *)sums)[1] = Q6_V_hi_W(acc);
                for (j = jc; j < je; ++j) {
                    out[j] = sums[channels[j] - c0];
                }
            }
        }
        jc = je;
    }
    *dw_exp = *dy_exp;
}

void pe_bias_grad_s8_hvx(int32_t num_rows, int32_t row_size, const int8_t *dy,
                         const int32_t *dy_exp, int32_t *db, int32_t *db_exp)
{
    pe_hvx_column_sums(dy, num_rows, row_size, db);
    *db_exp = *dy_exp;
}

/* -- average pooling ------------------------------------------------------------------------ */
void pe_avg_pool2d_grad_s8_hvx(const pe_context *ctx, const pe_avg_pool_grad_params *params,
                               const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                               const pe_dims *filter_dims, const pe_dims *dx_dims, int8_t *dx,
                               int32_t *dx_exp)
{
    const int32_t unit = (int32_t)1 << params->recip_bits;
    const int32_t ch = dx_dims->c;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    pe_hvx_range range = pe_hvx_range_zero();
    pe_hvx_rescale rs = pe_hvx_rescale_make(0, 0, 0);
    int32_t shift = 0, pass, b, oy, ox, c0, j, fy, fx;
    (void)ctx;
    pe_hvx_fill(dx, 0, dx_dims->n * in_h * in_w * ch);    /* positions no window reaches */
    for (pass = 0; pass < 2; ++pass) {
        if (pass == 1) {
            pe_range r;
            r.lo = pe_hvx_min_lane(range.lo);
            r.hi = pe_hvx_max_lane(range.hi);
            shift = pe_normalise_shift(pe_range_max_abs(&r));
            rs = pe_hvx_rescale_make(0, 0, shift);
        }
        for (b = 0; b < dy_dims->n; ++b) {
            for (oy = 0; oy < dy_dims->h; ++oy) {
                const int32_t iy0 = oy * params->stride.h - params->padding.h;
                int32_t fy0, fy1;
                pe_window(iy0, filter_dims->h, in_h, &fy0, &fy1);
                for (ox = 0; ox < dy_dims->w; ++ox) {
                    const int32_t ix0 = ox * params->stride.w - params->padding.w;
                    int32_t fx0, fx1, count;
                    HVX_Vector recip;
                    pe_window(ix0, filter_dims->w, in_w, &fx0, &fx1);
                    count = (fy1 - fy0) * (fx1 - fx0);
                    if (count <= 0) {
                        continue;
                    }
                    recip = Q6_V_vsplat_R((unit + count / 2) / count);
                    for (c0 = 0; c0 < ch; c0 += 128) {
                        const int32_t len = ch - c0 < 128 ? ch - c0 : 128;
                        HVX_Vector w[4];
                        HVX_Vector out;
                        pe_hvx_words4(pe_hvx_load(dy + ((b * dy_dims->h + oy) * dy_dims->w
                                                        + ox) * ch + c0, len), w);
                        for (j = 0; j < 4; ++j) {
                            w[j] = pe_hvx_mul_lo(w[j], recip);
                            if (pass == 0 && 32 * j < len) {
                                /* lanes past len are not dy's: leave them out of the range */
                                const HVX_Vector v = Q6_V_vmux_QVV(
                                    Q6_Q_vsetq2_R(4 * (len - 32 * j < 32 ? len - 32 * j : 32)),
                                    w[j], Q6_V_vzero());
                                pe_hvx_range_add(&range, v);
                            }
                        }
                        if (pass == 0) {
                            continue;
                        }
                        out = pe_hvx_bytes4(pe_hvx_normalise(w[0], &rs),
                                            pe_hvx_normalise(w[1], &rs),
                                            pe_hvx_normalise(w[2], &rs),
                                            pe_hvx_normalise(w[3], &rs));
                        for (fy = fy0; fy < fy1; ++fy) {
                            for (fx = fx0; fx < fx1; ++fx) {
                                pe_hvx_store(dx + ((b * in_h + iy0 + fy) * in_w + ix0 + fx) * ch
                                             + c0, out, len);
                            }
                        }
                    }
                }
            }
        }
    }
    *dx_exp = *dy_exp - params->recip_bits + shift;
}
