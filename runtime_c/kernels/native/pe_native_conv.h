/*
 * pe_native_conv.h - the native backend's int8 convolution and fully connected layer (any
 * kernel size, stride, padding and dilation; one group), bit-exact with TFLM's reference
 * ConvPerChannel / FullyConnected:
 *
 *   out[p][o] = clamp(requant(bias[o] + sum_k w[o][k] * (x_p[k] + offset)) + zp)
 *
 * as a small matrix product over unsigned rows. Per output position p the kernel builds the
 * byte row u_p over (kh, kw, c): u = x + 128 (x ^ 0x80) for taps in the image and 128 - offset
 * for padding taps (TFLM skips those: they must add nothing; offset = -zp lies in
 * [-127, 128], so 128 - offset is a byte), four rows at a time in the scratch (a pointwise
 * layer over whole groups of four channels reads its rows from the input and flips the bytes
 * as it reads them). Then
 *
 *   sum_k w (x + offset) = sum_k w u + (offset - 128) sum_k w       (exact modulo 2^32)
 *
 * over every k, padding included; the second term, ``corr`` per output channel, joins the
 * bias. The weights are bytes in blocks of sixteen output channels, w8[block][k / 4][lane][4]
 * (codegen/backends/native.py pack_quads: rows past out_c and values past k are 0), packed at
 * compile time for weights nothing changes (corr with them) and into the scratch at every
 * call for weights training changes (a 16 x 16 transpose of four-byte words per 64 k).
 * VPDPBUSD adds 64 products u * w per instruction (AVX-512 VNNI: four per int32 lane, exact:
 * |u w| <= 255 * 128); without VNNI the bytes are widened to int16 and VPMADDWD adds pairs of
 * them (AVX-512 BW, AVX2); sums wrap as TFLM's do.
 *
 * Scratch (pe_nv_conv_scratch): the four rows, 4 * 4 * k4 bytes; the sums' start per output
 * channel (bias + corr) padded to whole blocks, blocks * 16 int32; for weights packed at run
 * time, the packed copy (blocks * k4 * 64 bytes).
 */
#ifndef PE_NATIVE_CONV_H
#define PE_NATIVE_CONV_H

#include "pe_native.h"

enum { PE_NV_ROWS = 4 };

/* GCC unrolls the loops over a tile's rows and blocks fully only when asked; clang does it
 * unasked (and warns where a count is not constant) */
#if defined(__GNUC__) && !defined(__clang__)
#define PE_NV_UNROLL _Pragma("GCC unroll 8")
#else
#define PE_NV_UNROLL
#endif

/* dst[i] = src[i] ^ 0x80 (x + 128 as a byte) for n bytes: whole vectors, then eight-byte
 * words and bytes (no masked stores: slow on some cores, and the rows they write are read
 * back at once, which a masked store does not forward to) */
PE_NV_KERNEL void pe_nv_bias_bytes(const int8_t *PE_NV_RESTRICT src, uint8_t *PE_NV_RESTRICT dst,
                                   int32_t n)
{
    int32_t i = 0;
#if defined(PE_NV_AVX512)
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (; i + 64 <= n; i += 64) {
        _mm512_storeu_si512((void *)(dst + i), _mm512_xor_si512(
            _mm512_loadu_si512((const void *)(src + i)), flip));
    }
#endif
#if defined(PE_NV_AVX2)
    {
        const __m256i flip32 = _mm256_set1_epi8((char)0x80);
        for (; i + 32 <= n; i += 32) {
            _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm256_xor_si256(
                _mm256_loadu_si256((const __m256i *)(const void *)(src + i)), flip32));
        }
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, src + i, sizeof w);
        w ^= 0x8080808080808080u;
        memcpy(dst + i, &w, sizeof w);
    }
    for (; i < n; ++i) {
        dst[i] = (uint8_t)((uint8_t)src[i] ^ 0x80u);
    }
}

/* the byte row of one output position: u over (kh, kw, c) (x ^ 0x80 in the image, ``pad``
 * outside), zeros up to 4 * k4 values */
PE_NV_KERNEL void pe_nv_im2col(const int8_t *PE_NV_RESTRICT image, uint8_t *PE_NV_RESTRICT row,
                               int32_t in_h, int32_t in_w, int32_t in_c, int32_t k_h,
                               int32_t k_w, int32_t iy0, int32_t ix0, int32_t d_h, int32_t d_w,
                               uint8_t pad, int32_t k4)
{
    int32_t ky, kx;
    int32_t at = 0;
    for (ky = 0; ky < k_h; ++ky) {
        const int32_t iy = iy0 + ky * d_h;
        if (iy < 0 || iy >= in_h) {
            memset(row + at, pad, (size_t)(k_w * in_c));
            at += k_w * in_c;
            continue;
        }
        if (d_w == 1 && ix0 >= 0 && ix0 + k_w <= in_w) {
            /* the whole span of the kernel's width lies in the image: one run */
            pe_nv_bias_bytes(image + ((int32_t)iy * in_w + ix0) * in_c, row + at, k_w * in_c);
            at += k_w * in_c;
            continue;
        }
        for (kx = 0; kx < k_w; ++kx) {
            const int32_t ix = ix0 + kx * d_w;
            if (ix < 0 || ix >= in_w) {
                memset(row + at, pad, (size_t)in_c);
            } else {
                pe_nv_bias_bytes(image + ((int32_t)iy * in_w + ix) * in_c, row + at, in_c);
            }
            at += in_c;
        }
    }
    if (at < 4 * k4) {
        memset(row + at, 0, (size_t)(4 * k4 - at));
    }
}

/* the four bytes of a row at ``p`` as one word, each x ^ 0x80 when ``flip`` (rows read from
 * the input as they are: a pointwise layer's) */
static inline uint32_t pe_nv_quad(const uint8_t *p, int32_t flip)
{
    uint32_t q;
    memcpy(&q, p, sizeof q);
    return flip ? q ^ 0x80808080u : q;
}

#if defined(PE_NV_AVX2) && !defined(PE_NV_VNNI)
/* the four bytes of a word zero-extended to int16 (the eight bytes repeated over a vector) */
static inline int64_t pe_nv_quad16(uint32_t q)
{
    return (int64_t)((uint64_t)(q & 0xFFu) | (uint64_t)(q >> 8 & 0xFFu) << 16 |
                     (uint64_t)(q >> 16 & 0xFFu) << 32 | (uint64_t)(q >> 24) << 48);
}
#endif

/* acc[t][b * 16 + lane] = init[b * 16 + lane] + sum over k of rows[t][k] * w8 of block b,
 * lane: t < nt (1..4) rows, b < nb (1..2) blocks; ``w`` is the first block's quads, ``wstep``
 * the bytes between blocks. Sums wrap modulo 2^32. The loops over rows and blocks unroll fully
 * where nt and nb are constants (pe_nv_dot calls this with literals for the whole tiles), so
 * that the sums stay in registers. */
PE_NV_KERNEL void pe_nv_dot_tile(const uint8_t *PE_NV_RESTRICT rows, int32_t rstep,
                                 const int32_t nt, const int8_t *PE_NV_RESTRICT w,
                                 int32_t wstep, const int32_t nb, int32_t k4, int32_t flip,
                                 const int32_t *init, int32_t acc[PE_NV_ROWS][2 * PE_NV_LANES])
{
    int32_t t, b, j;
#if defined(PE_NV_AVX512) && defined(PE_NV_VNNI)
    __m512i s[PE_NV_ROWS][2];
    PE_NV_UNROLL
    for (t = 0; t < PE_NV_ROWS; ++t) {
        PE_NV_UNROLL
        for (b = 0; b < 2; ++b) {
            s[t][b] = b < nb ? _mm512_loadu_si512((const void *)(init + b * PE_NV_LANES))
                             : _mm512_setzero_si512();
        }
    }
    for (j = 0; j < k4; ++j) {
        __m512i wv[2];
        PE_NV_UNROLL
        for (b = 0; b < nb; ++b) {
            wv[b] = _mm512_loadu_si512((const void *)(w + b * wstep + 64 * j));
        }
        PE_NV_UNROLL
        for (t = 0; t < nt; ++t) {
            const __m512i x = _mm512_set1_epi32((int32_t)pe_nv_quad(rows + t * rstep + 4 * j,
                                                                    flip));
            PE_NV_UNROLL
            for (b = 0; b < nb; ++b) {
                s[t][b] = _mm512_dpbusd_epi32(s[t][b], x, wv[b]);
            }
        }
    }
    PE_NV_UNROLL
    for (t = 0; t < nt; ++t) {
        PE_NV_UNROLL
        for (b = 0; b < nb; ++b) {
            _mm512_storeu_si512((void *)&acc[t][b * PE_NV_LANES], s[t][b]);
        }
    }
#elif defined(PE_NV_AVX512)
    /* the quads widened to int16: lanes 0-7 and 8-15 of a block in two vectors, each int32
     * lane of a product holding the sum of a pair; the pairs are added at the end */
    __m512i s[PE_NV_ROWS][2][2];
    PE_NV_UNROLL
    for (t = 0; t < PE_NV_ROWS; ++t) {
        PE_NV_UNROLL
        for (b = 0; b < 2; ++b) {
            s[t][b][0] = _mm512_setzero_si512();
            s[t][b][1] = _mm512_setzero_si512();
        }
    }
    for (j = 0; j < k4; ++j) {
        __m512i wv[2][2];
        PE_NV_UNROLL
        for (b = 0; b < nb; ++b) {
            const int8_t *wp = w + b * wstep + 64 * j;
            wv[b][0] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)wp));
            wv[b][1] = _mm512_cvtepi8_epi16(
                _mm256_loadu_si256((const __m256i *)(const void *)(wp + 32)));
        }
        PE_NV_UNROLL
        for (t = 0; t < nt; ++t) {
            const __m512i x = _mm512_set1_epi64(
                pe_nv_quad16(pe_nv_quad(rows + t * rstep + 4 * j, flip)));
            PE_NV_UNROLL
            for (b = 0; b < nb; ++b) {
                s[t][b][0] = _mm512_add_epi32(s[t][b][0], _mm512_madd_epi16(x, wv[b][0]));
                s[t][b][1] = _mm512_add_epi32(s[t][b][1], _mm512_madd_epi16(x, wv[b][1]));
            }
        }
    }
    PE_NV_UNROLL
    for (t = 0; t < nt; ++t) {
        PE_NV_UNROLL
        for (b = 0; b < nb; ++b) {
            /* the low word of each 64-bit lane: the lane's pair sums added */
            const __m256i lo = _mm512_cvtepi64_epi32(
                _mm512_add_epi32(s[t][b][0], _mm512_srli_epi64(s[t][b][0], 32)));
            const __m256i hi = _mm512_cvtepi64_epi32(
                _mm512_add_epi32(s[t][b][1], _mm512_srli_epi64(s[t][b][1], 32)));
            const __m512i sum = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            _mm512_storeu_si512((void *)&acc[t][b * PE_NV_LANES], _mm512_add_epi32(
                sum, _mm512_loadu_si512((const void *)(init + b * PE_NV_LANES))));
        }
    }
#elif defined(PE_NV_AVX2)
    /* one block and two rows at a time: the quads widened to int16, four lanes per vector,
     * each int32 lane of a product holding the sum of a pair; the pairs are added at the end */
    int32_t t0;
    for (b = 0; b < nb; ++b) {
        const int8_t *wb = w + b * wstep;
        for (t0 = 0; t0 < nt; t0 += 2) {
            const int32_t n2 = nt - t0 >= 2 ? 2 : 1;
            __m256i s[2][4];
            int q;
            for (t = 0; t < 2; ++t) {
                for (q = 0; q < 4; ++q) {
                    s[t][q] = _mm256_setzero_si256();
                }
            }
            for (j = 0; j < k4; ++j) {
                __m256i x[2];
                x[0] = _mm256_set1_epi64x(pe_nv_quad16(pe_nv_quad(rows + t0 * rstep + 4 * j,
                                                                  flip)));
                x[1] = n2 > 1 ? _mm256_set1_epi64x(pe_nv_quad16(pe_nv_quad(
                                    rows + (t0 + 1) * rstep + 4 * j, flip)))
                              : x[0];
                PE_NV_UNROLL
                for (q = 0; q < 4; ++q) {
                    const __m256i wq = _mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(const void *)(wb + 64 * j + 16 * q)));
                    s[0][q] = _mm256_add_epi32(s[0][q], _mm256_madd_epi16(x[0], wq));
                    s[1][q] = _mm256_add_epi32(s[1][q], _mm256_madd_epi16(x[1], wq));
                }
            }
            for (t = 0; t < n2; ++t) {
                const int32_t *ib = init + b * PE_NV_LANES;
                /* hadd: [q0 l0 l1, q1 l0 l1 | q0 l2 l3, q1 l2 l3] -> lanes 0-7 in order */
                const __m256i h01 = _mm256_permute4x64_epi64(
                    _mm256_hadd_epi32(s[t][0], s[t][1]), 0xD8);
                const __m256i h23 = _mm256_permute4x64_epi64(
                    _mm256_hadd_epi32(s[t][2], s[t][3]), 0xD8);
                _mm256_storeu_si256((__m256i *)(void *)&acc[t0 + t][b * PE_NV_LANES],
                                    _mm256_add_epi32(h01, _mm256_loadu_si256(
                                        (const __m256i *)(const void *)ib)));
                _mm256_storeu_si256((__m256i *)(void *)&acc[t0 + t][b * PE_NV_LANES + 8],
                                    _mm256_add_epi32(h23, _mm256_loadu_si256(
                                        (const __m256i *)(const void *)(ib + 8))));
            }
        }
    }
#else
    int32_t l, i;
    for (t = 0; t < nt; ++t) {
        for (b = 0; b < nb; ++b) {
            const int8_t *wb = w + b * wstep;
            const uint8_t *x = rows + t * rstep;
            uint32_t s[PE_NV_LANES];
            for (l = 0; l < PE_NV_LANES; ++l) {
                s[l] = (uint32_t)init[b * PE_NV_LANES + l];
            }
            for (j = 0; j < k4; ++j) {
                const uint32_t q = pe_nv_quad(x + 4 * j, flip);
                for (l = 0; l < PE_NV_LANES; ++l) {
                    for (i = 0; i < 4; ++i) {
                        s[l] += (uint32_t)((int32_t)(q >> (8 * i) & 0xFFu) *
                                           wb[64 * j + 4 * l + i]);
                    }
                }
            }
            for (l = 0; l < PE_NV_LANES; ++l) {
                acc[t][b * PE_NV_LANES + l] = pe_s32_from_u32(s[l]);
            }
        }
    }
#endif
}

/* pe_nv_dot_tile with the whole tiles' counts as literals */
PE_NV_KERNEL void pe_nv_dot(const uint8_t *PE_NV_RESTRICT rows, int32_t rstep, int32_t nt,
                            const int8_t *PE_NV_RESTRICT w, int32_t wstep, int32_t nb,
                            int32_t k4, int32_t flip, const int32_t *init,
                            int32_t acc[PE_NV_ROWS][2 * PE_NV_LANES])
{
    if (nt == PE_NV_ROWS && nb == 2) {
        pe_nv_dot_tile(rows, rstep, PE_NV_ROWS, w, wstep, 2, k4, flip, init, acc);
    } else if (nt == PE_NV_ROWS) {
        pe_nv_dot_tile(rows, rstep, PE_NV_ROWS, w, wstep, 1, k4, flip, init, acc);
    } else if (nt == 1) {
        pe_nv_dot_tile(rows, rstep, 1, w, wstep, nb, k4, flip, init, acc);
    } else {
        pe_nv_dot_tile(rows, rstep, nt, w, wstep, nb, k4, flip, init, acc);
    }
}

#if defined(PE_NV_AVX512)
/* the 16 x 16 transpose of four-byte words: r[i] word j -> r[j] word i */
static inline void pe_nv_transpose16(__m512i r[16])
{
    __m512i a[16], c[16];
    int i;
    for (i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (i = 0; i < 16; i += 4) {
        c[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
        c[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
        c[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
        c[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    /* c[4g + m] holds, in 128-bit quarter q, words 4q + m of rows 4g .. 4g + 3 */
    for (i = 0; i < 4; ++i) {
        const __m512i x0 = _mm512_shuffle_i32x4(c[i], c[4 + i], 0x88);      /* q0, q2 */
        const __m512i x1 = _mm512_shuffle_i32x4(c[i], c[4 + i], 0xDD);      /* q1, q3 */
        const __m512i y0 = _mm512_shuffle_i32x4(c[8 + i], c[12 + i], 0x88);
        const __m512i y1 = _mm512_shuffle_i32x4(c[8 + i], c[12 + i], 0xDD);
        r[i] = _mm512_shuffle_i32x4(x0, y0, 0x88);          /* word i: quarter 0 */
        r[8 + i] = _mm512_shuffle_i32x4(x0, y0, 0xDD);      /* word 8 + i: quarter 2 */
        r[4 + i] = _mm512_shuffle_i32x4(x1, y1, 0x88);      /* word 4 + i: quarter 1 */
        r[12 + i] = _mm512_shuffle_i32x4(x1, y1, 0xDD);     /* word 12 + i: quarter 3 */
    }
}
#endif

/* The weights (out_c, k) as pack_quads lays them out (w8), and per output channel
 * corr = (offset - 128) * sum_k w (wrapping) added to ``init``. */
PE_NV_KERNEL void pe_nv_pack_quads(const int8_t *PE_NV_RESTRICT filter,
                                   int8_t *PE_NV_RESTRICT w8, int32_t out_c, int32_t k,
                                   int32_t k4, int32_t offset, int32_t *PE_NV_RESTRICT init)
{
    const int32_t blocks = (out_c + PE_NV_LANES - 1) / PE_NV_LANES;
    int32_t b, j, l;
    for (b = 0; b < blocks; ++b) {
        int32_t j0 = 0;
        int32_t sums[PE_NV_LANES];
        for (l = 0; l < PE_NV_LANES; ++l) {
            sums[l] = 0;
        }
#if defined(PE_NV_AVX512)
        {
            const int32_t valid = out_c - b * PE_NV_LANES < PE_NV_LANES ? out_c - b * PE_NV_LANES
                                                                       : PE_NV_LANES;
            const __m512i flip = _mm512_set1_epi8((char)0x80);
            __m512i total[PE_NV_LANES];
            for (l = 0; l < PE_NV_LANES; ++l) {
                total[l] = _mm512_setzero_si512();
            }
            for (j0 = 0; j0 < k4; j0 += 16) {
                const int32_t bytes = k - 4 * j0 < 64 ? k - 4 * j0 : 64;
                const __mmask64 m = bytes >= 64 ? ~(__mmask64)0
                                    : bytes > 0 ? ((__mmask64)1 << bytes) - 1u : 0u;
                const int32_t words = k4 - j0 < 16 ? k4 - j0 : 16;
                __m512i r[16];
                for (l = 0; l < PE_NV_LANES; ++l) {
                    r[l] = l < valid ? _mm512_maskz_loadu_epi8(
                                           m, (const void *)(filter + (b * PE_NV_LANES + l) * k +
                                                             4 * j0))
                                     : _mm512_setzero_si512();
                    /* sum of (w + 128) over the 64 bytes, zeros included: 128 each */
                    total[l] = _mm512_add_epi64(total[l], _mm512_sad_epu8(
                        _mm512_xor_si512(r[l], flip), _mm512_setzero_si512()));
                }
                pe_nv_transpose16(r);
                for (l = 0; l < words; ++l) {
                    _mm512_storeu_si512((void *)(w8 + (b * k4 + j0 + l) * 64), r[l]);
                }
            }
            for (l = 0; l < PE_NV_LANES; ++l) {
                /* every chunk counted 64 bytes at 128 over their values */
                const int64_t s = _mm512_reduce_add_epi64(total[l]) -
                                  (int64_t)128 * 64 * ((k4 + 15) / 16);
                sums[l] = l < valid ? (int32_t)s : 0;
            }
            j0 = k4;
        }
#elif defined(PE_NV_AVX2)
        {
            int h;
            for (h = 0; h < 2; ++h) {
                const int32_t r0 = b * PE_NV_LANES + 8 * h;
                for (j0 = 0; j0 + 8 <= k4 && 4 * (j0 + 8) <= k; j0 += 8) {
                    __m256i r[8], a[8], c[8];
                    int i;
                    for (i = 0; i < 8; ++i) {
                        r[i] = r0 + i < out_c ? _mm256_loadu_si256((const __m256i *)(const void *)(
                                                    filter + (r0 + i) * k + 4 * j0))
                                              : _mm256_setzero_si256();
                    }
                    for (i = 0; i < 8; i += 2) {
                        a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
                        a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
                    }
                    for (i = 0; i < 8; i += 4) {
                        c[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
                        c[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
                        c[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
                        c[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
                    }
                    /* c[m] (rows 0-3) and c[4 + m] (rows 4-7): words m and 4 + m per half */
                    for (i = 0; i < 4; ++i) {
                        _mm256_storeu_si256(
                            (__m256i *)(void *)(w8 + (b * k4 + j0 + i) * 64 + 32 * h),
                            _mm256_permute2x128_si256(c[i], c[4 + i], 0x20));
                        _mm256_storeu_si256(
                            (__m256i *)(void *)(w8 + (b * k4 + j0 + 4 + i) * 64 + 32 * h),
                            _mm256_permute2x128_si256(c[i], c[4 + i], 0x31));
                    }
                }
            }
        }
#endif
        for (j = j0; j < k4; ++j) {
            int8_t *dst = w8 + (b * k4 + j) * 64;
            for (l = 0; l < PE_NV_LANES; ++l) {
                const int32_t o = b * PE_NV_LANES + l;
                int32_t i;
                for (i = 0; i < 4; ++i) {
                    dst[4 * l + i] = (int8_t)(o < out_c && 4 * j + i < k
                                              ? filter[o * k + 4 * j + i] : 0);
                }
            }
        }
#if !defined(PE_NV_AVX512)
        for (l = 0; l < PE_NV_LANES; ++l) {
            const int32_t o = b * PE_NV_LANES + l;
            int32_t i;
            int32_t s = 0;
            for (i = 0; o < out_c && i < k; ++i) {
                s += filter[o * k + i];
            }
            sums[l] = s;
        }
#endif
        for (l = 0; l < PE_NV_LANES; ++l) {
            init[b * PE_NV_LANES + l] = pe_s32_from_u32(
                (uint32_t)init[b * PE_NV_LANES + l] +
                (uint32_t)(offset - 128) * (uint32_t)sums[l]);
        }
    }
}

/* Bytes of scratch for a layer (see the header comment); ``packed``: weights packed at
 * compile time. */
static inline int32_t pe_nv_conv_scratch(int32_t k, int32_t out_c, int32_t packed)
{
    const int32_t k4 = (k + 3) / 4;
    const int32_t blocks = (out_c + PE_NV_LANES - 1) / PE_NV_LANES;
    return PE_NV_ROWS * k4 * 4 + blocks * PE_NV_LANES * 4 + (packed ? 0 : blocks * k4 * 64);
}

/* The layer: ``w8`` the packed weights and ``corr`` their correction per output channel
 * (NULL, NULL: ``filter`` packed into the scratch first), ``bias`` out_c int32 or NULL,
 * ``rq`` the requantization words per block of sixteen channels (pe_native.h), out_offset the
 * output zero point (0 when folded into rq). A fully connected layer is the conv of a 1 x 1
 * kernel over rows x 1 positions. */
PE_NV_KERNEL void pe_nv_conv_s8(const pe_context *ctx, const int8_t *input, const int8_t *w8,
                                const int32_t *corr, const int8_t *filter, const int32_t *bias,
                                const int32_t *rq, int8_t *output, int32_t batches,
                                int32_t in_h, int32_t in_w, int32_t in_c, int32_t out_h,
                                int32_t out_w, int32_t out_c, int32_t k_h, int32_t k_w,
                                int32_t s_h, int32_t s_w, int32_t pad_h, int32_t pad_w,
                                int32_t d_h, int32_t d_w, int32_t input_offset,
                                int32_t out_offset, int32_t act_min, int32_t act_max)
{
    const int32_t k = k_h * k_w * in_c;
    const int32_t k4 = (k + 3) / 4;
    const int32_t blocks = (out_c + PE_NV_LANES - 1) / PE_NV_LANES;
    const int32_t positions = out_h * out_w;
    const int32_t rstep = 4 * k4;
    const int32_t wstep = k4 * 64;
    const uint8_t pad = (uint8_t)(128 - input_offset);
    /* a pointwise layer over whole quads reads its rows from the input as they are */
    const int32_t direct = k_h == 1 && k_w == 1 && s_h == 1 && s_w == 1 && pad_h == 0 &&
                           pad_w == 0 && in_c % 4 == 0 && out_h == in_h && out_w == in_w;
    uint8_t *rows = (uint8_t *)ctx->buf;
    int32_t *init = (int32_t *)(void *)(rows + PE_NV_ROWS * rstep);
    int32_t acc[PE_NV_ROWS][2 * PE_NV_LANES];
    int32_t n, p0, t, b, o;
    for (o = 0; o < blocks * PE_NV_LANES; ++o) {
        const int32_t b0 = bias != 0 && o < out_c ? bias[o] : 0;
        init[o] = corr != 0 && o < out_c ? pe_add_wrap_s32(b0, corr[o]) : b0;
    }
    if (w8 == 0) {
        int8_t *packed = (int8_t *)(void *)(init + blocks * PE_NV_LANES);
        pe_nv_pack_quads(filter, packed, out_c, k, k4, input_offset, init);
        w8 = packed;
    }
    for (n = 0; n < batches; ++n) {
        const int8_t *image = input + n * in_h * in_w * in_c;
        int8_t *out_image = output + n * positions * out_c;
        for (p0 = 0; p0 < positions; p0 += PE_NV_ROWS) {
            const int32_t nt = positions - p0 < PE_NV_ROWS ? positions - p0 : PE_NV_ROWS;
            const uint8_t *tile = direct ? (const uint8_t *)(const void *)(image + p0 * in_c)
                                         : rows;
            for (t = 0; !direct && t < nt; ++t) {
                const int32_t oy = (p0 + t) / out_w;
                const int32_t ox = (p0 + t) % out_w;
                pe_nv_im2col(image, rows + t * rstep, in_h, in_w, in_c, k_h, k_w,
                             oy * s_h - pad_h, ox * s_w - pad_w, d_h, d_w, pad, k4);
            }
            for (b = 0; b < blocks; b += 2) {
                const int32_t nb = blocks - b >= 2 ? 2 : 1;
                pe_nv_dot(tile, rstep, nt, w8 + b * wstep, wstep, nb, k4, direct,
                          init + b * PE_NV_LANES, acc);
                for (t = 0; t < nt; ++t) {
                    int32_t i;
                    for (i = 0; i < nb; ++i) {
                        const int32_t o0 = (b + i) * PE_NV_LANES;
                        const int32_t count = out_c - o0 < PE_NV_LANES ? out_c - o0
                                                                       : PE_NV_LANES;
                        pe_nv_requant16(&acc[t][i * PE_NV_LANES], rq + (b + i) * PE_NV_RQ_BLOCK,
                                        out_offset, act_min, act_max,
                                        out_image + (p0 + t) * out_c + o0, count);
                    }
                }
            }
        }
    }
}

#endif /* PE_NATIVE_CONV_H */
