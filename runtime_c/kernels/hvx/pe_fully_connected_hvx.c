/* The fully connected layer of one sample (a row or a few) on HVX, reading the weights as
 * they are ((O, K) rows: frozen in flash or trained in RAM, no packed copy):
 *
 * pe_fully_connected_s8_dot_hvx: per output unit the dot product of its row with the input,
 *     128 products a vrmpy (lanes past K zeroed), eight units side by side;
 *     sum w * (x + off) = sum w * x + off * sum w (sum w: vrmpy with ones); the lane sums of
 *     eight units at once by a tree of shuffles, 32 units requantized together.
 * pe_fully_connected_grad_input_s8_hvx: dx[r][i] = sum_o dys[r][o] * w[o][i] with dys the
 *     prescaled int16 gradients (as the ref kernel): 128 inputs a step, each weight row
 *     widened to int16 (vsxt: even and odd bytes apart) times dys[o] (vmpy(Vu.h, Rt.h):sat,
 *     which never saturates: the prescale shift keeps every partial sum inside int32);
 *     the four accumulators hold lanes 4i, 4i+2, 4i+1, 4i+3 and the interleaving narrowing
 *     shifts put the bytes back in order. Two passes: range (the rescale's plan), values.
 * pe_fully_connected_grad_weight_s8_hvx: dw[j][i] = sum_r (x[r][i] + off) * dy[r][o_j],
 *     32 inputs a vector, int32 products (|x + off| <= 255, |dy| <= 127).
 */
#include "pe_grad_fixed.h"
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"

/* v with its bytes n.. set to 0 (0 < n <= 128). */
static inline HVX_Vector pe_hvx_keep(HVX_Vector v, int32_t n)
{
    return n >= 128 ? v : Q6_V_vmux_QVV(Q6_Q_vsetq2_R(n), v, Q6_V_vzero());
}

/* Lane sums of eight vectors: lane u (u < 8) of the result is the sum of the 32 lanes of s[u].
 * Three levels of word-interleaving shuffles (vshuff by 4, 8, 16 bytes) and adds leave lane l
 * with partial sums of vector l % 8; two rotations add the four lanes of each. */
static inline HVX_Vector pe_hvx_fold(HVX_Vector a, HVX_Vector b, int32_t bytes)
{
    const HVX_VectorPair w = Q6_W_vshuff_VVR(b, a, -bytes);
    return Q6_Vw_vadd_VwVw(Q6_V_lo_W(w), Q6_V_hi_W(w));
}

static inline HVX_Vector pe_hvx_sums8(const HVX_Vector s[8])
{
    const HVX_Vector t0 = pe_hvx_fold(s[0], s[1], 4), t1 = pe_hvx_fold(s[2], s[3], 4);
    const HVX_Vector t2 = pe_hvx_fold(s[4], s[5], 4), t3 = pe_hvx_fold(s[6], s[7], 4);
    HVX_Vector v = pe_hvx_fold(pe_hvx_fold(t0, t1, 8), pe_hvx_fold(t2, t3, 8), 16);
    v = Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, 32));
    return Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, 64));
}

void pe_fully_connected_s8_dot_hvx(const pe_context *ctx, const pe_fc_params *params,
                                   const int32_t *rq, const pe_dims *input_dims,
                                   const int8_t *input, const pe_dims *filter_dims,
                                   const int8_t *filter, const int32_t *bias,
                                   const pe_dims *output_dims, int8_t *output)
{
    const int32_t depth = input_dims->c;
    const int32_t rows = output_dims->n * output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    const HVX_Vector ones = Q6_V_vsplat_R(0x01010101);
    const int32_t off = (int32_t)(((uint32_t)params->input_offset & 0xFFFFu) * 0x10001u);
    const HVX_Vector zp = Q6_V_vsplat_R(params->output_offset);
    const HVX_Vector lo = Q6_V_vsplat_R(params->activation.min);
    const HVX_Vector hi = Q6_V_vsplat_R(params->activation.max);
    int32_t r, o, g, k, c0;
    (void)ctx;
    (void)filter_dims;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = input + r * depth;
        for (o = 0; o < out_c; o += 32) {
            const int32_t n = out_c - o < 32 ? out_c - o : 32;
            HVX_Vector acc = Q6_V_vzero(), y;
            for (g = 0; g < n; g += 8) {
                const int8_t *w[8];
                HVX_Vector s[8], sw[8], v;
                PE_HVX_UNROLL
                for (k = 0; k < 8; ++k) {      /* units past n repeat the last one */
                    w[k] = filter + (o + (g + k < n ? g + k : n - 1)) * depth;
                    s[k] = Q6_V_vzero();
                    sw[k] = Q6_V_vzero();
                }
                for (c0 = 0; c0 < depth; c0 += 128) {
                    const int32_t len = depth - c0 < 128 ? depth - c0 : 128;
                    const HVX_Vector xv = pe_hvx_keep(pe_hvx_load(x + c0, len), len);
                    PE_HVX_UNROLL
                    for (k = 0; k < 8; ++k) {
                        const HVX_Vector wv = pe_hvx_keep(pe_hvx_load(w[k] + c0, len), len);
                        s[k] = Q6_Vw_vrmpyacc_VwVbVb(s[k], xv, wv);
                        sw[k] = Q6_Vw_vrmpyacc_VwVbVb(sw[k], wv, ones);
                    }
                }
                /* sum w * (x + off) = sum w * x + off * sum w, lane by lane before the sums;
                 * lanes 0..7 of the sums to lanes g..g+7 */
                PE_HVX_UNROLL
                for (k = 0; k < 8; ++k) {
                    s[k] = Q6_Vw_vmpyiacc_VwVwRh(s[k], sw[k], off);
                }
                v = Q6_V_vror_VR(pe_hvx_sums8(s), 128 - 4 * g);
                acc = Q6_V_vmux_QVV(Q6_Q_and_QQn(Q6_Q_vsetq2_R(4 * g + 32), Q6_Q_vsetq_R(4 * g)),
                                    v, acc);
            }
            if (bias != 0) {
                acc = Q6_Vw_vadd_VwVw(acc, pe_hvx_load_n(bias + o, 4 * n));
            }
            y = pe_hvx_requant(acc, rq + o * PE_HVX_RQ, zp, lo, hi);
            pe_hvx_store_n(output + r * out_c + o, pe_hvx_bytes2(y, y), n);
        }
    }
}

/* The valid lanes of accumulator r (lanes 4i + r of a step of `len` values). */
static inline HVX_Vector pe_hvx_keep_group(HVX_Vector v, int32_t len, int32_t r)
{
    const int32_t n = (len - r + 3) / 4;
    return n >= 32 ? v : n <= 0 ? Q6_V_vzero() : Q6_V_vmux_QVV(Q6_Q_vsetq2_R(4 * n), v,
                                                                Q6_V_vzero());
}

void pe_fully_connected_grad_input_s8_hvx(const pe_context *ctx,
                                          const pe_grad_input_quant *quant,
                                          const int32_t *pre, const pe_dims *dy_dims,
                                          const int8_t *dy, const int32_t *dy_exp,
                                          const pe_dims *filter_dims, const int8_t *filter,
                                          const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const int32_t out_c = filter_dims->n, depth = filter_dims->c;
    const int32_t rows = dy_dims->n;
    int16_t *dys = (int16_t *)pe_hvx_align(ctx->buf);           /* out_c + 1, per row */
    pe_hvx_range range = pe_hvx_range_zero();
    pe_hvx_rescale rs = pe_hvx_rescale_make(0, 0, 0);
    pe_rescale_plan plan = {0, 0};
    int32_t pass, r, o, c0, j;
    (void)dx_dims;
    for (pass = 0; pass < 2; ++pass) {
        if (pass == 1) {
            pe_range lim;
            lim.lo = pe_hvx_min_lane(range.lo);
            lim.hi = pe_hvx_max_lane(range.hi);
            plan = pe_rescale_plan_make(&lim, quant->output_multiplier);
            rs = pe_hvx_rescale_make(plan.left, quant->output_multiplier, plan.right);
        }
        for (r = 0; r < rows; ++r) {
            pe_hvx_prescale_row(dy + r * out_c, out_c, pre, dys);
            for (c0 = 0; c0 < depth; c0 += 128) {
                const int32_t len = depth - c0 < 128 ? depth - c0 : 128;
                HVX_VectorPair e = Q6_W_vcombine_VV(Q6_V_vzero(), Q6_V_vzero());
                HVX_VectorPair od = e;
                HVX_Vector a[4];
                for (o = 0; o < out_c; ++o) {
                    const HVX_VectorPair xs = Q6_Wh_vsxt_Vb(
                        pe_hvx_load(filter + o * depth + c0, len));
                    const int32_t g = (int32_t)(((uint32_t)(uint16_t)dys[o]) * 0x10001u);
                    e = Q6_Ww_vmpyacc_WwVhRh_sat(e, Q6_V_lo_W(xs), g);
                    od = Q6_Ww_vmpyacc_WwVhRh_sat(od, Q6_V_hi_W(xs), g);
                }
                a[0] = Q6_V_lo_W(e), a[1] = Q6_V_lo_W(od), a[2] = Q6_V_hi_W(e);
                a[3] = Q6_V_hi_W(od);
                if (pass == 0) {
                    for (j = 0; j < 4; ++j) {
                        pe_hvx_range_add(&range, pe_hvx_keep_group(a[j], len, j));
                    }
                } else {
                    const HVX_Vector he = Q6_Vh_vasr_VwVwR_sat(pe_hvx_rescale_value(a[2], &rs),
                                                               pe_hvx_rescale_value(a[0], &rs), 0);
                    const HVX_Vector ho = Q6_Vh_vasr_VwVwR_sat(pe_hvx_rescale_value(a[3], &rs),
                                                               pe_hvx_rescale_value(a[1], &rs), 0);
                    pe_hvx_store(dx + r * depth + c0, Q6_Vb_vasr_VhVhR_sat(ho, he, 0), len);
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp - quant->prescale_shift, quant->output_shift, &plan);
}

void pe_fully_connected_grad_weight_s8_hvx(const pe_context *ctx,
                                           const pe_fc_grad_weight_params *params,
                                           const int32_t *channels, const pe_dims *x_dims,
                                           const int8_t *x, const pe_dims *dy_dims,
                                           const int8_t *dy, const int32_t *dy_exp,
                                           const pe_dims *dw_dims, int32_t *dw,
                                           int32_t *dw_exp)
{
    const int32_t depth = x_dims->c, rows = x_dims->n, out_c = dy_dims->c;
    const HVX_Vector off = Q6_V_vsplat_R(params->input_offset);
    int32_t j, c0, r, k;
    (void)ctx;
    for (c0 = 0; c0 < depth; c0 += 128) {
        const int32_t len = depth - c0 < 128 ? depth - c0 : 128;
        HVX_Vector xo[4];                      /* one row: x + off of the step, once */
        pe_hvx_words4(pe_hvx_load(x + c0, len), xo);
        for (k = 0; k < 4; ++k) {
            xo[k] = Q6_Vw_vadd_VwVw(xo[k], off);
        }
        for (j = 0; j < dw_dims->n; ++j) {
            const int32_t o = channels != 0 ? channels[j] : j;
            HVX_Vector acc[4] = {Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero()};
            for (r = 0; r < rows; ++r) {
                const int32_t g = (int32_t)(((uint32_t)(uint16_t)(int16_t)dy[r * out_c + o])
                                            * 0x10001u);
                HVX_Vector w[4];
                if (r == 0) {
                    w[0] = xo[0], w[1] = xo[1], w[2] = xo[2], w[3] = xo[3];
                } else {
                    pe_hvx_words4(pe_hvx_load(x + r * depth + c0, len), w);
                    for (k = 0; k < 4; ++k) {
                        w[k] = Q6_Vw_vadd_VwVw(w[k], off);
                    }
                }
                for (k = 0; k < 4; ++k) {
                    acc[k] = Q6_Vw_vmpyiacc_VwVwRh(acc[k], w[k], g);
                }
            }
            for (k = 0; k < 4 && 32 * k < len; ++k) {
                const int32_t n = len - 32 * k < 32 ? len - 32 * k : 32;
                pe_hvx_store(dw + j * depth + c0 + 32 * k, acc[k], 4 * n);
            }
        }
    }
    *dw_exp = *dy_exp;
}
