/* pe_act_mask_s8_arm - the 1-bit activation mask of pe_mask_s8.c (bit i of the mask: lo < y[i]
 * < hi, eight bits a byte, the first element in bit 0), eight values per step on cores with the
 * DSP extension: per word of four values, SSUB8 sets the GE flags of the bytes above lo and SEL
 * keeps them, again for the bytes below hi, and one multiply gathers the four byte flags into
 * four bits (byte j holding 0 or 1: (w * 0x01020408) >> 24 has it in bit j, with no carries
 * between the partial products). About 2.5 instructions a value instead of about 10. */ 
#include "pe_arm.h"
#include "pe_arm_kernels.h"
#include "pe_train_kernels.h"

#if PE_ARM_DSP
/* 0x01 in each byte of y (four int8 values) that lies above lo and below hi: lo1 and hi1 hold
 * lo + 1 and hi - 1 in every byte */
static inline uint32_t pe_arm_inside8(uint32_t y, uint32_t lo1, uint32_t hi1)
{
    uint32_t t, a;
    __asm__("ssub8 %[t], %[y], %[lo1]\n\t"
            "sel %[a], %[one], %[zero]\n\t"
            "ssub8 %[t], %[hi1], %[y]\n\t"
            "sel %[a], %[a], %[zero]\n\t"
            : [t] "=&r"(t), [a] "=&r"(a)
            : [y] "r"(y), [lo1] "r"(lo1), [hi1] "r"(hi1), [one] "r"(0x01010101u),
              [zero] "r"(0u)
            : "cc");
    (void)t;
    return a;
}
#endif

void pe_act_mask_s8_arm(const pe_activation *params, int32_t size, const int8_t *y,
                        uint8_t *mask)
{
    int32_t i = 0;
#if PE_ARM_DSP
    const int32_t lo = params->min;
    const int32_t hi = params->max;
    if (lo < 127 && hi > -128) {
        const uint32_t lo1 = 0x01010101u * (uint32_t)(uint8_t)(int8_t)(lo + 1);
        const uint32_t hi1 = 0x01010101u * (uint32_t)(uint8_t)(int8_t)(hi - 1);
        for (; i + 8 <= size; i += 8) {
            const uint32_t a = pe_arm_inside8(pe_arm_ld32(y + i), lo1, hi1);
            const uint32_t b = pe_arm_inside8(pe_arm_ld32(y + i + 4), lo1, hi1);
            mask[i >> 3] = (uint8_t)(((a * 0x01020408u) >> 24) | (((b * 0x01020408u) >> 24) << 4));
        }
    }
#endif
    if (i < size) {                          /* the rest (a multiple of eight behind): ref */
        pe_act_mask_s8(params, size - i, y + i, mask + (i >> 3));
    }
}

/* four mask bits -> four byte masks (0x00 or 0xFF per bit, bit j in byte j) */
static const uint32_t pe_arm_nibble_bytes[16] = {
    0x00000000u, 0x000000FFu, 0x0000FF00u, 0x0000FFFFu, 0x00FF0000u, 0x00FF00FFu,
    0x00FFFF00u, 0x00FFFFFFu, 0xFF000000u, 0xFF0000FFu, 0xFF00FF00u, 0xFF00FFFFu,
    0xFFFF0000u, 0xFFFF00FFu, 0xFFFFFF00u, 0xFFFFFFFFu};

/* pe_mask_grad_s8_arm - pe_mask_grad_s8 (dx = dy where the mask bit is set, else 0; the
 * exponent passes through) four values a step: the word of four dy bytes ANDed with the byte
 * masks of their four bits (a 16-entry table). dx may be dy. */
void pe_mask_grad_s8_arm(int32_t size, const int8_t *dy, const int32_t *dy_exp,
                         const uint8_t *mask, int8_t *dx, int32_t *dx_exp)
{
    const int32_t e = *dy_exp;
    int32_t i;
    for (i = 0; i + 8 <= size; i += 8) {
        const uint32_t m = mask[i >> 3];
        pe_arm_st32(dx + i, pe_arm_ld32(dy + i) & pe_arm_nibble_bytes[m & 15u]);
        pe_arm_st32(dx + i + 4, pe_arm_ld32(dy + i + 4) & pe_arm_nibble_bytes[m >> 4]);
    }
    *dx_exp = e;
    if (i < size) {                          /* the rest (a multiple of eight behind): ref */
        pe_mask_grad_s8(size - i, dy + i, dy_exp, mask + (i >> 3), dx + i, dx_exp);
    }
}

/* pe_mask_grad_f32_arm - pe_mask_grad_f32 eight values per mask byte: each float's bits ANDed
 * with 0 or all ones from its bit (a cleared value is +0.0, as ref's 0.0f; a kept one is dy's
 * bits). dx may be dy. */
void pe_mask_grad_f32_arm(int32_t size, const float *dy, const uint8_t *mask, float *dx)
{
    int32_t i, j;
    for (i = 0; i + 8 <= size; i += 8) {
        const uint32_t m = mask[i >> 3];
        for (j = 0; j < 8; ++j) {
            uint32_t v;
            memcpy(&v, dy + i + j, sizeof v);
            v &= 0u - ((m >> j) & 1u);
            memcpy(dx + i + j, &v, sizeof v);
        }
    }
    if (i < size) {                          /* the rest: ref */
        pe_mask_grad_f32(size - i, dy + i, mask + (i >> 3), dx + i);
    }
}
