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

#if PE_ARM_DSP
/* one row of a 3x3 plane's taps against four outputs: rows ky of the three-row window
 * (the plane pointer p at that row), weights W (taps 0, 1) and the third tap in V's bottom
 * ("b") or top ("t") half; stride 1 reads x0..x5 (five loads, two of them unaligned), stride 2
 * x0..x9 (five loads, the last one's top unused: the plane's spare values) */
#define PE_ARM_DW3_S1(w, v, h)                        \
    "ldr r10, [r12, #0]\n\t"                               \
    "ldr r11, [r12, #2]\n\t"                               \
    "smlad r0, r10, " w ", r0\n\t"                         \
    "smlad r1, r11, " w ", r1\n\t"                         \
    "ldr r10, [r12, #4]\n\t"                               \
    "smlab" h " r0, r10, " v ", r0\n\t"                    \
    "smlat" h " r1, r10, " v ", r1\n\t"                    \
    "smlad r2, r10, " w ", r2\n\t"                         \
    "ldr r11, [r12, #6]\n\t"                               \
    "smlad r3, r11, " w ", r3\n\t"                         \
    "ldr r10, [r12, #8]\n\t"                               \
    "smlab" h " r2, r10, " v ", r2\n\t"                    \
    "smlat" h " r3, r10, " v ", r3\n\t"
#define PE_ARM_DW3_S2(w, v, h)                        \
    "ldr r10, [r12, #0]\n\t"                               \
    "smlad r0, r10, " w ", r0\n\t"                         \
    "ldr r10, [r12, #4]\n\t"                               \
    "smlab" h " r0, r10, " v ", r0\n\t"                    \
    "smlad r1, r10, " w ", r1\n\t"                         \
    "ldr r10, [r12, #8]\n\t"                               \
    "smlab" h " r1, r10, " v ", r1\n\t"                    \
    "smlad r2, r10, " w ", r2\n\t"                         \
    "ldr r10, [r12, #12]\n\t"                              \
    "smlab" h " r2, r10, " v ", r2\n\t"                    \
    "smlad r3, r10, " w ", r3\n\t"                         \
    "ldr r10, [r12, #16]\n\t"                              \
    "smlab" h " r3, r10, " v ", r3\n\t"
/* the requantization of r0..r3 and their SSAT to int8: the fast form (words 0..2: m, c, e),
 * or the one-rounding form (words 0..2: 2^(e-2) [+ zp * 2^(e-1)], m, e-1; pe_arm_requant3:
 * the low word 2^30 with acc's sign bit, the high word the constant plus acc's sign, SMLAL,
 * the high word shifted) over r4 r5, whose weights the loop reloads after the stores */
#define PE_ARM_DW_FAST_RQ                                                 \
    "smmlar r0, r0, r7, r10\n\t"                                           \
    "smmlar r1, r1, r7, r10\n\t"                                           \
    "smmlar r2, r2, r7, r10\n\t"                                           \
    "smmlar r3, r3, r7, r10\n\t"                                           \
    "asr r0, r0, r11\n\t"                                                  \
    "asr r1, r1, r11\n\t"                                                  \
    "asr r2, r2, r11\n\t"                                                  \
    "asr r3, r3, r11\n\t"
#define PE_ARM_DW_ONE(acc)                                                \
    "and r4, " acc ", #0x80000000\n\t"                                     \
    "orr r4, r4, #0x40000000\n\t"                                          \
    "add r5, r7, " acc ", asr #31\n\t"                                     \
    "smlal r4, r5, " acc ", r10\n\t"                                       \
    "asr " acc ", r5, r11\n\t"
#define PE_ARM_DW_GENERAL_RQ                                              \
    PE_ARM_DW_ONE("r0") PE_ARM_DW_ONE("r1") PE_ARM_DW_ONE("r2")         \
    PE_ARM_DW_ONE("r3")
#define PE_ARM_DW3_RELOAD "add r0, sp, #56\n\tldm r0, {r4, r5, r6, r8, r9}\n\t"
/* words 15..19 of the frame (the general form's weights) onto the stack: after the first 15
 * words are copied, r7 points at them */
#define PE_ARM_DW3_SAVE "ldm r7, {r0, r1, r2, r3, r10}\n\tadd r11, sp, #60\n\t" \
    "stm r11, {r0, r1, r2, r3, r10}\n\t"

/* the loop over the rows of one channel (a frame of 20 words on the stack, the first 15
 * copied, the rest by `save`): per four outputs the bias (words 3..6), the three rows (r7:
 * the plane's row stride in bytes), the requantization `rq` (words 0..2 in r7 r10 r11; r7
 * reloaded from word 7 after), the four stores `cs` bytes apart (word 8), `after` (the
 * weights back from words 14..18), until p reaches the row's end (word 9); then the plane and
 * the output move to the next row (words 10 and 11), the end by word 12, for word 13 rows */
#define PE_ARM_DW_LOOP(taps, step, rq, save, after, ...)                   \
    __asm__ volatile(                                                      \
        "sub sp, sp, #80\n\t"                                              \
        "ldm r7!, {r0, r1, r2, r3, r10}\n\t"                               \
        "stm sp, {r0, r1, r2, r3, r10}\n\t"                                \
        "ldm r7!, {r0, r1, r2, r3, r10}\n\t"                               \
        "add r11, sp, #20\n\t"                                             \
        "stm r11, {r0, r1, r2, r3, r10}\n\t"                               \
        "ldm r7!, {r0, r1, r2, r3, r10}\n\t"                               \
        "add r11, sp, #40\n\t"                                             \
        "stm r11, {r0, r1, r2, r3, r10}\n\t"                               \
        save                                                               \
        "ldr r7, [sp, #28]\n\t"                                            \
        "1:\n\t"                                                           \
        "ldrd r0, r1, [sp, #12]\n\t"                                       \
        "ldrd r2, r3, [sp, #20]\n\t"                                       \
        taps                                                               \
        "add r12, r12, #" step "\n\t"                                      \
        "ldm sp, {r7, r10, r11}\n\t"                                       \
        rq                                                                 \
        "ssat r0, #8, r0\n\t"                                              \
        "ssat r1, #8, r1\n\t"                                              \
        "ssat r2, #8, r2\n\t"                                              \
        "ssat r3, #8, r3\n\t"                                              \
        "ldrd r7, r10, [sp, #28]\n\t"                                      \
        "strb r0, [lr]\n\t"                                                \
        "strb r1, [lr, r10]\n\t"                                           \
        "add lr, lr, r10, lsl #1\n\t"                                      \
        "strb r2, [lr]\n\t"                                                \
        "strb r3, [lr, r10]\n\t"                                           \
        "add lr, lr, r10, lsl #1\n\t"                                      \
        after                                                              \
        "ldr r11, [sp, #36]\n\t"                                           \
        "cmp r12, r11\n\t"                                                 \
        "bne 1b\n\t"                                                       \
        "add r0, sp, #40\n\t"                                              \
        "ldm r0, {r1, r2, r3, r10}\n\t"                                    \
        "add r12, r12, r1\n\t"                                             \
        "add lr, lr, r2\n\t"                                               \
        "add r11, r11, r3\n\t"                                             \
        "str r11, [sp, #36]\n\t"                                           \
        "subs r10, r10, #1\n\t"                                            \
        "str r10, [sp, #52]\n\t"                                           \
        "bne 1b\n\t"                                                       \
        "add sp, sp, #80\n\t"                                              \
        : __VA_ARGS__)
/* the three rows of taps of a 3x3 window, the weights in registers (r4 r5 r6: taps 0 and 1 of
 * each row, r8: the third taps of rows 0 and 1, r9: of row 2) */
#define PE_ARM_DW3_TAPS(rowm)                                              \
    rowm("r4", "r8", "b")                                                  \
    "add r12, r12, r7\n\t"                                                 \
    rowm("r5", "r8", "t")                                                  \
    "add r12, r12, r7\n\t"                                                 \
    rowm("r6", "r9", "b")                                                  \
    "sub r12, r12, r7, lsl #1\n\t"
#define PE_ARM_DW3_LOOP(rowm, step, rq, save, after)                       \
    PE_ARM_DW_LOOP(PE_ARM_DW3_TAPS(rowm), step, rq, save, after,           \
                   "+r"(fr), "+r"(p), "+r"(out), "+r"(w0), "+r"(w1)        \
                   : "r"(w2), "r"(v01), "r"(v2)                            \
                   : "r0", "r1", "r2", "r3", "r10", "r11", "cc", "memory")

/* One row of taps of a 5x5 or 7x7 window against four outputs: the row's weight pairs loaded
 * from r9 (pe_arm_dw_s8's wq: (w0, w1), (w2, w3), ..., (w_last, 0)) into r4 r5 r6 [r8], then
 * the plane's values x0.. at r12 in loads of two (stride 1: aligned and one-off pairs, each
 * read once; stride 2: aligned pairs, each used by every output it reaches at once). */
/* stride 1: the first three pairs (x0..x5 and the one-off pairs between), common to both */
#define PE_ARM_DWK_S1_HEAD                                                 \
    "ldr r10, [r12, #0]\n\t"                                               \
    "ldr r11, [r12, #2]\n\t"                                               \
    "smlad r0, r10, r4, r0\n\t"                                            \
    "smlad r1, r11, r4, r1\n\t"                                            \
    "ldr r10, [r12, #4]\n\t"                                               \
    "ldr r11, [r12, #6]\n\t"                                               \
    "smlad r0, r10, r5, r0\n\t"                                            \
    "smlad r1, r11, r5, r1\n\t"                                            \
    "smlad r2, r10, r4, r2\n\t"                                            \
    "smlad r3, r11, r4, r3\n\t"                                            \
    "ldr r10, [r12, #8]\n\t"                                               \
    "ldr r11, [r12, #10]\n\t"
#define PE_ARM_DW5_S1                                                      \
    "ldm r9!, {r4, r5, r6}\n\t"                                            \
    PE_ARM_DWK_S1_HEAD                                                     \
    "smlabb r0, r10, r6, r0\n\t"                                           \
    "smlatb r1, r10, r6, r1\n\t"                                           \
    "smlad r2, r10, r5, r2\n\t"                                            \
    "smlad r3, r11, r5, r3\n\t"                                            \
    "ldr r10, [r12, #12]\n\t"                                              \
    "smlabb r2, r10, r6, r2\n\t"                                           \
    "smlatb r3, r10, r6, r3\n\t"
#define PE_ARM_DW7_S1                                                      \
    "ldm r9!, {r4, r5, r6, r8}\n\t"                                        \
    PE_ARM_DWK_S1_HEAD                                                     \
    "smlad r0, r10, r6, r0\n\t"                                            \
    "smlad r1, r11, r6, r1\n\t"                                            \
    "smlad r2, r10, r5, r2\n\t"                                            \
    "smlad r3, r11, r5, r3\n\t"                                            \
    "ldr r10, [r12, #12]\n\t"                                              \
    "ldr r11, [r12, #14]\n\t"                                              \
    "smlabb r0, r10, r8, r0\n\t"                                           \
    "smlatb r1, r10, r8, r1\n\t"                                           \
    "smlad r2, r10, r6, r2\n\t"                                            \
    "smlad r3, r11, r6, r3\n\t"                                            \
    "ldr r10, [r12, #16]\n\t"                                              \
    "smlabb r2, r10, r8, r2\n\t"                                           \
    "smlatb r3, r10, r8, r3\n\t"
/* stride 2: the first two pairs (x0..x3) and the load of the third, common to both */
#define PE_ARM_DWK_S2_HEAD                                                 \
    "ldr r10, [r12, #0]\n\t"                                               \
    "smlad r0, r10, r4, r0\n\t"                                            \
    "ldr r10, [r12, #4]\n\t"                                               \
    "smlad r0, r10, r5, r0\n\t"                                            \
    "smlad r1, r10, r4, r1\n\t"                                            \
    "ldr r10, [r12, #8]\n\t"
#define PE_ARM_DW5_S2                                                      \
    "ldm r9!, {r4, r5, r6}\n\t"                                            \
    PE_ARM_DWK_S2_HEAD                                                     \
    "smlabb r0, r10, r6, r0\n\t"                                           \
    "smlad r1, r10, r5, r1\n\t"                                            \
    "smlad r2, r10, r4, r2\n\t"                                            \
    "ldr r10, [r12, #12]\n\t"                                              \
    "smlabb r1, r10, r6, r1\n\t"                                           \
    "smlad r2, r10, r5, r2\n\t"                                            \
    "smlad r3, r10, r4, r3\n\t"                                            \
    "ldr r10, [r12, #16]\n\t"                                              \
    "smlabb r2, r10, r6, r2\n\t"                                           \
    "smlad r3, r10, r5, r3\n\t"                                            \
    "ldr r10, [r12, #20]\n\t"                                              \
    "smlabb r3, r10, r6, r3\n\t"
#define PE_ARM_DW7_S2                                                      \
    "ldm r9!, {r4, r5, r6, r8}\n\t"                                        \
    PE_ARM_DWK_S2_HEAD                                                     \
    "smlad r0, r10, r6, r0\n\t"                                            \
    "smlad r1, r10, r5, r1\n\t"                                            \
    "smlad r2, r10, r4, r2\n\t"                                            \
    "ldr r10, [r12, #12]\n\t"                                              \
    "smlabb r0, r10, r8, r0\n\t"                                           \
    "smlad r1, r10, r6, r1\n\t"                                            \
    "smlad r2, r10, r5, r2\n\t"                                            \
    "smlad r3, r10, r4, r3\n\t"                                            \
    "ldr r10, [r12, #16]\n\t"                                              \
    "smlabb r1, r10, r8, r1\n\t"                                           \
    "smlad r2, r10, r6, r2\n\t"                                            \
    "smlad r3, r10, r5, r3\n\t"                                            \
    "ldr r10, [r12, #20]\n\t"                                              \
    "smlabb r2, r10, r8, r2\n\t"                                           \
    "smlad r3, r10, r6, r3\n\t"                                            \
    "ldr r10, [r12, #24]\n\t"                                              \
    "smlabb r3, r10, r8, r3\n\t"
/* the rows of a k x k window: the weights from frame word 14, the plane pointer kept in word
 * 15 and restored after the last row */
#define PE_ARM_DWK_NEXT "add r12, r12, r7\n\t"
#define PE_ARM_DW5_TAPS(row)                                               \
    "ldr r9, [sp, #56]\n\tstr r12, [sp, #60]\n\t"                          \
    row PE_ARM_DWK_NEXT row PE_ARM_DWK_NEXT row PE_ARM_DWK_NEXT row        \
    PE_ARM_DWK_NEXT row "ldr r12, [sp, #60]\n\t"
#define PE_ARM_DW7_TAPS(row)                                               \
    "ldr r9, [sp, #56]\n\tstr r12, [sp, #60]\n\t"                          \
    row PE_ARM_DWK_NEXT row PE_ARM_DWK_NEXT row PE_ARM_DWK_NEXT row        \
    PE_ARM_DWK_NEXT row PE_ARM_DWK_NEXT row PE_ARM_DWK_NEXT row            \
    "ldr r12, [sp, #60]\n\t"
#define PE_ARM_DWK_LOOP(taps, step, rq)                                    \
    PE_ARM_DW_LOOP(taps, step, rq, "", "",                                 \
                   "+r"(fr), "+r"(p), "+r"(out), "+r"(w0), "+r"(w1),       \
                   "+r"(w2), "+r"(v01), "+r"(v2)                           \
                   :                                                       \
                   : "r0", "r1", "r2", "r3", "r10", "r11", "cc", "memory")

/* outputs [0, 4 * groups) of every output row of a k x k (3, 5 or 7) depthwise channel whose
 * outputs are SSAT to int8 (the whole range as clamp, no zero point left to add): `general`
 * the one-rounding form, else the fast one (pe_arm.h); plane the channel's plane (wp values a
 * row), wq its weight pairs, bc its bias, r its three words, o its first output (cs bytes
 * apart, out_w a row) */
static void pe_arm_dw_rows(const int16_t *plane, int32_t wp, int32_t k, int32_t sh, int32_t sw,
                           const uint32_t *wq, int32_t bc, const int32_t *r, int general,
                           int8_t *o, int32_t cs, int32_t out_h, int32_t out_w)
{
    const int32_t groups = out_w >> 2;
    const int32_t step = (sw == 1 ? 8 : 16) * groups;      /* bytes of plane a row reads */
    uint32_t frame[20];
    register const uint32_t *fr __asm__("r7") = frame;
    register const int16_t *p __asm__("r12") = plane;
    register int8_t *out __asm__("lr") = o;
    register uint32_t w0 __asm__("r4") = wq[0];
    register uint32_t w1 __asm__("r5") = wq[2];
    register uint32_t w2 __asm__("r6") = wq[4];
    register uint32_t v01 __asm__("r8") = (wq[1] & 0xffffu) | (wq[3] << 16);
    register uint32_t v2 __asm__("r9") = wq[5];
    if (groups <= 0 || out_h <= 0) {
        return;
    }
    frame[0] = (uint32_t)r[0];
    frame[1] = (uint32_t)r[1];
    frame[2] = (uint32_t)r[2];
    frame[3] = frame[4] = frame[5] = frame[6] = (uint32_t)bc;
    frame[7] = (uint32_t)(2 * wp);
    frame[8] = (uint32_t)cs;
    frame[9] = (uint32_t)(uintptr_t)plane + (uint32_t)step;
    frame[10] = (uint32_t)(2 * wp * sh - step);
    frame[11] = (uint32_t)((out_w - 4 * groups) * cs);
    frame[12] = (uint32_t)(2 * wp * sh);
    frame[13] = (uint32_t)out_h;
    if (k != 3) {                   /* 5x5, 7x7: the weights read a row at a time */
        frame[14] = (uint32_t)(uintptr_t)wq;
        if (k == 5 && sw == 1) {
            if (general) {
                PE_ARM_DWK_LOOP(PE_ARM_DW5_TAPS(PE_ARM_DW5_S1), "8", PE_ARM_DW_GENERAL_RQ);
            } else {
                PE_ARM_DWK_LOOP(PE_ARM_DW5_TAPS(PE_ARM_DW5_S1), "8", PE_ARM_DW_FAST_RQ);
            }
        } else if (k == 5) {
            if (general) {
                PE_ARM_DWK_LOOP(PE_ARM_DW5_TAPS(PE_ARM_DW5_S2), "16", PE_ARM_DW_GENERAL_RQ);
            } else {
                PE_ARM_DWK_LOOP(PE_ARM_DW5_TAPS(PE_ARM_DW5_S2), "16", PE_ARM_DW_FAST_RQ);
            }
        } else if (sw == 1) {
            if (general) {
                PE_ARM_DWK_LOOP(PE_ARM_DW7_TAPS(PE_ARM_DW7_S1), "8", PE_ARM_DW_GENERAL_RQ);
            } else {
                PE_ARM_DWK_LOOP(PE_ARM_DW7_TAPS(PE_ARM_DW7_S1), "8", PE_ARM_DW_FAST_RQ);
            }
        } else if (general) {
            PE_ARM_DWK_LOOP(PE_ARM_DW7_TAPS(PE_ARM_DW7_S2), "16", PE_ARM_DW_GENERAL_RQ);
        } else {
            PE_ARM_DWK_LOOP(PE_ARM_DW7_TAPS(PE_ARM_DW7_S2), "16", PE_ARM_DW_FAST_RQ);
        }
    } else if (general) {
        frame[14] = w0;
        frame[15] = w1;
        frame[16] = w2;
        frame[17] = v01;
        frame[18] = v2;
        frame[19] = 0;
        if (sw == 1) {
            PE_ARM_DW3_LOOP(PE_ARM_DW3_S1, "8", PE_ARM_DW_GENERAL_RQ, PE_ARM_DW3_SAVE,
                            PE_ARM_DW3_RELOAD);
        } else {
            PE_ARM_DW3_LOOP(PE_ARM_DW3_S2, "16", PE_ARM_DW_GENERAL_RQ, PE_ARM_DW3_SAVE,
                            PE_ARM_DW3_RELOAD);
        }
    } else if (sw == 1) {
        PE_ARM_DW3_LOOP(PE_ARM_DW3_S1, "8", PE_ARM_DW_FAST_RQ, "", "");
    } else {
        PE_ARM_DW3_LOOP(PE_ARM_DW3_S2, "16", PE_ARM_DW_FAST_RQ, "", "");
    }
    (void)fr;
    (void)p;
    (void)out;
    (void)w0;
    (void)w1;
}
#endif

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
    int32_t b, c, oy, ox, ox0, ky, j;
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
            ox0 = 0;
#if PE_ARM_DSP
            if (k_h == k_w && (k_w == 3 || k_w == 5 || k_w == 7) && sw <= 2 &&
                (mode == PE_ARM_FAST ||
                 (mode == 0 && out_off == 0 && act_min <= -128 && act_max >= 127))) {
                /* four outputs a step in assembly, the rest of each row below */
                pe_arm_dw_rows(plane, wp, k_w, sh, sw, wq, bc, r, mode == 0, out + c, chans,
                               out_h, out_w);
                ox0 = out_w & ~3;
            }
#endif
            for (oy = 0; oy < out_h; ++oy) {
                const int16_t *base = plane + oy * sh * wp;
                int8_t *o = out + oy * out_w * chans + c;
                ox = ox0;
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
