/*
 * pe_fixedpoint.h - the gemmlowp fixed-point functions behind TFLM's int8 softmax.
 *
 * exp of a non-positive Q5.26 value, 1 / (1 + x) by Newton-Raphson and TFLM's GetReciprocal,
 * transcribed from gemmlowp/fixedpoint.h (int32 scalar path) with the same undefined-behaviour
 * guarantees as pe_requant.h (every sum that could leave int32 wraps explicitly). Bit-exact with
 * codegen/golden/numerics.py.
 */
#ifndef PE_FIXEDPOINT_H
#define PE_FIXEDPOINT_H

#include <stdint.h>

#include "pe_requant.h"

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for 0 < exponent < 31. */
static inline int32_t pe_sat_rounding_mul_by_pot(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)(((uint32_t)1 << (31 - exponent)) - 1u);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return pe_shl_wrap_s32(x, exponent);
}

/* gemmlowp RoundingHalfSum: (a + b) / 2 rounded half away from zero. */
static inline int32_t pe_rounding_half_sum(int32_t a, int32_t b)
{
    const int64_t sum = (int64_t)a + (int64_t)b;
    return (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
}

/* Leading zero bits of a uint32 (32 for 0), without compiler builtins. */
static inline int32_t pe_count_leading_zeros_u32(uint32_t x)
{
    int32_t n = 0;
    if (x == 0u) {
        return 32;
    }
    if ((x & 0xFFFF0000u) == 0u) { n += 16; x <<= 16; }
    if ((x & 0xFF000000u) == 0u) { n += 8; x <<= 8; }
    if ((x & 0xF0000000u) == 0u) { n += 4; x <<= 4; }
    if ((x & 0xC0000000u) == 0u) { n += 2; x <<= 2; }
    if ((x & 0x80000000u) == 0u) { n += 1; }
    return n;
}

/* exp(a) for a Q0.31 value a in [-1/4, 0); Q0.31 result. */
static inline int32_t pe_exp_on_interval_between_negative_one_quarter_and_0_excl(int32_t a)
{
    const int32_t exp_minus_one_eighth = 1895147668;   /* exp(-1/8) in Q0.31 */
    const int32_t one_third = 715827883;               /* 1/3 in Q0.31 */
    const int32_t x = pe_add_wrap_s32(a, (int32_t)1 << 28);
    const int32_t x2 = pe_sat_rounding_doubling_high_mul(x, x);
    const int32_t x3 = pe_sat_rounding_doubling_high_mul(x2, x);
    const int32_t x4 = pe_sat_rounding_doubling_high_mul(x2, x2);
    const int32_t x4_over_4 = pe_rounding_divide_by_pot(x4, 2);
    const int32_t poly = pe_rounding_divide_by_pot(
        pe_add_wrap_s32(pe_sat_rounding_doubling_high_mul(pe_add_wrap_s32(x4_over_4, x3),
                                                          one_third), x2), 1);
    return pe_add_wrap_s32(exp_minus_one_eighth,
                           pe_sat_rounding_doubling_high_mul(exp_minus_one_eighth,
                                                             pe_add_wrap_s32(x, poly)));
}

/* gemmlowp exp_on_negative_values for a Q5.26 input (the softmax's kScaledDiffIntegerBits);
 * Q0.31 result. */
static inline int32_t pe_exp_on_negative_values_q5_26(int32_t a)
{
    /* exp(-2^k) in Q0.31 for k = -2 .. 4 */
    static const int32_t barrel[7] = {1672461947, 1302514674, 790015084, 290630308,
                                      39332535, 720401, 242};
    const int32_t one_quarter = (int32_t)1 << 24;
    const int32_t a_mod = pe_add_wrap_s32(a & (one_quarter - 1), -one_quarter);
    const int32_t remainder = pe_s32_from_u32((uint32_t)a_mod - (uint32_t)a);
    int32_t result = pe_exp_on_interval_between_negative_one_quarter_and_0_excl(
        pe_sat_rounding_mul_by_pot(a_mod, 5));
    int32_t k;
    for (k = 0; k < 7; ++k) {
        if ((remainder & ((int32_t)1 << (24 + k))) != 0) {
            result = pe_sat_rounding_doubling_high_mul(result, barrel[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a) for Q0.31 a in [0, 1); Q0.31. */
static inline int32_t pe_one_over_one_plus_x_for_x_in_0_1(int32_t a)
{
    const int32_t constant_48_over_17 = 1515870810;      /* Q2.29 */
    const int32_t constant_neg_32_over_17 = -1010580540; /* Q2.29 */
    const int32_t one_q2_29 = (int32_t)1 << 29;
    const int32_t half_denominator = pe_rounding_half_sum(a, INT32_MAX);
    int32_t x = pe_add_wrap_s32(constant_48_over_17,
                                pe_sat_rounding_doubling_high_mul(half_denominator,
                                                                  constant_neg_32_over_17));
    int32_t i;
    for (i = 0; i < 3; ++i) {
        const int32_t half_denominator_times_x =
            pe_sat_rounding_doubling_high_mul(half_denominator, x);
        const int32_t one_minus = pe_s32_from_u32((uint32_t)one_q2_29
                                                  - (uint32_t)half_denominator_times_x);
        x = pe_add_wrap_s32(x, pe_sat_rounding_mul_by_pot(
                                   pe_sat_rounding_doubling_high_mul(x, one_minus), 2));
    }
    return pe_sat_rounding_mul_by_pot(x, 1);
}

/* TFLM GetReciprocal(x, x_integer_digits): Q0.31 scale with 1/x = scale * 2^-bits_over_unit,
 * for x > 0. */
static inline int32_t pe_get_reciprocal(int32_t x, int32_t x_integer_digits,
                                        int32_t *num_bits_over_unit)
{
    const int32_t headroom_plus_one = pe_count_leading_zeros_u32((uint32_t)x);
    const uint32_t shifted = headroom_plus_one >= 32 ? 0u
                             : (uint32_t)x << headroom_plus_one;
    *num_bits_over_unit = x_integer_digits - headroom_plus_one;
    return pe_one_over_one_plus_x_for_x_in_0_1(pe_s32_from_u32(shifted - 0x80000000u));
}

#endif /* PE_FIXEDPOINT_H */
