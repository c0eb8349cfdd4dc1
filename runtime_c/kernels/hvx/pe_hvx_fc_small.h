/*
 * pe_hvx_fc_small.h - the hvx backend's fully connected layer of one sample (or a few) with
 * few units: at most 32 units of at most 32 inputs, 16 of at most 64 or 8 of at most 512 (a
 * classifier's last layer; codegen/backends/hvx.py fc_small). pe_fully_connected_s8_small_hvx
 * is static inline, so that a generated model, whose shapes and parameters are constant
 * structs, gets code specialised to its layer (no dispatch, every offset folded);
 * pe_hvx_kernels.h brings it in when compiling for HVX.
 *
 * The weights are read as they are ((O, K) rows, frozen in flash or trained in RAM). Rows of
 * at most 64 bytes go several to a vector: a vector holds the rows of 128 / S units (S = 32 or
 * 64 bytes, the slot of a row), moved into their slots by one valign per pair of rows, and one
 * vrmpy per pair multiplies them by the input placed in the same slots (x + 128 as unsigned
 * bytes, zeros elsewhere). Longer rows take a vector per unit and 128 inputs. A tree of deals
 * then sums each unit's lanes into lane u. With c = 128 - input offset, sum w * (x + off) =
 * sum w * (x + 128) - c * sum w: a second vrmpy by c unless c is 0 (the input of a ReLU).
 * Then the bias, TFLM's requantization per lane (pe_hvx.h) and one store of the units' bytes.
 */
#ifndef PE_HVX_FC_SMALL_H
#define PE_HVX_FC_SMALL_H

#include "pe_hvx.h"
#include "pe_kernels.h"

/* Lanes 2i and 2i + 1 of a, then of b, summed: a's pairs in lanes 0..15, b's in 16..31. */
PE_HVX_INLINE HVX_Vector pe_hvx_deal_fold(HVX_Vector a, HVX_Vector b)
{
    const HVX_VectorPair d = Q6_W_vdeal_VVR(b, a, -4);
    return Q6_Vw_vadd_VwVw(Q6_V_lo_W(d), Q6_V_hi_W(d));
}

/* The products of the 128 / span units whose rows (depth bytes each) start at p, n bytes of
 * them (the last vector may hold fewer units), unit j's in slot j (bytes span * j on): the
 * units go two by two, rows 2i and 2i + 1 moved up together by s = (2i + 1) * (span - depth)
 * bytes, which puts row 2i at the end of its slot and row 2i + 1 at the start of the next,
 * where xg[i] (the input, unsigned) and cg[i] (c) are, zero elsewhere. Each move is one valign
 * of the two aligned blocks that hold the rows by (p - s) mod 128. When the rows start less
 * than s bytes into their block (p - s is in the block before), they all lie in it (p % 128 <
 * s <= 3 * (span - depth) and the rows take 128 / span * depth bytes: b1 is b0) and the valign
 * rotates it: the bytes that come round before them meet zeros. The units' lane sums sit side
 * by side, span / 4 lanes each. */
PE_HVX_INLINE HVX_Vector pe_fc_small_acc(const int8_t *p, int32_t n, int32_t depth,
                                         const HVX_Vector *xg, const HVX_Vector *cg,
                                         const int32_t corr, const int32_t span)
{
    const uintptr_t a = (uintptr_t)p;
    const HVX_Vector b0 = *(const pe_hvx_block *)(a & ~(uintptr_t)127u);
    const HVX_Vector b1 = *(const pe_hvx_block *)((a + (uintptr_t)n - 1u) & ~(uintptr_t)127u);
    HVX_Vector acc = Q6_V_vzero(), sub = Q6_V_vzero();
    int32_t i;
    PE_HVX_UNROLL
    for (i = 0; i < 64 / span; ++i) {
        const int32_t r = (int32_t)(a & 127u) - (2 * i + 1) * (span - depth);
        const HVX_Vector w = Q6_V_valign_VVR(b1, b0, r & 127);
        acc = Q6_Vw_vrmpyacc_VwVubVb(acc, xg[i], w);
        if (corr) {
            sub = Q6_Vw_vrmpyacc_VwVubVb(sub, cg[i], w);
        }
    }
    return corr ? Q6_Vw_vsub_VwVw(acc, sub) : acc;
}

/* v (bytes 0 .. depth - 1, zeros after) at bytes off .. off + depth - 1 (0 <= off, off +
 * depth <= 128), zeros elsewhere. */
PE_HVX_INLINE HVX_Vector pe_hvx_place(HVX_Vector v, int32_t off)
{
    return Q6_V_vlalign_VVR(v, Q6_V_vzero(), off);
}

/* The input (or c) where pe_fc_small_acc's pairs of rows lie: at the end of slot 2i and the
 * start of slot 2i + 1. */
PE_HVX_INLINE void pe_fc_small_inputs(HVX_Vector v, int32_t depth, HVX_Vector g[2],
                                      const int32_t span)
{
    g[0] = Q6_V_vor_VV(depth == span ? v : pe_hvx_place(v, span - depth),
                       pe_hvx_place(v, span));
    if (span == 32) {
        g[1] = pe_hvx_place(g[0], 64);
    }
}

/* The tree of deals over 2 * pairs vectors of 128 / span units each, span / 4 lanes a unit:
 * every level sums adjacent lanes and packs two vectors into one (a lone vector with itself),
 * until each unit has one lane, unit u in lane u (log2(span / 4) levels). */
PE_HVX_INLINE HVX_Vector pe_fc_small_tree(const HVX_Vector *acc, const int32_t span,
                                          const int32_t pairs)
{
    HVX_Vector v[4];
    int32_t t, n, s;
    PE_HVX_UNROLL
    for (t = 0; t < pairs; ++t) {
        v[t] = pe_hvx_deal_fold(acc[2 * t], acc[2 * t + 1]);
    }
    n = pairs;
    PE_HVX_UNROLL
    for (s = span / 8; s > 1; s /= 2) {
        PE_HVX_UNROLL
        for (t = 0; 2 * t < n; ++t) {
            v[t] = pe_hvx_deal_fold(v[2 * t], 2 * t + 1 < n ? v[2 * t + 1] : v[2 * t]);
        }
        n = (n + 1) / 2;
    }
    return v[0];
}

/* sum_k w[u][k] * (x[k] + off) of the units u < units (<= 32) in lanes u, rows of depth <=
 * span (32 or 64) bytes at w. Units go 128 / span to a vector (2 * pairs vectors at most: the
 * smallest tree holds 1 to 2 * pairs vectors, the others pairs + 1 to 2 * pairs), then every
 * level of a tree of deals sums adjacent lanes and packs two vectors into one, until each
 * unit has one lane: log2(span / 4) levels. xu is x + 128 as unsigned bytes and c = 128 -
 * off, both zero past depth; c == 0 (off = 128: the input of a ReLU) leaves out the
 * c * sum w term. */
PE_HVX_INLINE HVX_Vector pe_fc_small_sums(HVX_Vector xu, HVX_Vector cv, const int8_t *w,
                                          int32_t depth, int32_t units, const int32_t span,
                                          const int32_t pairs, const int32_t smallest,
                                          const int32_t corr)
{
    const int32_t per = 128 / span;
    HVX_Vector xg[2], cg[2], acc[8];
    int32_t t;
    pe_fc_small_inputs(xu, depth, xg, span);
    if (corr) {
        pe_fc_small_inputs(cv, depth, cg, span);
    }
    PE_HVX_UNROLL
    for (t = 0; t < 2 * pairs; ++t) {
        const int32_t left = (units - t * per) * depth;
        acc[t] = t == 0 || (t <= pairs && !smallest) || left > 0
                     ? pe_fc_small_acc(w + t * per * depth, left < per * depth ? left
                                                                       : per * depth,
                                       depth, xg, cg, corr, span)
                     : Q6_V_vzero();
    }
    return pe_fc_small_tree(acc, span, pairs);
}

/* The same for rows of 64 < depth <= 512 bytes and at most 8 units, one unit to a vector (span
 * 128): per unit and 128 inputs one vrmpy by the input's 128 bytes (a whole vector of a row is
 * one vmemu, it is the row's; a row's last, shorter one reads just the blocks that hold it).
 * x is the input row, c = 128 - input offset. */
PE_HVX_INLINE HVX_Vector pe_fc_long_sums(const int8_t *x, int32_t c, const int8_t *w,
                                         int32_t depth, int32_t units, const int32_t pairs,
                                         const int32_t smallest, const int32_t corr)
{
    HVX_Vector xc[4], cc[4], acc[8];
    int32_t k, t;
    PE_HVX_UNROLL
    for (k = 0; k < 4; ++k) {
        const int32_t len = depth - 128 * k;
        xc[k] = cc[k] = Q6_V_vzero();
        if (len > 0) {
            const HVX_VectorPred keep = Q6_Q_vsetq2_R(len < 128 ? len : 128);
            xc[k] = Q6_V_vmux_QVV(keep, Q6_V_vxor_VV(pe_hvx_load(x + 128 * k, len),
                                                     Q6_Vb_vsplat_R(0x80)), Q6_V_vzero());
            cc[k] = Q6_V_vmux_QVV(keep, Q6_Vb_vsplat_R(c), Q6_V_vzero());
        }
    }
    PE_HVX_UNROLL
    for (t = 0; t < 2 * pairs; ++t) {
        HVX_Vector a = Q6_V_vzero(), b = Q6_V_vzero();
        if (t == 0 || (t <= pairs && !smallest) || t < units) {
            PE_HVX_UNROLL
            for (k = 0; k < 4; ++k) {
                const int32_t len = depth - 128 * k;
                if (len > 0) {
                    const HVX_Vector wv = pe_hvx_load(w + t * depth + 128 * k, len);
                    a = Q6_Vw_vrmpyacc_VwVubVb(a, xc[k], wv);
                    if (corr) {
                        b = Q6_Vw_vrmpyacc_VwVubVb(b, cc[k], wv);
                    }
                }
            }
        }
        acc[t] = corr ? Q6_Vw_vsub_VwVw(a, b) : a;
    }
    return pe_fc_small_tree(acc, 128, pairs);
}

/* One row: the sums of pe_fc_small_sums or pe_fc_long_sums (span 128) (span, pairs,
 * smallest, corr as there), the bias, one requantization and store. All of it in the
 * caller, specialised: the loads of the input, the weights and the bias interleave. */
PE_HVX_INLINE void pe_fc_small_row(const pe_fc_params *params, const int32_t *rq,
                                   const int8_t *x, const int8_t *w, const int32_t *bias,
                                   int32_t depth, int32_t units, int8_t *out, const int32_t span,
                                   const int32_t pairs, const int32_t smallest,
                                   const int32_t corr)
{
    const int32_t c = 128 - params->input_offset;
    /* no bias: a block of zeros, so that the load is not behind a branch */
    static const pe_hvx_block zeros;
    const HVX_Vector b = pe_hvx_load_n(bias != 0 ? (const void *)bias : (const void *)&zeros,
                                       4 * units);
    HVX_Vector acc, v, y;
    if (span == 128) {
        acc = pe_fc_long_sums(x, c, w, depth, units, pairs, smallest, corr);
    } else {
        const HVX_VectorPred keep = Q6_Q_vsetq2_R(depth);
        const HVX_Vector xu = Q6_V_vmux_QVV(keep, Q6_V_vxor_VV(pe_hvx_load_n(x, depth),
                                                               Q6_Vb_vsplat_R(0x80)),
                                            Q6_V_vzero());
        const HVX_Vector cv = corr ? Q6_V_vmux_QVV(keep, Q6_Vb_vsplat_R(c), Q6_V_vzero())
                                   : Q6_V_vzero();
        acc = pe_fc_small_sums(xu, cv, w, depth, units, span, pairs, smallest, corr);
    }
    v = Q6_Vw_vadd_VwVw(pe_hvx_mbqm(Q6_Vw_vadd_VwVw(acc, b), rq),
                        Q6_V_vsplat_R(params->output_offset));
    if (params->activation.min <= -128 && params->activation.max >= 127) {
        y = pe_hvx_bytes2(v, v);        /* the saturating packs are the clamp */
    } else {
        y = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(v, Q6_V_vsplat_R(params->activation.min)),
                            Q6_V_vsplat_R(params->activation.max));
        y = pe_hvx_bytes2(y, y);
    }
    pe_hvx_store_n(out, y, units);
}

/* pe_fc_small_row by the input offset (c == 0: no c * sum w), the row length and the number
 * of vectors the units fill. */
PE_HVX_INLINE void pe_fc_small(const pe_fc_params *params, const int32_t *rq, const int8_t *x,
                               const int8_t *w, const int32_t *bias, int32_t depth,
                               int32_t units, int8_t *out)
{
#define PE_FC_SMALL_ROW(span, pairs, smallest, corr) \
    pe_fc_small_row(params, rq, x, w, bias, depth, units, out, span, pairs, smallest, corr)
#define PE_FC_SMALL_TREES(corr)                                                              \
    if (depth > 64) {                                                                        \
        if (units <= 2) {                                                                    \
            PE_FC_SMALL_ROW(128, 1, 1, corr);                                                \
        } else if (units <= 4) {                                                             \
            PE_FC_SMALL_ROW(128, 2, 0, corr);                                                \
        } else {                                                                             \
            PE_FC_SMALL_ROW(128, 4, 0, corr);                                                \
        }                                                                                    \
    } else if (depth > 32) {                                                                 \
        if (units <= 8) {                                                                    \
            PE_FC_SMALL_ROW(64, 2, 1, corr);                                                 \
        } else {                                                                             \
            PE_FC_SMALL_ROW(64, 4, 0, corr);                                                 \
        }                                                                                    \
    } else if (units <= 8) {                                                                 \
        PE_FC_SMALL_ROW(32, 1, 1, corr);                                                     \
    } else if (units <= 16) {                                                                \
        PE_FC_SMALL_ROW(32, 2, 0, corr);                                                     \
    } else {                                                                                 \
        PE_FC_SMALL_ROW(32, 4, 0, corr);                                                     \
    }
    if (params->input_offset == 128) {
        PE_FC_SMALL_TREES(0)
    } else {
        PE_FC_SMALL_TREES(1)
    }
#undef PE_FC_SMALL_TREES
#undef PE_FC_SMALL_ROW
}

/* Rows of a small layer one after the other (out of line: the one-row path stays lean). */
static inline __attribute__((noinline)) void pe_fc_small_rows(const pe_fc_params *params,
                                                              const int32_t *rq,
                                                              const int8_t *x, const int8_t *w,
                                                              const int32_t *bias,
                                                              int32_t rows, int32_t depth,
                                                              int32_t units, int8_t *out)
{
    int32_t r;
    for (r = 0; r < rows; ++r) {
        const int8_t *wr = w;
        int32_t d = depth, u = units;
        /* the units' addresses are not worked out (and spilled) ahead of the loop */
        __asm__ volatile("" : "+r"(wr), "+r"(d), "+r"(u));
        pe_fc_small(params, rq, x + r * d, wr, bias, d, u, out + r * u);
    }
}

/* The ref kernel's arguments (rq in place of the quant struct, as the other hvx kernels); the
 * layer sizes above. */
PE_HVX_INLINE void pe_fully_connected_s8_small_hvx(const pe_context *ctx,
                                                   const pe_fc_params *params,
                                                   const int32_t *rq,
                                                   const pe_dims *input_dims,
                                                   const int8_t *input,
                                                   const pe_dims *filter_dims,
                                                   const int8_t *filter, const int32_t *bias,
                                                   const pe_dims *output_dims, int8_t *output)
{
    (void)ctx;
    (void)filter_dims;
    if (output_dims->n == 1 && output_dims->h == 1 && output_dims->w == 1) {
        pe_fc_small(params, rq, input, filter, bias, input_dims->c, output_dims->c, output);
    } else {
        pe_fc_small_rows(params, rq, input, filter, bias,
                         output_dims->n * output_dims->h * output_dims->w, input_dims->c,
                         output_dims->c, output);
    }
}

#endif /* PE_HVX_FC_SMALL_H */
