/*
 * pe_requant.h - exact int8 requantization arithmetic of TFLite Micro / CMSIS-NN.
 *
 * The gemmlowp primitives behind TFLM's MultiplyByQuantizedMultiplier (double rounding, the
 * default build of both TFLM and CMSIS-NN; see NUMERICS.md), written so that no input can
 * trigger undefined behaviour:
 *   - signed overflow never happens: wrapping int32 sums and left shifts go through uint32_t
 *     and come back with pe_s32_from_u32() (a value conversion, not an implementation-defined
 *     cast);
 *   - no signed value is shifted left, and no negative value is shifted right: an arithmetic
 *     shift right is spelled ~(~x >> e) for negative x (gcc and clang compile it to one
 *     arithmetic shift instruction);
 *   - shift counts stay below the operand width.
 * int32_t is two's complement by the C99 standard (7.18.1.1), so bitwise AND on negative
 * values is well defined.
 *
 * Multipliers and shifts are produced ahead of time by Python (codegen/golden/numerics.py,
 * quantize_multiplier): multiplier in [0, 2^31), shift in [-31, 30] with a positive shift
 * meaning a left shift. Nothing here uses floating point.
 */
#ifndef PE_REQUANT_H
#define PE_REQUANT_H

#include <stdint.h>

/* uint32 -> int32 with two's-complement wrap-around (no implementation-defined conversion). */
static inline int32_t pe_s32_from_u32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 0x80000000u) + INT32_MIN;
}

/* a + b wrapped to int32 (what C int32 arithmetic does on every target TFLM runs on). */
static inline int32_t pe_add_wrap_s32(int32_t a, int32_t b)
{
    return pe_s32_from_u32((uint32_t)a + (uint32_t)b);
}

/* x * 2^e wrapped to int32, for 0 <= e (e >= 32 gives 0, as the golden model's int64 shift). */
static inline int32_t pe_shl_wrap_s32(int32_t x, int32_t e)
{
    return e >= 32 ? 0 : pe_s32_from_u32((uint32_t)x << e);
}

/* floor(x / 2^e) for 0 <= e <= 31: an arithmetic shift right without shifting a negative. */
static inline int32_t pe_asr_s32(int32_t x, int32_t e)
{
    return x < 0 ? ~(~x >> e) : x >> e;
}

/* gemmlowp SaturatingRoundingDoublingHighMul (= ARM VQRDMULH): round(a * b / 2^31),
 * ties away from zero; INT32_MIN * INT32_MIN saturates to INT32_MAX. */
static inline int32_t pe_sat_rounding_doubling_high_mul(int32_t a, int32_t b)
{
    int64_t ab;
    int64_t nudge;
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    ab = (int64_t)a * (int64_t)b;
    nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    /* C division truncates toward zero; |result| < 2^31 here. */
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp RoundingDivideByPOT: x / 2^e rounded half away from zero, for e >= 0.
 * Exponents of 32 and more (reachable in softmax) give what exact arithmetic gives. */
static inline int32_t pe_rounding_divide_by_pot(int32_t x, int32_t e)
{
    int32_t mask;
    int32_t remainder;
    int32_t threshold;
    if (e >= 32) {
        return (e == 32 && x == INT32_MIN) ? -1 : 0;
    }
    mask = (int32_t)(((uint32_t)1 << e) - 1u);
    remainder = x & mask;
    threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return pe_asr_s32(x, e) + (remainder > threshold ? 1 : 0);
}

/* TFLM MultiplyByQuantizedMultiplier (double rounding): x * multiplier * 2^(shift - 31). */
static inline int32_t pe_multiply_by_quantized_multiplier(int32_t x, int32_t multiplier,
                                                          int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    return pe_rounding_divide_by_pot(
        pe_sat_rounding_doubling_high_mul(pe_shl_wrap_s32(x, left), multiplier), right);
}

/* TFLM MultiplyByQuantizedMultiplierGreaterThanOne (softmax's input scaling). */
static inline int32_t pe_multiply_by_quantized_multiplier_gt_one(int32_t x, int32_t multiplier,
                                                                 int32_t left_shift)
{
    return pe_sat_rounding_doubling_high_mul(pe_shl_wrap_s32(x, left_shift), multiplier);
}

/* min(max(x, lo), hi), in TFLM's and CMSIS-NN's order (hi wins should lo exceed hi). */
static inline int32_t pe_clamp_s32(int32_t x, int32_t lo, int32_t hi)
{
    const int32_t y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

/* clamp(x + offset, lo, hi) without overflow for any int32 x (offset, lo, hi are zero points
 * and quantized bounds, |.| < 2^30): shifting the bounds instead of x is exactly equivalent. */
static inline int32_t pe_offset_clamp_s32(int32_t x, int32_t offset, int32_t lo, int32_t hi)
{
    return pe_clamp_s32(x, lo - offset, hi - offset) + offset;
}

#endif /* PE_REQUANT_H */
