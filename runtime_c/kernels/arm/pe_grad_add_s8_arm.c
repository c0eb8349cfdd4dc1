/* pe_grad_add_s8_arm - pe_grad_add_s8 (ref, pe_grad_add_s8.c; codegen/golden/train_grads.py
 * grad_add_i8) when both shifts s_j = e_j - max(e1, e2) + 16 are >= 0 (the exponents differ by
 * at most 16): then t = q1 * 2^s1 + q2 * 2^s2 exactly (|t| < 2^24), one pass takes its range,
 * a second recomputes t and normalises it (RDBPOT(t, r) = (t + 2^(r-1) - [t < 0]) >> r, clamped
 * to +-127). An all-zero input and larger exponent gaps go to ref. g may
 * alias g1 or g2 (each pass reads element i before it writes it). */
#include "pe_arm.h"
#include "pe_arm_kernels.h"
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"

void pe_grad_add_s8_arm(int32_t size, const int8_t *g1, const int32_t *g1_exp, const int8_t *g2,
                        const int32_t *g2_exp, int8_t *g, int32_t *g_exp)
{
    const int32_t e1 = *g1_exp, e2 = *g2_exp;
    const int32_t big = e1 > e2 ? e1 : e2;
    const int32_t s1 = e1 - big + PE_GRAD_ADD_BITS, s2 = e2 - big + PE_GRAD_ADD_BITS;
    pe_range range = pe_range_zero();
    int32_t m1, m2, r, i;
    if (s1 < 0 || s2 < 0 || pe_all_zero(size, g2) || pe_all_zero(size, g1)) {
        pe_grad_add_s8(size, g1, g1_exp, g2, g2_exp, g, g_exp);
        return;
    }
    m1 = (int32_t)1 << s1;
    m2 = (int32_t)1 << s2;
    for (i = 0; i < size; ++i) {
        pe_range_add(&range, g1[i] * m1 + g2[i] * m2);
    }
    r = pe_normalise_shift(pe_range_max_abs(&range));
    for (i = 0; i < size; ++i) {
        const int32_t t = g1[i] * m1 + g2[i] * m2;
        int32_t v = r > 0 ? pe_asr_s32(pe_s32_from_u32((uint32_t)t + (1u << (r - 1))
                                                       - ((uint32_t)t >> 31)), r)
                          : t;
        v = v > PE_GRAD_MAX ? PE_GRAD_MAX : v;
        g[i] = (int8_t)(v < -PE_GRAD_MAX ? -PE_GRAD_MAX : v);
    }
    *g_exp = big - PE_GRAD_ADD_BITS + r;
}
