/*
 * pe_arm_add.h - the body of the arm backend's int8 ADD of two tensors of the same shape,
 * bit-exact with TFLM's reference AddElementwise, through tables computed at compile time.
 *
 * TFLM rescales each input value separately, (x + offset) << left_shift times a multiplier:
 * for int8 inputs that is one of 256 int32 values per input, which codegen/backends/arm.py
 * computes ahead of time (tables: 256 for input 1, then 256 for input 2, indexed by the byte's
 * unsigned value). Per element: two table reads, the wrapping sum and the output
 * requantization (pe_arm.h's one-rounding form with rq's three words, or TFLM's two-step
 * recipe with out_mult / out_shift when rq is NULL). Each output element is written after
 * its inputs are read: in place is fine.
 */
#ifndef PE_ARM_ADD_H
#define PE_ARM_ADD_H

#include "pe_arm.h"

PE_ARM_KERNEL void pe_arm_add_s8(const int32_t *tables, const int32_t *rq,
                                 const int8_t *input1, const int8_t *input2, int8_t *output,
                                 int32_t size, int32_t out_mult, int32_t out_shift,
                                 int32_t out_off, int32_t act_min, int32_t act_max)
{
    const int32_t *const t1 = tables;
    const int32_t *const t2 = tables + 256;
    int32_t i;
    if (rq != 0) {
        const int32_t r0 = rq[0], r1 = rq[1], r2 = rq[2];
        for (i = 0; i < size; ++i) {
            const int32_t sum = pe_add_wrap_s32(t1[(uint8_t)input1[i]], t2[(uint8_t)input2[i]]);
            output[i] = pe_arm_clamp8(pe_arm_requant3(sum, r0, r1, r2), out_off, act_min,
                                      act_max);
        }
        return;
    }
    for (i = 0; i < size; ++i) {
        const int32_t sum = pe_add_wrap_s32(t1[(uint8_t)input1[i]], t2[(uint8_t)input2[i]]);
        const int32_t out = pe_multiply_by_quantized_multiplier(sum, out_mult, out_shift);
        output[i] = (int8_t)pe_offset_clamp_s32(out, out_off, act_min, act_max);
    }
}

#endif /* PE_ARM_ADD_H */
