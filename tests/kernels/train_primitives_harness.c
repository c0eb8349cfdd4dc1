/* Array wrappers around the static inline helpers of pe_train_float.h and pe_grad_fixed.h, so
 * the tests can compare them with codegen/golden (train_numerics, train_optim) through ctypes.
 * Compiled into the test's tmp_path, never into the source tree. */
#include <stdint.h>

#include "pe_grad_fixed.h"
#include "pe_train_float.h"

void t_logf(int32_t n, const float *x, float *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_logf(x[i]);
}

void t_sqrtf(int32_t n, const float *x, float *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_sqrtf(x[i]);
}

void t_roundf(int32_t n, const float *x, float *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_roundf(x[i]);
}

void t_round_sat(int32_t n, const float *x, int32_t lo, int32_t hi, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_round_sat_f32(x[i], lo, hi);
}

void t_round_sat_flag(int32_t n, const float *x, int32_t lo, int32_t hi, int32_t *out,
                      int32_t *flag)
{
    int32_t i;
    for (i = 0; i < n; ++i) {
        int saturated = -1;
        out[i] = pe_round_sat_flag_f32(x[i], lo, hi, &saturated);
        flag[i] = saturated;
    }
}

void t_shl_saturates(int32_t n, const int32_t *x, const int64_t *s, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_shl_saturates(x[i], s[i]);
}

void t_round_step(int32_t n, const float *x, int64_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_round_step_i64(x[i]);
}

void t_mbqm_sat(int32_t n, const int32_t *x, const int32_t *m, const int64_t *s, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_mul_by_multiplier_sat(x[i], m[i], s[i]);
}

void t_shift_exp(int32_t n, const int32_t *q, const int32_t *s, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_shift_exp(q[i], s[i]);
}

/* normalise (mode 0) or rescale by (m, k) (mode 1) of a whole int32 tensor, two passes like
 * the kernels; returns the exponent. */
int32_t t_rescale(int32_t n, const int32_t *acc, int32_t e, int32_t mode, int32_t m, int32_t k,
                  int8_t *out)
{
    pe_range range = pe_range_zero();
    int32_t i;
    for (i = 0; i < n; ++i) pe_range_add(&range, acc[i]);
    if (mode == 0) {
        const int32_t r = pe_normalise_shift(pe_range_max_abs(&range));
        for (i = 0; i < n; ++i) out[i] = pe_normalise_value(acc[i], r);
        return e + r;
    } else {
        const pe_rescale_plan plan = pe_rescale_plan_make(&range, m);
        for (i = 0; i < n; ++i) out[i] = pe_rescale_value(acc[i], m, &plan);
        return pe_rescale_exponent(e, k, &plan);
    }
}
