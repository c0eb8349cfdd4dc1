/* pe_mul_s8_hvx - int8 multiplication of two tensors of the same shape on HVX, bit-exact with
 * TFLM's reference Mul: out = clamp(MBQM((x1 + off1) * (x2 + off2), m, s) + zp_out), the
 * product of two values of at most 255 in magnitude in int32 (the low word of the 32 x 32
 * multiply), 128 elements a step. */
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"

void pe_mul_s8_hvx(const pe_mul_params *params, int32_t size, const int8_t *input1,
                   const int8_t *input2, int8_t *output)
{
    const pe_hvx_rq q = pe_hvx_rq_make(params->output_multiplier, params->output_shift);
    const HVX_Vector off1 = Q6_V_vsplat_R(params->input1_offset);
    const HVX_Vector off2 = Q6_V_vsplat_R(params->input2_offset);
    const HVX_Vector zp = Q6_V_vsplat_R(params->output_offset);
    const HVX_Vector lo = Q6_V_vsplat_R(params->activation.min);
    const HVX_Vector hi = Q6_V_vsplat_R(params->activation.max);
    int32_t i, j;
    for (i = 0; i < size; i += 128) {
        const int32_t len = size - i < 128 ? size - i : 128;
        HVX_Vector x1[4], x2[4], y[4];
        pe_hvx_words4(pe_hvx_load(input1 + i, len), x1);
        pe_hvx_words4(pe_hvx_load(input2 + i, len), x2);
        for (j = 0; j < 4; ++j) {
            const HVX_Vector p = pe_hvx_mul_lo(Q6_Vw_vadd_VwVw(x1[j], off1),
                                               Q6_Vw_vadd_VwVw(x2[j], off2));
            const HVX_Vector v = Q6_Vw_vadd_VwVw(pe_hvx_mbqm_rq(p, &q), zp);
            y[j] = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(v, lo), hi);
        }
        pe_hvx_store(output + i, pe_hvx_bytes4(y[0], y[1], y[2], y[3]), len);
    }
}
