/*
 * pe_arm_f32.h - float32 building blocks of the arm backend's fp32 backward kernels.
 *
 * The fp32 backward is bit-exact with the golden model (docs/training.md fixes every
 * summation order): each sum starts from +0.0f and adds its products one by one in the given
 * order, every product and every sum rounded to float32. The loops here keep exactly those
 * operations and reorder nothing but independent sums: they compute eight (or four) sums side
 * by side. On cores with a single-precision FPU they are assembly: VLDM loads eight floats in
 * one instruction and VMLA.F32 multiplies and accumulates with the product rounded first (a
 * non-fused multiply-accumulate, unlike VFMA), so a product-and-sum costs one instruction
 * plus a share of one load. Elsewhere the same operations in C (compiled with
 * -ffp-contract=off, as every kernel is).
 */
#ifndef PE_ARM_F32_H
#define PE_ARM_F32_H

#include <stdint.h>

#if defined(__ARM_FP) && (__ARM_FP & 4) && defined(__GNUC__) && defined(__thumb2__)
#define PE_ARM_VFP 1
#else
#define PE_ARM_VFP 0
#endif

/* s0..s7 += g * s16..s23 (g: one S register), eight non-fused multiply-accumulates */
#define PE_ARM_VMLA8(g)                                                                     \
    "vmla.f32 s0, " g ", s16\n\t"                                                         \
    "vmla.f32 s1, " g ", s17\n\t"                                                         \
    "vmla.f32 s2, " g ", s18\n\t"                                                         \
    "vmla.f32 s3, " g ", s19\n\t"                                                         \
    "vmla.f32 s4, " g ", s20\n\t"                                                         \
    "vmla.f32 s5, " g ", s21\n\t"                                                         \
    "vmla.f32 s6, " g ", s22\n\t"                                                         \
    "vmla.f32 s7, " g ", s23\n\t"

/* out[j] = from[j] + sum of g[k] * w[8k + j] over k = 0..n-1 in order, j = 0..7: eight sums
 * over n terms (g: n floats; w: n rows of 8 floats; from and out may be the same). Four terms
 * per loop pass (one VLDM of four g, four VLDMs of eight w, 32 VMLAs), the rest one by one. */
static inline void pe_arm_f32_axpy8(const float *from, float *out, const float *g,
                                    const float *w, int32_t n)
{
#if PE_ARM_VFP
    if (n > 0) {
        const float *gp = g;
        const float *wp = w;
        int32_t quads = n >> 2;
        int32_t rest = n & 3;
        __asm__ volatile(
            "vldmia %[from], {s0-s7}\n\t"
            "cmp %[q], #0\n\t"
            "beq 2f\n\t"
            "1:\n\t"
            "vldmia %[g]!, {s24-s27}\n\t"
            "vldmia %[w]!, {s16-s23}\n\t"
            PE_ARM_VMLA8("s24")
            "vldmia %[w]!, {s16-s23}\n\t"
            PE_ARM_VMLA8("s25")
            "vldmia %[w]!, {s16-s23}\n\t"
            PE_ARM_VMLA8("s26")
            "vldmia %[w]!, {s16-s23}\n\t"
            PE_ARM_VMLA8("s27")
            "subs %[q], %[q], #1\n\t"
            "bne 1b\n\t"
            "2:\n\t"
            "cmp %[r], #0\n\t"
            "beq 4f\n\t"
            "3:\n\t"
            "vldmia %[g]!, {s24}\n\t"
            "vldmia %[w]!, {s16-s23}\n\t"
            PE_ARM_VMLA8("s24")
            "subs %[r], %[r], #1\n\t"
            "bne 3b\n\t"
            "4:\n\t"
            "vstmia %[out], {s0-s7}\n\t"
            : [g] "+r"(gp), [w] "+r"(wp), [q] "+r"(quads), [r] "+r"(rest)
            : [from] "r"(from), [out] "r"(out)
            : "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s16", "s17",
              "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26", "s27");
    }
#else
    float acc[8];
    int32_t k, j;
    for (j = 0; j < 8; ++j) {
        acc[j] = from[j];
    }
    for (k = 0; k < n; ++k) {
        for (j = 0; j < 8; ++j) {
            acc[j] = acc[j] + g[k] * w[8 * k + j];
        }
    }
    for (j = 0; j < 8; ++j) {
        out[j] = acc[j];
    }
#endif
}

/* out[j] = from[j] + sum over k = 0..n-1 of g[k] * (float(w[k * wstride + j]) * scale[k]),
 * j = 0..7: eight sums over n terms whose weights are int8 rows converted on the way (one
 * position of a fully connected layer's input gradient, where converting the weights into a
 * buffer first would not pay). */
static inline void pe_arm_f32_axpy8_s8(const float *from, float *out, const float *g,
                                       const int8_t *w, int32_t wstride, const float *scale,
                                       int32_t n)
{
#if PE_ARM_VFP
    if (n > 0) {
        const float *gp = g;
        const float *sp = scale;
        const int8_t *wp = w;
        int32_t k = n;
        uint32_t r0, r1, r2, r3;
        __asm__ volatile(
            "vldmia %[from], {s0-s7}\n\t"
            "1:\n\t"
            "ldr %[r0], [%[w]]\n\t"
            "ldr %[r1], [%[w], #4]\n\t"
            "add %[w], %[w], %[ws]\n\t"
            "vldmia %[g]!, {s24}\n\t"
            "vldmia %[s]!, {s25}\n\t"
            "sxtb %[r2], %[r0]\n\t"
            "sxtb %[r3], %[r0], ror #8\n\t"
            "vmov s16, s17, %[r2], %[r3]\n\t"
            "sxtb %[r2], %[r0], ror #16\n\t"
            "sxtb %[r3], %[r0], ror #24\n\t"
            "vmov s18, s19, %[r2], %[r3]\n\t"
            "sxtb %[r2], %[r1]\n\t"
            "sxtb %[r3], %[r1], ror #8\n\t"
            "vmov s20, s21, %[r2], %[r3]\n\t"
            "sxtb %[r2], %[r1], ror #16\n\t"
            "sxtb %[r3], %[r1], ror #24\n\t"
            "vmov s22, s23, %[r2], %[r3]\n\t"
            "vcvt.f32.s32 s16, s16\n\t"
            "vcvt.f32.s32 s17, s17\n\t"
            "vcvt.f32.s32 s18, s18\n\t"
            "vcvt.f32.s32 s19, s19\n\t"
            "vcvt.f32.s32 s20, s20\n\t"
            "vcvt.f32.s32 s21, s21\n\t"
            "vcvt.f32.s32 s22, s22\n\t"
            "vcvt.f32.s32 s23, s23\n\t"
            "vmul.f32 s16, s16, s25\n\t"
            "vmul.f32 s17, s17, s25\n\t"
            "vmul.f32 s18, s18, s25\n\t"
            "vmul.f32 s19, s19, s25\n\t"
            "vmul.f32 s20, s20, s25\n\t"
            "vmul.f32 s21, s21, s25\n\t"
            "vmul.f32 s22, s22, s25\n\t"
            "vmul.f32 s23, s23, s25\n\t"
            PE_ARM_VMLA8("s24")
            "subs %[k], %[k], #1\n\t"
            "bne 1b\n\t"
            "vstmia %[out], {s0-s7}\n\t"
            : [g] "+r"(gp), [s] "+r"(sp), [w] "+r"(wp), [k] "+r"(k), [r0] "=&r"(r0),
              [r1] "=&r"(r1), [r2] "=&r"(r2), [r3] "=&r"(r3)
            : [from] "r"(from), [out] "r"(out), [ws] "r"(wstride)
            : "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s16", "s17",
              "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25");
    }
#else
    float acc[8];
    int32_t k, j;
    for (j = 0; j < 8; ++j) {
        acc[j] = from[j];
    }
    for (k = 0; k < n; ++k) {
        for (j = 0; j < 8; ++j) {
            acc[j] = acc[j] + g[k] * ((float)w[k * wstride + j] * scale[k]);
        }
    }
    for (j = 0; j < 8; ++j) {
        out[j] = acc[j];
    }
#endif
}

/* acc[j] += a_k[j] * w_k[j] for k = 0..n-1 in order, j = 0..7, where a_k = a + k * astep and
 * w_k = w + k * wstep (floats; astep may be negative): eight sums over n terms with regular
 * strides (a row of depthwise taps). */
static inline void pe_arm_f32_taps8(float *acc, const float *a, int32_t astep, const float *w,
                                    int32_t wstep, int32_t n)
{
#if PE_ARM_VFP
    if (n > 0) {
        const float *ap = a;
        const float *wp = w;
        int32_t k = n;
        const int32_t ab = astep * (int32_t)sizeof(float);
        const int32_t wb = wstep * (int32_t)sizeof(float);
        __asm__ volatile(
            "vldmia %[acc], {s0-s7}\n\t"
            "1:\n\t"
            "vldmia %[a], {s8-s15}\n\t"
            "vldmia %[w], {s16-s23}\n\t"
            "add %[a], %[a], %[ab]\n\t"
            "add %[w], %[w], %[wb]\n\t"
            "vmla.f32 s0, s8, s16\n\t"
            "vmla.f32 s1, s9, s17\n\t"
            "vmla.f32 s2, s10, s18\n\t"
            "vmla.f32 s3, s11, s19\n\t"
            "vmla.f32 s4, s12, s20\n\t"
            "vmla.f32 s5, s13, s21\n\t"
            "vmla.f32 s6, s14, s22\n\t"
            "vmla.f32 s7, s15, s23\n\t"
            "subs %[k], %[k], #1\n\t"
            "bne 1b\n\t"
            "vstmia %[acc], {s0-s7}\n\t"
            : [a] "+r"(ap), [w] "+r"(wp), [k] "+r"(k)
            : [acc] "r"(acc), [ab] "r"(ab), [wb] "r"(wb)
            : "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9",
              "s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20",
              "s21", "s22", "s23");
    }
#else
    int32_t k, j;
    for (k = 0; k < n; ++k) {
        for (j = 0; j < 8; ++j) {
            acc[j] = acc[j] + a[k * astep + j] * w[k * wstep + j];
        }
    }
#endif
}

/* acc[j] += g0 * x0[j], then += g1 * x1[j], += g2 * x2[j], += g3 * x3[j], for j = 0..7
 * (x_k: 8 floats each): four terms of eight sums, in that order. */
static inline void pe_arm_f32_axpy8x4(float *acc, const float g[4], const float *x0,
                                      const float *x1, const float *x2, const float *x3)
{
#if PE_ARM_VFP
    __asm__ volatile(
        "vldmia %[acc], {s0-s7}\n\t"
        "vldmia %[g], {s24-s27}\n\t"
        "vldmia %[x0], {s16-s23}\n\t"
        PE_ARM_VMLA8("s24")
        "vldmia %[x1], {s16-s23}\n\t"
        PE_ARM_VMLA8("s25")
        "vldmia %[x2], {s16-s23}\n\t"
        PE_ARM_VMLA8("s26")
        "vldmia %[x3], {s16-s23}\n\t"
        PE_ARM_VMLA8("s27")
        "vstmia %[acc], {s0-s7}\n\t"
        :
        : [acc] "r"(acc), [g] "r"(g), [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2), [x3] "r"(x3)
        : "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s16", "s17", "s18",
          "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26", "s27");
#else
    int32_t j;
    for (j = 0; j < 8; ++j) {
        float a = acc[j];
        a = a + g[0] * x0[j];
        a = a + g[1] * x1[j];
        a = a + g[2] * x2[j];
        a = a + g[3] * x3[j];
        acc[j] = a;
    }
#endif
}

#endif /* PE_ARM_F32_H */
