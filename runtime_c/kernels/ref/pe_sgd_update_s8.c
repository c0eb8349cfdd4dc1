/* pe_sgd_update_s8_s8, pe_sgd_update_s8_s32 - int8-mode SGD on an int8 weight / int32 bias,
 * integer only (codegen/golden/train_optim.py sgd_update_i8), per trained entry with the
 * int32 gradient accumulator acc at exponent e and the channel's (M_c, k_c) = (qas, qas_shift):
 *
 *   G = master ? F : (buf1 ? 8 : 0)             (F = master_frac_bits)
 *   d = mbqm_sat(acc, M_c, k_c + e + G)         (the step in 2^-G parameter quanta)
 *   buf1 given: buf = sat32(RDBPOT(momentum_q15 * buf, 15) + d) (64-bit); s = buf; else s = d
 *   no master:  p = sat(p - (buf1 ? RDBPOT(s, 8) : s))                  (64-bit difference)
 *   master, int8 weight:  master = clamp(master - s, -(127 << F), 127 << F);
 *                         w = clamp(RDBPOT(master, F), -127, 127)
 *   master, int32 bias:   t = sat32(master - s); n = RDBPOT(t, F); master = t - n * 2^F;
 *                         b = sat32(b + n)
 *   saturated += the entries where the left shift of mbqm_sat or any of these clamps clipped
 */
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"
#include "pe_update.h"

enum {
    PE_MOMENTUM_FRAC_BITS = 8
};

/* v clamped to [lo, hi]; *saturated |= whether it clipped. */
static int32_t pe_clip_s64(int64_t v, int64_t lo, int64_t hi, int *saturated)
{
    if (v > hi || v < lo) {
        *saturated = 1;
        return (int32_t)(v > hi ? hi : lo);
    }
    return (int32_t)v;
}

/* One trained entry: grad acc, multiplier m, total shift (k_c + e + G). Returns 1 when the
 * update saturated. */
static int pe_sgd_entry(const pe_sgd_params *params, const pe_param_ref *param, int32_t p,
                        int32_t acc, int32_t m, int64_t shift, int32_t *buf, int32_t *master)
{
    const int32_t f = params->master_frac_bits;
    int saturated = pe_shl_saturates(acc, shift);
    int32_t s = pe_mul_by_multiplier_sat(acc, m, shift);
    if (buf != 0) {
        const int64_t decayed = pe_rounding_divide_by_pot_s64(
            (int64_t)params->momentum_q15 * *buf, 15);
        s = pe_clip_s64(decayed + s, INT32_MIN, INT32_MAX, &saturated);
        *buf = s;
    }
    if (master == 0) {
        const int32_t delta = buf != 0 ? pe_rounding_divide_by_pot(s, PE_MOMENTUM_FRAC_BITS) : s;
        pe_param_set(param, p, pe_clip_s64((int64_t)pe_param_get(param, p) - delta, param->lo,
                                           param->hi, &saturated));
    } else if (param->p8 != 0) {                 /* int8 weight: master = w in 2^-F quanta */
        const int64_t lim = (int64_t)127 << f;
        *master = pe_clip_s64((int64_t)*master - s, -lim, lim, &saturated);
        pe_param_set(param, p, pe_clamp_s32(pe_rounding_divide_by_pot(*master, f), -127, 127));
    } else {                                     /* int32 bias: master = remainder */
        const int32_t t = pe_clip_s64((int64_t)*master - s, INT32_MIN, INT32_MAX, &saturated);
        const int32_t n = pe_rounding_divide_by_pot(t, f);
        *master = (int32_t)((int64_t)t - (int64_t)n * ((int64_t)1 << f));
        pe_param_set(param, p, pe_clip_s64((int64_t)pe_param_get(param, p) + n, param->lo,
                                           param->hi, &saturated));
    }
    return saturated;
}

static void pe_sgd_s8(const pe_sgd_params *params, const pe_update_dims *dims,
                      const int32_t *channels, const pe_param_ref *param, const int32_t *grad,
                      const int32_t *qas, const int32_t *grad_exp, const int32_t *qas_shift,
                      int32_t *buf1, int32_t *master, int32_t *saturated)
{
    const int32_t g_bits = master != 0 ? params->master_frac_bits
                                       : buf1 != 0 ? PE_MOMENTUM_FRAC_BITS : 0;
    int32_t count = 0;
    int32_t o, j, k;
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            const int32_t p0 = pe_update_param_base(dims, channels, o, j);
            const int32_t g0 = pe_update_grad_base(dims, o, j);
            const int64_t shift = (int64_t)qas_shift[j] + *grad_exp + g_bits;
            for (k = 0; k < dims->inner; ++k) {
                const int32_t i = g0 + k;
                count += pe_sgd_entry(params, param, p0 + k, grad[i], qas[j], shift,
                                      buf1 != 0 ? &buf1[i] : 0, master != 0 ? &master[i] : 0);
            }
        }
    }
    pe_count_saturated(saturated, count);
}

void pe_sgd_update_s8_s8(const pe_sgd_params *params, const pe_update_dims *dims,
                         const int32_t *channels, int8_t *param, const int32_t *grad,
                         const int32_t *qas, const int32_t *grad_exp, const int32_t *qas_shift,
                         int32_t *buf1, int32_t *master, int32_t *saturated)
{
    const pe_param_ref p = pe_param_s8(param);
    pe_sgd_s8(params, dims, channels, &p, grad, qas, grad_exp, qas_shift, buf1, master,
              saturated);
}

void pe_sgd_update_s8_s32(const pe_sgd_params *params, const pe_update_dims *dims,
                          const int32_t *channels, int32_t *param, const int32_t *grad,
                          const int32_t *qas, const int32_t *grad_exp,
                          const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                          int32_t *saturated)
{
    const pe_param_ref p = pe_param_s32(param, dims);
    pe_sgd_s8(params, dims, channels, &p, grad, qas, grad_exp, qas_shift, buf1, master,
              saturated);
}
