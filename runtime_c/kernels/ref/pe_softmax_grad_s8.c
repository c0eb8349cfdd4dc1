/* pe_softmax_grad_s8 - int8 gradient of a mid-graph softmax (y: scale 1/256, zero point
 * -128), integer only (codegen/golden/train_grads.py softmax_grad_i8), per row:
 *
 *   u[j] = y[j] + y_offset (in [0, 255]);  sdot = sum of dy_q[j] * u[j]
 *   D[i] = 256 * dy_q[i] - sdot;  r1 = max(0, bitlen(max |D| over all rows) - 15)
 *   t[i] = u[i] * RDBPOT(D[i], r1);  (dx, e_dx) = rescale(t, e - 16 + r1, beta)
 *
 * Three passes over the rows (max |D|, extremes of t, values); sdot is recomputed per pass.
 */
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"

static int32_t pe_row_dot(const int8_t *g, const int8_t *p, int32_t y_offset, int32_t n)
{
    int32_t sum = 0;
    int32_t j;
    for (j = 0; j < n; ++j) {
        sum += g[j] * (p[j] + y_offset);
    }
    return sum;
}

void pe_softmax_grad_s8(const pe_softmax_grad_params *params, int32_t num_rows,
                        int32_t row_size, const int8_t *dy, const int32_t *dy_exp,
                        const int8_t *y, int8_t *dx, int32_t *dx_exp)
{
    const int32_t off = params->y_offset;
    pe_range d_range = pe_range_zero();
    pe_range t_range = pe_range_zero();
    pe_rescale_plan plan;
    int32_t r1, r, j;
    for (r = 0; r < num_rows; ++r) {
        const int8_t *g = dy + r * row_size;
        const int32_t sdot = pe_row_dot(g, y + r * row_size, off, row_size);
        for (j = 0; j < row_size; ++j) {
            pe_range_add(&d_range, 256 * g[j] - sdot);
        }
    }
    r1 = pe_bitlen_u32(pe_range_max_abs(&d_range)) - 15;
    r1 = r1 > 0 ? r1 : 0;
    for (r = 0; r < num_rows; ++r) {
        const int8_t *g = dy + r * row_size;
        const int8_t *p = y + r * row_size;
        const int32_t sdot = pe_row_dot(g, p, off, row_size);
        for (j = 0; j < row_size; ++j) {
            pe_range_add(&t_range, (p[j] + off)
                                   * pe_rounding_divide_by_pot(256 * g[j] - sdot, r1));
        }
    }
    plan = pe_rescale_plan_make(&t_range, params->beta_multiplier);
    for (r = 0; r < num_rows; ++r) {
        const int8_t *g = dy + r * row_size;
        const int8_t *p = y + r * row_size;
        const int32_t sdot = pe_row_dot(g, p, off, row_size);
        for (j = 0; j < row_size; ++j) {
            dx[r * row_size + j] = pe_rescale_value(
                (p[j] + off) * pe_rounding_divide_by_pot(256 * g[j] - sdot, r1),
                params->beta_multiplier, &plan);
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp - 16 + r1, params->beta_shift, &plan);
}
