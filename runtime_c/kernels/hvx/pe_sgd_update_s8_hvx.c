/* pe_sgd_update_s8_s8_hvx, pe_sgd_update_s8_s32_hvx - the int8 mode's SGD (integer only) on
 * HVX: pe_sgd_update_s8.c's recipe, 32 trained entries of a channel a step, the same results
 * and the same count of saturated updates (codegen/golden/train_optim.py sgd_update_i8):
 *
 *   G = master ? F : (buf1 ? 8 : 0)
 *   d = mbqm_sat(acc, M_c, k_c + e + G)      the left shift saturates (and counts), a right
 *                                            shift of 32 or more gives 0
 *   buf1: buf = sat32(RDBPOT(mq * buf, 15) + d); s = buf, else s = d
 *         (mq * buf from vmpye's 48-bit product: RDBPOT(z, 15) = 2 * (z >> 16) + bit 15 of z
 *          + (z & 0x7FFF > 0x3FFF + (z < 0)), exact for mq < 2^16)
 *   no master: p = sat(p - (buf1 ? RDBPOT(s, 8) : s))
 *   master, int8 weight: master = clamp(master - s, -(127 << F), 127 << F);
 *                        w = clamp(RDBPOT(master, F), -127, 127)
 *   master, int32 bias:  t = sat32(master - s); n = RDBPOT(t, F); master = t - n * 2^F;
 *                        b = sat(b + n)
 * A difference or sum that leaves int32 is found by comparing the wrapping and the saturating
 * instruction; every clamp that clips flags its entry once. */
#include "pe_grad_fixed.h"
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"
#include "pe_update.h"

typedef struct {
    HVX_Vector v;                 /* the values */
    HVX_VectorPred clipped;       /* where an exact result left the range */
} pe_hvx_clip;

/* x - y (y - x when `add` is 0: x + y) clamped to [lo, hi], exact 33-bit arithmetic. */
PE_HVX_INLINE pe_hvx_clip pe_hvx_sub_clamp(HVX_Vector x, HVX_Vector y, int add, HVX_Vector lo,
                                           HVX_Vector hi)
{
    pe_hvx_clip r;
    const HVX_Vector wrap = add ? Q6_Vw_vadd_VwVw(x, y) : Q6_Vw_vsub_VwVw(x, y);
    const HVX_Vector sat = add ? Q6_Vw_vadd_VwVw_sat(x, y) : Q6_Vw_vsub_VwVw_sat(x, y);
    r.clipped = Q6_Q_or_QQ(Q6_Q_not_Q(Q6_Q_vcmp_eq_VwVw(wrap, sat)),
                           Q6_Q_or_QQ(Q6_Q_vcmp_gt_VwVw(lo, sat), Q6_Q_vcmp_gt_VwVw(sat, hi)));
    r.v = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(sat, lo), hi);
    return r;
}

/* RoundingDivideByPOT by a shift 0 <= e <= 31 for the whole vector. */
PE_HVX_INLINE HVX_Vector pe_hvx_rdbpot_r(HVX_Vector t, int32_t e)
{
    const int32_t mask = (int32_t)((1u << e) - 1u);
    return pe_hvx_rdbpot(t, Q6_V_vsplat_R(e), Q6_V_vsplat_R(mask), Q6_V_vsplat_R(mask >> 1));
}

static void pe_hvx_sgd(const pe_sgd_params *params, const pe_update_dims *dims,
                       const int32_t *channels, int8_t *p8, int32_t *p32, const int32_t *grad,
                       const int32_t *qas, const int32_t *grad_exp, const int32_t *qas_shift,
                       int32_t *buf1, int32_t *master, int32_t *saturated)
{
    const int32_t f = params->master_frac_bits;
    const int32_t g_bits = master != 0 ? f : buf1 != 0 ? 8 : 0;
    const HVX_Vector one = Q6_V_vsplat_R(1), zero = Q6_V_vzero();
    const HVX_Vector i32_max = Q6_V_vsplat_R(INT32_MAX), i32_min = Q6_V_vsplat_R(INT32_MIN);
    const HVX_Vector p_lo = Q6_V_vsplat_R(p8 != 0 ? -127 : dims->lo);
    const HVX_Vector p_hi = Q6_V_vsplat_R(p8 != 0 ? 127 : dims->hi);
    const HVX_Vector m_lim = Q6_V_vsplat_R(127 * (1 << f)), m_nlim = Q6_V_vsplat_R(-127 * (1 << f));
    const HVX_Vector mq = Q6_V_vsplat_R(params->momentum_q15);
    HVX_Vector count = zero;
    int32_t o, j, k;
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            const int32_t p0 = pe_update_param_base(dims, channels, o, j);
            const int32_t g0 = pe_update_grad_base(dims, o, j);
            const int64_t shift = (int64_t)qas_shift[j] + *grad_exp + g_bits;
            const int32_t left = shift > 0 ? (shift > 32 ? 32 : (int32_t)shift) : 0;
            const HVX_Vector m = Q6_V_vsplat_R(qas[j]);
            for (k = 0; k < dims->inner; k += 32) {
                const int32_t n = dims->inner - k < 32 ? dims->inner - k : 32;
                const HVX_Vector acc = pe_hvx_load_n(grad + g0 + k, 4 * n);
                HVX_VectorPred flag = Q6_Q_vcmp_gt_VwVw(zero, zero);          /* none */
                HVX_Vector s = acc, p;
                /* d = mbqm_sat(acc, m, shift) */
                if (left >= 32) {
                    const HVX_VectorPred nz = Q6_Q_not_Q(Q6_Q_vcmp_eq_VwVw(acc, zero));
                    flag = nz;
                    s = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(acc, zero), i32_max,
                                      Q6_V_vmux_QVV(nz, i32_min, zero));
                } else if (left > 0) {
                    /* x > INT32_MAX >> s or x < INT32_MIN >> s (arithmetic): the shift clips */
                    const int32_t top = INT32_MAX >> left;
                    const int32_t bottom = (int32_t)((uint32_t)INT32_MIN >> left
                                                     | ~(UINT32_MAX >> left));
                    const HVX_VectorPred hi_q = Q6_Q_vcmp_gt_VwVw(acc, Q6_V_vsplat_R(top));
                    const HVX_VectorPred lo_q = Q6_Q_vcmp_gt_VwVw(Q6_V_vsplat_R(bottom), acc);
                    flag = Q6_Q_or_QQ(hi_q, lo_q);
                    s = Q6_V_vmux_QVV(hi_q, i32_max,
                                      Q6_V_vmux_QVV(lo_q, i32_min, Q6_Vw_vasl_VwR(acc, left)));
                }
                s = pe_hvx_srdhm(s, m);
                if (shift < 0) {
                    s = shift < -31 ? zero : pe_hvx_rdbpot_r(s, (int32_t)-shift);
                }
                if (buf1 != 0) {
                    const HVX_Vector b = pe_hvx_load_n(buf1 + g0 + k, 4 * n);
                    const HVX_VectorPair z = Q6_W_vmpye_VwVuh(b, mq);   /* b * mq, 48 bits */
                    const HVX_Vector low = Q6_Vuw_vlsr_VuwR(Q6_V_lo_W(z), 16);
                    const HVX_Vector rem = Q6_V_vand_VV(low, Q6_V_vsplat_R(0x7FFF));
                    const HVX_Vector thr = Q6_Vw_condacc_QVwVw(Q6_Q_vcmp_gt_VwVw(zero, b),
                                                               Q6_V_vsplat_R(0x3FFF), one);
                    HVX_Vector dec = Q6_Vw_vadd_VwVw(Q6_Vw_vasl_VwR(Q6_V_hi_W(z), 1),
                                                     Q6_Vuw_vlsr_VuwR(low, 15));
                    pe_hvx_clip sum;
                    dec = Q6_Vw_condacc_QVwVw(Q6_Q_vcmp_gt_VwVw(rem, thr), dec, one);
                    sum = pe_hvx_sub_clamp(dec, s, 1, i32_min, i32_max);
                    flag = Q6_Q_or_QQ(flag, sum.clipped);
                    s = sum.v;
                    pe_hvx_store_n(buf1 + g0 + k, s, 4 * n);
                }
                if (p8 != 0) {
                    HVX_Vector w[4];
                    pe_hvx_words4(pe_hvx_load_n(p8 + p0 + k, n), w);
                    p = w[0];
                } else {
                    p = pe_hvx_load_n(p32 + p0 + k, 4 * n);
                }
                if (master == 0) {
                    const pe_hvx_clip r = pe_hvx_sub_clamp(
                        p, buf1 != 0 ? pe_hvx_rdbpot_r(s, 8) : s, 0, p_lo, p_hi);
                    flag = Q6_Q_or_QQ(flag, r.clipped);
                    p = r.v;
                } else if (p8 != 0) {
                    const pe_hvx_clip r = pe_hvx_sub_clamp(
                        pe_hvx_load_n(master + g0 + k, 4 * n), s, 0, m_nlim, m_lim);
                    flag = Q6_Q_or_QQ(flag, r.clipped);
                    pe_hvx_store_n(master + g0 + k, r.v, 4 * n);
                    p = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(pe_hvx_rdbpot_r(r.v, f),
                                                        Q6_V_vsplat_R(-127)),
                                        Q6_V_vsplat_R(127));
                } else {
                    const pe_hvx_clip t = pe_hvx_sub_clamp(
                        pe_hvx_load_n(master + g0 + k, 4 * n), s, 0, i32_min, i32_max);
                    const HVX_Vector q = pe_hvx_rdbpot_r(t.v, f);
                    const pe_hvx_clip b = pe_hvx_sub_clamp(p, q, 1, p_lo, p_hi);
                    flag = Q6_Q_or_QQ(flag, Q6_Q_or_QQ(t.clipped, b.clipped));
                    pe_hvx_store_n(master + g0 + k, Q6_Vw_vsub_VwVw(t.v, Q6_Vw_vasl_VwR(q, f)),
                                   4 * n);
                    p = b.v;
                }
                if (p8 != 0) {
                    pe_hvx_store_n(p8 + p0 + k, pe_hvx_bytes2(p, p), n);
                } else {
                    pe_hvx_store_n(p32 + p0 + k, p, 4 * n);
                }
                if (n < 32) {
                    flag = Q6_Q_and_QQ(flag, Q6_Q_vsetq2_R(4 * n));
                }
                count = Q6_Vw_condacc_QVwVw(flag, count, one);
            }
        }
    }
    {
        HVX_Vector v = count;
        int32_t s;
        for (s = 64; s >= 4; s >>= 1) {
            v = Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, s));
        }
        pe_count_saturated(saturated, Q6_R_vextract_VR(v, 0));
    }
}

void pe_sgd_update_s8_s8_hvx(const pe_sgd_params *params, const pe_update_dims *dims,
                             const int32_t *channels, int8_t *param, const int32_t *grad,
                             const int32_t *qas, const int32_t *grad_exp,
                             const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                             int32_t *saturated)
{
    pe_hvx_sgd(params, dims, channels, param, 0, grad, qas, grad_exp, qas_shift, buf1, master,
               saturated);
}

void pe_sgd_update_s8_s32_hvx(const pe_sgd_params *params, const pe_update_dims *dims,
                              const int32_t *channels, int32_t *param, const int32_t *grad,
                              const int32_t *qas, const int32_t *grad_exp,
                              const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                              int32_t *saturated)
{
    pe_hvx_sgd(params, dims, channels, 0, param, grad, qas, grad_exp, qas_shift, buf1, master,
               saturated);
}
