/*
 * pe_arm_dw.h - the body of the arm backend's int8 depthwise convolution (depth multiplier 1,
 * dilation 1), bit-exact with TFLM's reference DepthwiseConvPerChannel; see pe_arm.h.
 *
 * One channel at a time: its padded input plane is gathered into the scratch buffer as int16
 * (input offset added, padding 0), the channel's weights are packed into int16 pairs of
 * horizontally neighbouring taps, and every output is a sum of SMLADs over unaligned pairs of
 * the plane (an odd last tap pairs with a zero weight; the plane has two spare zeros for that
 * read). Strides 1 and 2 compute two outputs per step, sharing the weights' loads (3x3 windows
 * also share the input's). With `ksum` (frozen weights: per channel the input offset times the
 * sum of its weights, computed at compile time) the offset is folded into the bias and the
 * plane holds the input values as they are, padding as the input zero point (which adds the
 * same zero as TFLM's skipped taps); without, the plane holds x + offset, padding 0. In the
 * fast form (pe_arm.h's PE_ARM_FAST) the accumulator is built doubled, as SMMLAR reads it:
 * the bias and the weights (with ksum) or the plane (without) times two.
 * A channel is read whole before any of its outputs is written, and no other channel is
 * written meanwhile: the output may overwrite the input (in place).
 * Scratch: ((out_h - 1) * stride_h + k_h) * ((out_w - 1) * stride_w + k_w) + 2 int16.
 */
#ifndef PE_ARM_DW_H
#define PE_ARM_DW_H

#include "pe_arm.h"
#include "pe_kernels.h"

#define PE_ARM_DW_MAX_PAIRS 64

/* the padded plane of channel c: hp x wp values (x + offset) * scale, `pad` where the window
 * leaves the input, origin at (-pad_h, -pad_w) */
PE_ARM_INLINE void pe_arm_plane(int16_t *plane, const int8_t *in, int32_t in_h, int32_t in_w,
                                int32_t chans, int32_t hp, int32_t wp, int32_t pad_h,
                                int32_t pad_w, int32_t offset, int32_t scale, int16_t pad)
{
    const int32_t x0 = pad_w < wp ? pad_w : wp;
    const int32_t x1 = pad_w + in_w < wp ? pad_w + in_w : wp;
    int32_t py, px;
    for (py = 0; py < hp; ++py) {
        const int32_t iy = py - pad_h;
        int16_t *row = plane + py * wp;
        if (iy < 0 || iy >= in_h) {
            for (px = 0; px < wp; ++px) {
                row[px] = pad;
            }
            continue;
        }
        for (px = 0; px < x0; ++px) {
            row[px] = pad;
        }
        if (px < x1) {
            /* two values a step, stored as one word */
            const int8_t *src = in + (iy * in_w + (x0 - pad_w)) * chans;
            PE_ARM_UNROLL(4)
            for (; px + 2 <= x1; px += 2, src += 2 * chans) {
                pe_arm_st32(row + px, pe_arm_pack16(((int32_t)src[0] + offset) * scale,
                                                    ((int32_t)src[chans] + offset) * scale));
            }
            if (px < x1) {
                row[px++] = (int16_t)(((int32_t)*src + offset) * scale);
            }
        }
        for (; px < wp; ++px) {
            row[px] = pad;
        }
    }
    plane[hp * wp] = 0;
    plane[hp * wp + 1] = 0;
}

/* an output: pe_arm.h's fast form by mode, else the one-rounding form with zero point and
 * clamp */
PE_ARM_INLINE int8_t pe_arm_dw_out(int32_t acc, const int32_t *rq, int32_t mode, int32_t out_off,
                                   int32_t act_min, int32_t act_max)
{
    if (mode & PE_ARM_FAST) {
        return pe_arm_clamp8(pe_arm_requant_mode(acc, rq, mode), 0, -128, 127);
    }
    return pe_arm_clamp8(pe_arm_requant(acc, rq), out_off, act_min, act_max);
}

PE_ARM_KERNEL void pe_arm_dw_s8(const pe_context *ctx, const int8_t *input,
                                const int8_t *filter, const int32_t *bias, const int32_t *ksum,
                                const int32_t *rq,
                                int8_t *output, int32_t n, int32_t in_h, int32_t in_w,
                                int32_t chans, int32_t out_h, int32_t out_w, int32_t k_h,
                                int32_t k_w, int32_t sh, int32_t sw, int32_t pad_h,
                                int32_t pad_w, int32_t in_off, int32_t out_off, int32_t act_min,
                                int32_t act_max, int32_t mode)
{
    const int32_t hp = (out_h - 1) * sh + k_h;
    const int32_t wp = (out_w - 1) * sw + k_w;
    const int32_t pairs = (k_w + 1) / 2;
    int16_t *const plane = (int16_t *)ctx->buf;
    uint32_t wq[PE_ARM_DW_MAX_PAIRS];
    int32_t b, c, oy, ox, ky, j;
    for (b = 0; b < n; ++b) {
        const int8_t *in = input + b * in_h * in_w * chans;
        int8_t *out = output + b * out_h * out_w * chans;
        for (c = 0; c < chans; ++c) {
            /* the fast form doubles the weights when the offset is folded, else the plane */
            const int32_t scale = (mode & PE_ARM_FAST) ? 2 : 1;
            const int32_t wscale = ksum != 0 ? scale : 1;
            const int32_t bc = ((bias != 0 ? bias[c] : 0) + (ksum != 0 ? ksum[c] : 0)) * scale;
            const int32_t *const r = rq + c * PE_ARM_RQ_WORDS;
            if (ksum != 0) {
                pe_arm_plane(plane, in + c, in_h, in_w, chans, hp, wp, pad_h, pad_w, 0, 1,
                             (int16_t)(-in_off));
            } else {
                pe_arm_plane(plane, in + c, in_h, in_w, chans, hp, wp, pad_h, pad_w, in_off,
                             scale, 0);
            }
            for (ky = 0; ky < k_h; ++ky) {
                for (j = 0; j < pairs; ++j) {
                    const int32_t kx = 2 * j;
                    const int32_t w0 = filter[(ky * k_w + kx) * chans + c];
                    const int32_t w1 =
                        kx + 1 < k_w ? filter[(ky * k_w + kx + 1) * chans + c] : 0;
                    wq[ky * pairs + j] = pe_arm_pack16(w0 * wscale, w1 * wscale);
                }
            }
            for (oy = 0; oy < out_h; ++oy) {
                const int16_t *base = plane + oy * sh * wp;
                int8_t *o = out + oy * out_w * chans + c;
                ox = 0;
                if (k_w == 3 && sw == 1) {
                    for (; ox + 1 < out_w; ox += 2) {
                        int32_t s0 = bc, s1 = bc;
                        PE_ARM_UNROLL(7)
                        for (ky = 0; ky < k_h; ++ky) {
                            const int16_t *rr = base + ky * wp + ox;
                            const uint32_t x23 = pe_arm_ld32(rr + 2);
                            s0 = pe_arm_smlad(pe_arm_ld32(rr), wq[2 * ky], s0);
                            s1 = pe_arm_smlad(pe_arm_ld32(rr + 1), wq[2 * ky], s1);
                            s0 = pe_arm_smlabb(x23, wq[2 * ky + 1], s0);
                            s1 = pe_arm_smlatb(x23, wq[2 * ky + 1], s1);
                        }
                        o[ox * chans] = pe_arm_dw_out(s0, r, mode, out_off, act_min, act_max);
                        o[(ox + 1) * chans] = pe_arm_dw_out(s1, r, mode, out_off, act_min,
                                                            act_max);
                    }
                } else if (k_w == 3 && sw == 2) {
                    for (; ox + 1 < out_w; ox += 2) {
                        int32_t s0 = bc, s1 = bc;
                        PE_ARM_UNROLL(7)
                        for (ky = 0; ky < k_h; ++ky) {
                            const int16_t *rr = base + ky * wp + 2 * ox;
                            const uint32_t x23 = pe_arm_ld32(rr + 2);
                            s0 = pe_arm_smlad(pe_arm_ld32(rr), wq[2 * ky], s0);
                            s1 = pe_arm_smlad(x23, wq[2 * ky], s1);
                            s0 = pe_arm_smlabb(x23, wq[2 * ky + 1], s0);
                            s1 = pe_arm_smlabb(pe_arm_ld32(rr + 4), wq[2 * ky + 1], s1);
                        }
                        o[ox * chans] = pe_arm_dw_out(s0, r, mode, out_off, act_min, act_max);
                        o[(ox + 1) * chans] = pe_arm_dw_out(s1, r, mode, out_off, act_min,
                                                            act_max);
                    }
                } else if (sw <= 2) {
                    /* any window: two outputs per step over the same weight pairs */
                    for (; ox + 1 < out_w; ox += 2) {
                        int32_t s0 = bc, s1 = bc;
                        PE_ARM_UNROLL(7)
                        for (ky = 0; ky < k_h; ++ky) {
                            const int16_t *rr = base + ky * wp + ox * sw;
                            PE_ARM_UNROLL(4)
                            for (j = 0; j < pairs; ++j) {
                                const uint32_t w = wq[ky * pairs + j];
                                s0 = pe_arm_smlad(pe_arm_ld32(rr + 2 * j), w, s0);
                                s1 = pe_arm_smlad(pe_arm_ld32(rr + sw + 2 * j), w, s1);
                            }
                        }
                        o[ox * chans] = pe_arm_dw_out(s0, r, mode, out_off, act_min, act_max);
                        o[(ox + 1) * chans] = pe_arm_dw_out(s1, r, mode, out_off, act_min,
                                                            act_max);
                    }
                }
                for (; ox < out_w; ++ox) {
                    int32_t s = bc;
                    PE_ARM_UNROLL(7)
                    for (ky = 0; ky < k_h; ++ky) {
                        const int16_t *rr = base + ky * wp + ox * sw;
                        PE_ARM_UNROLL(4)
                        for (j = 0; j < pairs; ++j) {
                            s = pe_arm_smlad(pe_arm_ld32(rr + 2 * j), wq[ky * pairs + j], s);
                        }
                    }
                    o[ox * chans] = pe_arm_dw_out(s, r, mode, out_off, act_min, act_max);
                }
            }
        }
    }
}

#endif /* PE_ARM_DW_H */
