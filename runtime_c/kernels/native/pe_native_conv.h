/*
 * pe_native_conv.h - the native backend's int8 convolution and fully connected layer (any
 * kernel size, stride, padding and dilation; one group), bit-exact with TFLM's reference
 * ConvPerChannel / FullyConnected:
 *
 *   out[p][o] = clamp(requant(bias[o] + sum_k w[o][k] * (x_p[k] + input_offset)) + zp)
 *
 * as a small matrix product. Per output pixel p the kernel builds the int16 row x_p + offset
 * over (kh, kw, c) (padding taps 0: TFLM skips them, which adds the same nothing), four rows
 * at a time in the scratch; the weights are int16 pairs in blocks of sixteen output channels,
 * w16[block][k / 2][lane][2] (codegen/backends/native.py pack_pairs: rows past out_c and the
 * value past an odd k are 0), packed at compile time for weights nothing changes and into the
 * scratch at every call for weights training changes. One multiply-add of int16 pairs per
 * lane and pair of k (VPDPWSSD, or VPMADDWD + VPADDD) adds 32 products (AVX-512) or 16 (AVX2)
 * into sixteen int32 sums that wrap as TFLM's do; |w (x + offset)| <= 127 * 255, so a pair
 * never saturates.
 *
 * Scratch (pe_nv_conv_scratch): the four rows, 4 * k2 * 2 int16; the bias padded to whole
 * blocks, blocks * 16 int32; then, for weights packed at run time, the packed copy
 * (blocks * k2 * 32 int16).
 */
#ifndef PE_NATIVE_CONV_H
#define PE_NATIVE_CONV_H

#include "pe_native.h"

enum { PE_NV_ROWS = 4 };

/* the int16 row of one output position: (x + offset) over (kh, kw, c), padding taps 0,
 * zeros up to 2 * k2 values */
PE_NV_KERNEL void pe_nv_im2col(const int8_t *PE_NV_RESTRICT image, int16_t *PE_NV_RESTRICT row,
                               int32_t in_h, int32_t in_w, int32_t in_c, int32_t k_h,
                               int32_t k_w, int32_t iy0, int32_t ix0, int32_t d_h, int32_t d_w,
                               int32_t offset, int32_t k2)
{
    int32_t ky, kx, c;
    int32_t at = 0;
    for (ky = 0; ky < k_h; ++ky) {
        const int32_t iy = iy0 + ky * d_h;
        if (iy < 0 || iy >= in_h) {
            memset(row + at, 0, (size_t)(k_w * in_c) * sizeof(int16_t));
            at += k_w * in_c;
            continue;
        }
        if (d_w == 1 && ix0 >= 0 && ix0 + k_w <= in_w) {
            /* the whole span of the kernel's width lies in the image: one run */
            const int8_t *src = image + ((int32_t)iy * in_w + ix0) * in_c;
            const int32_t run = k_w * in_c;
            c = 0;
#if defined(PE_NV_AVX2)
            {
                const __m256i off = _mm256_set1_epi16((int16_t)offset);
                for (; c + 16 <= run; c += 16) {
                    const __m256i v = _mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(const void *)(src + c)));
                    _mm256_storeu_si256((__m256i *)(void *)(row + at + c),
                                        _mm256_add_epi16(v, off));
                }
            }
#endif
            for (; c < run; ++c) {
                row[at + c] = (int16_t)(src[c] + offset);
            }
            at += run;
            continue;
        }
        for (kx = 0; kx < k_w; ++kx) {
            const int32_t ix = ix0 + kx * d_w;
            if (ix < 0 || ix >= in_w) {
                memset(row + at, 0, (size_t)in_c * sizeof(int16_t));
            } else {
                const int8_t *src = image + ((int32_t)iy * in_w + ix) * in_c;
                for (c = 0; c < in_c; ++c) {
                    row[at + c] = (int16_t)(src[c] + offset);
                }
            }
            at += in_c;
        }
    }
    for (; at < 2 * k2; ++at) {
        row[at] = 0;
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#define PE_NV_UNROLL _Pragma("GCC unroll 8")
#elif defined(__clang__)
#define PE_NV_UNROLL _Pragma("unroll")
#else
#define PE_NV_UNROLL
#endif

/* acc[t][b * 16 + lane] = init[b * 16 + lane] + sum over k of rows[t][k] * w16 of block b,
 * lane: t < nt (1..4) rows, b < nb (1..2) blocks; ``w`` is the first block's pairs, ``wstep``
 * the int16 values between blocks. Sums wrap modulo 2^32. The loops over rows and blocks
 * unroll fully where nt and nb are constants (pe_nv_dot calls this with literals for the
 * whole tiles), so that the sums stay in registers. */
PE_NV_KERNEL void pe_nv_dot_tile(const int16_t *PE_NV_RESTRICT rows, int32_t rstep,
                                 const int32_t nt, const int16_t *PE_NV_RESTRICT w,
                                 int32_t wstep, const int32_t nb, int32_t k2,
                                 const int32_t *init, int32_t acc[PE_NV_ROWS][2 * PE_NV_LANES])
{
    int32_t t, b, j;
#if defined(PE_NV_AVX512)
    __m512i s[PE_NV_ROWS][2];
    PE_NV_UNROLL
    for (t = 0; t < PE_NV_ROWS; ++t) {
        PE_NV_UNROLL
        for (b = 0; b < 2; ++b) {
            s[t][b] = b < nb ? _mm512_loadu_si512((const void *)(init + b * PE_NV_LANES))
                             : _mm512_setzero_si512();
        }
    }
    for (j = 0; j < k2; ++j) {
        __m512i wv[2];
        PE_NV_UNROLL
        for (b = 0; b < nb; ++b) {
            wv[b] = _mm512_loadu_si512((const void *)(w + b * wstep + 32 * j));
        }
        PE_NV_UNROLL
        for (t = 0; t < nt; ++t) {
            int32_t pair;
            __m512i x;
            memcpy(&pair, rows + t * rstep + 2 * j, sizeof pair);
            x = _mm512_set1_epi32(pair);
            PE_NV_UNROLL
            for (b = 0; b < nb; ++b) {
#if defined(PE_NV_VNNI)
                s[t][b] = _mm512_dpwssd_epi32(s[t][b], x, wv[b]);
#else
                s[t][b] = _mm512_add_epi32(s[t][b], _mm512_madd_epi16(x, wv[b]));
#endif
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
#elif defined(PE_NV_AVX2)
    /* one block at a time: up to four rows x two halves of eight lanes */
    for (b = 0; b < nb; ++b) {
        const int32_t *ib = init + b * PE_NV_LANES;
        const int16_t *wb = w + b * wstep;
        __m256i s[PE_NV_ROWS][2];
        PE_NV_UNROLL
        for (t = 0; t < PE_NV_ROWS; ++t) {
            s[t][0] = _mm256_loadu_si256((const __m256i *)(const void *)ib);
            s[t][1] = _mm256_loadu_si256((const __m256i *)(const void *)(ib + 8));
        }
        for (j = 0; j < k2; ++j) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(wb + 32 * j));
            const __m256i w1 = _mm256_loadu_si256(
                (const __m256i *)(const void *)(wb + 32 * j + 16));
            PE_NV_UNROLL
            for (t = 0; t < nt; ++t) {
                int32_t pair;
                __m256i x;
                memcpy(&pair, rows + t * rstep + 2 * j, sizeof pair);
                x = _mm256_set1_epi32(pair);
                s[t][0] = _mm256_add_epi32(s[t][0], _mm256_madd_epi16(x, w0));
                s[t][1] = _mm256_add_epi32(s[t][1], _mm256_madd_epi16(x, w1));
            }
        }
        PE_NV_UNROLL
        for (t = 0; t < nt; ++t) {
            _mm256_storeu_si256((__m256i *)(void *)&acc[t][b * PE_NV_LANES], s[t][0]);
            _mm256_storeu_si256((__m256i *)(void *)&acc[t][b * PE_NV_LANES + 8], s[t][1]);
        }
    }
#else
    int32_t l;
    for (t = 0; t < nt; ++t) {
        for (b = 0; b < nb; ++b) {
            const int16_t *wb = w + b * wstep;
            const int16_t *x = rows + t * rstep;
            uint32_t s[PE_NV_LANES];
            for (l = 0; l < PE_NV_LANES; ++l) {
                s[l] = (uint32_t)init[b * PE_NV_LANES + l];
            }
            for (j = 0; j < k2; ++j) {
                const int32_t x0 = x[2 * j];
                const int32_t x1 = x[2 * j + 1];
                for (l = 0; l < PE_NV_LANES; ++l) {
                    s[l] += (uint32_t)(x0 * wb[32 * j + 2 * l] + x1 * wb[32 * j + 2 * l + 1]);
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
PE_NV_KERNEL void pe_nv_dot(const int16_t *PE_NV_RESTRICT rows, int32_t rstep, int32_t nt,
                            const int16_t *PE_NV_RESTRICT w, int32_t wstep, int32_t nb,
                            int32_t k2, const int32_t *init,
                            int32_t acc[PE_NV_ROWS][2 * PE_NV_LANES])
{
    if (nt == PE_NV_ROWS && nb == 2) {
        pe_nv_dot_tile(rows, rstep, PE_NV_ROWS, w, wstep, 2, k2, init, acc);
    } else if (nt == PE_NV_ROWS) {
        pe_nv_dot_tile(rows, rstep, PE_NV_ROWS, w, wstep, 1, k2, init, acc);
    } else if (nt == 1) {
        pe_nv_dot_tile(rows, rstep, 1, w, wstep, nb, k2, init, acc);
    } else {
        pe_nv_dot_tile(rows, rstep, nt, w, wstep, nb, k2, init, acc);
    }
}

/* the int16 pairs of rows (out_c, k) of int8 weights, as pack_pairs lays them out: per block
 * of sixteen rows and pair j, a gather of the sixteen rows' bytes 2j..2j+3 (while they lie in
 * the row; the last pairs of a row one by one), sign-extended two at a time */
PE_NV_KERNEL void pe_nv_pack_pairs(const int8_t *PE_NV_RESTRICT filter,
                                   int16_t *PE_NV_RESTRICT w16, int32_t out_c, int32_t k,
                                   int32_t k2)
{
    const int32_t blocks = (out_c + PE_NV_LANES - 1) / PE_NV_LANES;
    const int32_t gathered = k >= 4 ? (k - 4) / 2 + 1 : 0;  /* pairs j with 2j + 3 < k */
    int32_t b, j, l;
    (void)gathered;
    for (b = 0; b < blocks; ++b) {
        int32_t j0 = 0;
#if defined(PE_NV_AVX512)
        {
            const int32_t valid = out_c - b * PE_NV_LANES < PE_NV_LANES ? out_c - b * PE_NV_LANES
                                                                       : PE_NV_LANES;
            const __mmask16 m = (__mmask16)(valid == PE_NV_LANES ? 0xFFFFu : (1u << valid) - 1u);
            const __m512i idx = _mm512_mullo_epi32(
                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                _mm512_set1_epi32(k));
            const int8_t *base = filter + b * PE_NV_LANES * k;
            const __m512i low = _mm512_set1_epi32(0xFFFF);
            for (j = 0; j < gathered; ++j) {
                const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx,
                                                              (const void *)(base + 2 * j), 1);
                const __m512i lo = _mm512_and_si512(
                    _mm512_srai_epi32(_mm512_slli_epi32(g, 24), 24), low);
                const __m512i hi = _mm512_slli_epi32(
                    _mm512_srai_epi32(_mm512_slli_epi32(g, 16), 24), 16);
                _mm512_storeu_si512((void *)(w16 + (b * k2 + j) * 2 * PE_NV_LANES),
                                    _mm512_or_si512(lo, hi));
            }
            j0 = gathered;
        }
#elif defined(PE_NV_AVX2)
        {
            const __m256i low = _mm256_set1_epi32(0xFFFF);
            int h;
            for (h = 0; h < 2; ++h) {
                const int32_t r0 = b * PE_NV_LANES + 8 * h;
                const int32_t valid = out_c - r0 < 8 ? (out_c - r0 > 0 ? out_c - r0 : 0) : 8;
                const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid),
                                                     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                       _mm256_set1_epi32(k));
                const int8_t *base = filter + (valid > 0 ? r0 : 0) * k;
                for (j = 0; j < gathered; ++j) {
                    const __m256i g = _mm256_mask_i32gather_epi32(
                        _mm256_setzero_si256(), (const int *)(const void *)(base + 2 * j), idx, m,
                        1);
                    const __m256i lo = _mm256_and_si256(
                        _mm256_srai_epi32(_mm256_slli_epi32(g, 24), 24), low);
                    const __m256i hi = _mm256_slli_epi32(
                        _mm256_srai_epi32(_mm256_slli_epi32(g, 16), 24), 16);
                    _mm256_storeu_si256(
                        (__m256i *)(void *)(w16 + (b * k2 + j) * 2 * PE_NV_LANES + 16 * h),
                        _mm256_or_si256(lo, hi));
                }
            }
            j0 = gathered;
        }
#endif
        for (j = j0; j < k2; ++j) {
            int16_t *dst = w16 + (b * k2 + j) * 2 * PE_NV_LANES;
            for (l = 0; l < PE_NV_LANES; ++l) {
                const int32_t o = b * PE_NV_LANES + l;
                const int8_t *src = filter + o * k + 2 * j;
                dst[2 * l] = (int16_t)(o < out_c ? src[0] : 0);
                dst[2 * l + 1] = (int16_t)(o < out_c && 2 * j + 1 < k ? src[1] : 0);
            }
        }
    }
}

/* Bytes of scratch for a layer (see the header comment); ``packed``: weights packed at
 * compile time. */
static inline int32_t pe_nv_conv_scratch(int32_t k, int32_t out_c, int32_t packed)
{
    const int32_t k2 = (k + 1) / 2;
    const int32_t blocks = (out_c + PE_NV_LANES - 1) / PE_NV_LANES;
    return PE_NV_ROWS * k2 * 2 * 2 + blocks * PE_NV_LANES * 4 +
           (packed ? 0 : blocks * k2 * 2 * PE_NV_LANES * 2);
}

/* The layer: ``w16`` the packed weights (NULL: ``filter`` packed into the scratch first),
 * ``bias`` out_c int32 or NULL, ``rq`` the requantization words per block of sixteen
 * channels (pe_native.h), out_offset the output zero point (0 when folded into rq). A fully
 * connected layer is the conv of a 1 x 1 kernel over rows x 1 positions. */
PE_NV_KERNEL void pe_nv_conv_s8(const pe_context *ctx, const int8_t *input, const int16_t *w16,
                                const int8_t *filter, const int32_t *bias, const int32_t *rq,
                                int8_t *output, int32_t batches, int32_t in_h, int32_t in_w,
                                int32_t in_c, int32_t out_h, int32_t out_w, int32_t out_c,
                                int32_t k_h, int32_t k_w, int32_t s_h, int32_t s_w,
                                int32_t pad_h, int32_t pad_w, int32_t d_h, int32_t d_w,
                                int32_t input_offset, int32_t out_offset, int32_t act_min,
                                int32_t act_max)
{
    const int32_t k = k_h * k_w * in_c;
    const int32_t k2 = (k + 1) / 2;
    const int32_t blocks = (out_c + PE_NV_LANES - 1) / PE_NV_LANES;
    const int32_t positions = out_h * out_w;
    const int32_t rstep = 2 * k2;
    const int32_t wstep = k2 * 2 * PE_NV_LANES;
    int16_t *rows = (int16_t *)ctx->buf;
    int32_t *init = (int32_t *)(void *)(rows + PE_NV_ROWS * rstep);
    int32_t acc[PE_NV_ROWS][2 * PE_NV_LANES];
    int32_t n, p0, t, b, o;
    for (o = 0; o < blocks * PE_NV_LANES; ++o) {
        init[o] = bias != 0 && o < out_c ? bias[o] : 0;
    }
    if (w16 == 0) {
        int16_t *packed = (int16_t *)(void *)(init + blocks * PE_NV_LANES);
        pe_nv_pack_pairs(filter, packed, out_c, k, k2);
        w16 = packed;
    }
    for (n = 0; n < batches; ++n) {
        const int8_t *image = input + n * in_h * in_w * in_c;
        int8_t *out_image = output + n * positions * out_c;
        for (p0 = 0; p0 < positions; p0 += PE_NV_ROWS) {
            const int32_t nt = positions - p0 < PE_NV_ROWS ? positions - p0 : PE_NV_ROWS;
            for (t = 0; t < nt; ++t) {
                const int32_t oy = (p0 + t) / out_w;
                const int32_t ox = (p0 + t) % out_w;
                pe_nv_im2col(image, rows + t * rstep, in_h, in_w, in_c, k_h, k_w,
                             oy * s_h - pad_h, ox * s_w - pad_w, d_h, d_w, input_offset, k2);
            }
            for (b = 0; b < blocks; b += 2) {
                const int32_t nb = blocks - b >= 2 ? 2 : 1;
                pe_nv_dot(rows, rstep, nt, w16 + b * wstep, wstep, nb, k2,
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
