/*
 * pe_hvx.h - building blocks of the hvx backend's kernels (runtime_c/kernels/hvx): Hexagon
 * HVX in 128-byte mode (v66 / v67), through clang's intrinsics (Q6_*). Integer only: the
 * v68+ float instructions crash qemu-hexagon 7.2 and the int8 backward needs none.
 *
 * Memory. Activations sit anywhere in the arena (16-byte aligned at best) and rows of any
 * length, so every vector access goes through these helpers:
 *   pe_hvx_loadu / pe_hvx_storeu   128 bytes at any address (vmemu), where all 128 are the
 *                                  buffer's;
 *   pe_hvx_load_n / pe_hvx_store_n the first n <= 128 bytes only: aligned loads of just the
 *                                  128-byte blocks that hold them (so a tail never reads a
 *                                  block, or a page, the buffer does not reach) and two
 *                                  masked aligned stores (bytes outside [p, p + n) are not
 *                                  written).
 * Pointers to these vector types may alias anything (may_alias): kernels read int8 buffers as
 * vectors and words without breaking C's aliasing rules.
 *
 * Requantization (TFLM MultiplyByQuantizedMultiplier, double rounding), per lane, from five
 * vectors of int32 per 32 lanes that the code generator computes
 * (codegen/backends/hvx.py rq_words): {m, l, r, 2^r - 1, (2^r - 1) >> 1}:
 *   x = acc << l                                  (vasl, wraps like TFLM's int32 product)
 *   t = SRDHM(x, m)  = vmpyo(x, m):<<1:rnd:sat:shift over vmpye(x, m): floor((x*m + 2^30) /
 *                     2^31), saturated, which is TFLM's rounding for every sign
 *   q = (t >> r) + ((t & mask) > mask / 2 + (t < 0))   RoundingDivideByPOT, exactly
 * A plain (t + 2^(r-1)) >> r would differ from TFLM on negative ties (NUMERICS).
 */
#ifndef PE_HVX_H
#define PE_HVX_H

#include <stdint.h>

#include <hexagon_protos.h>
#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

#if !defined(__HVX__) || __HVX_LENGTH__ != 128
#error "the hvx kernels need HVX in 128-byte mode (-mhvx -mhvx-length=128b)"
#endif

#define PE_HVX_INLINE static inline __attribute__((always_inline))
/* A loop unrolled whole (arrays of vectors indexed by its counter stay in registers). */
#define PE_HVX_UNROLL _Pragma("clang loop unroll(full)")

enum {
    PE_HVX_BYTES = 128,           /* one vector */
    PE_HVX_WORDS = 32,            /* int32 lanes of a vector */
    PE_HVX_RQ = 5                 /* requantization vectors per 32 lanes */
};

typedef long pe_hvx_any __attribute__((__vector_size__(128), __aligned__(1), __may_alias__));
typedef long pe_hvx_block __attribute__((__vector_size__(128), __aligned__(128),
                                        __may_alias__));
typedef int32_t pe_hvx_word __attribute__((__aligned__(4), __may_alias__));
typedef int16_t pe_hvx_half __attribute__((__aligned__(2), __may_alias__));

PE_HVX_INLINE HVX_Vector pe_hvx_loadu(const void *p)
{
    return *(const pe_hvx_any *)p;
}

PE_HVX_INLINE void pe_hvx_storeu(void *p, HVX_Vector v)
{
    *(pe_hvx_any *)p = v;
}

/* A pointer rounded up to the next multiple of 128 (scratch buffers). */
PE_HVX_INLINE void *pe_hvx_align(void *p)
{
    return (void *)(((uintptr_t)p + 127u) & ~(uintptr_t)127u);
}

/* The first n bytes at p (0 < n <= 128); lanes n.. are whatever the blocks hold. The two
 * aligned blocks read are those of the first and the last byte (the same block when they
 * share one): no branch, and nothing read outside blocks the buffer reaches. */
PE_HVX_INLINE HVX_Vector pe_hvx_load_n(const void *p, int32_t n)
{
    const uintptr_t a = (uintptr_t)p;
    const HVX_Vector v0 = *(const pe_hvx_block *)(a & ~(uintptr_t)127u);
    const HVX_Vector v1 = *(const pe_hvx_block *)((a + (uintptr_t)n - 1u) & ~(uintptr_t)127u);
    return Q6_V_valign_VVR(v1, v0, (int32_t)(a & 127u));
}

/* Store lanes 0..n-1 of v at p (0 <= n <= 128), nothing else. */
PE_HVX_INLINE void pe_hvx_store_n(void *p, HVX_Vector v, int32_t n)
{
    const uintptr_t a = (uintptr_t)p;
    HVX_Vector *base = (HVX_Vector *)(a & ~(uintptr_t)127u);
    const int32_t off = (int32_t)(a & 127u);
    const int32_t end = off + n;
    HVX_Vector r;
    HVX_VectorPred before;
    if (n <= 0) {
        return;
    }
    r = Q6_V_vlalign_VVR(v, v, off);
    before = Q6_Q_vsetq_R(off);
    if (end > 128) {
        Q6_vmem_QRIV(Q6_Q_vsetq_R(end - 128), base + 1, r);
        Q6_vmem_QnRIV(before, base, r);
    } else {
        Q6_vmem_QRIV(Q6_Q_and_QQn(Q6_Q_vsetq2_R(end), before), base, r);
    }
}

/* Store n bytes, a whole vector at once when n is 128. */
PE_HVX_INLINE void pe_hvx_store(void *p, HVX_Vector v, int32_t n)
{
    if (n >= 128) {
        pe_hvx_storeu(p, v);
    } else {
        pe_hvx_store_n(p, v, n);
    }
}

/* The first n (<= 128) bytes at p, or all 128 when n is 128 (one vmemu). */
PE_HVX_INLINE HVX_Vector pe_hvx_load(const void *p, int32_t n)
{
    return n >= 128 ? pe_hvx_loadu(p) : pe_hvx_load_n(p, n);
}

/* Fill n bytes at p with the byte b. */
PE_HVX_INLINE void pe_hvx_fill(void *p, int32_t b, int32_t n)
{
    uint8_t *d = (uint8_t *)p;
    const HVX_Vector v = Q6_Vb_vsplat_R(b);
    int32_t i;
    for (i = 0; i + 128 <= n; i += 128) {
        pe_hvx_storeu(d + i, v);
    }
    pe_hvx_store_n(d + i, v, n - i);
}

/* Copy n bytes (buffers that do not overlap). */
PE_HVX_INLINE void pe_hvx_copy(void *dst, const void *src, int32_t n)
{
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    int32_t i;
    for (i = 0; i + 128 <= n; i += 128) {
        pe_hvx_storeu(d + i, pe_hvx_loadu(s + i));
    }
    if (i < n) {
        pe_hvx_store_n(d + i, pe_hvx_load_n(s + i, n - i), n - i);
    }
}

/* SaturatingRoundingDoublingHighMul per int32 lane (m: any int32). */
PE_HVX_INLINE HVX_Vector pe_hvx_srdhm(HVX_Vector x, HVX_Vector m)
{
    return Q6_Vw_vmpyoacc_VwVwVh_s1_rnd_sat_shift(Q6_Vw_vmpye_VwVuh(x, m), x, m);
}

/* RoundingDivideByPOT per lane: r the shift, mask = 2^r - 1, half = mask >> 1. */
PE_HVX_INLINE HVX_Vector pe_hvx_rdbpot(HVX_Vector t, HVX_Vector r, HVX_Vector mask,
                                       HVX_Vector half)
{
    const HVX_Vector one = Q6_V_vsplat_R(1);
    const HVX_Vector rem = Q6_V_vand_VV(t, mask);
    const HVX_Vector thr = Q6_Vw_condacc_QVwVw(Q6_Q_vcmp_gt_VwVw(Q6_V_vzero(), t), half, one);
    const HVX_Vector q = Q6_Vw_vasr_VwVw(t, r);
    return Q6_Vw_condacc_QVwVw(Q6_Q_vcmp_gt_VwVw(rem, thr), q, one);
}

/* MultiplyByQuantizedMultiplier per lane with the five vectors at q (pe_hvx.h's header). */
PE_HVX_INLINE HVX_Vector pe_hvx_mbqm(HVX_Vector acc, const int32_t *q)
{
    const HVX_Vector x = Q6_Vw_vasl_VwVw(acc, pe_hvx_loadu(q + 32));
    const HVX_Vector t = pe_hvx_srdhm(x, pe_hvx_loadu(q));
    return pe_hvx_rdbpot(t, pe_hvx_loadu(q + 64), pe_hvx_loadu(q + 96),
                         pe_hvx_loadu(q + 128));
}

/* The five vectors of one multiplier and shift for every lane (per-tensor requantization). */
typedef struct {
    HVX_Vector m, l, r, mask, half;
} pe_hvx_rq;

PE_HVX_INLINE pe_hvx_rq pe_hvx_rq_make(int32_t multiplier, int32_t shift)
{
    pe_hvx_rq q;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int32_t mask = (int32_t)((1u << right) - 1u);
    q.m = Q6_V_vsplat_R(multiplier);
    q.l = Q6_V_vsplat_R(shift > 0 ? shift : 0);
    q.r = Q6_V_vsplat_R(right);
    q.mask = Q6_V_vsplat_R(mask);
    q.half = Q6_V_vsplat_R(mask >> 1);
    return q;
}

PE_HVX_INLINE HVX_Vector pe_hvx_mbqm_rq(HVX_Vector acc, const pe_hvx_rq *q)
{
    const HVX_Vector t = pe_hvx_srdhm(Q6_Vw_vasl_VwVw(acc, q->l), q->m);
    return pe_hvx_rdbpot(t, q->r, q->mask, q->half);
}

/* The int8 output stage: MBQM + zero point, clamped to [lo, hi] (splatted words). */
PE_HVX_INLINE HVX_Vector pe_hvx_requant(HVX_Vector acc, const int32_t *q, HVX_Vector zp,
                                        HVX_Vector lo, HVX_Vector hi)
{
    const HVX_Vector v = Q6_Vw_vadd_VwVw(pe_hvx_mbqm(acc, q), zp);
    return Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(v, lo), hi);
}

/* Two vectors of int32 values in int8 range as 64 bytes in lane order (lanes 0..63 of the
 * result: a's 32 words, then b's). */
PE_HVX_INLINE HVX_Vector pe_hvx_bytes2(HVX_Vector a, HVX_Vector b)
{
    const HVX_Vector h = Q6_Vh_vpack_VwVw_sat(b, a);
    return Q6_Vb_vpack_VhVh_sat(h, h);
}

/* Four vectors of int32 values in int8 range as 128 bytes in lane order (a, b, c, d). */
PE_HVX_INLINE HVX_Vector pe_hvx_bytes4(HVX_Vector a, HVX_Vector b, HVX_Vector c, HVX_Vector d)
{
    return Q6_Vb_vpack_VhVh_sat(Q6_Vh_vpack_VwVw_sat(d, c), Q6_Vh_vpack_VwVw_sat(b, a));
}

/* 128 bytes as four vectors of int32 in lane order (bytes 0-31, 32-63, 64-95, 96-127). */
PE_HVX_INLINE void pe_hvx_words4(HVX_Vector v, HVX_Vector out[4])
{
    const HVX_VectorPair h = Q6_Wh_vunpack_Vb(v);
    const HVX_VectorPair w0 = Q6_Ww_vunpack_Vh(Q6_V_lo_W(h));
    const HVX_VectorPair w1 = Q6_Ww_vunpack_Vh(Q6_V_hi_W(h));
    out[0] = Q6_V_lo_W(w0);
    out[1] = Q6_V_hi_W(w0);
    out[2] = Q6_V_lo_W(w1);
    out[3] = Q6_V_hi_W(w1);
}

/* A pixel position (image, row, column) walked in NHWC order with no division. */
typedef struct {
    int32_t b, y, x;
} pe_hvx_pos;

PE_HVX_INLINE void pe_hvx_pos_next(pe_hvx_pos *p, int32_t h, int32_t w)
{
    if (++p->x == w) {
        p->x = 0;
        if (++p->y == h) {
            p->y = 0;
            ++p->b;
        }
    }
}

/* The low 32 bits of a * b per int32 lane. */
PE_HVX_INLINE HVX_Vector pe_hvx_mul_lo(HVX_Vector a, HVX_Vector b)
{
    return Q6_Vw_vmpyieacc_VwVwVuh(Q6_Vw_vmpyieo_VhVh(a, b), a, b);
}

/* Bytes 0..63 of four vectors interleaved four by four: word i of out[0] holds (a[i], b[i],
 * c[i], d[i]) for i < 32, word i of out[1] the same for byte 32 + i. */
PE_HVX_INLINE void pe_hvx_interleave4(HVX_Vector a, HVX_Vector b, HVX_Vector c, HVX_Vector d,
                                      HVX_Vector out[2])
{
    const HVX_Vector ab = Q6_V_lo_W(Q6_W_vshuff_VVR(b, a, -1));
    const HVX_Vector cd = Q6_V_lo_W(Q6_W_vshuff_VVR(d, c, -1));
    const HVX_VectorPair t = Q6_W_vshuff_VVR(cd, ab, -2);
    out[0] = Q6_V_lo_W(t);
    out[1] = Q6_V_hi_W(t);
}

/* sums[c] = sum over the rows of m[r][c] (int8 rows of `cols` values, int32 sums; writes
 * exactly cols values). */
static inline void pe_hvx_column_sums(const int8_t *m, int32_t rows, int32_t cols,
                                      int32_t *sums)
{
    int32_t c0, r, j;
    for (c0 = 0; c0 < cols; c0 += 128) {
        const int32_t len = cols - c0 < 128 ? cols - c0 : 128;
        HVX_Vector acc[4] = {Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero()};
        for (r = 0; r < rows; ++r) {
            HVX_Vector w[4];
            pe_hvx_words4(pe_hvx_load(m + r * cols + c0, len), w);
            for (j = 0; j < 4; ++j) {
                acc[j] = Q6_Vw_vadd_VwVw(acc[j], w[j]);
            }
        }
        for (j = 0; j < 4 && 32 * j < len; ++j) {
            const int32_t n = len - 32 * j < 32 ? len - 32 * j : 32;
            pe_hvx_store(sums + c0 + 32 * j, acc[j], 4 * n);
        }
    }
}

/* The int8 input gradients' prescale dys = MBQM(dy << b, M_o, k_o) of n values (one dy
 * pixel or row) as int16 at dst, n rounded up to even (the pad 0); `pre`: rq vectors with b in
 * the left shifts (|dys| <= 127 * 2^b fits int16). */
static inline void pe_hvx_prescale_row(const int8_t *dy, int32_t n, const int32_t *pre,
                                       int16_t *dst)
{
    int32_t o0, j;
    for (o0 = 0; o0 < n; o0 += 128) {
        const int32_t len = n - o0 < 128 ? n - o0 : 128;
        HVX_Vector w[4];
        pe_hvx_words4(pe_hvx_load(dy + o0, len), w);
        for (j = 0; j < 4; ++j) {           /* the blocks of `pre` there are */
            w[j] = 32 * j < len ? pe_hvx_mbqm(w[j], pre + (o0 / 32 + j) * PE_HVX_RQ * 32)
                                : Q6_V_vzero();
        }
        pe_hvx_store(dst + o0, Q6_Vh_vpack_VwVw_sat(w[1], w[0]), 2 * (len < 64 ? len : 64));
        if (len > 64) {
            pe_hvx_store(dst + o0 + 64, Q6_Vh_vpack_VwVw_sat(w[3], w[2]), 2 * (len - 64));
        }
    }
    if (n & 1) {
        dst[n] = 0;
    }
}

/* The largest and the smallest int32 lane of v (all lanes). */
PE_HVX_INLINE int32_t pe_hvx_max_lane(HVX_Vector v)
{
    int32_t s;
    for (s = 64; s >= 4; s >>= 1) {
        v = Q6_Vw_vmax_VwVw(v, Q6_V_vror_VR(v, s));
    }
    return Q6_R_vextract_VR(v, 0);
}

PE_HVX_INLINE int32_t pe_hvx_min_lane(HVX_Vector v)
{
    int32_t s;
    for (s = 64; s >= 4; s >>= 1) {
        v = Q6_Vw_vmin_VwVw(v, Q6_V_vror_VR(v, s));
    }
    return Q6_R_vextract_VR(v, 0);
}

/* -- the int8 backward's integer arithmetic (pe_grad_fixed.h), per lane ----------------------
 * normalise(t, r): q = clamp(RDBPOT(t, r), -127, 127) with one shift r for the whole tensor;
 * the rescale's t = SRDHM(acc << l, M) with one l and M. */
typedef struct {
    HVX_Vector left;              /* l */
    HVX_Vector mult;              /* M */
    HVX_Vector right;             /* r */
    HVX_Vector mask;              /* 2^r - 1 */
    HVX_Vector half;              /* mask >> 1 */
} pe_hvx_rescale;

PE_HVX_INLINE pe_hvx_rescale pe_hvx_rescale_make(int32_t left, int32_t mult, int32_t right)
{
    pe_hvx_rescale p;
    const int32_t mask = (int32_t)((1u << right) - 1u);
    p.left = Q6_V_vsplat_R(left);
    p.mult = Q6_V_vsplat_R(mult);
    p.right = Q6_V_vsplat_R(right);
    p.mask = Q6_V_vsplat_R(mask);
    p.half = Q6_V_vsplat_R(mask >> 1);
    return p;
}

/* normalise of t (int32 lanes) at the plan's shift: int32 lanes in [-127, 127]. */
PE_HVX_INLINE HVX_Vector pe_hvx_normalise(HVX_Vector t, const pe_hvx_rescale *p)
{
    const HVX_Vector q = pe_hvx_rdbpot(t, p->right, p->mask, p->half);
    return Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(q, Q6_V_vsplat_R(-127)), Q6_V_vsplat_R(127));
}

/* rescale of acc: normalise(SRDHM(acc << l, M), r). */
PE_HVX_INLINE HVX_Vector pe_hvx_rescale_value(HVX_Vector acc, const pe_hvx_rescale *p)
{
    return pe_hvx_normalise(pe_hvx_srdhm(Q6_Vw_vasl_VwVw(acc, p->left), p->mult), p);
}

/* A running minimum and maximum of int32 lanes (start: 0, as pe_range). */
typedef struct {
    HVX_Vector lo;
    HVX_Vector hi;
} pe_hvx_range;

PE_HVX_INLINE pe_hvx_range pe_hvx_range_zero(void)
{
    pe_hvx_range r;
    r.lo = Q6_V_vzero();
    r.hi = Q6_V_vzero();
    return r;
}

PE_HVX_INLINE void pe_hvx_range_add(pe_hvx_range *r, HVX_Vector v)
{
    r->lo = Q6_Vw_vmin_VwVw(r->lo, v);
    r->hi = Q6_Vw_vmax_VwVw(r->hi, v);
}

#endif /* PE_HVX_H */
