/*
 * pe_native_dw.h - the native backend's int8 depthwise convolution (depth multiplier 1, any
 * kernel, stride, padding and dilation), bit-exact with TFLM's reference DepthwiseConvPerChannel:
 *
 *   out[p][c] = clamp(requant(bias[c] + sum over in-image taps of w[tap][c] * (x[c] + offset)))
 *
 * vectorised over sixteen channels: per output position and block of channels the taps that
 * lie in the image (padding taps skipped, as TFLM does) add w * (x + offset) in int32 lanes
 * (VPMOVSXBD, VPMULLD, VPADDD), wrapping as TFLM's sums. The weights are int32,
 * w32[tap][c] with the channels padded with zeros to whole blocks (codegen/backends/native.py
 * pack_depthwise), at compile time for weights nothing changes and in the scratch at every
 * call for weights training changes.
 *
 * Layers of fewer than sixteen channels (1, 2, 4 or 8) with stride and dilation 1 along the
 * width run the positions of a row whose taps all lie in the image sixteen values at a time:
 * 16 / channels neighbouring positions, whose input values at a tap are neighbours too; the
 * weights, sums' start and requantization words repeat per position (built at each call).
 *
 * Scratch (pe_nv_dw_scratch): the bias padded to whole blocks (blocks * 16 int32); for weights
 * packed at run time, taps * blocks * 16 int32; for the flat rows, (taps + 4) * 16 int32.
 */
#ifndef PE_NATIVE_DW_H
#define PE_NATIVE_DW_H

#include "pe_native.h"

/* whether a layer's rows run flat (see above) */
static inline int32_t pe_nv_dw_flat(int32_t channels, int32_t s_w, int32_t d_w)
{
    return channels < PE_NV_LANES && PE_NV_LANES % channels == 0 && s_w == 1 && d_w == 1;
}

static inline int32_t pe_nv_dw_scratch(int32_t taps, int32_t channels, int32_t packed,
                                       int32_t flat)
{
    const int32_t cp = (channels + PE_NV_LANES - 1) / PE_NV_LANES * PE_NV_LANES;
    return cp * 4 + (packed ? 0 : taps * cp * 4) + (flat ? (taps + 4) * PE_NV_LANES * 4 : 0);
}

/* acc[l] = init[l] + sum over the taps (ky0..ky1) x (kx0..kx1) of w[tap][l] * (x[tap][l] +
 * offset) for the n (1..16) channels of a block: ``x`` the block's first channel at the first
 * tap, ``xrow`` / ``xcol`` the values between rows / columns of taps, ``w`` the block's
 * weights at tap (0, 0), ``wrow`` = k_w * cp between rows of weights, ``cp`` between taps */
PE_NV_KERNEL void pe_nv_dw_taps(const int8_t *x, int32_t xrow, int32_t xcol, const int32_t *w,
                                int32_t wrow, int32_t cp, int32_t ky0, int32_t ky1,
                                int32_t kx0, int32_t kx1, int32_t offset, int32_t n,
                                const int32_t *init, int32_t *PE_NV_RESTRICT acc)
{
    int32_t ky, kx;
#if defined(PE_NV_AVX512)
    const __mmask16 m = (__mmask16)(n == PE_NV_LANES ? 0xFFFFu : (1u << n) - 1u);
    const __m512i off = _mm512_set1_epi32(offset);
    __m512i a = _mm512_loadu_si512((const void *)init);
    for (ky = ky0; ky < ky1; ++ky) {
        for (kx = kx0; kx < kx1; ++kx) {
            const int8_t *xp = x + (ky - ky0) * xrow + (kx - kx0) * xcol;
            const __m128i bytes = n == PE_NV_LANES
                ? _mm_loadu_si128((const __m128i *)(const void *)xp)
                : _mm_maskz_loadu_epi8(m, (const void *)xp);
            const __m512i v = _mm512_add_epi32(_mm512_cvtepi8_epi32(bytes), off);
            a = _mm512_add_epi32(a, _mm512_mullo_epi32(
                v, _mm512_loadu_si512((const void *)(w + ky * wrow + kx * cp))));
        }
    }
    _mm512_storeu_si512((void *)acc, a);
#elif defined(PE_NV_AVX2)
    const __m256i off = _mm256_set1_epi32(offset);
    __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)init);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(init + 8));
    for (ky = ky0; ky < ky1; ++ky) {
        for (kx = kx0; kx < kx1; ++kx) {
            const int8_t *xp = x + (ky - ky0) * xrow + (kx - kx0) * xcol;
            const int32_t *wp = w + ky * wrow + kx * cp;
            int8_t tmp[PE_NV_LANES];
            int64_t lo, hi;
            if (n < PE_NV_LANES) {
                memset(tmp, 0, sizeof tmp);
                memcpy(tmp, xp, (size_t)n);
                xp = tmp;
            }
            memcpy(&lo, xp, sizeof lo);
            memcpy(&hi, xp + 8, sizeof hi);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(
                _mm256_add_epi32(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(lo)), off),
                _mm256_loadu_si256((const __m256i *)(const void *)wp)));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(
                _mm256_add_epi32(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(hi)), off),
                _mm256_loadu_si256((const __m256i *)(const void *)(wp + 8))));
        }
    }
    _mm256_storeu_si256((__m256i *)(void *)acc, a0);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 8), a1);
#else
    uint32_t a[PE_NV_LANES];
    int32_t l;
    for (l = 0; l < PE_NV_LANES; ++l) {
        a[l] = (uint32_t)init[l];
    }
    for (ky = ky0; ky < ky1; ++ky) {
        for (kx = kx0; kx < kx1; ++kx) {
            const int8_t *xp = x + (ky - ky0) * xrow + (kx - kx0) * xcol;
            const int32_t *wp = w + ky * wrow + kx * cp;
            for (l = 0; l < n; ++l) {
                a[l] += (uint32_t)(wp[l] * (xp[l] + offset));
            }
        }
    }
    for (l = 0; l < PE_NV_LANES; ++l) {
        acc[l] = pe_s32_from_u32(a[l]);
    }
#endif
}

/* the int32 weights of a depthwise filter (taps, channels) padded to whole blocks */
PE_NV_KERNEL void pe_nv_pack_depthwise(const int8_t *PE_NV_RESTRICT filter,
                                       int32_t *PE_NV_RESTRICT w32, int32_t taps,
                                       int32_t channels)
{
    const int32_t cp = (channels + PE_NV_LANES - 1) / PE_NV_LANES * PE_NV_LANES;
    int32_t t, c;
    for (t = 0; t < taps; ++t) {
        for (c = 0; c < cp; ++c) {
            w32[t * cp + c] = c < channels ? filter[t * channels + c] : 0;
        }
    }
}

/* one output position, every block of channels (``init``, ``w32``, ``rq`` as the layer's) */
PE_NV_KERNEL void pe_nv_dw_position(const int8_t *image, const int32_t *init, const int32_t *w32,
                                    const int32_t *rq, int8_t *out, int32_t in_h, int32_t in_w,
                                    int32_t channels, int32_t k_h, int32_t k_w, int32_t iy0,
                                    int32_t ix0, int32_t d_h, int32_t d_w, int32_t input_offset,
                                    int32_t out_offset, int32_t act_min, int32_t act_max)
{
    const int32_t cp = (channels + PE_NV_LANES - 1) / PE_NV_LANES * PE_NV_LANES;
    /* the taps in the image: rows ky0..ky1, columns kx0..kx1 (dilated) */
    const int32_t ky0 = iy0 >= 0 ? 0 : (-iy0 + d_h - 1) / d_h;
    const int32_t ky1 = in_h - iy0 >= (k_h - 1) * d_h + 1 ? k_h : (in_h - iy0 + d_h - 1) / d_h;
    const int32_t kx0 = ix0 >= 0 ? 0 : (-ix0 + d_w - 1) / d_w;
    const int32_t kx1 = in_w - ix0 >= (k_w - 1) * d_w + 1 ? k_w : (in_w - ix0 + d_w - 1) / d_w;
    int32_t acc[PE_NV_LANES];
    int32_t c0;
    for (c0 = 0; c0 < channels; c0 += PE_NV_LANES) {
        const int32_t count = channels - c0 < PE_NV_LANES ? channels - c0 : PE_NV_LANES;
        pe_nv_dw_taps(image + ((iy0 + ky0 * d_h) * in_w + ix0 + kx0 * d_w) * channels + c0,
                      d_h * in_w * channels, d_w * channels, w32 + c0, k_w * cp, cp, ky0, ky1,
                      kx0, kx1, input_offset, count, init + c0, acc);
        pe_nv_requant16(acc, rq + c0 / PE_NV_LANES * PE_NV_RQ_BLOCK, out_offset, act_min,
                        act_max, out + c0, count);
    }
}

/* the rows of a flat layer (stride and dilation 1 along the width, channels | 16): positions
 * whose taps all lie in the row's width 16 / channels at a time over the repeated ``fw``,
 * ``finit``, ``frq``; the rest one by one */
PE_NV_KERNEL void pe_nv_dw_rows_flat(const int8_t *input, const int32_t *fw, const int32_t *finit,
                                     const int32_t *frq, const int32_t *init, const int32_t *w32,
                                     const int32_t *rq, int8_t *output, int32_t batches,
                                     int32_t in_h, int32_t in_w, int32_t channels, int32_t out_h,
                                     int32_t out_w, int32_t k_h, int32_t k_w, int32_t s_h,
                                     int32_t pad_h, int32_t pad_w, int32_t d_h,
                                     int32_t input_offset, int32_t out_offset, int32_t act_min,
                                     int32_t act_max)
{
    const int32_t per = PE_NV_LANES / channels;
    /* positions ox with every tap in the width: pad_w <= ox <= in_w - k_w + pad_w */
    const int32_t first = pad_w < out_w ? pad_w : out_w;
    const int32_t last = in_w - k_w + pad_w < out_w - 1 ? in_w - k_w + pad_w : out_w - 1;
    int32_t n, oy, ox;
    int32_t acc[PE_NV_LANES];
    for (n = 0; n < batches; ++n) {
        const int8_t *image = input + n * in_h * in_w * channels;
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * s_h - pad_h;
            const int32_t ky0 = iy0 >= 0 ? 0 : (-iy0 + d_h - 1) / d_h;
            const int32_t ky1 = in_h - iy0 >= (k_h - 1) * d_h + 1 ? k_h
                                : (in_h - iy0 + d_h - 1) / d_h;
            int8_t *out_row = output + (n * out_h + oy) * out_w * channels;
            ox = 0;
            for (; ox < out_w && ox < first; ++ox) {
                pe_nv_dw_position(image, init, w32, rq, out_row + ox * channels, in_h, in_w,
                                  channels, k_h, k_w, iy0, ox - pad_w, d_h, 1, input_offset,
                                  out_offset, act_min, act_max);
            }
            for (; ox <= last; ox += per) {
                const int32_t m = last + 1 - ox < per ? last + 1 - ox : per;
                pe_nv_dw_taps(image + ((iy0 + ky0 * d_h) * in_w + ox - pad_w) * channels,
                              d_h * in_w * channels, channels, fw, k_w * PE_NV_LANES,
                              PE_NV_LANES, ky0, ky1, 0, k_w, input_offset, m * channels, finit,
                              acc);
                pe_nv_requant16(acc, frq, out_offset, act_min, act_max,
                                out_row + ox * channels, m * channels);
            }
            if (last >= first) {
                ox = last + 1;
            }
            for (; ox < out_w; ++ox) {
                pe_nv_dw_position(image, init, w32, rq, out_row + ox * channels, in_h, in_w,
                                  channels, k_h, k_w, iy0, ox - pad_w, d_h, 1, input_offset,
                                  out_offset, act_min, act_max);
            }
        }
    }
}

/* The layer: ``w32`` the packed weights (NULL: ``filter`` packed into the scratch first),
 * ``bias`` (channels int32 or NULL), ``rq`` the requantization words per block of sixteen
 * channels, out_offset the output zero point (0 when folded into rq). */
PE_NV_KERNEL void pe_nv_dw_s8(const pe_context *ctx, const int8_t *input, const int32_t *w32,
                              const int8_t *filter, const int32_t *bias, const int32_t *rq,
                              int8_t *output, int32_t batches, int32_t in_h, int32_t in_w,
                              int32_t channels, int32_t out_h, int32_t out_w, int32_t k_h,
                              int32_t k_w, int32_t s_h, int32_t s_w, int32_t pad_h,
                              int32_t pad_w, int32_t d_h, int32_t d_w, int32_t input_offset,
                              int32_t out_offset, int32_t act_min, int32_t act_max)
{
    const int32_t cp = (channels + PE_NV_LANES - 1) / PE_NV_LANES * PE_NV_LANES;
    int32_t *init = (int32_t *)ctx->buf;
    int32_t n, oy, ox, c0;
    for (c0 = 0; c0 < cp; ++c0) {
        init[c0] = bias != 0 && c0 < channels ? bias[c0] : 0;
    }
    if (w32 == 0) {
        int32_t *packed = init + cp;
        pe_nv_pack_depthwise(filter, packed, k_h * k_w, channels);
        w32 = packed;
    }
    if (pe_nv_dw_flat(channels, s_w, d_w)) {
        /* the repeated weights, sums' start and words of the flat rows */
        const int32_t taps = k_h * k_w;
        int32_t *fw = init + cp + (w32 == init + cp ? taps * cp : 0);
        int32_t *finit = fw + taps * PE_NV_LANES;
        int32_t *frq = finit + PE_NV_LANES;
        int32_t t, l, r;
        for (t = 0; t < taps; ++t) {
            for (l = 0; l < PE_NV_LANES; ++l) {
                fw[t * PE_NV_LANES + l] = w32[t * cp + l % channels];
            }
        }
        for (l = 0; l < PE_NV_LANES; ++l) {
            finit[l] = init[l % channels];
            for (r = 0; r < 3; ++r) {
                frq[r * PE_NV_LANES + l] = rq[r * PE_NV_LANES + l % channels];
            }
        }
        pe_nv_dw_rows_flat(input, fw, finit, frq, init, w32, rq, output, batches, in_h, in_w,
                           channels, out_h, out_w, k_h, k_w, s_h, pad_h, pad_w, d_h,
                           input_offset, out_offset, act_min, act_max);
        return;
    }
    for (n = 0; n < batches; ++n) {
        const int8_t *image = input + n * in_h * in_w * channels;
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * s_h - pad_h;
            for (ox = 0; ox < out_w; ++ox) {
                pe_nv_dw_position(image, init, w32, rq, output + ((n * out_h + oy) * out_w + ox) *
                                  channels, in_h, in_w, channels, k_h, k_w, iy0,
                                  ox * s_w - pad_w, d_h, d_w, input_offset, out_offset, act_min,
                                  act_max);
            }
        }
    }
}

#endif /* PE_NATIVE_DW_H */
