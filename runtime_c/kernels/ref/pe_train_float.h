/*
 * pe_train_float.h - float32 helpers of the fp32 backward (backward: fp32), bit-exact with
 * codegen/golden/train_numerics.py: no libm, no libc, every operation one IEEE-754 float32
 * rounding (compile with -ffp-contract=off: a fused multiply-add would change results).
 *
 *   pe_logf        the loss's deterministic log (the exact sequence of train_numerics.pe_logf)
 *   pe_roundf      round half away from zero (C roundf) by truncation and an exact remainder
 *   pe_round_sat_f32  sat(round(x)) into [lo, hi] as train_numerics.round_sat_f32 (NaN -> 0)
 *                  (pe_round_sat_flag_f32 also says whether it saturated)
 *   pe_round_step_i64 an int32 bias's fp32 update as an integer step (train_optim)
 *   pe_sqrtf       correctly rounded square root by integer digit recurrence: the IEEE-754
 *                  result on every target, with or without an FPU or a C library (a
 *                  hardware sqrt instruction would give the same bits; libm is not used so
 *                  that Hexagon and soft-float Cortex-M builds need none)
 */
#ifndef PE_TRAIN_FLOAT_H
#define PE_TRAIN_FLOAT_H

#include <float.h>
#include <stdint.h>

#include "pe_float.h"

/* Every float32 operation must round to float32 (SSE, ARM VFP, Hexagon, soft float), not be
 * kept in a wider format (x87). */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != -1
#error "the fp32 training kernels need FLT_EVAL_METHOD == 0 (e.g. -mfpmath=sse, not x87)"
#endif

/* The IEEE-754 bit pattern of a float (union punning is defined in C99 TC3). */
static inline uint32_t pe_f32_bits(float f)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    return v.u;
}

/* The quiet NaN a kernel writes for an invalid input (e.g. a label outside the classes). */
static inline float pe_f32_nan(void)
{
    return pe_f32_from_bits(0x7FC00000u);
}

/* train_numerics.pe_logf: natural log of a positive finite float32, as documented there:
 * x = f * 2^k with f in [sqrt(2)/2, sqrt(2)), t = (f - 1) / (f + 1), an odd series in t. */
static inline float pe_logf(float x)
{
    const float ln2_hi = pe_f32_from_bits(0x3F317180u);     /* 6.9313812256e-01 */
    const float ln2_lo = pe_f32_from_bits(0x3717F7D1u);     /* 9.0580006145e-06 */
    const float c3 = (float)(1.0 / 3.0);
    const float c5 = (float)(1.0 / 5.0);
    const float c7 = (float)(1.0 / 7.0);
    uint32_t b = pe_f32_bits(x);
    uint32_t m;
    int32_t k = 0;
    float f, t, t2, a, r, kf;
    if (b < 0x00800000u) {                                   /* subnormal */
        x = x * 8388608.0f;
        b = pe_f32_bits(x);
        k = -23;
    }
    k += (int32_t)(b >> 23) - 127;
    m = b & 0x007FFFFFu;
    if (m >= 0x3504F3u) {
        f = pe_f32_from_bits(m | 0x3F000000u);               /* [sqrt(2)/2, 1) */
        k += 1;
    } else {
        f = pe_f32_from_bits(m | 0x3F800000u);               /* [1, sqrt(2)) */
    }
    t = (f - 1.0f) / (f + 1.0f);
    t2 = t * t;
    a = t2 / 9.0f;
    a = c7 + a;
    a = t2 * a;
    a = c5 + a;
    a = t2 * a;
    a = c3 + a;
    a = t2 * a;
    a = 1.0f + a;
    r = (2.0f * t) * a;
    kf = (float)k;
    return kf * ln2_hi + (r + kf * ln2_lo);
}

/* C roundf (half away from zero) without libm: |x| < 2^23 is truncated through int32 and the
 * remainder |x| - trunc(|x|) (exact) decides; larger values are integers already. */
static inline float pe_roundf(float x)
{
    const int negative = (pe_f32_bits(x) >> 31) != 0u;      /* -0.0 stays -0.0 */
    const float a = negative ? -x : x;
    float t;
    if (!(a < 8388608.0f)) {
        return x;                                            /* integral, inf or NaN */
    }
    t = (float)(int32_t)a;
    if (a - t >= 0.5f) {
        t = t + 1.0f;
    }
    return negative ? -t : t;
}

/* sat(round_half_away(x)) into [lo, hi] (lo, hi exactly representable or INT32_MAX, whose
 * float is 2^31); NaN gives 0. */
/* sat(round(x)) into [lo, hi] and whether it saturated (*saturated = 1: x is NaN, or round(x)
 * lies outside [lo, hi]; train_numerics.round_saturates). */
static inline int32_t pe_round_sat_flag_f32(float x, int32_t lo, int32_t hi, int *saturated)
{
    float r;
    int32_t v;
    if (x != x) {
        *saturated = 1;
        return 0;
    }
    r = pe_roundf(x);
    if (r >= 2147483648.0f) {
        *saturated = 1;
        return hi;
    }
    if (r < -2147483648.0f) {
        *saturated = 1;
        return lo;
    }
    v = (int32_t)r;                     /* exact: r is an integer in [-2^31, 2^31) */
    *saturated = v > hi || v < lo;
    return v > hi ? hi : v < lo ? lo : v;
}

static inline int32_t pe_round_sat_f32(float x, int32_t lo, int32_t hi)
{
    int saturated;
    return pe_round_sat_flag_f32(x, lo, hi, &saturated);
}

/* An fp32 update u of an int32 bias as an integer step (train_optim.round_step_i64):
 * round_half_away(u) clamped to [-2^32, 2^32], NaN -> 0. */
static inline int64_t pe_round_step_i64(float u)
{
    float r;
    if (u != u) {
        return 0;
    }
    r = pe_roundf(u);
    if (r >= 4294967296.0f) {
        return (int64_t)1 << 32;
    }
    if (r <= -4294967296.0f) {
        return -((int64_t)1 << 32);
    }
    if (r > -2147483648.0f && r < 2147483648.0f) {
        return (int64_t)(int32_t)r;        /* one float -> int32 conversion, no int64 helper */
    }
    return (int64_t)r;
}

/* Correctly rounded float32 square root (round to nearest even), bit by bit (the classic
 * digit recurrence of fdlibm's e_sqrtf.c). sqrt(-0) = -0, sqrt(+inf) = +inf, NaN in -> the
 * same NaN, negative -> the default quiet NaN. */
static inline float pe_sqrtf(float x)
{
    uint32_t ix = pe_f32_bits(x);
    uint32_t q = 0u;
    uint32_t s = 0u;
    uint32_t r = 0x01000000u;
    int32_t m;
    if ((ix & 0x7FFFFFFFu) == 0u) {
        return x;                                            /* +-0 */
    }
    if ((ix & 0x7F800000u) == 0x7F800000u && (ix & 0x007FFFFFu) != 0u) {
        return x;                                            /* NaN */
    }
    if ((ix >> 31) != 0u) {
        return pe_f32_nan();                                 /* negative */
    }
    if (ix == 0x7F800000u) {
        return x;                                            /* +inf */
    }
    m = (int32_t)(ix >> 23);
    if (m == 0) {                                            /* subnormal: normalise */
        while ((ix & 0x00800000u) == 0u) {
            ix <<= 1;
            m -= 1;
        }
        m += 1;
    }
    m -= 127;
    ix = (ix & 0x007FFFFFu) | 0x00800000u;
    if ((m & 1) != 0) {                                      /* odd exponent: ix * 2 */
        ix += ix;
    }
    m = (m - (m & 1)) / 2;                                   /* floor(m / 2) */
    ix += ix;
    while (r != 0u) {                                        /* 25 result bits */
        const uint32_t t = s + r;
        if (t <= ix) {
            s = t + r;
            ix -= t;
            q += r;
        }
        ix += ix;
        r >>= 1;
    }
    if (ix != 0u) {
        q += q & 1u;                                         /* round to nearest */
    }
    return pe_f32_from_bits((q >> 1) + 0x3F000000u + ((uint32_t)(m + 126) << 23) - (126u << 23));
}

#endif /* PE_TRAIN_FLOAT_H */
