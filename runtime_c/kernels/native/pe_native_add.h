/*
 * pe_native_add.h - the native backend's int8 ADD of two tensors of the same shape, bit-exact
 * with TFLM's reference AddElementwise, over the arm backend's tables: TFLM rescales each input
 * value on its own ((x + offset) << left_shift times a multiplier), one of 256 int32 values
 * per input computed at compile time (codegen/backends/arm.py add_tables: 256 for input 1,
 * then 256 for input 2, indexed by the byte's unsigned value). Sixteen elements a step: two
 * table gathers, the wrapping sum, the output requantization of pe_native.h (``rq``: one
 * block of words, every lane the output's). Each output is written after its inputs are
 * read: in place is fine.
 */
#ifndef PE_NATIVE_ADD_H
#define PE_NATIVE_ADD_H

#include "pe_native.h"

PE_NV_KERNEL void pe_nv_add_s8(const int32_t *tables, const int32_t *rq, const int8_t *input1,
                               const int8_t *input2, int8_t *output, int32_t size,
                               int32_t out_offset, int32_t act_min, int32_t act_max)
{
    const int32_t *const t1 = tables;
    const int32_t *const t2 = tables + 256;
    int32_t sums[PE_NV_LANES];
    int32_t i, l;
    for (i = 0; i < size; i += PE_NV_LANES) {
        const int32_t n = size - i < PE_NV_LANES ? size - i : PE_NV_LANES;
#if defined(PE_NV_AVX512)
        const __mmask16 m = (__mmask16)(n == PE_NV_LANES ? 0xFFFFu : (1u << n) - 1u);
        const __m512i a = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, (const void *)(input1 + i)));
        const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, (const void *)(input2 + i)));
        _mm512_storeu_si512((void *)sums, _mm512_add_epi32(
            _mm512_i32gather_epi32(a, (const void *)t1, 4),
            _mm512_i32gather_epi32(b, (const void *)t2, 4)));
#else
        for (l = 0; l < n; ++l) {
            sums[l] = pe_add_wrap_s32(t1[(uint8_t)input1[i + l]], t2[(uint8_t)input2[i + l]]);
        }
#endif
        (void)l;
        pe_nv_requant16(sums, rq, out_offset, act_min, act_max, output + i, n);
    }
}

#endif /* PE_NATIVE_ADD_H */
