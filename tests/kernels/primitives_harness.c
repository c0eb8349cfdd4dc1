/* Array wrappers around the static inline helpers of pe_requant.h and pe_fixedpoint.h, so
 * the tests can compare them with codegen/golden/numerics.py through ctypes. Compiled into
 * the test's tmp_path, never into the source tree. */
#include <stdint.h>

#include "pe_fixedpoint.h"
#include "pe_requant.h"

void t_srdhm(int32_t n, const int32_t *a, const int32_t *b, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_sat_rounding_doubling_high_mul(a[i], b[i]);
}

void t_rdbpot(int32_t n, const int32_t *x, const int32_t *e, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_rounding_divide_by_pot(x[i], e[i]);
}

void t_mbqm(int32_t n, const int32_t *x, const int32_t *m, const int32_t *s, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_multiply_by_quantized_multiplier(x[i], m[i], s[i]);
}

void t_mbqm_gt_one(int32_t n, const int32_t *x, const int32_t *m, const int32_t *s,
                   int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_multiply_by_quantized_multiplier_gt_one(x[i], m[i], s[i]);
}

void t_exp_q5_26(int32_t n, const int32_t *x, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_exp_on_negative_values_q5_26(x[i]);
}

void t_reciprocal(int32_t n, const int32_t *x, int32_t *out, int32_t *bits)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_get_reciprocal(x[i], 12, &bits[i]);
}

void t_clz(int32_t n, const uint32_t *x, int32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) out[i] = pe_count_leading_zeros_u32(x[i]);
}
