/* pe_add_grad_s8, pe_mul_grad_s8, pe_mean_grad_s8 - int8 gradients of broadcasting ops,
 * integer only (codegen/golden/train_grads.py add_grad_i8, mul_grad_i8, mean_grad_i8):
 *
 *   add:  acc = sum of dy_q over the broadcast dimensions; normalise(acc, e)
 *   mul:  acc = sum of dy_q * (other_q + offset); rescale(acc, e, M, k) (M, k of s_other)
 *   mean: (q, e') = rescale(dy_q, e, M, k) (M, k of 1/count), broadcast to dx
 * Sums are computed twice (extremes, then values).
 */
#include "pe_broadcast.h"
#include "pe_grad_fixed.h"
#include "pe_reduce_grad.h"
#include "pe_train_kernels.h"

static int32_t pe_add_acc(const pe_dims *dy_dims, const int8_t *dy, const pe_dims *r,
                          int32_t n, int32_t h, int32_t w, int32_t c)
{
    int32_t acc = 0;
    int32_t a, b, d, e;
    for (a = 0; a < r->n; ++a) {
        for (b = 0; b < r->h; ++b) {
            for (d = 0; d < r->w; ++d) {
                for (e = 0; e < r->c; ++e) {
                    acc += dy[pe_reduce_offset(dy_dims, n + a, h + b, w + d, c + e)];
                }
            }
        }
    }
    return acc;
}

void pe_add_grad_s8(const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                    const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const pe_dims r = pe_reduced_dims(dy_dims, dx_dims);
    pe_range range = pe_range_zero();
    int32_t shift;
    int32_t n, h, w, c;
    int8_t *out = dx;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    pe_range_add(&range, pe_add_acc(dy_dims, dy, &r, n, h, w, c));
                }
            }
        }
    }
    shift = pe_normalise_shift(pe_range_max_abs(&range));
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    *out++ = pe_normalise_value(pe_add_acc(dy_dims, dy, &r, n, h, w, c), shift);
                }
            }
        }
    }
    *dx_exp = *dy_exp + shift;
}

static int32_t pe_mul_acc(const pe_mul_grad_params *params, const pe_dims *dy_dims,
                          const int8_t *dy, const pe_dims *os, const int8_t *other,
                          const pe_dims *r, int32_t n, int32_t h, int32_t w, int32_t c)
{
    int32_t acc = 0;
    int32_t a, b, d, e;
    for (a = 0; a < r->n; ++a) {
        for (b = 0; b < r->h; ++b) {
            for (d = 0; d < r->w; ++d) {
                for (e = 0; e < r->c; ++e) {
                    acc += dy[pe_reduce_offset(dy_dims, n + a, h + b, w + d, c + e)]
                           * (other[pe_broadcast_offset(os, n + a, h + b, w + d, c + e)]
                              + params->other_offset);
                }
            }
        }
    }
    return acc;
}

void pe_mul_grad_s8(const pe_mul_grad_params *params, const pe_dims *dy_dims, const int8_t *dy,
                    const int32_t *dy_exp, const pe_dims *other_dims, const int8_t *other,
                    const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const pe_dims r = pe_reduced_dims(dy_dims, dx_dims);
    const pe_dims os = pe_broadcast_strides(other_dims);
    pe_range range = pe_range_zero();
    pe_rescale_plan plan;
    int32_t n, h, w, c;
    int8_t *out = dx;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    pe_range_add(&range, pe_mul_acc(params, dy_dims, dy, &os, other, &r, n, h,
                                                    w, c));
                }
            }
        }
    }
    plan = pe_rescale_plan_make(&range, params->multiplier);
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    *out++ = pe_rescale_value(pe_mul_acc(params, dy_dims, dy, &os, other, &r, n,
                                                         h, w, c), params->multiplier, &plan);
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp, params->shift, &plan);
}

void pe_mean_grad_s8(const pe_per_tensor_quant *quant, const pe_dims *dy_dims,
                     const int8_t *dy, const int32_t *dy_exp, const pe_dims *dx_dims,
                     int8_t *dx, int32_t *dx_exp)
{
    const pe_dims s = pe_broadcast_strides(dy_dims);
    const int32_t size = dy_dims->n * dy_dims->h * dy_dims->w * dy_dims->c;
    pe_range range = pe_range_zero();
    pe_rescale_plan plan;
    int32_t i, n, h, w, c;
    for (i = 0; i < size; ++i) {
        pe_range_add(&range, dy[i]);
    }
    plan = pe_rescale_plan_make(&range, quant->multiplier);
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    *dx++ = pe_rescale_value(dy[pe_broadcast_offset(&s, n, h, w, c)],
                                             quant->multiplier, &plan);
                }
            }
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp, quant->shift, &plan);
}
