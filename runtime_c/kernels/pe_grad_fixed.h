/*
 * pe_grad_fixed.h - integer arithmetic of the int8 backward (backward: int8), bit-exact with
 * codegen/golden/train_numerics.py.
 *
 * A gradient is int8 q in [-127, 127] with one int32 exponent e per tensor (value q * 2^e).
 *
 *   normalise(t, e):   r = max(0, bitlen(max|t|) - 7); q = clamp(RDBPOT(t, r), -127, 127);
 *                      exponent e + r
 *   rescale(acc, e, M, k):  l = max(0, 30 - bitlen(max|acc|)); t = SRDHM(acc << l, M);
 *                      normalise(t, e - l + k)
 *
 * Kernels never store the int32 intermediate tensor: a first pass computes every value and
 * keeps only the smallest and the largest (a pe_range), a second pass recomputes each value
 * and writes its int8 result. That is exact because max|t| = max(|min t|, |max t|) and SRDHM
 * with a non-negative multiplier is monotone, so the extremes of t = SRDHM(acc << l, M) are
 * the images of the extremes of acc. Both ranges start at 0, which changes no maximum of |.|.
 *
 * UB-free like pe_requant.h: no signed overflow, no shift of a negative value.
 */
#ifndef PE_GRAD_FIXED_H
#define PE_GRAD_FIXED_H

#include <stdint.h>

#include "pe_fixedpoint.h"
#include "pe_requant.h"

enum {
    PE_GRAD_MAX = 127,              /* int8 gradients are symmetric: [-127, 127] */
    PE_GRAD_ADD_BITS = 16           /* grad_add's headroom: t_j = q_j << (e_j - E + 16) */
};

/* The smallest and largest value seen (both start at 0). */
typedef struct {
    int32_t lo;
    int32_t hi;
} pe_range;

static inline pe_range pe_range_zero(void)
{
    pe_range r;
    r.lo = 0;
    r.hi = 0;
    return r;
}

static inline void pe_range_add(pe_range *r, int32_t v)
{
    if (v < r->lo) {
        r->lo = v;
    }
    if (v > r->hi) {
        r->hi = v;
    }
}

/* Whether q[0..size) is all zero (stops at the first non-zero value). */
static inline int pe_all_zero(int32_t size, const int8_t *q)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        if (q[i] != 0) {
            return 0;
        }
    }
    return 1;
}

/* |x| as an unsigned (exact for INT32_MIN). */
static inline uint32_t pe_abs_u32(int32_t x)
{
    return x < 0 ? 0u - (uint32_t)x : (uint32_t)x;
}

/* Number of significant bits of an unsigned (0 for 0). */
static inline int32_t pe_bitlen_u32(uint32_t m)
{
    return 32 - pe_count_leading_zeros_u32(m);
}

static inline uint32_t pe_range_max_abs(const pe_range *r)
{
    const uint32_t a = pe_abs_u32(r->lo);
    const uint32_t b = pe_abs_u32(r->hi);
    return a > b ? a : b;
}

/* normalise: the right shift r for values whose largest magnitude is max_abs. */
static inline int32_t pe_normalise_shift(uint32_t max_abs)
{
    const int32_t r = pe_bitlen_u32(max_abs) - 7;
    return r > 0 ? r : 0;
}

/* normalise: one value at shift r. */
static inline int8_t pe_normalise_value(int32_t t, int32_t r)
{
    return (int8_t)pe_clamp_s32(pe_rounding_divide_by_pot(t, r), -PE_GRAD_MAX, PE_GRAD_MAX);
}

/* A rescale by M * 2^(k - 31) fixed for a whole tensor: headroom shift `left` (l), the
 * normalising right shift `right` (r); the result exponent is e - left + k + right. */
typedef struct {
    int32_t left;
    int32_t right;
} pe_rescale_plan;

/* SRDHM(acc << left, M) for |acc << left| < 2^31 (the plan guarantees it). */
static inline int32_t pe_rescale_raw(int32_t acc, int32_t multiplier, int32_t left)
{
    return pe_sat_rounding_doubling_high_mul(pe_shl_wrap_s32(acc, left), multiplier);
}

/* The plan of rescale() for accumulators spanning `acc` (their min and max). */
static inline pe_rescale_plan pe_rescale_plan_make(const pe_range *acc, int32_t multiplier)
{
    pe_rescale_plan p;
    pe_range t;
    const int32_t l = 30 - pe_bitlen_u32(pe_range_max_abs(acc));
    p.left = l > 0 ? l : 0;
    t.lo = pe_rescale_raw(acc->lo, multiplier, p.left);
    t.hi = pe_rescale_raw(acc->hi, multiplier, p.left);
    p.right = pe_normalise_shift(pe_range_max_abs(&t));
    return p;
}

static inline int8_t pe_rescale_value(int32_t acc, int32_t multiplier, const pe_rescale_plan *p)
{
    return pe_normalise_value(pe_rescale_raw(acc, multiplier, p->left), p->right);
}

/* The exponent after a rescale of values at exponent e by M * 2^(k - 31). */
static inline int32_t pe_rescale_exponent(int32_t e, int32_t k, const pe_rescale_plan *p)
{
    return e - p->left + k + p->right;
}

/* x * 2^s with int32 saturation, for 0 <= s (s >= 32 saturates every non-zero x). */
static inline int32_t pe_sat_shl_s32(int32_t x, int32_t s)
{
    if (x == 0 || s == 0) {
        return x;
    }
    if (s >= 32) {
        return x > 0 ? INT32_MAX : INT32_MIN;
    }
    if (x > (INT32_MAX >> s)) {
        return INT32_MAX;
    }
    if (x < pe_asr_s32(INT32_MIN, s)) {
        return INT32_MIN;
    }
    return pe_shl_wrap_s32(x, s);
}

/* Whether the saturating left shift of pe_mul_by_multiplier_sat(x, M, shift) clips
 * (train_numerics.shl_saturates): shift > 0 and x * 2^min(shift, 32) outside int32. */
static inline int pe_shl_saturates(int32_t x, int64_t shift)
{
    const int32_t s = shift > 32 ? 32 : (int32_t)shift;
    if (shift <= 0 || x == 0) {
        return 0;
    }
    return s >= 32 || x > (INT32_MAX >> s) || x < pe_asr_s32(INT32_MIN, s);
}

/* train_numerics.mul_by_multiplier_sat: TFLM MultiplyByQuantizedMultiplier with a
 * saturating left shift and any shift (a right shift of 32 or more gives 0). The shift is
 * passed as int64 so that sums of exponents cannot overflow. */
static inline int32_t pe_mul_by_multiplier_sat(int32_t x, int32_t multiplier, int64_t shift)
{
    int32_t v = x;
    if (shift > 0) {
        v = pe_sat_shl_s32(x, shift > 32 ? 32 : (int32_t)shift);
    }
    v = pe_sat_rounding_doubling_high_mul(v, multiplier);
    if (shift >= 0) {
        return v;
    }
    return shift < -31 ? 0 : pe_rounding_divide_by_pot(v, (int32_t)-shift);
}

/* train_numerics.shift_exp: q * 2^s for 0 <= s (s small), RDBPOT(q, -s) for -31 <= s < 0,
 * 0 below. */
static inline int32_t pe_shift_exp(int32_t q, int32_t s)
{
    if (s >= 0) {
        return pe_shl_wrap_s32(q, s);
    }
    return s < -31 ? 0 : pe_rounding_divide_by_pot(q, -s);
}

/* int32 saturation of an int64. */
static inline int32_t pe_sat_s32_from_s64(int64_t x)
{
    return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
}

/* RDBPOT for an int64 value and 0 <= e <= 62: half away from zero, arithmetic shift. */
static inline int64_t pe_rounding_divide_by_pot_s64(int64_t x, int32_t e)
{
    const int64_t mask = (int64_t)(((uint64_t)1 << e) - 1u);
    const int64_t remainder = x & mask;
    const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    const int64_t floor = x < 0 ? ~(~x >> e) : x >> e;
    return floor + (remainder > threshold ? 1 : 0);
}

#endif /* PE_GRAD_FIXED_H */
