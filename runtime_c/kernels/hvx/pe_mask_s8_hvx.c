/* pe_act_mask_s8_hvx, pe_mask_grad_s8_hvx - the 1-bit activation masks of training graphs
 * and the int8 masked gradient on HVX (the ref kernels' arguments and results; bit i of a
 * mask is bit i & 7 of byte i >> 3), 128 values a step:
 *   act_mask: lo < y < hi as a byte predicate, each byte's bit (i & 7) from a pattern
 *       vector, the bytes of each group of eight added (vrmpy by ones over four, then the
 *       odd word into the even one) and compacted (three byte deals);
 *   mask_grad: the 16 mask bytes spread to 128 (three self-shuffles), ANDed with the same
 *       pattern: zero lanes select 0, the others dy. */
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"

/* byte i: 1 << (i & 7) */
static const uint8_t pe_hvx_bits[128] __attribute__((aligned(128))) = {
#define PE_HVX_BITS8 1, 2, 4, 8, 16, 32, 64, 128
#define PE_HVX_BITS32 PE_HVX_BITS8, PE_HVX_BITS8, PE_HVX_BITS8, PE_HVX_BITS8
    PE_HVX_BITS32, PE_HVX_BITS32, PE_HVX_BITS32, PE_HVX_BITS32
#undef PE_HVX_BITS32
#undef PE_HVX_BITS8
};

void pe_act_mask_s8_hvx(const pe_activation *params, int32_t size, const int8_t *y,
                        uint8_t *mask)
{
    const HVX_Vector lo = Q6_Vb_vsplat_R(params->min);
    const HVX_Vector hi = Q6_Vb_vsplat_R(params->max);
    const HVX_Vector bits = *(const pe_hvx_block *)pe_hvx_bits;
    int32_t i;
    for (i = 0; i < size; i += 128) {
        const int32_t len = size - i < 128 ? size - i : 128;
        const HVX_Vector v = pe_hvx_load(y + i, len);
        HVX_VectorPred q = Q6_Q_and_QQ(Q6_Q_vcmp_gt_VbVb(v, lo), Q6_Q_vcmp_gt_VbVb(hi, v));
        HVX_Vector w;
        if (len < 128) {
            q = Q6_Q_and_QQ(q, Q6_Q_vsetq2_R(len));
        }
        w = Q6_Vuw_vrmpy_VubRub(Q6_V_vmux_QVV(q, bits, Q6_V_vzero()), 0x01010101);
        w = Q6_Vw_vadd_VwVw(w, Q6_V_vror_VR(w, 4));        /* byte m: low byte of word 2m */
        w = Q6_Vb_vdeal_Vb(Q6_Vb_vdeal_Vb(Q6_Vb_vdeal_Vb(w)));
        pe_hvx_store_n(mask + (i >> 3), w, (len + 7) >> 3);
    }
}

void pe_mask_grad_s8_hvx(int32_t size, const int8_t *dy, const int32_t *dy_exp,
                         const uint8_t *mask, int8_t *dx, int32_t *dx_exp)
{
    const HVX_Vector bits = *(const pe_hvx_block *)pe_hvx_bits;
    int32_t i, k;
    for (i = 0; i < size; i += 128) {
        const int32_t len = size - i < 128 ? size - i : 128;
        HVX_Vector m = pe_hvx_load_n(mask + (i >> 3), (len + 7) >> 3);
        for (k = 0; k < 3; ++k) {                           /* each byte eight times */
            m = Q6_V_lo_W(Q6_W_vshuff_VVR(m, m, -1));
        }
        m = Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VbVb(Q6_V_vand_VV(m, bits), Q6_V_vzero()), Q6_V_vzero(),
                          pe_hvx_load(dy + i, len));
        pe_hvx_store(dx + i, m, len);
    }
    *dx_exp = *dy_exp;
}
