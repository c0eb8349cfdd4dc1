/*
 * pe_arm_conv.h - the body of the arm backend's int8 convolution (groups of one), bit-exact
 * with TFLM's reference ConvPerChannel; see pe_arm.h for the data layout and PE_ARM_KERNEL.
 *
 * Two output pixels at a time: their receptive fields are expanded into the scratch buffer as
 * two int16 columns (input offset added, padding 0, pe_arm.h's pair order, interleaved per four
 * values so that one pointer walks both), then a 2x2 register tile (two pixels x two output
 * channels) runs over them with SMLAD, four products per weight word: over weights packed at
 * compile time (an assembly loop on DSP cores), or over the filter as it is when training
 * changes it. Requantization is pe_arm.h's one-rounding form (rq: three int32 per channel).
 * Scratch: two columns of k_h * k_w * in_c int16 rounded up to a multiple of four, and when
 * in_c is not a multiple of four a staging row of as many bytes.
 */
#ifndef PE_ARM_CONV_H
#define PE_ARM_CONV_H

#include "pe_arm.h"
#include "pe_kernels.h"

/* int16 position of value `slot` of column j (0 or 1) of an interleaved pair */
static inline int32_t pe_arm_at(int32_t slot, int32_t j)
{
    return ((slot >> 2) << 3) + (j << 2) + (slot & 3);
}

/* Column j of output pixel (oy, ox): k_h * k_w * in_c values, zeros up to a multiple of 4.
 * Channel counts that are multiples of four expand straight from the input; others gather the
 * window's bytes into `stage` first (whole rows of the window with one copy, padding as the
 * input zero point, which the offset turns into 0) and expand that four values at a time. */
static inline void pe_arm_column(int16_t *cols, int8_t *stage, int32_t j, const int8_t *in,
                                 int32_t oy, int32_t ox, int32_t in_h, int32_t in_w, int32_t c,
                                 int32_t k_h, int32_t k_w, int32_t stride_h, int32_t stride_w,
                                 int32_t pad_h, int32_t pad_w, int32_t dil_h, int32_t dil_w,
                                 int32_t in_off)
{
    const uint32_t off2 = pe_arm_pack16(in_off, in_off);
    const int32_t k = k_h * k_w * c;
    const int32_t iy0 = oy * stride_h - pad_h;
    const int32_t ix0 = ox * stride_w - pad_w;
    int32_t ky, kx, i, pos = 0;
    if ((c & 3) != 0) {
        const int8_t zp = (int8_t)(-in_off);
        const int32_t row = k_w * c;
        for (ky = 0; ky < k_h; ++ky, pos += row) {
            const int32_t iy = iy0 + ky * dil_h;
            if (iy < 0 || iy >= in_h) {
                memset(stage + pos, zp, (size_t)row);
            } else if (dil_w == 1 && ix0 >= 0 && ix0 + k_w <= in_w) {
                memcpy(stage + pos, in + (iy * in_w + ix0) * c, (size_t)row);
            } else {
                for (kx = 0; kx < k_w; ++kx) {
                    const int32_t ix = ix0 + kx * dil_w;
                    if (ix < 0 || ix >= in_w) {
                        memset(stage + pos + kx * c, zp, (size_t)c);
                    } else {
                        memcpy(stage + pos + kx * c, in + (iy * in_w + ix) * c, (size_t)c);
                    }
                }
            }
        }
        for (i = k; i < ((k + 3) & ~3); ++i) {
            stage[i] = zp;
        }
        for (i = 0; i < k; i += 4) {
            pe_arm_expand4(cols + pe_arm_at(i, j), stage + i, off2);
        }
        return;
    }
    for (ky = 0; ky < k_h; ++ky) {
        const int32_t iy = iy0 + ky * dil_h;
        for (kx = 0; kx < k_w; ++kx, pos += c) {
            const int32_t ix = ix0 + kx * dil_w;
            const int8_t *src;
            if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) {
                for (i = 0; i < c; i += 4) {
                    int16_t *d = cols + pe_arm_at(pos + i, j);
                    pe_arm_st32(d, 0u);
                    pe_arm_st32(d + 2, 0u);
                }
                continue;
            }
            src = in + (iy * in_w + ix) * c;
            for (i = 0; i < c; i += 4) {
                pe_arm_expand4(cols + pe_arm_at(pos + i, j), src + i, off2);
            }
        }
    }
}

/* acc[2*p + j] += column p . weight row j over k values: w is the first row, the second row
 * lies k bytes after it (the last partial group of four from pe_arm_tail32). */
static inline void pe_arm_dot_2x2(const int16_t *cols, const int8_t *w, int32_t k,
                                  int32_t acc[4])
{
    int32_t a0 = acc[0], a1 = acc[1], b0 = acc[2], b1 = acc[3];
    int32_t g;
    for (g = 0; g < (k >> 2); ++g) {
        const uint32_t xa0 = pe_arm_ld32(cols), xa1 = pe_arm_ld32(cols + 2);
        const uint32_t xb0 = pe_arm_ld32(cols + 4), xb1 = pe_arm_ld32(cols + 6);
        uint32_t v = pe_arm_ld32(w + k);
        uint32_t u = pe_arm_ld32(w);
        uint32_t e = pe_arm_sxtb16(u);
        a0 = pe_arm_smlad(xa0, e, a0);
        b0 = pe_arm_smlad(xb0, e, b0);
        u = pe_arm_sxtb16_ror8(u);
        a0 = pe_arm_smlad(xa1, u, a0);
        b0 = pe_arm_smlad(xb1, u, b0);
        e = pe_arm_sxtb16(v);
        a1 = pe_arm_smlad(xa0, e, a1);
        b1 = pe_arm_smlad(xb0, e, b1);
        v = pe_arm_sxtb16_ror8(v);
        a1 = pe_arm_smlad(xa1, v, a1);
        b1 = pe_arm_smlad(xb1, v, b1);
        cols += 8;
        w += 4;
    }
    if (k & 3) {
        const uint32_t xa0 = pe_arm_ld32(cols), xa1 = pe_arm_ld32(cols + 2);
        const uint32_t xb0 = pe_arm_ld32(cols + 4), xb1 = pe_arm_ld32(cols + 6);
        const uint32_t u = pe_arm_tail32(w, k & 3), v = pe_arm_tail32(w + k, k & 3);
        a0 = pe_arm_smlad(xa1, pe_arm_sxtb16_ror8(u), pe_arm_smlad(xa0, pe_arm_sxtb16(u), a0));
        b0 = pe_arm_smlad(xb1, pe_arm_sxtb16_ror8(u), pe_arm_smlad(xb0, pe_arm_sxtb16(u), b0));
        a1 = pe_arm_smlad(xa1, pe_arm_sxtb16_ror8(v), pe_arm_smlad(xa0, pe_arm_sxtb16(v), a1));
        b1 = pe_arm_smlad(xb1, pe_arm_sxtb16_ror8(v), pe_arm_smlad(xb0, pe_arm_sxtb16(v), b1));
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = b0;
    acc[3] = b1;
}

/* The outputs of two adjacent pixels (two = 1: columns 0 and 1 of the pair) or of one
 * (column 0), channel pairs first, then a last odd channel. packed = 1: `filter` is the
 * compile-time packed copy (pe_arm.h: pairs of rows interleaved per four values, rows padded
 * to a multiple of four, then the odd row); 0: the filter itself (k values per row). */
static inline void pe_arm_conv_pixels(const int16_t *cols, int32_t two, const int8_t *filter,
                                      int32_t packed, const int32_t *bias, const int32_t *rq,
                                      int8_t *oa, int32_t k, int32_t out_c, int32_t out_off,
                                      int32_t lo, int32_t hi)
{
    const int32_t groups = (k + 3) >> 2;
    int8_t *ob = oa + out_c;
    int32_t oc;
    for (oc = 0; oc + 1 < out_c; oc += 2) {
        const int32_t *r = rq + oc * PE_ARM_RQ_WORDS;
        const int32_t b0 = bias != 0 ? bias[oc] : 0;
        const int32_t b1 = bias != 0 ? bias[oc + 1] : 0;
        const int8_t *w = packed ? filter + oc * 4 * groups : filter + oc * k;
        int32_t acc[4];
        acc[0] = b0;
        acc[1] = b1;
        acc[2] = b0;
        acc[3] = b1;
        if (two) {
            if (packed) {
                pe_arm_dot_2x2_packed(cols, w, groups, acc);
            } else {
                pe_arm_dot_2x2(cols, w, k, acc);
            }
            ob[oc] = pe_arm_clamp8(pe_arm_requant3(acc[2], r[0], r[1], r[2]), out_off, lo, hi);
            ob[oc + 1] = pe_arm_clamp8(pe_arm_requant3(acc[3], r[3], r[4], r[5]), out_off, lo,
                                       hi);
        } else if (packed) {
            acc[0] = pe_arm_dot_1x1_packed(cols, 8, w, 8, groups, acc[0]);
            acc[1] = pe_arm_dot_1x1_packed(cols, 8, w + 4, 8, groups, acc[1]);
        } else {
            acc[0] = pe_arm_dot_plain(cols, 8, w, k, acc[0]);
            acc[1] = pe_arm_dot_plain(cols, 8, w + k, k, acc[1]);
        }
        oa[oc] = pe_arm_clamp8(pe_arm_requant3(acc[0], r[0], r[1], r[2]), out_off, lo, hi);
        oa[oc + 1] = pe_arm_clamp8(pe_arm_requant3(acc[1], r[3], r[4], r[5]), out_off, lo, hi);
    }
    if (oc < out_c) {
        const int32_t *r = rq + oc * PE_ARM_RQ_WORDS;
        const int32_t b0 = bias != 0 ? bias[oc] : 0;
        int32_t j;
        for (j = 0; j <= two; ++j) {
            const int32_t acc =
                packed ? pe_arm_dot_1x1_packed(cols + 4 * j, 8, filter + oc * 4 * groups, 4,
                                               groups, b0)
                       : pe_arm_dot_plain(cols + 4 * j, 8, filter + oc * k, k, b0);
            (j ? ob : oa)[oc] = pe_arm_out(acc, r, out_off, lo, hi);
        }
    }
}

PE_ARM_KERNEL void pe_arm_conv_s8(const pe_context *ctx, const int8_t *input,
                                  const int8_t *filter, int32_t packed, const int32_t *bias,
                                  const int32_t *rq, int8_t *output, int32_t n, int32_t in_h, int32_t in_w,
                                  int32_t in_c, int32_t out_h, int32_t out_w, int32_t out_c,
                                  int32_t k_h, int32_t k_w, int32_t stride_h, int32_t stride_w,
                                  int32_t pad_h, int32_t pad_w, int32_t dil_h, int32_t dil_w,
                                  int32_t in_off, int32_t out_off, int32_t act_min,
                                  int32_t act_max)
{
    const int32_t k = k_h * k_w * in_c;
    int16_t *const cols = (int16_t *)ctx->buf;
    int8_t *const stage = (int8_t *)(cols + 2 * ((k + 3) & ~3));
    int32_t b, oy, ox;
    for (b = 0; b < n; ++b) {
        const int8_t *in = input + b * in_h * in_w * in_c;
        int8_t *out = output + b * out_h * out_w * out_c;
        int32_t pending = 0, py = 0, px = 0;     /* a pixel waiting for its pair */
        for (oy = 0; oy < out_h; ++oy) {
            for (ox = 0; ox < out_w; ++ox) {
                pe_arm_column(cols, stage, pending, in, oy, ox, in_h, in_w, in_c, k_h, k_w,
                              stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, in_off);
                if (!pending) {
                    pending = 1;
                    py = oy;
                    px = ox;
                    continue;
                }
                pending = 0;
                /* pixel (py, px) and the next one, (oy, ox), are adjacent in the output */
                pe_arm_conv_pixels(cols, 1, filter, packed, bias, rq,
                                   out + (py * out_w + px) * out_c, k, out_c, out_off, act_min,
                                   act_max);
            }
        }
        if (pending) {
            pe_arm_conv_pixels(cols, 0, filter, packed, bias, rq,
                               out + (py * out_w + px) * out_c, k, out_c, out_off, act_min,
                               act_max);
        }
    }
}

#endif /* PE_ARM_CONV_H */
