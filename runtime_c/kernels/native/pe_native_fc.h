/*
 * pe_native_fc.h - the native backend's int8 fully connected layer over weights as they are
 * (rows (units, depth), int8): for weights training changes, where packing them at every call
 * (pe_native_conv.h) would cost as much as the product of a few input rows. Bit-exact with
 * TFLM's reference FullyConnected (symmetric weights):
 *
 *   out[r][o] = clamp(requant(bias[o] + sum_k w[o][k] * (x[r][k] + input_offset)) + zp)
 *
 * Per input row the int16 row x + offset (zeros up to a multiple of 32) in the scratch; per
 * output unit the products along k, 32 (AVX-512) or 16 (AVX2) int16 pairs per multiply-add,
 * four units at a time, summed across the lanes at the end (integer sums: any order is exact).
 *
 * Scratch (pe_nv_fc_scratch): the row, kp int16 (kp: depth rounded up to 32), and the sums of
 * a block of sixteen units.
 */
#ifndef PE_NATIVE_FC_H
#define PE_NATIVE_FC_H

#include "pe_native.h"

static inline int32_t pe_nv_fc_scratch(int32_t depth)
{
    return (depth + 31) / 32 * 32 * 2 + PE_NV_LANES * 4;
}

/* sum over k < depth of x16[k] * w[k] for four rows of w (``wstep`` bytes apart), each added
 * to its ``sums`` entry; x16 holds zeros from depth up to a multiple of 32 */
PE_NV_KERNEL void pe_nv_fc_dot4(const int16_t *PE_NV_RESTRICT x16, const int8_t *w,
                                int32_t wstep, int32_t depth, int32_t count, int32_t *sums)
{
#if defined(PE_NV_AVX512)
    __m512i s[4];
    int32_t k, u;
    for (u = 0; u < 4; ++u) {
        s[u] = _mm512_setzero_si512();
    }
    for (k = 0; k < depth; k += 32) {
        const __mmask32 m = depth - k >= 32 ? 0xFFFFFFFFu : (1u << (depth - k)) - 1u;
        const __m512i x = _mm512_loadu_si512((const void *)(x16 + k));
        for (u = 0; u < 4; ++u) {
            if (u < count) {
                const __m512i wv = _mm512_cvtepi8_epi16(
                    _mm256_maskz_loadu_epi8(m, (const void *)(w + u * wstep + k)));
#if defined(PE_NV_VNNI)
                s[u] = _mm512_dpwssd_epi32(s[u], x, wv);
#else
                s[u] = _mm512_add_epi32(s[u], _mm512_madd_epi16(x, wv));
#endif
            }
        }
    }
    for (u = 0; u < count; ++u) {
        sums[u] = pe_add_wrap_s32(sums[u], _mm512_reduce_add_epi32(s[u]));
    }
#elif defined(PE_NV_AVX2)
    __m256i s[4];
    int32_t k, u;
    const int32_t whole = depth / 16 * 16;
    for (u = 0; u < 4; ++u) {
        s[u] = _mm256_setzero_si256();
    }
    for (k = 0; k < whole; k += 16) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(x16 + k));
        for (u = 0; u < 4; ++u) {
            if (u < count) {
                const __m256i wv = _mm256_cvtepi8_epi16(
                    _mm_loadu_si128((const __m128i *)(const void *)(w + u * wstep + k)));
                s[u] = _mm256_add_epi32(s[u], _mm256_madd_epi16(x, wv));
            }
        }
    }
    for (u = 0; u < count; ++u) {
        int32_t lanes[8];
        uint32_t total = 0u;
        int32_t i;
        _mm256_storeu_si256((__m256i *)(void *)lanes, s[u]);
        for (i = 0; i < 8; ++i) {
            total += (uint32_t)lanes[i];
        }
        for (k = whole; k < depth; ++k) {
            total += (uint32_t)(x16[k] * w[u * wstep + k]);
        }
        sums[u] = pe_add_wrap_s32(sums[u], pe_s32_from_u32(total));
    }
#else
    int32_t k, u;
    for (u = 0; u < count; ++u) {
        uint32_t total = (uint32_t)sums[u];
        for (k = 0; k < depth; ++k) {
            total += (uint32_t)(x16[k] * w[u * wstep + k]);
        }
        sums[u] = pe_s32_from_u32(total);
    }
#endif
}

PE_NV_KERNEL void pe_nv_fc_s8(const pe_context *ctx, const int8_t *input, const int8_t *filter,
                              const int32_t *bias, const int32_t *rq, int8_t *output,
                              int32_t rows, int32_t depth, int32_t units, int32_t input_offset,
                              int32_t out_offset, int32_t act_min, int32_t act_max)
{
    const int32_t kp = (depth + 31) / 32 * 32;
    int16_t *x16 = (int16_t *)ctx->buf;
    int32_t *sums = (int32_t *)(void *)(x16 + kp);
    int32_t r, o0, u, k;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = input + r * depth;
        for (k = 0; k < depth; ++k) {
            x16[k] = (int16_t)(x[k] + input_offset);
        }
        for (; k < kp; ++k) {
            x16[k] = 0;
        }
        for (o0 = 0; o0 < units; o0 += PE_NV_LANES) {
            const int32_t n = units - o0 < PE_NV_LANES ? units - o0 : PE_NV_LANES;
            for (u = 0; u < n; ++u) {
                sums[u] = bias != 0 ? bias[o0 + u] : 0;
            }
            for (u = 0; u < n; u += 4) {
                pe_nv_fc_dot4(x16, filter + (o0 + u) * depth, depth, depth,
                              n - u < 4 ? n - u : 4, sums + u);
            }
            pe_nv_requant16(sums, rq + o0 / PE_NV_LANES * PE_NV_RQ_BLOCK, out_offset, act_min,
                            act_max, output + r * units + o0, n);
        }
    }
}

#endif /* PE_NATIVE_FC_H */
