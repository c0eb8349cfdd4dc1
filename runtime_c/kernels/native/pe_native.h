/*
 * pe_native.h - what the native backend's kernels share (runtime_c/kernels/native): the
 * instruction set the compiler targets, float32 vectors, and TFLM's requantization over
 * sixteen output channels at a time.
 *
 * The native backend is pockengine's own C for the machine pockengine runs on (board
 * "host"). Its kernels take every shape as an argument and are inlined into the generated
 * model with literal shapes, so each layer gets code of its own; the inner loops are written
 * for the vector units the compiler targets (the host Makefile builds with -march=native
 * where the compiler takes it):
 *   PE_NV_AVX512  AVX-512 F + BW + VL (+ VNNI: PE_NV_VNNI), 64-byte vectors;
 *   PE_NV_AVX2    AVX2, 32-byte vectors;
 *   neither       portable C over 16-byte vectors of GCC/clang's vector extension (SSE2,
 *                 NEON, or scalar code where a target has none).
 * A build may ask for less than the compiler targets: -DPE_NV_NO_AVX512 (the AVX2 code on an
 * AVX-512 machine), -DPE_NV_PORTABLE (the portable code); the tests build all three.
 *
 * Every path computes the same bits as the golden model: integer sums wrap modulo 2^32 in any
 * order, float32 sums keep the order of docs/training.md (vectors run over an independent
 * index: channels), no FMA (-ffp-contract=off, and no fused intrinsic is used).
 */
#ifndef PE_NATIVE_H
#define PE_NATIVE_H

#include <stdint.h>
#include <string.h>

#include "pe_kernels.h"
#include "pe_requant.h"

#if !defined(PE_NV_PORTABLE) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && !defined(PE_NV_NO_AVX512)
#define PE_NV_AVX512 1
#if defined(__AVX512VNNI__)
#define PE_NV_VNNI 1
#endif
#endif
#if !defined(PE_NV_PORTABLE) && defined(__AVX2__)
#define PE_NV_AVX2 1
#endif
#if defined(PE_NV_AVX512) || defined(PE_NV_AVX2)
#include <immintrin.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PE_NV_KERNEL static inline __attribute__((always_inline))
#define PE_NV_RESTRICT __restrict__
#else
#define PE_NV_KERNEL static inline
#define PE_NV_RESTRICT
#endif

/* the name of the path this translation unit compiled (tests report it) */
#if defined(PE_NV_AVX512) && defined(PE_NV_VNNI)
#define PE_NV_PATH "avx512-vnni"
#elif defined(PE_NV_AVX512)
#define PE_NV_PATH "avx512"
#elif defined(PE_NV_AVX2)
#define PE_NV_PATH "avx2"
#else
#define PE_NV_PATH "portable"
#endif

/* -- float32 vectors ------------------------------------------------------------------------
 * PE_NV_F32 lanes of float (GCC/clang vector extension; +, -, * are IEEE lane by lane, one
 * rounding each). Loads and stores go through memcpy: any alignment, no aliasing questions. */
#if defined(PE_NV_AVX512)
#define PE_NV_F32 16
#elif defined(PE_NV_AVX2)
#define PE_NV_F32 8
#else
#define PE_NV_F32 4
#endif
typedef float pe_nv_f32 __attribute__((vector_size(PE_NV_F32 * 4)));

static inline pe_nv_f32 pe_nv_load_f32(const float *p)
{
    pe_nv_f32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void pe_nv_store_f32(float *p, pe_nv_f32 v)
{
    memcpy(p, &v, sizeof v);
}

/* every lane x (bit for bit: -0.0 and NaN payloads kept) */
static inline pe_nv_f32 pe_nv_splat_f32(float x)
{
    pe_nv_f32 v = {0.0f};
    int i;
    for (i = 0; i < PE_NV_F32; ++i) {
        v[i] = x;
    }
    return v;
}

/* -- requantization of sixteen channels -------------------------------------------------------
 * pe_arm.h's one-rounding form of TFLM's MultiplyByQuantizedMultiplier (double rounding), for
 * right shifts e >= 2 and multipliers above 2^30 (codegen/backends/arm.py requant_words):
 *   result = floor((acc * m + k_hi * 2^32 + (acc < 0 ? -2^30 : 2^30)) / 2^(32 + e1))
 * with k_hi = 2^(e-2) (+ zp * 2^(e-1) when the output zero point is folded in) and e1 = e - 1.
 * The words of a block of sixteen channels lie as three rows of sixteen int32: m, k_hi, e1
 * (codegen/backends/native.py rq_blocks). */
enum { PE_NV_LANES = 16, PE_NV_RQ_BLOCK = 3 * PE_NV_LANES };

static inline int32_t pe_nv_requant1(int32_t acc, int32_t m, int32_t k_hi, int32_t e1)
{
    const int64_t t = (int64_t)acc * (int64_t)m + (acc < 0 ? -((int64_t)1 << 30)
                                                             : ((int64_t)1 << 30));
    /* floor(t / 2^32) + k_hi, then floor(... / 2^e1): |t| < 2^62, the high word fits int32 */
    const int32_t hi = (int32_t)(t < 0 ? ~(~t >> 32) : t >> 32);
    return pe_asr_s32(pe_add_wrap_s32(hi, k_hi), e1);
}

/* Sixteen accumulators (int32, wrapped sums) -> sixteen int8 outputs: requantized with the
 * block's words ``rq``, plus out_offset, clamped to [lo, hi]; ``n`` (1..16) of them stored. */
static inline void pe_nv_requant16(const int32_t *acc, const int32_t *rq, int32_t out_offset,
                                   int32_t lo, int32_t hi, int8_t *out, int32_t n)
{
#if defined(PE_NV_AVX512)
    const __m512i a = _mm512_loadu_si512((const void *)acc);
    const __m512i m = _mm512_loadu_si512((const void *)rq);
    const __m512i k_hi = _mm512_loadu_si512((const void *)(rq + PE_NV_LANES));
    const __m512i e1 = _mm512_loadu_si512((const void *)(rq + 2 * PE_NV_LANES));
    const __m512i half = _mm512_set1_epi64((int64_t)1 << 30);
    const __m512i flip = _mm512_set1_epi64(-((int64_t)1 << 31));
    /* products of the even lanes and of the odd lanes, 64 bits each */
    __m512i pe = _mm512_mul_epi32(a, m);
    __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(m, 32));
    __m512i r;
    __m128i b;
    /* + 2^30, or - 2^30 for a negative product (m > 0: the accumulator's sign) */
    pe = _mm512_add_epi64(pe, _mm512_add_epi64(half, _mm512_and_si512(
                                  _mm512_srai_epi64(pe, 63), flip)));
    po = _mm512_add_epi64(po, _mm512_add_epi64(half, _mm512_and_si512(
                                  _mm512_srai_epi64(po, 63), flip)));
    /* the high words, back in lane order */
    r = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(pe, 32), po);
    r = _mm512_srav_epi32(_mm512_add_epi32(r, k_hi), e1);
    r = _mm512_add_epi32(r, _mm512_set1_epi32(out_offset));
    r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
    b = _mm512_cvtepi32_epi8(r);
    if (n == PE_NV_LANES) {
        _mm_storeu_si128((__m128i *)(void *)out, b);
    } else if (n == 8) {
        _mm_storel_epi64((__m128i *)(void *)out, b);
    } else {
        /* no masked store: slow on some cores, and not forwarded to the next layer's loads */
        int8_t tmp[PE_NV_LANES];
        _mm_storeu_si128((__m128i *)(void *)tmp, b);
        memcpy(out, tmp, (size_t)n);
    }
#elif defined(PE_NV_AVX2)
    __m256i r[2];
    int h;
    for (h = 0; h < 2; ++h) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(acc + 8 * h));
        const __m256i m = _mm256_loadu_si256((const __m256i *)(const void *)(rq + 8 * h));
        const __m256i k_hi = _mm256_loadu_si256(
            (const __m256i *)(const void *)(rq + PE_NV_LANES + 8 * h));
        const __m256i e1 = _mm256_loadu_si256(
            (const __m256i *)(const void *)(rq + 2 * PE_NV_LANES + 8 * h));
        const __m256i half = _mm256_set1_epi64x((int64_t)1 << 30);
        const __m256i flip = _mm256_set1_epi64x(-((int64_t)1 << 31));
        const __m256i zero = _mm256_setzero_si256();
        __m256i pe = _mm256_mul_epi32(a, m);
        __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(m, 32));
        __m256i v;
        pe = _mm256_add_epi64(pe, _mm256_add_epi64(half, _mm256_and_si256(
                                      _mm256_cmpgt_epi64(zero, pe), flip)));
        po = _mm256_add_epi64(po, _mm256_add_epi64(half, _mm256_and_si256(
                                      _mm256_cmpgt_epi64(zero, po), flip)));
        v = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
        v = _mm256_srav_epi32(_mm256_add_epi32(v, k_hi), e1);
        v = _mm256_add_epi32(v, _mm256_set1_epi32(out_offset));
        r[h] = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)),
                                _mm256_set1_epi32(hi));
    }
    {
        /* clamped to int8 already: the saturating packs only narrow; restore lane order */
        const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]), 0xD8);
        const __m256i bytes = _mm256_packs_epi16(w, w);
        const __m128i b = _mm256_castsi256_si128(_mm256_permute4x64_epi64(bytes, 0x08));
        if (n == PE_NV_LANES) {
            _mm_storeu_si128((__m128i *)(void *)out, b);
        } else {
            int8_t tmp[PE_NV_LANES];
            _mm_storeu_si128((__m128i *)(void *)tmp, b);
            memcpy(out, tmp, (size_t)n);
        }
    }
#else
    int32_t i;
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)pe_offset_clamp_s32(
            pe_nv_requant1(acc[i], rq[i], rq[PE_NV_LANES + i], rq[2 * PE_NV_LANES + i]),
            out_offset, lo, hi);
    }
#endif
}

#endif /* PE_NATIVE_H */
