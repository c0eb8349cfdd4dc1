/* The fully connected layer of one sample (a row or a few) on HVX, reading the weights as
 * they are ((O, K) rows: frozen in flash or trained in RAM, no packed copy):
 *
 * pe_fully_connected_s8_dot_hvx: per output unit the dot product of its row with the input,
 *     128 products a vrmpy, eight units (four when there are at most four) side by side:
 *     sum w * (x + off) = sum w * (x + 128) - (128 - off) * sum w, two vrmpy of unsigned
 *     bytes (x ^ 0x80, 128 - off; zero past K) by the signed weights; the lane sums of the
 *     eight units by a tree of shuffles, 32 units requantized together.
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

/* a and b word-interleaved by `bytes` (vshuff) and the halves added: lane l of the result
 * sums two lanes of a (l even in units of bytes / 4) or of b. */
static inline HVX_Vector pe_hvx_fold(HVX_Vector a, HVX_Vector b, int32_t bytes)
{
    const HVX_VectorPair w = Q6_W_vshuff_VVR(b, a, -bytes);
    return Q6_Vw_vadd_VwVw(Q6_V_lo_W(w), Q6_V_hi_W(w));
}

/* Lane sums of `units` (4 or 8) vectors: lane u < units of the result is the sum of the 32
 * lanes of s[u] (log2(units) levels of shuffles leave lane l with partial sums of vector
 * l % units, rotations add the lanes of each that remain). */
PE_HVX_INLINE HVX_Vector pe_hvx_sums(HVX_Vector s[8], const int32_t units)
{
    HVX_Vector v;
    s[0] = pe_hvx_fold(s[0], s[1], 4);
    s[1] = pe_hvx_fold(s[2], s[3], 4);
    if (units == 8) {
        s[2] = pe_hvx_fold(s[4], s[5], 4);
        s[3] = pe_hvx_fold(s[6], s[7], 4);
        v = pe_hvx_fold(pe_hvx_fold(s[0], s[1], 8), pe_hvx_fold(s[2], s[3], 8), 16);
    } else {
        v = pe_hvx_fold(s[0], s[1], 8);
        v = Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, 16));
    }
    v = Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, 32));
    return Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, 64));
}

/* `units` (4 or 8) units' dot products with the input x, sum_k w[u][k] * (x[k] + off), in
 * lanes 0..units-1 (rows w, w + depth, ...; rows past `last` repeat it).
 *
 * With xu = x + 128 (x ^ 0x80, unsigned bytes) and c = 128 - off (0..255: off is -127..128),
 * sum w * (x + off) = sum w * xu - c * sum w: per 128 values a row, one load (only the aligned
 * blocks that hold them), vrmpy(xu.ub, w.b) accumulated and vrmpy(c.ub, w.b) subtracted. xu
 * and c are zero past the row's values, so whatever the load brings in past them multiplies
 * zero. One running row pointer: no table of row addresses to keep in registers. */
PE_HVX_INLINE HVX_Vector pe_hvx_fc_units(const int8_t *x, const int8_t *w, const int8_t *last,
                                         int32_t depth, HVX_Vector cb, const int32_t units)
{
    HVX_Vector s[8];
    int32_t k, c0;
    PE_HVX_UNROLL
    for (k = 0; k < 8; ++k) {
        s[k] = Q6_V_vzero();
    }
    for (c0 = 0; c0 < depth; c0 += 128) {
        const int32_t len = depth - c0 < 128 ? depth - c0 : 128;
        const HVX_Vector xu = pe_hvx_keep(Q6_V_vxor_VV(pe_hvx_load_n(x + c0, len),
                                                       Q6_Vb_vsplat_R(0x80)), len);
        const HVX_Vector cv = pe_hvx_keep(cb, len);
        const int8_t *p = w + c0, *end = last + c0;
        PE_HVX_UNROLL
        for (k = 0; k < 8; ++k) {
            if (k < units) {
                const HVX_Vector wv = pe_hvx_load_n(p, len);
                s[k] = Q6_Vw_vsub_VwVw(Q6_Vw_vrmpyacc_VwVubVb(s[k], xu, wv),
                                       Q6_Vw_vrmpy_VubVb(cv, wv));
                p = p + depth < end ? p + depth : end;
            }
        }
    }
    return pe_hvx_sums(s, units);
}

/* Outputs o .. o + n - 1 (n <= 32) of one input row as int32 sums in lanes 0..n-1. Out of line:
 * each call starts from a handful of pointers, so nothing of the caller's loops is hoisted
 * into registers it would need. */
static __attribute__((noinline)) HVX_Vector pe_hvx_fc_block(const int8_t *x, const int8_t *w,
                                                           int32_t n, int32_t depth,
                                                           HVX_Vector cb)
{
    const int8_t *last = w + (n - 1) * depth;
    HVX_Vector acc = Q6_V_vzero();
    int32_t g;
    if (n <= 4) {
        return pe_hvx_fc_units(x, w, last, depth, cb, 4);
    }
    for (g = 0; g < n; g += 8) {          /* lanes 0..7 of the sums to lanes g..g + 7 */
        const HVX_Vector v = pe_hvx_fc_units(x, w + g * depth, last, depth, cb, 8);
        acc = Q6_V_vmux_QVV(Q6_Q_and_QQn(Q6_Q_vsetq2_R(4 * g + 32), Q6_Q_vsetq_R(4 * g)),
                            Q6_V_vror_VR(v, 128 - 4 * g), acc);
    }
    return acc;
}

/* One input row of a layer of at most 32 units, in one function with nothing called (the
 * vector constants stay in registers, no spills around a call): groups of eight units, the
 * last group of four when at most four remain, then one requantization and store. A small
 * classifier's products are fewer than the general path's fixed cost. */
static __attribute__((noinline)) void pe_fc_one_block(const pe_fc_params *params,
                                                      const int32_t *rq, const int8_t *x,
                                                      const int8_t *w, const int32_t *bias,
                                                      int32_t depth, int32_t n, int8_t *out)
{
    const HVX_Vector cb = Q6_Vb_vsplat_R(128 - params->input_offset);
    const int8_t *last = w + (n - 1) * depth;
    HVX_Vector acc = Q6_V_vzero(), y;
    int32_t g;
    for (g = 0; g < n; g += 8) {          /* lanes 0..7 of the sums to lanes g..g + 7 */
        const HVX_Vector v = n - g <= 4 ? pe_hvx_fc_units(x, w + g * depth, last, depth, cb, 4)
                                        : pe_hvx_fc_units(x, w + g * depth, last, depth, cb, 8);
        acc = g == 0 ? v : Q6_V_vmux_QVV(Q6_Q_and_QQn(Q6_Q_vsetq2_R(4 * g + 32),
                                                      Q6_Q_vsetq_R(4 * g)),
                                         Q6_V_vror_VR(v, 128 - 4 * g), acc);
    }
    if (bias != 0) {
        acc = Q6_Vw_vadd_VwVw(acc, pe_hvx_load_n(bias, 4 * n));
    }
    y = pe_hvx_requant(acc, rq, Q6_V_vsplat_R(params->output_offset),
                       Q6_V_vsplat_R(params->activation.min),
                       Q6_V_vsplat_R(params->activation.max));
    pe_hvx_store_n(out, pe_hvx_bytes2(y, y), n);
}

static __attribute__((noinline)) void pe_fc_rows(const pe_fc_params *params,
                                                 const int32_t *rq, const pe_dims *input_dims,
                                                 const int8_t *input, const int8_t *filter,
                                                 const int32_t *bias,
                                                 const pe_dims *output_dims, int8_t *output);

void pe_fully_connected_s8_dot_hvx(const pe_context *ctx, const pe_fc_params *params,
                                   const int32_t *rq, const pe_dims *input_dims,
                                   const int8_t *input, const pe_dims *filter_dims,
                                   const int8_t *filter, const int32_t *bias,
                                   const pe_dims *output_dims, int8_t *output)
{
    const int32_t rows = output_dims->n * output_dims->h * output_dims->w;
    int32_t r;
    (void)ctx;
    (void)filter_dims;
    if (output_dims->c > 32) {
        pe_fc_rows(params, rq, input_dims, input, filter, bias, output_dims, output);
        return;
    }
    for (r = 0; r < rows; ++r) {
        pe_fc_one_block(params, rq, input + r * input_dims->c, filter, bias, input_dims->c,
                        output_dims->c, output + r * output_dims->c);
    }
}

/* More than 32 units: blocks of 32, each out of line (pe_hvx_fc_block). */
static void pe_fc_rows(const pe_fc_params *params, const int32_t *rq,
                       const pe_dims *input_dims, const int8_t *input, const int8_t *filter,
                       const int32_t *bias, const pe_dims *output_dims, int8_t *output)
{
    const int32_t depth = input_dims->c;
    const int32_t rows = output_dims->n * output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    const HVX_Vector cb = Q6_Vb_vsplat_R(128 - params->input_offset);
    const HVX_Vector zp = Q6_V_vsplat_R(params->output_offset);
    const HVX_Vector lo = Q6_V_vsplat_R(params->activation.min);
    const HVX_Vector hi = Q6_V_vsplat_R(params->activation.max);
    int32_t r, o;
    for (r = 0; r < rows; ++r) {
        for (o = 0; o < out_c; o += 32) {
            const int32_t n = out_c - o < 32 ? out_c - o : 32;
            HVX_Vector acc = pe_hvx_fc_block(input + r * depth, filter + o * depth, n, depth,
                                             cb), y;
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
        if (rows == 1) {                       /* one product a weight: no sums */
            for (j = 0; j < dw_dims->n; ++j) {
                const int32_t o = channels != 0 ? channels[j] : j;
                const int32_t g = (int32_t)(((uint32_t)(uint16_t)(int16_t)dy[o]) * 0x10001u);
                int32_t *d = dw + j * depth + c0;
                if (len <= 32) {                /* one vector: 258 -> 218 packets (digits) */
                    pe_hvx_store_n(d, Q6_Vw_vmpyi_VwRh(xo[0], g), 4 * len);
                    continue;
                }
                for (k = 0; k < 4 && 32 * k < len; ++k) {
                    const int32_t n = len - 32 * k < 32 ? len - 32 * k : 32;
                    pe_hvx_store(d + 32 * k, Q6_Vw_vmpyi_VwRh(xo[k], g), 4 * n);
                }
            }
            continue;
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
