/* pe_sgd_update_s8_s8_arm, pe_sgd_update_s8_s32_arm - pe_sgd_update_s8_s8 / _s32 (ref,
 * pe_sgd_update_s8.c; codegen/golden/train_optim.py sgd_update_i8) for the plain case the
 * sparse fine-tunes use: no momentum and no master copy. Then each trained entry is
 *
 *   s = mbqm_sat(acc, M_j, k_j + e);  p = sat(p - s)   (saturated += clipped entries)
 *
 * in one loop per trained channel with the channel's multiplier and shift hoisted. With
 * l = max(k_j + e, 0) <= 30 and r = max(-(k_j + e), 0) <= 31: for |acc| < 2^(30 - l) the left
 * shift does not clip, TFLM's SRDHM(acc * 2^l, M) is SMMULR(acc * 2^(l + 1), M) exactly, and
 * the rounding shift RDBPOT(v, r) is (v + 2^(r-1) - [v < 0]) >> r (|v| < 2^30: no overflow);
 * other entries and channels take pe_grad_fixed.h's general form. Momentum and master copies
 * go to ref. */
#include "pe_arm.h"
#include "pe_arm_kernels.h"
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"
#include "pe_update.h"

/* A channel's form: shift = k_j + e; l1 = max(shift, 0) + 1, r = max(-shift, 0) and bound =
 * 2^(30 - l) when l <= 30 and r <= 31 (bound 0 otherwise: every entry general) */
typedef struct {
    int32_t shift, m, l1, r, half, neg;
    uint32_t bound;
} pe_arm_sgd_channel;

static inline pe_arm_sgd_channel pe_arm_sgd_form(int32_t m, int32_t shift)
{
    pe_arm_sgd_channel f;
    const int fast = shift <= 30 && shift >= -31;
    f.shift = shift;
    f.m = m;
    f.l1 = (fast && shift > 0 ? shift : 0) + 1;
    f.r = fast && shift < 0 ? -shift : 0;
    f.half = f.r > 0 ? (int32_t)1 << (f.r - 1) : 0;
    f.neg = f.r > 0 ? 1 : 0;
    f.bound = fast ? (uint32_t)1 << (31 - f.l1) : 0u;
    return f;
}

/* the fast step of an entry with |acc| < bound */
static inline int32_t pe_arm_sgd_fast(int32_t acc, const pe_arm_sgd_channel *f)
{
    const int32_t v = pe_arm_smmlar((int32_t)((uint32_t)acc << f->l1), f->m, 0);
    return pe_asr_s32(v + f->half - (v < 0 ? f->neg : 0), f->r);
}

/* the general form of one entry (pe_grad_fixed.h, 64-bit difference): the new value clamped
 * to [lo, hi]; *count += 1 when the left shift or the clamp clipped */
static int32_t pe_arm_sgd_general(int32_t p, int32_t acc, const pe_arm_sgd_channel *f,
                                  int32_t lo, int32_t hi, int32_t *count)
{
    const int sat = pe_shl_saturates(acc, f->shift);
    const int64_t v = (int64_t)p - pe_mul_by_multiplier_sat(acc, f->m, f->shift);
    if (sat || v > hi || v < lo) {
        *count += 1;
    }
    return v > hi ? hi : v < lo ? lo : (int32_t)v;
}

/* the walk of the plain case on an int8 weight: the fast step has |s| < 2^30, so p - s fits
 * in int32 */
static void pe_arm_sgd_s8(const pe_update_dims *dims, const int32_t *channels, int8_t *param,
                          const int32_t *grad, const int32_t *qas, int32_t e,
                          const int32_t *qas_shift, int32_t *count)
{
    int32_t o, j, k;
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            int8_t *const p = param + pe_update_param_base(dims, channels, o, j);
            const int32_t *const g = grad + pe_update_grad_base(dims, o, j);
            const pe_arm_sgd_channel f = pe_arm_sgd_form(qas[j], qas_shift[j] + e);
            for (k = 0; k < dims->inner; ++k) {
                const int32_t acc = g[k];
                int32_t t;
                if ((uint32_t)acc + f.bound < 2u * f.bound) {
                    t = p[k] - pe_arm_sgd_fast(acc, &f);
                    if ((uint32_t)(t + 127) > 254u) {
                        t = t < 0 ? -127 : 127;
                        *count += 1;
                    }
                } else {
                    t = pe_arm_sgd_general(p[k], acc, &f, -127, 127, count);
                }
                p[k] = (int8_t)t;
            }
        }
    }
}

/* the walk of the plain case on an int32 bias clamped to [lo, hi] (64-bit difference) */
static void pe_arm_sgd_s32(const pe_update_dims *dims, const int32_t *channels, int32_t *param,
                           const int32_t *grad, const int32_t *qas, int32_t e,
                           const int32_t *qas_shift, int32_t *count)
{
    const int32_t lo = dims->lo, hi = dims->hi;
    int32_t o, j, k;
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            int32_t *const p = param + pe_update_param_base(dims, channels, o, j);
            const int32_t *const g = grad + pe_update_grad_base(dims, o, j);
            const pe_arm_sgd_channel f = pe_arm_sgd_form(qas[j], qas_shift[j] + e);
            for (k = 0; k < dims->inner; ++k) {
                const int32_t acc = g[k];
                if ((uint32_t)acc + f.bound < 2u * f.bound) {
                    const int64_t t = (int64_t)p[k] - pe_arm_sgd_fast(acc, &f);
                    if (t > hi || t < lo) {
                        *count += 1;
                    }
                    p[k] = t > hi ? hi : t < lo ? lo : (int32_t)t;
                } else {
                    p[k] = pe_arm_sgd_general(p[k], acc, &f, lo, hi, count);
                }
            }
        }
    }
}

/* The plain case on a bias of one entry per channel (outer 1, inner 1; the usual shape): one
 * flat loop over the channels (no per-channel walk), each entry with its channel's form */
static void pe_arm_sgd_bias(int32_t n, const int32_t *channels, int32_t *param,
                            const int32_t *grad, const int32_t *qas, int32_t e,
                            const int32_t *qas_shift, int32_t lo, int32_t hi, int32_t *count)
{
    int32_t j;
    for (j = 0; j < n; ++j) {
        const int32_t acc = grad[j];
        const pe_arm_sgd_channel f = pe_arm_sgd_form(qas[j], qas_shift[j] + e);
        int32_t *const p = param + (channels != 0 ? channels[j] : j);
        if ((uint32_t)acc + f.bound < 2u * f.bound) {
            const int64_t t = (int64_t)*p - pe_arm_sgd_fast(acc, &f);
            if (t > hi || t < lo) {
                *count += 1;
            }
            *p = t > hi ? hi : t < lo ? lo : (int32_t)t;
        } else {
            *p = pe_arm_sgd_general(*p, acc, &f, lo, hi, count);
        }
    }
}

/* Whether the plain loops take the call: no momentum or master copy, and an exponent with
 * which k_j + e cannot overflow int32 (|k_j| < 2^30, as quantize_multiplier gives) */
static int pe_arm_sgd_plain(const int32_t *grad_exp, const int32_t *buf1,
                            const int32_t *master)
{
    return buf1 == 0 && master == 0 && *grad_exp >= -(1 << 24) && *grad_exp <= (1 << 24);
}

void pe_sgd_update_s8_s8_arm(const pe_sgd_params *params, const pe_update_dims *dims,
                             const int32_t *channels, int8_t *param, const int32_t *grad,
                             const int32_t *qas, const int32_t *grad_exp,
                             const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                             int32_t *saturated)
{
    int32_t count = 0;
    if (!pe_arm_sgd_plain(grad_exp, buf1, master)) {
        pe_sgd_update_s8_s8(params, dims, channels, param, grad, qas, grad_exp, qas_shift, buf1,
                            master, saturated);
        return;
    }
    pe_arm_sgd_s8(dims, channels, param, grad, qas, *grad_exp, qas_shift, &count);
    pe_count_saturated(saturated, count);
}

void pe_sgd_update_s8_s32_arm(const pe_sgd_params *params, const pe_update_dims *dims,
                              const int32_t *channels, int32_t *param, const int32_t *grad,
                              const int32_t *qas, const int32_t *grad_exp,
                              const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                              int32_t *saturated)
{
    int32_t count = 0;
    if (!pe_arm_sgd_plain(grad_exp, buf1, master)) {
        pe_sgd_update_s8_s32(params, dims, channels, param, grad, qas, grad_exp, qas_shift,
                             buf1, master, saturated);
        return;
    }
    if (dims->outer == 1 && dims->inner == 1) {
        pe_arm_sgd_bias(dims->count, channels, param, grad, qas, *grad_exp, qas_shift, dims->lo,
                        dims->hi, &count);
    } else {
        pe_arm_sgd_s32(dims, channels, param, grad, qas, *grad_exp, qas_shift, &count);
    }
    pe_count_saturated(saturated, count);
}
