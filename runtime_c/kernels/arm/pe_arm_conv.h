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
PE_ARM_INLINE void pe_arm_column(int16_t *cols, int8_t *stage, int32_t j, const int8_t *in,
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
        PE_ARM_UNROLL(7)
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
        {
            int16_t *d = cols + pe_arm_at(0, j);       /* group i / 4 at d + 2 * i */
            if (in_off == 0) {                          /* (a literal in specialised code) */
                PE_ARM_UNROLL(8)
                for (i = 0; i < k; i += 4, d += 8) {
                    const uint32_t w = pe_arm_ld32(stage + i);
                    pe_arm_st32(d, pe_arm_sxtb16(w));
                    pe_arm_st32(d + 2, pe_arm_sxtb16_ror8(w));
                }
                return;
            }
            PE_ARM_UNROLL(8)
            for (i = 0; i < k; i += 4, d += 8) {
                pe_arm_expand4(d, stage + i, off2);
            }
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
PE_ARM_INLINE void pe_arm_conv_pixels(const int16_t *cols, int32_t two, const int8_t *filter,
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

/* -- frozen weights as an int16 stream ------------------------------------------------------------
 * A layer whose weights do not change at run time, with an even number of output channels and
 * the whole int8 range as its clamp, reads one int32 stream that codegen/backends/arm.py
 * builds at compile time, per pair of output channels:
 *   [bias of the pair]       two int32, doubled, then the same two again (fast form only:
 *                            one LDM loads both pixels' accumulators; otherwise `bias`)
 *   weights                  per group of four values and per channel of the pair, the values
 *                            as int16 pairs in pe_arm.h's order (w0, w2), (w1, w3) (doubled in
 *                            the fast form); groups padded with zeros to an even count
 *   requantization           three int32 per channel of the pair
 * No SXTB16 is left in the inner loop: per group, two pixels times two channels are 8 SMLADs
 * and 4 LDRDs.
 *
 * Requantization: pe_arm.h's forms by mode (PE_ARM_FAST, PE_ARM_SIGNED); in the fast form the
 * bias and the weights of the stream are doubled, in the general one the bias is read from
 * `bias` and the words are {2^(e-2) + zp * 2^(e-1), m, e-1}.
 */
#if PE_ARM_DSP
/* The assembly of pe_arm_w16_pairs and pe_arm_rows_pairs: per pair of channels, the bias, the
 * dot products over the groups (two per iteration), the requantization, the four stores. The
 * dot products need every register but sp and pc, so the loop state lives in a frame on the
 * stack: [sp] cols, [sp+4] end of the columns, [sp+8] pixel a's next output, [sp+12] pixel b's,
 * [sp+16] end of the weights, [sp+20] the bias of the general form, (rows form) [sp+24] the
 * requantization words, [sp+28] k - 4. The registers are fixed (PE_ARM_PAIR_REGS) so that LDM
 * can load a group's four column words, the six requantization words and the fast form's four
 * bias words (the pair's two, twice) in one instruction each. */
#define PE_ARM_PAIR_REGS                                                              \
    register int32_t a0 __asm__("r0");                                                \
    register int32_t a1 __asm__("r1");                                                \
    register int32_t b0 __asm__("r2");                                                \
    register int32_t b1 __asm__("r3");                                                \
    register uint32_t x0 __asm__("r4");                                               \
    register uint32_t x1 __asm__("r5");                                               \
    register uint32_t x2 __asm__("r6");                                               \
    register uint32_t x3 __asm__("r8");                                               \
    register uint32_t t0 __asm__("r9");                                               \
    register uint32_t t1 __asm__("r10");                                              \
    register uintptr_t xp __asm__("r11");                                             \
    register uintptr_t xe __asm__("r12");                                             \
    register uintptr_t st __asm__("r7") = (uintptr_t)frame;                           \
    register uintptr_t wp __asm__("lr") = (uintptr_t)w
#define PE_ARM_PAIR_OPERANDS                                                          \
    : [wp] "+r"(wp), [st] "+r"(st), [a0] "=&r"(a0), [a1] "=&r"(a1), [b0] "=&r"(b0),   \
      [b1] "=&r"(b1), [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3),  \
      [t0] "=&r"(t0), [t1] "=&r"(t1), [xp] "=&r"(xp), [xe] "=&r"(xe)                  \
    :                                                                                 \
    : "cc", "memory"
#define PE_ARM_PAIR_UNUSED                                                            \
    (void)a0; (void)a1; (void)b0; (void)b1; (void)x0; (void)x1; (void)x2; (void)x3;   \
    (void)t0; (void)t1; (void)xp; (void)xe; (void)st; (void)wp
/* the frame's first six words from st */
#define PE_ARM_PAIR_FRAME                                \
    "ldm %[st], {r4, r5, r6, r8, r9, r10}\n\t"           \
    "stm sp, {r4, r5, r6, r8, r9, r10}\n\t"
#define PE_ARM_COLS "ldm %[xp]!, {r4, r5, r6, r8}\n\t"
#define PE_ARM_RQ_FROM(p) "ldm %[" p "]!, {r4, r5, r6, r8, r9, r10}\n\t"
#define PE_ARM_W16_GROUP                                 \
    PE_ARM_COLS                                          \
    "ldrd %[t0], %[t1], [%[wp]], #8\n\t"                 \
    "smlad %[a0], %[x0], %[t0], %[a0]\n\t"               \
    "smlad %[a0], %[x1], %[t1], %[a0]\n\t"               \
    "smlad %[b0], %[x2], %[t0], %[b0]\n\t"               \
    "smlad %[b0], %[x3], %[t1], %[b0]\n\t"               \
    "ldrd %[t0], %[t1], [%[wp]], #8\n\t"                 \
    "smlad %[a1], %[x0], %[t0], %[a1]\n\t"               \
    "smlad %[a1], %[x1], %[t1], %[a1]\n\t"               \
    "smlad %[b1], %[x2], %[t0], %[b1]\n\t"               \
    "smlad %[b1], %[x3], %[t1], %[b1]\n\t"
#define PE_ARM_W16_DOTS_OF(groups)                       \
    "ldrd %[xp], %[xe], [sp]\n\t"                        \
    "3:\n\t" groups                                      \
    "cmp %[xp], %[xe]\n\t"                               \
    "bne 3b\n\t"                                         \
    PE_ARM_RQ_FROM("wp")
/* two groups an iteration, or four (a multiple of four groups) */
#define PE_ARM_W16_DOTS PE_ARM_W16_DOTS_OF(PE_ARM_W16_GROUP PE_ARM_W16_GROUP)
#define PE_ARM_W16_DOTS4                                 \
    PE_ARM_W16_DOTS_OF(PE_ARM_W16_GROUP PE_ARM_W16_GROUP PE_ARM_W16_GROUP PE_ARM_W16_GROUP)
/* requantization words: channel 0 in x0 x1 x2, channel 1 in x3 t0 t1 */
#define PE_ARM_W16_STORE                                 \
    "ssat %[a0], #8, %[a0]\n\t"                          \
    "ssat %[b0], #8, %[b0]\n\t"                          \
    "ssat %[a1], #8, %[a1]\n\t"                          \
    "ssat %[b1], #8, %[b1]\n\t"                          \
    "ldrd %[xp], %[xe], [sp, #8]\n\t"                    \
    "strb %[a0], [%[xp]], #1\n\t"                        \
    "strb %[a1], [%[xp]], #1\n\t"                        \
    "strb %[b0], [%[xe]], #1\n\t"                        \
    "strb %[b1], [%[xe]], #1\n\t"                        \
    "strd %[xp], %[xe], [sp, #8]\n\t"                    \
    "ldr %[xe], [sp, #16]\n\t"                           \
    "cmp %[wp], %[xe]\n\t"                               \
    "bne 2b\n\t"
/* fast form: acc = SMMLAR(acc, m, c [- 1]) >> e */
#define PE_ARM_FAST_RELU(acc, m, c, e)               \
    "smmlar %[" acc "], %[" acc "], %[" m "], %[" c "]\n\t" \
    "asr %[" acc "], %[" acc "], %[" e "]\n\t"
#define PE_ARM_FAST_SIGNED(acc, m, c, e)             \
    "add %[xe], %[" c "], %[" acc "], asr #31\n\t"       \
    "smmlar %[" acc "], %[" acc "], %[" m "], %[xe]\n\t" \
    "asr %[" acc "], %[" acc "], %[" e "]\n\t"
/* general form: hi:lo = khi : 2^30 (minus 2^31 for a negative acc), += acc * m, acc = hi >> e1 */
#define PE_ARM_W16_SMLAL_RELU(acc, khi, m, e)            \
    "mov %[xp], #0x40000000\n\t"                         \
    "mov %[xe], %[" khi "]\n\t"                          \
    "smlal %[xp], %[xe], %[" acc "], %[" m "]\n\t"       \
    "asr %[" acc "], %[xe], %[" e "]\n\t"
#define PE_ARM_W16_SMLAL_SIGNED(acc, khi, m, e)          \
    "and %[xp], %[" acc "], #0x80000000\n\t"             \
    "orr %[xp], %[xp], #0x40000000\n\t"                  \
    "add %[xe], %[" khi "], %[" acc "], asr #31\n\t"     \
    "smlal %[xp], %[xe], %[" acc "], %[" m "]\n\t"       \
    "asr %[" acc "], %[xe], %[" e "]\n\t"
/* the fast form's bias: the pair's two doubled words, twice (pixels a and b) */
#define PE_ARM_FAST_BIAS "2:\n\tldm %[wp]!, {r0, r1, r2, r3}\n\t"
#define PE_ARM_W16_PTR_BIAS                              \
    "2:\n\tldr %[xe], [sp, #20]\n\t"                     \
    "ldrd %[a0], %[a1], [%[xe]], #8\n\t"                 \
    "str %[xe], [sp, #20]\n\t"                           \
    "mov %[b0], %[a0]\n\t"                               \
    "mov %[b1], %[a1]\n\t"
#define PE_ARM_W16_ASM_OF(bias, q, dots)                                              \
    __asm__ volatile(                                                                 \
        "sub sp, sp, #24\n\t"                                                         \
        PE_ARM_PAIR_FRAME                                                             \
        bias dots                                                                     \
        q("a0", "x0", "x1", "x2") q("b0", "x0", "x1", "x2")                           \
        q("a1", "x3", "t0", "t1") q("b1", "x3", "t0", "t1")                           \
        PE_ARM_W16_STORE                                                              \
        "add sp, sp, #24\n\t"                                                         \
        PE_ARM_PAIR_OPERANDS)
/* the loop of `groups` groups (a local variable of the caller; a constant in specialised code,
 * where one of the two assemblies remains) */
#define PE_ARM_W16_ASM(bias, q)                                                       \
    do {                                                                              \
        if ((groups & 3) == 0) {                                                      \
            PE_ARM_W16_ASM_OF(bias, q, PE_ARM_W16_DOTS4);                             \
        } else {                                                                      \
            PE_ARM_W16_ASM_OF(bias, q, PE_ARM_W16_DOTS);                              \
        }                                                                             \
    } while (0)

/* the rows form (pe_arm_rows_pairs): weights int8 as they are, row 1 of a pair k bytes after
 * row 0 (st holds k - 4), expanded with SXTB16 in the loop */
/* one int8 weight word w of a channel (its four values expanded with SXTB16 into lo and w)
 * against both pixels' column words: accumulators a (pixel a) and b (pixel b) */
#define PE_ARM_SX_DOTS(w, lo, a, b)                           \
    "sxtb16 %[" lo "], %[" w "]\n\t"                          \
    "sxtb16 %[" w "], %[" w "], ror #8\n\t"                   \
    "smlad %[" a "], %[x0], %[" lo "], %[" a "]\n\t"          \
    "smlad %[" a "], %[x1], %[" w "], %[" a "]\n\t"           \
    "smlad %[" b "], %[x2], %[" lo "], %[" b "]\n\t"          \
    "smlad %[" b "], %[x3], %[" w "], %[" b "]\n\t"
#define PE_ARM_ROWS_GROUP                                \
    PE_ARM_COLS                                          \
    "ldr %[t0], [%[wp]], #4\n\t"                         \
    PE_ARM_SX_DOTS("t0", "t1", "a0", "b0")               \
    "ldr %[t0], [%[wp], %[st]]\n\t"                      \
    PE_ARM_SX_DOTS("t0", "t1", "a1", "b1")
#define PE_ARM_ROWS_ASM(q)                                                            \
    __asm__ volatile(                                                                 \
        "sub sp, sp, #32\n\t"                                                         \
        PE_ARM_PAIR_FRAME                                                             \
        "ldrd %[x0], %[x1], [%[st], #24]\n\t"                                         \
        "strd %[x0], %[x1], [sp, #24]\n\t"                                            \
        "mov %[st], %[x1]\n\t"                                                        \
        PE_ARM_W16_PTR_BIAS                                                           \
        "ldrd %[xp], %[xe], [sp]\n\t"                                                 \
        "3:\n\t" PE_ARM_ROWS_GROUP PE_ARM_ROWS_GROUP                                  \
        "cmp %[xp], %[xe]\n\t"                                                        \
        "bne 3b\n\t"                                                                  \
        "add %[wp], %[wp], %[st]\n\t"                                                 \
        "add %[wp], %[wp], #4\n\t"                                                    \
        "ldr %[xe], [sp, #24]\n\t"                                                    \
        PE_ARM_RQ_FROM("xe")                                                          \
        "str %[xe], [sp, #24]\n\t"                                                    \
        q("a0", "x0", "x1", "x2") q("b0", "x0", "x1", "x2")                           \
        q("a1", "x3", "t0", "t1") q("b1", "x3", "t0", "t1")                           \
        PE_ARM_W16_STORE                                                              \
        "add sp, sp, #32\n\t"                                                         \
        PE_ARM_PAIR_OPERANDS)
/* the raw form (pe_arm_raw_pairs): the stream has four zero words (the accumulators' start)
 * and per pair of channels and group both rows' four int16 weights in SXTB16's pair order (16
 * bytes), read as they are (the forward's W16 group); no requantization: the four int32 sums
 * are stored as they are */
#define PE_ARM_RAW_LOOP(groups)                                                       \
    __asm__ volatile(                                                                 \
        "sub sp, sp, #24\n\t"                                                         \
        PE_ARM_PAIR_FRAME                                                             \
        PE_ARM_FAST_BIAS                                                              \
        "ldrd %[xp], %[xe], [sp]\n\t"                                                 \
        "3:\n\t" groups                                                               \
        "cmp %[xp], %[xe]\n\t"                                                        \
        "bne 3b\n\t"                                                                  \
        "ldrd %[xp], %[xe], [sp, #8]\n\t"                                             \
        "stm %[xp]!, {r0, r1}\n\t"                                                    \
        "stm %[xe]!, {r2, r3}\n\t"                                                    \
        "strd %[xp], %[xe], [sp, #8]\n\t"                                             \
        "ldr %[xe], [sp, #16]\n\t"                                                    \
        "cmp %[wp], %[xe]\n\t"                                                        \
        "bne 2b\n\t"                                                                  \
        "add sp, sp, #24\n\t"                                                         \
        PE_ARM_PAIR_OPERANDS)
/* two groups an iteration, or four (a multiple of four groups) */
#define PE_ARM_RAW_ASM PE_ARM_RAW_LOOP(PE_ARM_W16_GROUP PE_ARM_W16_GROUP)
#define PE_ARM_RAW_ASM4                                                               \
    PE_ARM_RAW_LOOP(PE_ARM_W16_GROUP PE_ARM_W16_GROUP PE_ARM_W16_GROUP PE_ARM_W16_GROUP)
#endif

#if PE_ARM_DSP
/* the pair loops' frame (see PE_ARM_PAIR_REGS): cols, end of cols, oa, ob, end of the weights,
 * bias */
static inline void pe_arm_pair_frame(uintptr_t *frame, const int16_t *cols, int32_t groups,
                                     const void *oa, const void *ob, const void *end,
                                     const int32_t *bias)
{
    frame[0] = (uintptr_t)cols;
    frame[1] = (uintptr_t)(cols + 8 * groups);
    frame[2] = (uintptr_t)oa;
    frame[3] = (uintptr_t)ob;
    frame[4] = (uintptr_t)end;
    frame[5] = (uintptr_t)bias;
}
#endif

/* The outputs of one pair of pixels (columns 0 and 1 of `cols`, `groups` groups of four values,
 * an even count) for every pair of channels: s the stream, bias (general form) the layer's
 * bias, oa and ob the two pixels' outputs, `pairs` pairs of channels. */
PE_ARM_INLINE void pe_arm_w16_pairs(const int16_t *cols, int32_t groups, const int32_t *s,
                                    const int32_t *bias, int32_t mode, int8_t *oa, int8_t *ob,
                                    int32_t pairs)
{
    const int32_t per_pair = ((mode & PE_ARM_FAST) ? 4 : 0) + 4 * groups + 2 * PE_ARM_RQ_WORDS;
#if PE_ARM_DSP
    uintptr_t frame[6];
    const int32_t *const w = s;
    pe_arm_pair_frame(frame, cols, groups, oa, ob, s + pairs * per_pair, bias);
    if (pairs > 0) {
        PE_ARM_PAIR_REGS;
        if (mode == PE_ARM_FAST) {
            PE_ARM_W16_ASM(PE_ARM_FAST_BIAS, PE_ARM_FAST_RELU);
        } else if (mode == (PE_ARM_FAST | PE_ARM_SIGNED)) {
            PE_ARM_W16_ASM(PE_ARM_FAST_BIAS, PE_ARM_FAST_SIGNED);
        } else if (mode == PE_ARM_SIGNED) {
            PE_ARM_W16_ASM(PE_ARM_W16_PTR_BIAS, PE_ARM_W16_SMLAL_SIGNED);
        } else {
            PE_ARM_W16_ASM(PE_ARM_W16_PTR_BIAS, PE_ARM_W16_SMLAL_RELU);
        }
        PE_ARM_PAIR_UNUSED;
    }
#else
    int32_t p, g, j;
    for (p = 0; p < pairs; ++p, s += per_pair) {
        int32_t acc[4];                                   /* a0, a1, b0, b1 */
        const int32_t *w = s;
        const int32_t *rq;
        if (mode & PE_ARM_FAST) {
            acc[0] = acc[2] = w[0];                       /* w[2], w[3]: the same */
            acc[1] = acc[3] = w[1];
            w += 4;
        } else {
            acc[0] = acc[2] = bias[2 * p];
            acc[1] = acc[3] = bias[2 * p + 1];
        }
        for (g = 0; g < groups; ++g, w += 4) {
            const int16_t *x = cols + 8 * g;
            const uint32_t xa0 = pe_arm_ld32(x), xa1 = pe_arm_ld32(x + 2);
            const uint32_t xb0 = pe_arm_ld32(x + 4), xb1 = pe_arm_ld32(x + 6);
            acc[0] = pe_arm_smlad(xa1, (uint32_t)w[1], pe_arm_smlad(xa0, (uint32_t)w[0], acc[0]));
            acc[2] = pe_arm_smlad(xb1, (uint32_t)w[1], pe_arm_smlad(xb0, (uint32_t)w[0], acc[2]));
            acc[1] = pe_arm_smlad(xa1, (uint32_t)w[3], pe_arm_smlad(xa0, (uint32_t)w[2], acc[1]));
            acc[3] = pe_arm_smlad(xb1, (uint32_t)w[3], pe_arm_smlad(xb0, (uint32_t)w[2], acc[3]));
        }
        rq = w;
        for (j = 0; j < 2; ++j) {
            oa[2 * p + j] = pe_arm_clamp8(pe_arm_requant_mode(acc[j], rq + 3 * j, mode), 0, -128, 127);
            ob[2 * p + j] = pe_arm_clamp8(pe_arm_requant_mode(acc[2 + j], rq + 3 * j, mode), 0, -128,
                                          127);
        }
    }
#endif
}

/* The int32 sums of the pair loop over a raw stream (four zero words, then per pair of
 * channels and group of four values row 0's four int16 weights in SXTB16's pair order (w0,
 * w2, w1, w3), then row 1's (codegen/backends/arm.py raw_stream); groups padded with zeros
 * to an even count; no requantization), stored as they are: oa[c], ob[c] for the pixels of
 * columns 0 and 1 (the int8 backward's input gradients rescale them). */
PE_ARM_INLINE void pe_arm_raw_pairs(const int16_t *cols, int32_t groups, const int32_t *s,
                                    int32_t *oa, int32_t *ob, int32_t pairs)
{
    const int32_t per_pair = 4 + 4 * groups;
#if PE_ARM_DSP
    uintptr_t frame[6];
    const int32_t *const w = s;
    pe_arm_pair_frame(frame, cols, groups, oa, ob, s + pairs * per_pair, 0);
    if (pairs > 0) {
        PE_ARM_PAIR_REGS;
        if ((groups & 3) == 0) {
            PE_ARM_RAW_ASM4;
        } else {
            PE_ARM_RAW_ASM;
        }
        PE_ARM_PAIR_UNUSED;
    }
#else
    int32_t p, g, j;
    for (p = 0; p < pairs; ++p, s += per_pair) {
        const int32_t *w = s + 4;
        int32_t acc[4];                                   /* a0, a1, b0, b1 */
        acc[0] = s[0];
        acc[1] = s[1];
        acc[2] = s[2];
        acc[3] = s[3];
        for (g = 0; g < groups; ++g, w += 4) {
            const int16_t *x = cols + 8 * g;
            const uint32_t xa0 = pe_arm_ld32(x), xa1 = pe_arm_ld32(x + 2);
            const uint32_t xb0 = pe_arm_ld32(x + 4), xb1 = pe_arm_ld32(x + 6);
            for (j = 0; j < 2; ++j) {
                const uint32_t lo = (uint32_t)w[2 * j], hi = (uint32_t)w[2 * j + 1];
                acc[j] = pe_arm_smlad(xa1, hi, pe_arm_smlad(xa0, lo, acc[j]));
                acc[2 + j] = pe_arm_smlad(xb1, hi, pe_arm_smlad(xb0, lo, acc[2 + j]));
            }
        }
        oa[2 * p] = acc[0];
        oa[2 * p + 1] = acc[1];
        ob[2 * p] = acc[2];
        ob[2 * p + 1] = acc[3];
    }
#endif
}

/* The rows form of pe_arm_w16_pairs, for weights that training changes (read as they are,
 * int8 rows of k values, k a multiple of eight): the general requantization over `bias` and
 * `rq` ({2^(e-2) + zp * 2^(e-1), m, e-1} per channel), mode 0 or PE_ARM_SIGNED. */
PE_ARM_INLINE void pe_arm_rows_pairs(const int16_t *cols, int32_t groups, const int8_t *rows,
                                     const int32_t *bias, const int32_t *rq, int32_t mode,
                                     int8_t *oa, int8_t *ob, int32_t pairs)
{
    const int32_t k = 4 * groups;
#if PE_ARM_DSP
    /* the frame, then rq and k - 4 */
    uintptr_t frame[8];
    const int8_t *const w = rows;
    pe_arm_pair_frame(frame, cols, groups, oa, ob, rows + 2 * pairs * k, bias);
    frame[6] = (uintptr_t)rq;
    frame[7] = (uintptr_t)(k - 4);
    if (pairs > 0) {
        PE_ARM_PAIR_REGS;
        if (mode & PE_ARM_SIGNED) {
            PE_ARM_ROWS_ASM(PE_ARM_W16_SMLAL_SIGNED);
        } else {
            PE_ARM_ROWS_ASM(PE_ARM_W16_SMLAL_RELU);
        }
        PE_ARM_PAIR_UNUSED;
    }
#else
    int32_t p, g, j;
    for (p = 0; p < pairs; ++p) {
        int32_t acc[4];                                   /* a0, a1, b0, b1 */
        const int8_t *w = rows + 2 * p * k;
        acc[0] = acc[2] = bias[2 * p];
        acc[1] = acc[3] = bias[2 * p + 1];
        for (g = 0; g < groups; ++g) {
            const int16_t *x = cols + 8 * g;
            const uint32_t xa0 = pe_arm_ld32(x), xa1 = pe_arm_ld32(x + 2);
            const uint32_t xb0 = pe_arm_ld32(x + 4), xb1 = pe_arm_ld32(x + 6);
            for (j = 0; j < 2; ++j) {
                const uint32_t u = pe_arm_ld32(w + j * k + 4 * g);
                const uint32_t lo = pe_arm_sxtb16(u), hi = pe_arm_sxtb16_ror8(u);
                acc[j] = pe_arm_smlad(xa1, hi, pe_arm_smlad(xa0, lo, acc[j]));
                acc[2 + j] = pe_arm_smlad(xb1, hi, pe_arm_smlad(xb0, lo, acc[2 + j]));
            }
        }
        for (j = 0; j < 2; ++j) {
            const int32_t *r = rq + (2 * p + j) * PE_ARM_RQ_WORDS;
            oa[2 * p + j] = pe_arm_clamp8(pe_arm_requant_mode(acc[j], r, mode), 0, -128, 127);
            ob[2 * p + j] = pe_arm_clamp8(pe_arm_requant_mode(acc[2 + j], r, mode), 0, -128,
                                          127);
        }
    }
#endif
}

PE_ARM_INLINE void pe_arm_pairs(const int16_t *cols, int32_t groups, const int32_t *stream,
                                const int8_t *rows, const int32_t *bias, const int32_t *rq,
                                int32_t mode, int8_t *oa, int8_t *ob, int32_t pairs)
{
    if (rows != 0) {
        pe_arm_rows_pairs(cols, groups, rows, bias, rq, mode, oa, ob, pairs);
    } else {
        pe_arm_w16_pairs(cols, groups, stream, bias, mode, oa, ob, pairs);
    }
}

/* -- Helium: the stream in natural order ----------------------------------------------------
 * Mode PE_ARM_NATURAL (cores with MVE): per pair of output channels the stream holds [the
 * fast form's four bias words], then per block of eight values channel 0's eight int16 and
 * channel 1's, then the six requantization words; the two columns are plain int16 rows of k
 * rounded up to eight values (x + offset, zeros after k). Per block: four VLDRH and four
 * VMLADAVA, 32 multiply-accumulates. */

/* column (natural order) of output pixel (oy, ox): the window's bytes gathered into `stage`
 * (padding as the input zero point; pointwise windows read the input directly), then each
 * byte plus the offset as int16; k8 - k zeros after them */
PE_ARM_INLINE void pe_arm_column_natural(int16_t *col, int8_t *stage, const int8_t *in,
                                         int32_t oy, int32_t ox, int32_t in_h, int32_t in_w,
                                         int32_t c, int32_t k_h, int32_t k_w, int32_t stride_h,
                                         int32_t stride_w, int32_t pad_h, int32_t pad_w,
                                         int32_t dil_h, int32_t dil_w, int32_t in_off)
{
    const int32_t k = k_h * k_w * c;
    const int32_t k8 = (k + 7) & ~7;
    const int8_t *src;
    int32_t i;
    if (k_h == 1 && k_w == 1 && pad_h == 0 && pad_w == 0 && (k & 7) == 0) {
        src = in + ((oy * stride_h) * in_w + ox * stride_w) * c;
    } else {
        const int8_t zp = (int8_t)(-in_off);
        const int32_t iy0 = oy * stride_h - pad_h, ix0 = ox * stride_w - pad_w;
        int32_t ky, kx, pos = 0;
        for (ky = 0; ky < k_h; ++ky) {
            const int32_t iy = iy0 + ky * dil_h;
            for (kx = 0; kx < k_w; ++kx, pos += c) {
                const int32_t ix = ix0 + kx * dil_w;
                if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) {
                    memset(stage + pos, zp, (size_t)c);
                } else {
                    memcpy(stage + pos, in + (iy * in_w + ix) * c, (size_t)c);
                }
            }
        }
        for (i = k; i < k8; ++i) {
            stage[i] = zp;
        }
        src = stage;
    }
#if PE_ARM_HELIUM
    __asm__ volatile("" ::: "memory");      /* the staged bytes before VLDRB (below) */
    for (i = 0; i < k8; i += 8) {
        vst1q_s16(col + i, vaddq_n_s16(vldrbq_s16(src + i), (int16_t)in_off));
    }
#else
    for (i = 0; i < k8; ++i) {
        col[i] = (int16_t)((int32_t)src[i] + in_off);
    }
#endif
    for (i = k; i < k8; ++i) {              /* padding values: 0 (their weights are 0 too) */
        col[i] = 0;
    }
#if PE_ARM_HELIUM
    /* GCC 12's post-reload scheduler moved MVE loads (VLDRB of the staged bytes, VLDRH of
     * the column) ahead of the C stores they read (a few of 160 random cases wrong on the
     * Cortex-M55 at -O2, right with -fno-schedule-insns2): compiler barriers order them (no
     * instruction). */
    __asm__ volatile("" ::: "memory");
#endif
}

/* pe_arm_w16_pairs over a natural stream: columns a and b (k8 = 8 * blocks values each) */
PE_ARM_INLINE void pe_arm_natural_pairs(const int16_t *ca, const int16_t *cb, int32_t blocks,
                                        const int32_t *s, const int32_t *bias, int32_t mode,
                                        int8_t *oa, int8_t *ob, int32_t pairs)
{
    const int32_t head = (mode & PE_ARM_FAST) ? 4 : 0;
    const int32_t per_pair = head + 8 * blocks + 2 * PE_ARM_RQ_WORDS;
    int32_t p, j;
    for (p = 0; p < pairs; ++p, s += per_pair) {
        const int16_t *w = (const int16_t *)(const void *)(s + head);
        const int32_t *rq = s + head + 8 * blocks;
        int32_t a0, a1, b0, b1, blk;
        if (mode & PE_ARM_FAST) {
            a0 = b0 = s[0];
            a1 = b1 = s[1];
        } else {
            a0 = b0 = bias[2 * p];
            a1 = b1 = bias[2 * p + 1];
        }
        for (blk = 0; blk < blocks; ++blk, w += 16) {
#if PE_ARM_HELIUM
            const int16x8_t xa = vldrhq_s16(ca + 8 * blk), xb = vldrhq_s16(cb + 8 * blk);
            const int16x8_t w0 = vldrhq_s16(w), w1 = vldrhq_s16(w + 8);
            a0 = vmladavaq_s16(a0, xa, w0);
            b0 = vmladavaq_s16(b0, xb, w0);
            a1 = vmladavaq_s16(a1, xa, w1);
            b1 = vmladavaq_s16(b1, xb, w1);
#else
            for (j = 0; j < 8; ++j) {                /* wrapping int32 sums, as VMLADAVA */
                const int32_t xa = ca[8 * blk + j], xb = cb[8 * blk + j];
                a0 = pe_s32_from_u32((uint32_t)a0 + (uint32_t)(xa * w[j]));
                b0 = pe_s32_from_u32((uint32_t)b0 + (uint32_t)(xb * w[j]));
                a1 = pe_s32_from_u32((uint32_t)a1 + (uint32_t)(xa * w[8 + j]));
                b1 = pe_s32_from_u32((uint32_t)b1 + (uint32_t)(xb * w[8 + j]));
            }
#endif
        }
        oa[2 * p] = pe_arm_clamp8(pe_arm_requant_mode(a0, rq, mode), 0, -128, 127);
        ob[2 * p] = pe_arm_clamp8(pe_arm_requant_mode(b0, rq, mode), 0, -128, 127);
        oa[2 * p + 1] = pe_arm_clamp8(pe_arm_requant_mode(a1, rq + 3, mode), 0, -128, 127);
        ob[2 * p + 1] = pe_arm_clamp8(pe_arm_requant_mode(b1, rq + 3, mode), 0, -128, 127);
    }
    (void)j;
}

/* pe_arm_conv_w16_s8 over a natural stream: two pixels at a time (a last unpaired pixel beside
 * a zero column, its partner's outputs into the spare bytes). Scratch: two int16 columns of
 * k rounded up to eight, a staging row of as many bytes, out_c bytes. */
PE_ARM_INLINE void pe_arm_conv_natural(const pe_context *ctx, const int8_t *input,
                                       const int32_t *stream, const int32_t *bias, int32_t mode,
                                       int8_t *output, int32_t n, int32_t in_h, int32_t in_w,
                                       int32_t in_c, int32_t out_h, int32_t out_w, int32_t out_c,
                                       int32_t k_h, int32_t k_w, int32_t stride_h,
                                       int32_t stride_w, int32_t pad_h, int32_t pad_w,
                                       int32_t dil_h, int32_t dil_w, int32_t in_off)
{
    const int32_t k8 = (k_h * k_w * in_c + 7) & ~7;
    int16_t *const ca = (int16_t *)ctx->buf;
    int16_t *const cb = ca + k8;
    int8_t *const stage = (int8_t *)(cb + k8);
    int8_t *const spare = stage + k8;
    int32_t b, pix, i;
    for (b = 0; b < n; ++b) {
        const int8_t *in = input + b * in_h * in_w * in_c;
        int8_t *out = output + b * out_h * out_w * out_c;
        const int32_t count = out_h * out_w;
        for (pix = 0; pix < count; pix += 2) {
            pe_arm_column_natural(ca, stage, in, pix / out_w, pix % out_w, in_h, in_w, in_c,
                                  k_h, k_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                                  in_off);
            if (pix + 1 < count) {
                pe_arm_column_natural(cb, stage, in, (pix + 1) / out_w, (pix + 1) % out_w, in_h,
                                      in_w, in_c, k_h, k_w, stride_h, stride_w, pad_h, pad_w,
                                      dil_h, dil_w, in_off);
            } else {
                for (i = 0; i < k8; ++i) {
                    cb[i] = 0;
                }
            }
            pe_arm_natural_pairs(ca, cb, k8 >> 3, stream, bias, mode, out + pix * out_c,
                                 pix + 1 < count ? out + (pix + 1) * out_c : spare, out_c >> 1);
        }
    }
}

/* The loop every convolution body shares: the output pixels two at a time, their columns
 * expanded into the scratch, then one of three forms over them:
 *   PE_ARM_FORM_PIXELS  pe_arm_conv_pixels (packed pairs of int8 rows, or the filter as it
 *                       is); columns of k values rounded up to four; a last unpaired pixel
 *                       alone;
 *   PE_ARM_FORM_STREAM  pe_arm_w16_pairs over the int16 stream,
 *   PE_ARM_FORM_ROWS    pe_arm_rows_pairs over the filter as it is: columns of k values
 *                       rounded up to eight (zeros after them); the outputs of a last unpaired
 *                       pixel computed beside a zero column into the scratch's spare out_c
 *                       bytes.
 * Scratch: two int16 columns, a staging row of k rounded up to four bytes when in_c is not a
 * multiple of four, and (stream and rows forms) out_c bytes. */
enum { PE_ARM_FORM_PIXELS = 0, PE_ARM_FORM_STREAM = 1, PE_ARM_FORM_ROWS = 2 };

PE_ARM_INLINE void pe_arm_conv_drive(const pe_context *ctx, const int8_t *input, int32_t form,
                                     const int8_t *filter, int32_t packed,
                                     const int32_t *stream, const int32_t *bias,
                                     const int32_t *rq, int32_t mode, int8_t *output, int32_t n,
                                     int32_t in_h, int32_t in_w, int32_t in_c, int32_t out_h,
                                     int32_t out_w, int32_t out_c, int32_t k_h, int32_t k_w,
                                     int32_t stride_h, int32_t stride_w, int32_t pad_h,
                                     int32_t pad_w, int32_t dil_h, int32_t dil_w, int32_t in_off,
                                     int32_t out_off, int32_t act_min, int32_t act_max)
{
    const int32_t k = k_h * k_w * in_c;
    const int32_t k4 = (k + 3) & ~3, k8 = (k + 7) & ~7;
    const int32_t kk = form == PE_ARM_FORM_PIXELS ? k4 : k8;
    int16_t *const cols = (int16_t *)ctx->buf;
    int8_t *const stage = (int8_t *)(cols + 2 * kk);
    int8_t *const spare = stage + ((in_c & 3) != 0 ? k4 : 0);
    int32_t b, oy, ox, i;
    if (kk != k4) {                          /* the padding group of both columns: zeros */
        for (i = 0; i < 8; ++i) {
            cols[2 * k4 + i] = 0;
        }
    }
    for (b = 0; b < n; ++b) {
        const int8_t *in = input + b * in_h * in_w * in_c;
        int8_t *out = output + b * out_h * out_w * out_c;
        int32_t pending = 0, py = 0, px = 0;     /* a pixel waiting for its pair */
        for (oy = 0; oy < out_h; ++oy) {
            for (ox = 0; ox < out_w; ++ox) {
                int8_t *oa;
                pe_arm_column(cols, stage, pending, in, oy, ox, in_h, in_w, in_c, k_h, k_w,
                              stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, in_off);
                if (!pending) {
                    pending = 1;
                    py = oy;
                    px = ox;
                    continue;
                }
                pending = 0;
                oa = out + (py * out_w + px) * out_c;
                if (form == PE_ARM_FORM_PIXELS) {
                    /* pixel (py, px) and the next one, (oy, ox), are adjacent in the output */
                    pe_arm_conv_pixels(cols, 1, filter, packed, bias, rq, oa, k, out_c,
                                       out_off, act_min, act_max);
                } else {
                    pe_arm_pairs(cols, k8 >> 2, stream,
                                 form == PE_ARM_FORM_ROWS ? filter : 0, bias, rq, mode, oa,
                                 out + (oy * out_w + ox) * out_c, out_c >> 1);
                }
            }
        }
        if (!pending) {
            continue;
        }
        if (form == PE_ARM_FORM_PIXELS) {
            pe_arm_conv_pixels(cols, 0, filter, packed, bias, rq,
                               out + (py * out_w + px) * out_c, k, out_c, out_off, act_min,
                               act_max);
            continue;
        }
        for (i = 0; i < k8; i += 4) {            /* column 1: zeros */
            pe_arm_st32(cols + pe_arm_at(i, 1), 0u);
            pe_arm_st32(cols + pe_arm_at(i, 1) + 2, 0u);
        }
        pe_arm_pairs(cols, k8 >> 2, stream, form == PE_ARM_FORM_ROWS ? filter : 0, bias, rq,
                     mode, out + (py * out_w + px) * out_c, spare, out_c >> 1);
    }
}

/* pe_arm_conv_s8 over the stream of a layer with frozen weights (see above) */
PE_ARM_KERNEL void pe_arm_conv_w16_s8(const pe_context *ctx, const int8_t *input,
                                      const int32_t *stream, const int32_t *bias, int32_t mode,
                                      int8_t *output, int32_t n, int32_t in_h, int32_t in_w,
                                      int32_t in_c, int32_t out_h, int32_t out_w, int32_t out_c,
                                      int32_t k_h, int32_t k_w, int32_t stride_h,
                                      int32_t stride_w, int32_t pad_h, int32_t pad_w,
                                      int32_t dil_h, int32_t dil_w, int32_t in_off)
{
    if (mode & PE_ARM_NATURAL) {
        pe_arm_conv_natural(ctx, input, stream, bias, mode, output, n, in_h, in_w, in_c, out_h,
                            out_w, out_c, k_h, k_w, stride_h, stride_w, pad_h, pad_w, dil_h,
                            dil_w, in_off);
        return;
    }
    pe_arm_conv_drive(ctx, input, PE_ARM_FORM_STREAM, 0, 1, stream, bias, 0, mode, output, n,
                      in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, stride_h, stride_w, pad_h,
                      pad_w, dil_h, dil_w, in_off, 0, -128, 127);
}

/* pe_arm_conv_s8 over weights that training changes (pe_arm_rows_pairs: k a multiple of
 * eight, an even out_c, the whole int8 range as clamp, a bias) */
PE_ARM_KERNEL void pe_arm_conv_rows_s8(const pe_context *ctx, const int8_t *input,
                                       const int8_t *filter, const int32_t *bias,
                                       const int32_t *rq, int32_t mode, int8_t *output,
                                       int32_t n, int32_t in_h, int32_t in_w, int32_t in_c,
                                       int32_t out_h, int32_t out_w, int32_t out_c, int32_t k_h,
                                       int32_t k_w, int32_t stride_h, int32_t stride_w,
                                       int32_t pad_h, int32_t pad_w, int32_t dil_h,
                                       int32_t dil_w, int32_t in_off)
{
    pe_arm_conv_drive(ctx, input, PE_ARM_FORM_ROWS, filter, 0, 0, bias, rq, mode, output, n,
                      in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, stride_h, stride_w, pad_h,
                      pad_w, dil_h, dil_w, in_off, 0, -128, 127);
}

/* The convolution over packed int8 pairs of rows (packed = 1) or the filter as it is */
PE_ARM_KERNEL void pe_arm_conv_s8(const pe_context *ctx, const int8_t *input,
                                  const int8_t *filter, int32_t packed, const int32_t *bias,
                                  const int32_t *rq, int8_t *output, int32_t n, int32_t in_h,
                                  int32_t in_w, int32_t in_c, int32_t out_h, int32_t out_w,
                                  int32_t out_c, int32_t k_h, int32_t k_w, int32_t stride_h,
                                  int32_t stride_w, int32_t pad_h, int32_t pad_w, int32_t dil_h,
                                  int32_t dil_w, int32_t in_off, int32_t out_off,
                                  int32_t act_min, int32_t act_max)
{
    pe_arm_conv_drive(ctx, input, PE_ARM_FORM_PIXELS, filter, packed, 0, bias, rq, 0, output,
                      n, in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, stride_h, stride_w,
                      pad_h, pad_w, dil_h, dil_w, in_off, out_off, act_min, act_max);
}

#endif /* PE_ARM_CONV_H */
