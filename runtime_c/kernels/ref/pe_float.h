/* pe_float.h - float helpers shared by the ref float32 kernels: no libm, no libc (the kernels
 * must also build freestanding, e.g. for Hexagon without a C library). */
#ifndef PE_FLOAT_H
#define PE_FLOAT_H

#include <stdint.h>

/* The float with IEEE-754 bit pattern `bits` (union punning is defined in C99 TC3). */
static inline float pe_f32_from_bits(uint32_t bits)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.u = bits;
    return v.f;
}

/* min(max(x, lo), hi); NaN passes through (as numpy.clip and TFLite's std::min/max order). */
static inline float pe_clamp_f32(float x, float lo, float hi)
{
    const float y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

/* exp(x) in float32 to about 1 ulp: x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of
 * ln2), a degree-7 Taylor polynomial for exp(r), then scaling by 2^k. */
static inline float pe_exp_f32(float x)
{
    const float inv_ln2 = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;         /* 16 significant bits: k * ln2_hi exact */
    const float ln2_lo = 1.42860682030941723e-06f;
    float kf, r, p;
    int32_t k;
    if (x != x) {
        return x;                                     /* NaN */
    }
    if (x > 88.7228394f) {
        return pe_f32_from_bits(0x7F800000u);         /* overflow: +inf */
    }
    if (x < -103.972084f) {
        return 0.0f;
    }
    kf = x * inv_ln2;
    k = (int32_t)(kf < 0.0f ? kf - 0.5f : kf + 0.5f);
    r = (x - (float)k * ln2_hi) - (float)k * ln2_lo;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6.0f + r * (1.0f / 24.0f
        + r * (1.0f / 120.0f + r * (1.0f / 720.0f + r * (1.0f / 5040.0f)))))));
    /* p * 2^k, in two steps where 2^k is not a normal float (k in [-150, 128]). */
    if (k > 127) {
        return p * pe_f32_from_bits(0x7F000000u) * 2.0f;
    }
    if (k < -126) {
        return p * pe_f32_from_bits((uint32_t)(k + 64 + 127) << 23)
               * pe_f32_from_bits(0x1F800000u);    /* 2^-64 */
    }
    return p * pe_f32_from_bits((uint32_t)(k + 127) << 23);
}

#endif /* PE_FLOAT_H */
