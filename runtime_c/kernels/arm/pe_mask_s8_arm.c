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
