/*
 * pe_hvx_gemm.h - the int8 dot-product engine of the hvx backend's convolution and fully
 * connected kernels: rows of K int8 values (pixels, im2col rows or FC inputs) times O output
 * channels on vrmpy, 32 channels per vector and four values per lane.
 *
 * Weights are packed (at compile time for frozen weights, codegen/backends/hvx.py
 * pack_gemm_weights; into the scratch at run time for weights that training changes): block
 * ob of 32 output channels, group kg of four inputs is one 128-byte vector whose lane i holds
 * w[32 ob + i][4 kg .. 4 kg + 3] (zeros past O and K). A row's four values kg are one word,
 * splatted, so that vrmpy(splat, W[ob][kg]) adds sum_j x[4 kg + j] * w[o][4 kg + j] to lane o.
 *
 * The input offset is folded: sum w * (x + off) = sum w * x + off * sum w, and the second
 * term, ksum[o] = off * sum_k w[o][k], joins the bias (bk = bias + ksum). Padding taps and the
 * values past K therefore hold -off (the input's zero point): their products cancel in the
 * ksum. Sums wrap in int32 like TFLM's accumulator, so the result is TFLM's whenever TFLM's
 * is an int32.
 *
 * A tile is four rows times two channel blocks: eight accumulators, two weight vectors and
 * four splats per group: 1,024 multiply-accumulates in eight vrmpy (a last odd block: four).
 */
#ifndef PE_HVX_GEMM_H
#define PE_HVX_GEMM_H

#include "pe_hvx.h"

typedef struct {
    const int8_t *w;              /* packed weights, OB * KG vectors */
    const int32_t *bk;            /* bias + ksum, OB * 32 */
    const int32_t *rq;            /* requantization, OB * 5 * 32 */
    int32_t groups;               /* KG = ceil(K / 4) */
    int32_t blocks;               /* OB = ceil(O / 32) */
    int32_t out_c;                /* O */
    HVX_Vector zp;                /* output zero point, clamp */
    HVX_Vector lo;
    HVX_Vector hi;
} pe_hvx_gemm;

/* The word of four int8 values at p (any alignment). */
PE_HVX_INLINE int32_t pe_hvx_word_at(const int8_t *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16
                     | (uint32_t)b[3] << 24);
}

/* Word kg of a row (4-byte aligned when `aligned`). */
PE_HVX_INLINE int32_t pe_hvx_row_word(const int8_t *row, int32_t kg, int aligned)
{
    return aligned ? ((const pe_hvx_word *)row)[kg] : pe_hvx_word_at(row + 4 * kg);
}

/* Pack rows (O, K) of int8 weights into g's layout at dst (OB * KG vectors). */
static inline void pe_hvx_gemm_pack(int8_t *dst, const int8_t *w, int32_t out_c, int32_t k)
{
    const int32_t groups = (k + 3) / 4;
    const int32_t blocks = (out_c + 31) / 32;
    const int aligned = (k & 3) == 0 && ((uintptr_t)w & 3u) == 0;
    int32_t ob, i, kg;
    for (ob = 0; ob < blocks; ++ob) {
        pe_hvx_word *d = (pe_hvx_word *)(dst + ob * groups * 128);
        for (i = 0; i < 32; ++i) {
            const int32_t o = ob * 32 + i;
            const int8_t *row = w + o * k;
            for (kg = 0; kg < groups; ++kg) {
                int32_t v = 0;
                if (o < out_c) {
                    if (aligned) {
                        v = ((const pe_hvx_word *)row)[kg];
                    } else {
                        int32_t j;
                        uint32_t u = 0u;
                        for (j = 0; j < 4 && 4 * kg + j < k; ++j) {
                            u |= (uint32_t)(uint8_t)row[4 * kg + j] << (8 * j);
                        }
                        v = (int32_t)u;
                    }
                }
                d[kg * 32 + i] = v;
            }
        }
    }
}

/* bk = bias + (ksum, or off * sum of the packed weights when ksum is NULL), OB vectors at
 * dst (128-byte aligned). */
static inline void pe_hvx_gemm_bias(int32_t *dst, const int8_t *w, int32_t groups,
                                    int32_t out_c, const int32_t *bias, const int32_t *ksum,
                                    int32_t input_offset)
{
    const int32_t blocks = (out_c + 31) / 32;
    const HVX_Vector ones = Q6_V_vsplat_R(0x01010101);
    int32_t ob, kg;
    for (ob = 0; ob < blocks; ++ob) {
        const int32_t n = out_c - ob * 32 < 32 ? out_c - ob * 32 : 32;
        HVX_Vector v = bias != 0 ? pe_hvx_load_n(bias + ob * 32, 4 * n) : Q6_V_vzero();
        HVX_Vector s;
        if (ksum != 0) {
            s = pe_hvx_loadu(ksum + ob * 32);
        } else {
            s = Q6_V_vzero();
            for (kg = 0; kg < groups; ++kg) {
                s = Q6_Vw_vrmpyacc_VwVbVb(s, pe_hvx_loadu(w + (ob * groups + kg) * 128), ones);
            }
            /* vmpyi takes halfword i % 2 of the scalar for lane i: both halves */
            s = Q6_Vw_vmpyi_VwRh(s, (int32_t)(((uint32_t)input_offset & 0xFFFFu) * 0x10001u));
        }
        /* lanes past O: 0 (their weights are 0; the bias load left them undefined) */
        v = Q6_V_vmux_QVV(Q6_Q_vsetq2_R(4 * n), v, Q6_V_vzero());
        ((pe_hvx_block *)dst)[ob] = Q6_Vw_vadd_VwVw(v, s);
    }
}

/* The accumulators of up to four rows (r[0..3], 4-byte aligned words when `aligned`) for one
 * block of 32 channels (wa, b0) or two (`two`: also wb, b1). Inlined with `two` and `aligned`
 * constant, so a single block computes one accumulator per row. */
PE_HVX_INLINE void pe_hvx_gemm_acc(int32_t kgs, const int8_t *const r[4], int aligned,
                                   const int8_t *wa, const int8_t *wb, HVX_Vector b0,
                                   HVX_Vector b1, int two, HVX_Vector acc[4][2])
{
    HVX_Vector a00 = b0, a01 = b1, a10 = b0, a11 = b1;
    HVX_Vector a20 = b0, a21 = b1, a30 = b0, a31 = b1;
    int32_t kg;
    for (kg = 0; kg < kgs; ++kg) {
        const HVX_Vector w0 = pe_hvx_loadu(wa + kg * 128);
        const int32_t x0 = pe_hvx_row_word(r[0], kg, aligned);
        const int32_t x1 = pe_hvx_row_word(r[1], kg, aligned);
        const int32_t x2 = pe_hvx_row_word(r[2], kg, aligned);
        const int32_t x3 = pe_hvx_row_word(r[3], kg, aligned);
        const HVX_Vector s0 = Q6_V_vsplat_R(x0), s1 = Q6_V_vsplat_R(x1);
        const HVX_Vector s2 = Q6_V_vsplat_R(x2), s3 = Q6_V_vsplat_R(x3);
        a00 = Q6_Vw_vrmpyacc_VwVbVb(a00, s0, w0);
        a10 = Q6_Vw_vrmpyacc_VwVbVb(a10, s1, w0);
        a20 = Q6_Vw_vrmpyacc_VwVbVb(a20, s2, w0);
        a30 = Q6_Vw_vrmpyacc_VwVbVb(a30, s3, w0);
        if (two) {
            const HVX_Vector w1 = pe_hvx_loadu(wb + kg * 128);
            a01 = Q6_Vw_vrmpyacc_VwVbVb(a01, s0, w1);
            a11 = Q6_Vw_vrmpyacc_VwVbVb(a11, s1, w1);
            a21 = Q6_Vw_vrmpyacc_VwVbVb(a21, s2, w1);
            a31 = Q6_Vw_vrmpyacc_VwVbVb(a31, s3, w1);
        }
    }
    acc[0][0] = a00, acc[0][1] = a01, acc[1][0] = a10, acc[1][1] = a11;
    acc[2][0] = a20, acc[2][1] = a21, acc[3][0] = a30, acc[3][1] = a31;
}

/* Up to four rows (rows[0..n-1], 4-byte aligned when `aligned`) into out + q * out_stride. */
PE_HVX_INLINE void pe_hvx_gemm_tile(const pe_hvx_gemm *g, const int8_t *const *rows,
                                    int32_t n, int aligned, int8_t *out, int32_t out_stride)
{
    const int8_t *r[4];
    const int32_t kgs = g->groups;
    int32_t ob, q;
    for (q = 0; q < 4; ++q) {
        r[q] = rows[q < n ? q : 0];
    }
    for (ob = 0; ob < g->blocks; ob += 2) {
        const int two = ob + 1 < g->blocks;
        const int8_t *wa = g->w + ob * kgs * 128;
        const HVX_Vector b0 = ((const pe_hvx_block *)g->bk)[ob];
        const int32_t *qa = g->rq + ob * PE_HVX_RQ * 32;
        const int32_t left = g->out_c - ob * 32;
        HVX_Vector acc[4][2];
        if (two && aligned) {
            pe_hvx_gemm_acc(kgs, r, 1, wa, wa + kgs * 128, b0,
                            ((const pe_hvx_block *)g->bk)[ob + 1], 1, acc);
        } else if (two) {
            pe_hvx_gemm_acc(kgs, r, 0, wa, wa + kgs * 128, b0,
                            ((const pe_hvx_block *)g->bk)[ob + 1], 1, acc);
        } else if (aligned) {
            pe_hvx_gemm_acc(kgs, r, 1, wa, wa, b0, b0, 0, acc);
        } else {
            pe_hvx_gemm_acc(kgs, r, 0, wa, wa, b0, b0, 0, acc);
        }
        for (q = 0; q < n; ++q) {
            const HVX_Vector y0 = pe_hvx_requant(acc[q][0], qa, g->zp, g->lo, g->hi);
            const HVX_Vector y1 = two ? pe_hvx_requant(acc[q][1], qa + PE_HVX_RQ * 32, g->zp,
                                                       g->lo, g->hi) : y0;
            pe_hvx_store_n(out + q * out_stride + ob * 32, pe_hvx_bytes2(y0, y1),
                           left < 64 ? left : 64);
        }
    }
}


#endif /* PE_HVX_GEMM_H */
