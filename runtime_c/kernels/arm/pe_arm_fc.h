/*
 * pe_arm_fc.h - the body of the arm backend's int8 fully connected layer, bit-exact with TFLM's
 * reference FullyConnected (per tensor) and FullyConnectedPerChannel: rq holds pe_arm.h's three
 * requantization col per output unit either way (a per-tensor multiplier is repeated).
 *
 * Each input row is expanded once into the scratch buffer (int16, input offset added,
 * pe_arm.h's pair order); four weight rows at a time then run over it with SMLAD when the
 * weights are packed at compile time (pe_arm.h), two at a time over the filter as it is when
 * training changes it. The filter offset is 0 (symmetric int8 weights). Scratch: the depth
 * rounded up to four, in int16.
 */
#ifndef PE_ARM_FC_H
#define PE_ARM_FC_H

#include "pe_arm.h"
#include "pe_kernels.h"

static inline void pe_arm_expand_row(int16_t *col, const int8_t *x, int32_t depth,
                                     int32_t offset)
{
    const uint32_t off2 = pe_arm_pack16(offset, offset);
    int32_t d;
    for (d = 0; d + 4 <= depth; d += 4) {
        pe_arm_expand4(col + d, x + d, off2);
    }
    if (d < depth) {
        pe_arm_st32(col + d, 0u);
        pe_arm_st32(col + d + 2, 0u);
        pe_arm_expand_any(col, d, x + d, depth - d, offset);
    }
}

/* (acc0, acc1) += column . (row wa, row wb = wa + k) */
static inline void pe_arm_dot_1x2(const int16_t *a, const int8_t *w, int32_t k, int32_t *acc0,
                                  int32_t *acc1)
{
    int32_t s0 = *acc0, s1 = *acc1;
    int32_t g;
    PE_ARM_UNROLL(2)
    for (g = 0; g < (k >> 2); ++g) {
        const uint32_t x0 = pe_arm_ld32(a), x1 = pe_arm_ld32(a + 2);
        const uint32_t u = pe_arm_ld32(w), v = pe_arm_ld32(w + k);
        s0 = pe_arm_smlad(x0, pe_arm_sxtb16(u), s0);
        s1 = pe_arm_smlad(x0, pe_arm_sxtb16(v), s1);
        s0 = pe_arm_smlad(x1, pe_arm_sxtb16_ror8(u), s0);
        s1 = pe_arm_smlad(x1, pe_arm_sxtb16_ror8(v), s1);
        a += 4;
        w += 4;
    }
    if (k & 3) {
        const uint32_t x0 = pe_arm_ld32(a), x1 = pe_arm_ld32(a + 2);
        const uint32_t u = pe_arm_tail32(w, k & 3), v = pe_arm_tail32(w + k, k & 3);
        s0 = pe_arm_smlad(x1, pe_arm_sxtb16_ror8(u), pe_arm_smlad(x0, pe_arm_sxtb16(u), s0));
        s1 = pe_arm_smlad(x1, pe_arm_sxtb16_ror8(v), pe_arm_smlad(x0, pe_arm_sxtb16(v), s1));
    }
    *acc0 = s0;
    *acc1 = s1;
}

PE_ARM_KERNEL void pe_arm_fc_s8(const pe_context *ctx, const int8_t *input,
                                const int8_t *filter, int32_t packed, const int32_t *bias,
                                const int32_t *rq, int8_t *output, int32_t rows, int32_t depth,
                                int32_t units, int32_t in_off, int32_t out_off, int32_t act_min,
                                int32_t act_max)
{
    const int32_t groups = (depth + 3) >> 2;
    int16_t *const col = (int16_t *)ctx->buf;
    int32_t r, u;
    for (r = 0; r < rows; ++r) {
        int8_t *out = output + r * units;
        pe_arm_expand_row(col, input + r * depth, depth, in_off);
        u = 0;
        if (packed) {
            /* quads of rows interleaved per four values, then the last rows one by one */
            for (u = 0; u < (units & ~3); u += 4) {
                const int32_t *q = rq + u * PE_ARM_RQ_WORDS;
                int32_t acc[4], i;
                for (i = 0; i < 4; ++i) {
                    acc[i] = bias != 0 ? bias[u + i] : 0;
                }
                pe_arm_dot_1x4_packed(col, filter + u * 4 * groups, groups, acc);
                for (i = 0; i < 4; ++i) {
                    out[u + i] = pe_arm_clamp8(pe_arm_requant3(acc[i], q[3 * i], q[3 * i + 1],
                                                               q[3 * i + 2]),
                                               out_off, act_min, act_max);
                }
            }
            for (u = units & ~3; u < units; ++u) {
                const int32_t s = pe_arm_dot_1x1_packed(col, 4, filter + u * 4 * groups, 4,
                                                        groups, bias != 0 ? bias[u] : 0);
                out[u] = pe_arm_out(s, rq + u * PE_ARM_RQ_WORDS, out_off, act_min, act_max);
            }
            continue;
        }
        for (; u + 1 < units; u += 2) {
            int32_t s0 = bias != 0 ? bias[u] : 0;
            int32_t s1 = bias != 0 ? bias[u + 1] : 0;
            const int32_t *q = rq + u * PE_ARM_RQ_WORDS;
            pe_arm_dot_1x2(col, filter + u * depth, depth, &s0, &s1);
            out[u] = pe_arm_clamp8(pe_arm_requant3(s0, q[0], q[1], q[2]), out_off, act_min,
                                   act_max);
            out[u + 1] = pe_arm_clamp8(pe_arm_requant3(s1, q[3], q[4], q[5]), out_off, act_min,
                                       act_max);
        }
        if (u < units) {
            const int32_t s = pe_arm_dot_plain(col, 4, filter + u * depth, depth,
                                           bias != 0 ? bias[u] : 0);
            out[u] = pe_arm_out(s, rq + u * PE_ARM_RQ_WORDS, out_off, act_min, act_max);
        }
    }
}

#endif /* PE_ARM_FC_H */
