/*
 * pe_arm.h - building blocks of the arm backend's kernels (runtime_c/kernels/arm): the DSP
 * extension's SIMD instructions through ACLE where the core has them (Cortex-M4/M7/M33/M55),
 * exact portable C where it has not (the host, where the same kernels are tested against the
 * golden model), and the single-rounding form of TFLM's requantization.
 *
 * Data layout of the 16-bit operands. SXTB16 of the int8 bytes (x0 x1 x2 x3) gives the halfword
 * pair (x0, x2); SXTB16 of the word rotated by 8 bits gives (x1, x3). Kernels expand activations
 * into int16 buffers in exactly that order, (x0 + off, x2 + off), (x1 + off, x3 + off) per four
 * values, and expand int8 weights with the same two instructions, so that
 *     SMLAD((x0,x2), (w0,w2)) + SMLAD((x1,x3), (w1,w3)) = sum of x_i * w_i
 * with no reordering of the weights. (x + input_offset) lies in [-255, 255] and fits int16;
 * padding is 0 after the offset, which is TFLM's "skip the tap".
 *
 * Accumulators wrap like C int32 on TFLM's targets: SMLAD writes the low 32 bits of the sum
 * (it sets the Q flag on overflow but does not saturate); the portable versions compute in
 * uint32_t.
 */
#ifndef PE_ARM_H
#define PE_ARM_H

#include <stdint.h>
#include <string.h>

#include "pe_requant.h"

/* The kernels' bodies (pe_arm_conv.h, ...) are PE_ARM_KERNEL functions: inlined into every
 * call, so a generated model that calls them with its layers' shapes as literal arguments gets
 * code specialised for each layer (constant loop bounds, folded branches, unrolled taps). The
 * out-of-line pe_*_arm kernels (pe_arm_kernels.h) call the same bodies with run-time values.
 * A test harness that defines PE_ARM_EXTERN before including a body gets it as an ordinary
 * external function. */
#if defined(PE_ARM_EXTERN)
#define PE_ARM_KERNEL
#elif defined(__GNUC__)
#define PE_ARM_KERNEL static inline __attribute__((always_inline))
#else
#define PE_ARM_KERNEL static inline
#endif

/* The helpers of the bodies, inlined whatever the size of the function that calls them (a
 * generated model's step is one large function: without this GCC stops inlining there, and
 * the layer's constants no longer reach the loops). */
#if defined(__GNUC__)
#define PE_ARM_INLINE static inline __attribute__((always_inline))
#else
#define PE_ARM_INLINE static inline
#endif

/* Loop unrolling hints (GCC 8+; other compilers ignore the pragma's absence). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define PE_ARM_PRAGMA(x) _Pragma(#x)
#define PE_ARM_UNROLL(n) PE_ARM_PRAGMA(GCC unroll n)
#elif defined(__clang__)
#define PE_ARM_PRAGMA(x) _Pragma(#x)
#define PE_ARM_UNROLL(n) PE_ARM_PRAGMA(unroll n)
#else
#define PE_ARM_UNROLL(n)
#endif

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
#define PE_ARM_DSP 1
#include <arm_acle.h>
#else
#define PE_ARM_DSP 0
#endif

/* Helium (MVE, the Cortex-M55's vector extension): the integer intrinsics where the core has
 * them; kernels keep an exact scalar version of the same arithmetic for the other cores and
 * the host. */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && defined(__GNUC__)
#define PE_ARM_HELIUM 1
#include <arm_mve.h>
#else
#define PE_ARM_HELIUM 0
#endif

/* 32 bits from any address (one LDR on cores with unaligned access; memcpy elsewhere). */
static inline uint32_t pe_arm_ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void pe_arm_st32(void *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

static inline uint32_t pe_arm_pack16(int32_t lo, int32_t hi)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
    return r;
#else
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
#endif
}

static inline int32_t pe_arm_lo16(uint32_t v)
{
    return (int32_t)(int16_t)(uint16_t)(v & 0xFFFFu);
}

static inline int32_t pe_arm_hi16(uint32_t v)
{
    return (int32_t)(int16_t)(uint16_t)(v >> 16);
}

#if PE_ARM_DSP

#define pe_arm_sxtb16(x) ((uint32_t)__sxtb16((int32_t)(x)))
static inline uint32_t pe_arm_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
#define pe_arm_sadd16(a, b) ((uint32_t)__sadd16((int32_t)(a), (int32_t)(b)))
#define pe_arm_smlad(a, b, acc) ((int32_t)__smlad((int32_t)(a), (int32_t)(b), (int32_t)(acc)))
#define pe_arm_smlabb(a, b, acc) ((int32_t)__smlabb((int32_t)(a), (int32_t)(b), (int32_t)(acc)))
#define pe_arm_smlatb(a, b, acc) ((int32_t)__smlatb((int32_t)(a), (int32_t)(b), (int32_t)(acc)))
#define pe_arm_smlatt(a, b, acc) ((int32_t)__smlatt((int32_t)(a), (int32_t)(b), (int32_t)(acc)))

/* (hi:lo) += a * b, signed 64-bit (one SMLAL). */
#define PE_ARM_SMLAL(lo, hi, a, b) \
    __asm__("smlal %0, %1, %2, %3" : "+r"(lo), "+r"(hi) : "r"(a), "r"(b))

#else /* portable C, same results */

static inline uint32_t pe_arm_sxtb16(uint32_t x)
{
    return pe_arm_pack16((int8_t)(uint8_t)(x & 0xFFu), (int8_t)(uint8_t)((x >> 16) & 0xFFu));
}

static inline uint32_t pe_arm_sxtb16_ror8(uint32_t x)
{
    return pe_arm_pack16((int8_t)(uint8_t)((x >> 8) & 0xFFu), (int8_t)(uint8_t)(x >> 24));
}

static inline uint32_t pe_arm_sadd16(uint32_t a, uint32_t b)
{
    return pe_arm_pack16(pe_arm_lo16(a) + pe_arm_lo16(b), pe_arm_hi16(a) + pe_arm_hi16(b));
}

static inline int32_t pe_arm_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return pe_s32_from_u32((uint32_t)acc + (uint32_t)(pe_arm_lo16(a) * pe_arm_lo16(b))
                           + (uint32_t)(pe_arm_hi16(a) * pe_arm_hi16(b)));
}

static inline int32_t pe_arm_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return pe_s32_from_u32((uint32_t)acc + (uint32_t)(pe_arm_lo16(a) * pe_arm_lo16(b)));
}

static inline int32_t pe_arm_smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return pe_s32_from_u32((uint32_t)acc + (uint32_t)(pe_arm_hi16(a) * pe_arm_lo16(b)));
}

static inline int32_t pe_arm_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return pe_s32_from_u32((uint32_t)acc + (uint32_t)(pe_arm_hi16(a) * pe_arm_hi16(b)));
}

#define PE_ARM_SMLAL(lo, hi, a, b)                                                          \
    do {                                                                                    \
        const uint64_t pe_u_ = (((uint64_t)(uint32_t)(hi) << 32) | (uint64_t)(lo))          \
                               + (uint64_t)((int64_t)(a) * (int64_t)(b));                   \
        (lo) = (uint32_t)pe_u_;                                                             \
        (hi) = pe_s32_from_u32((uint32_t)(pe_u_ >> 32));                                    \
    } while (0)

#endif

/* Expand four int8 values at p to two int16 pairs (x0 + off, x2 + off), (x1 + off, x3 + off)
 * (off2: the offset in both halfwords) and store them at dst. */
static inline void pe_arm_expand4(int16_t *dst, const int8_t *p, uint32_t off2)
{
    const uint32_t w = pe_arm_ld32(p);
    pe_arm_st32(dst, pe_arm_sadd16(pe_arm_sxtb16(w), off2));
    pe_arm_st32(dst + 2, pe_arm_sadd16(pe_arm_sxtb16_ror8(w), off2));
}

/* Position of element k of a row in the expanded layout: within each group of four the
 * middle two swap (x0, x2, x1, x3). */
static inline int32_t pe_arm_slot(int32_t k)
{
    return (k & ~3) | ((k & 1) << 1) | ((k >> 1) & 1);
}

/* Expand n int8 values starting at src to dst[pe_arm_slot(k0 + i)] (any alignment of k0,
 * any n): the general path of im2col rows whose channel count is not a multiple of four. */
static inline void pe_arm_expand_any(int16_t *dst, int32_t k0, const int8_t *src, int32_t n,
                                     int32_t off)
{
    int32_t i;
    for (i = 0; i < n; ++i) {
        dst[pe_arm_slot(k0 + i)] = (int16_t)((int32_t)src[i] + off);
    }
}

/* The last, partial group of four weights of a row (n = 1..3 bytes), zeros after them. */
static inline uint32_t pe_arm_tail32(const int8_t *w, int32_t n)
{
    uint32_t v = (uint8_t)w[0];
    if (n > 1) {
        v |= (uint32_t)(uint8_t)w[1] << 8;
    }
    if (n > 2) {
        v |= (uint32_t)(uint8_t)w[2] << 16;
    }
    return v;
}

/* Requantization constants of one channel for pe_arm_requant, three int32 (see below):
 * {2^(e-2), multiplier, e-1} for a right shift e = -shift >= 2 and a multiplier above 2^30.
 * codegen/backends/arm.py computes them; channels outside that range use ref. */
enum { PE_ARM_RQ_WORDS = 3 };

/* TFLM's MultiplyByQuantizedMultiplier(acc, m, -e) with one 64-bit multiply-accumulate.
 * Double rounding folds into one: with t = acc * m (exact, 64 bits),
 *   SRDHM = floor((t + 2^30) / 2^31)           (= gemmlowp's for every int32 acc, m)
 *   RDBPOT(x, e) = floor((x + 2^(e-1) - [x < 0]) / 2^e)
 * and floor(floor(a / b) + c) / d) = floor((a + c*b) / (b*d)), so
 *   result = floor((t + 2^30 + (2^(e-1) - [x < 0]) * 2^31) / 2^(31+e)),
 * where x < 0 exactly when acc < 0 (m > 2^30). The constant is hi:lo = 2^(e-2) : 2^30 for
 * acc >= 0 and one 2^31 less (hi - 1 : 0xC0000000) for acc < 0; the result is the high word
 * of the sum shifted right by e - 1. Tested against the golden model's two-step recipe. */
static inline int32_t pe_arm_requant3(int32_t acc, int32_t k_hi, int32_t m, int32_t e1)
{
    const int32_t neg = acc < 0 ? -1 : 0;
    uint32_t lo = 0x40000000u ^ ((uint32_t)neg << 31);
    int32_t hi = k_hi + neg;
    PE_ARM_SMLAL(lo, hi, acc, m);
    (void)lo;
    return pe_asr_s32(hi, e1);
}

static inline int32_t pe_arm_requant(int32_t acc, const int32_t *rq)
{
    return pe_arm_requant3(acc, rq[0], rq[1], rq[2]);
}

/* -- the requantization forms of specialised layers ------------------------------------------
 * Mode bits that codegen/backends/arm.py chooses per layer at compile time:
 *  - PE_ARM_FAST, when the compiler has proved |acc| <= 2^29 for every input (frozen bias,
 *    bounded sums), every e <= 21 and the clamp is the whole int8 range: the kernel builds its
 *    accumulator doubled (weights or activations and bias times two), so that
 *        SMMLAR(2 acc, m, c) = c + floor((acc * m + 2^30) / 2^31) = c + SRDHM(acc, m)
 *    exactly, and with c = 2^(e-1) + zp * 2^e the result (SMMLAR(...) >> e) is
 *    RDBPOT(SRDHM, e) + zp: words {m, c, e}; TFLM's "- [x < 0]" in the rounding is a c one less
 *    for negative accumulators (x < 0 exactly when acc < 0). Three instructions an output.
 *  - otherwise the one-rounding form above, words {2^(e-2) [+ zp * 2^(e-1)], m, e-1}.
 *  - PE_ARM_SIGNED: negative accumulators need the sign fix. Without it (the output zero point
 *    is -128, the clamp's floor) every negative accumulator gives at most the zero point
 *    before the clamp and -128 after it either way, so the fix is skipped.
 *  - PE_ARM_NATURAL (conv streams only): the weights in natural order, eight values of a
 *    channel after another, for Helium's VMLADAV (pe_arm_conv.h). */
enum { PE_ARM_FAST = 1, PE_ARM_SIGNED = 2, PE_ARM_NATURAL = 4 };

/* (c * 2^32 + a * m + 2^31) >> 32, the low 32 bits (SMMLAR) */
static inline int32_t pe_arm_smmlar(int32_t a, int32_t m, int32_t c)
{
#if PE_ARM_DSP
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(m), "r"(c));
    return r;
#else
    const uint64_t u = ((uint64_t)(uint32_t)c << 32) + (uint64_t)((int64_t)a * (int64_t)m)
                       + 0x80000000u;
    return pe_s32_from_u32((uint32_t)(u >> 32));
#endif
}

/* one output of a layer of mode PE_ARM_FAST and/or PE_ARM_SIGNED (rq: its three words), with
 * the zero point folded in, before the clamp */
static inline int32_t pe_arm_requant_mode(int32_t acc, const int32_t *rq, int32_t mode)
{
    if (mode & PE_ARM_FAST) {
        const int32_t c = (mode & PE_ARM_SIGNED) && acc < 0 ? rq[1] - 1 : rq[1];
        return pe_asr_s32(pe_arm_smmlar(acc, rq[0], c), rq[2]);
    }
    if (mode & PE_ARM_SIGNED) {
        return pe_arm_requant3(acc, rq[0], rq[1], rq[2]);
    }
    {
        uint32_t lo = 0x40000000u;
        int32_t hi = rq[0];
        PE_ARM_SMLAL(lo, hi, acc, rq[1]);
        (void)lo;
        return pe_asr_s32(hi, rq[2]);
    }
}

/* add the output zero point to a requantized value, clamp, as int8 (one SSAT when the clamp is
 * the whole int8 range, which specialised code knows at compile time) */
static inline int8_t pe_arm_clamp8(int32_t v, int32_t out_offset, int32_t lo, int32_t hi)
{
    v += out_offset;
#if PE_ARM_DSP
    if (lo <= -128 && hi >= 127) {
        return (int8_t)__ssat(v, 8);
    }
    if (lo <= -128) {
        v = __ssat(v, 8);
    }
#endif
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (int8_t)v;
}

/* -- packed dot products ---------------------------------------------------------------------
 * Weights that do not change at run time are packed at compile time (codegen/backends/arm.py)
 * into the order the inner loops read: per group of four values of a row, the rows of a pair
 * (conv: two output channels) or of a quad (FC: four units) one after another, rows padded
 * with zeros to a multiple of four. The activations are expanded int16 pairs (pe_arm.h's
 * order): a conv column pair holds four words per group (column a's two, then column b's),
 * an FC row two. On cores with DSP the loops are written in assembly so that nothing but the
 * loads, SXTB16s and SMLADs runs: 17 instructions per 16 multiply-accumulates. */

/* acc[0..3] (column a row 0, column a row 1, column b row 0, column b row 1) over `groups`
 * groups of four values: x the interleaved column pair, w the packed pair of rows */
static inline void pe_arm_dot_2x2_packed(const int16_t *x, const int8_t *w, int32_t groups,
                                         int32_t acc[4])
{
    int32_t a0 = acc[0], a1 = acc[1], b0 = acc[2], b1 = acc[3];
#if PE_ARM_DSP
    if (groups > 0) {
        const int16_t *const end = x + 8 * groups;
        uint32_t x0, x1, x2, x3, w0, w1, t;
        __asm__ volatile(
            "1:\n\t"
            "ldrd %[x0], %[x1], [%[x]], #8\n\t"
            "ldrd %[x2], %[x3], [%[x]], #8\n\t"
            "ldrd %[w0], %[w1], [%[w]], #8\n\t"
            "sxtb16 %[t], %[w0]\n\t"
            "smlad %[a0], %[x0], %[t], %[a0]\n\t"
            "smlad %[b0], %[x2], %[t], %[b0]\n\t"
            "sxtb16 %[w0], %[w0], ror #8\n\t"
            "smlad %[a0], %[x1], %[w0], %[a0]\n\t"
            "smlad %[b0], %[x3], %[w0], %[b0]\n\t"
            "sxtb16 %[t], %[w1]\n\t"
            "smlad %[a1], %[x0], %[t], %[a1]\n\t"
            "smlad %[b1], %[x2], %[t], %[b1]\n\t"
            "sxtb16 %[w1], %[w1], ror #8\n\t"
            "smlad %[a1], %[x1], %[w1], %[a1]\n\t"
            "smlad %[b1], %[x3], %[w1], %[b1]\n\t"
            "cmp %[x], %[end]\n\t"
            "bne 1b\n\t"
            : [a0] "+r"(a0), [a1] "+r"(a1), [b0] "+r"(b0), [b1] "+r"(b1), [x] "+r"(x),
              [w] "+r"(w), [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3),
              [w0] "=&r"(w0), [w1] "=&r"(w1), [t] "=&r"(t)
            : [end] "r"(end)
            : "cc", "memory");
    }
#else
    int32_t g;
    for (g = 0; g < groups; ++g, x += 8, w += 8) {
        const uint32_t u = pe_arm_ld32(w), v = pe_arm_ld32(w + 4);
        const uint32_t x0 = pe_arm_ld32(x), x1 = pe_arm_ld32(x + 2);
        const uint32_t x2 = pe_arm_ld32(x + 4), x3 = pe_arm_ld32(x + 6);
        a0 = pe_arm_smlad(x1, pe_arm_sxtb16_ror8(u), pe_arm_smlad(x0, pe_arm_sxtb16(u), a0));
        b0 = pe_arm_smlad(x3, pe_arm_sxtb16_ror8(u), pe_arm_smlad(x2, pe_arm_sxtb16(u), b0));
        a1 = pe_arm_smlad(x1, pe_arm_sxtb16_ror8(v), pe_arm_smlad(x0, pe_arm_sxtb16(v), a1));
        b1 = pe_arm_smlad(x3, pe_arm_sxtb16_ror8(v), pe_arm_smlad(x2, pe_arm_sxtb16(v), b1));
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = b0;
    acc[3] = b1;
}

/* acc[0..3] += x . rows 0..3 over `groups` groups: x an expanded row (two words per group),
 * w a packed quad of rows (16 bytes per group) */
static inline void pe_arm_dot_1x4_packed(const int16_t *x, const int8_t *w, int32_t groups,
                                         int32_t acc[4])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#if PE_ARM_DSP
    if (groups > 0) {
        const int16_t *const end = x + 4 * groups;
        uint32_t x0, x1, w0, w1, w2, w3, t;
        __asm__ volatile(
            "1:\n\t"
            "ldrd %[x0], %[x1], [%[x]], #8\n\t"
            "ldrd %[w0], %[w1], [%[w]], #8\n\t"
            "ldrd %[w2], %[w3], [%[w]], #8\n\t"
            "sxtb16 %[t], %[w0]\n\t"
            "smlad %[a0], %[x0], %[t], %[a0]\n\t"
            "sxtb16 %[w0], %[w0], ror #8\n\t"
            "smlad %[a0], %[x1], %[w0], %[a0]\n\t"
            "sxtb16 %[t], %[w1]\n\t"
            "smlad %[a1], %[x0], %[t], %[a1]\n\t"
            "sxtb16 %[w1], %[w1], ror #8\n\t"
            "smlad %[a1], %[x1], %[w1], %[a1]\n\t"
            "sxtb16 %[t], %[w2]\n\t"
            "smlad %[a2], %[x0], %[t], %[a2]\n\t"
            "sxtb16 %[w2], %[w2], ror #8\n\t"
            "smlad %[a2], %[x1], %[w2], %[a2]\n\t"
            "sxtb16 %[t], %[w3]\n\t"
            "smlad %[a3], %[x0], %[t], %[a3]\n\t"
            "sxtb16 %[w3], %[w3], ror #8\n\t"
            "smlad %[a3], %[x1], %[w3], %[a3]\n\t"
            "cmp %[x], %[end]\n\t"
            "bne 1b\n\t"
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x),
              [w] "+r"(w), [x0] "=&r"(x0), [x1] "=&r"(x1), [w0] "=&r"(w0), [w1] "=&r"(w1),
              [w2] "=&r"(w2), [w3] "=&r"(w3), [t] "=&r"(t)
            : [end] "r"(end)
            : "cc", "memory");
    }
#else
    int32_t g, r;
    int32_t *const a[4] = {&a0, &a1, &a2, &a3};
    for (g = 0; g < groups; ++g, x += 4, w += 16) {
        for (r = 0; r < 4; ++r) {
            const uint32_t u = pe_arm_ld32(w + 4 * r);
            *a[r] = pe_arm_smlad(pe_arm_ld32(x + 2), pe_arm_sxtb16_ror8(u),
                                 pe_arm_smlad(pe_arm_ld32(x), pe_arm_sxtb16(u), *a[r]));
        }
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* acc += one expanded column (x, `xstep` int16 per group, its two pairs first) . one int8 row
 * as it is (w, k values; the last partial group of four from pe_arm_tail32): the loop for
 * weights that training changes. */
static inline int32_t pe_arm_dot_plain(const int16_t *x, int32_t xstep, const int8_t *w,
                                       int32_t k, int32_t acc)
{
    int32_t g;
    for (g = 0; g < (k >> 2); ++g, x += xstep, w += 4) {
        const uint32_t u = pe_arm_ld32(w);
        acc = pe_arm_smlad(pe_arm_ld32(x + 2), pe_arm_sxtb16_ror8(u),
                           pe_arm_smlad(pe_arm_ld32(x), pe_arm_sxtb16(u), acc));
    }
    if (k & 3) {
        const uint32_t u = pe_arm_tail32(w, k & 3);
        acc = pe_arm_smlad(pe_arm_ld32(x + 2), pe_arm_sxtb16_ror8(u),
                           pe_arm_smlad(pe_arm_ld32(x), pe_arm_sxtb16(u), acc));
    }
    return acc;
}

/* acc += one expanded column (x, `xstep` int16 per group, its two pairs first) . one packed
 * row (w, `wstep` bytes per group) */
static inline int32_t pe_arm_dot_1x1_packed(const int16_t *x, int32_t xstep, const int8_t *w,
                                            int32_t wstep, int32_t groups, int32_t acc)
{
    int32_t g;
    for (g = 0; g < groups; ++g, x += xstep, w += wstep) {
        const uint32_t u = pe_arm_ld32(w);
        acc = pe_arm_smlad(pe_arm_ld32(x + 2), pe_arm_sxtb16_ror8(u),
                           pe_arm_smlad(pe_arm_ld32(x), pe_arm_sxtb16(u), acc));
    }
    return acc;
}

static inline int8_t pe_arm_out(int32_t acc, const int32_t *rq, int32_t out_offset, int32_t lo,
                                int32_t hi)
{
    return pe_arm_clamp8(pe_arm_requant(acc, rq), out_offset, lo, hi);
}

#endif /* PE_ARM_H */
