/* pe_add_grad_f32, pe_mul_grad_f32, pe_mean_grad_f32 - fp32 gradients of broadcasting ops
 * (codegen/golden/train_grads.py add_grad_f32, mul_grad_f32, mean_grad_f32):
 *
 *   add:  dx = dy summed over the broadcast dimensions (row-major, float32 from +0.0; the
 *         code generator lowers an add_grad that reduces no axis to pe_reshape_grad_f32)
 *   mul:  dx = the same sum of dy * other_r, other_r = float32(other + offset) * scale
 *         broadcast to dy (one float32 product per term); params->reduce = 0 (no axis
 *         reduced): dx = the product itself, not +0.0 + product (-0.0 stays -0.0)
 *   mean: dx = dy / count broadcast back over the reduced dimensions
 */
#include "pe_broadcast.h"
#include "pe_reduce_grad.h"
#include "pe_train_kernels.h"

void pe_add_grad_f32(const pe_dims *dy_dims, const float *dy, const pe_dims *dx_dims,
                     float *dx)
{
    const pe_dims r = pe_reduced_dims(dy_dims, dx_dims);
    int32_t n, h, w, c, a, b, d, e;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    float acc = 0.0f;
                    for (a = 0; a < r.n; ++a) {
                        for (b = 0; b < r.h; ++b) {
                            for (d = 0; d < r.w; ++d) {
                                for (e = 0; e < r.c; ++e) {
                                    acc = acc + dy[pe_reduce_offset(dy_dims, n + a, h + b,
                                                                    w + d, c + e)];
                                }
                            }
                        }
                    }
                    *dx++ = acc;
                }
            }
        }
    }
}

void pe_mul_grad_f32(const pe_mul_grad_params_f32 *params, const pe_dims *dy_dims,
                     const float *dy, const pe_dims *other_dims, const int8_t *other,
                     const pe_dims *dx_dims, float *dx)
{
    const pe_dims r = pe_reduced_dims(dy_dims, dx_dims);
    const pe_dims os = pe_broadcast_strides(other_dims);
    int32_t n, h, w, c, a, b, d, e;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    float acc = 0.0f;
                    for (a = 0; a < r.n; ++a) {
                        for (b = 0; b < r.h; ++b) {
                            for (d = 0; d < r.w; ++d) {
                                for (e = 0; e < r.c; ++e) {
                                    const float o_r =
                                        (float)(other[pe_broadcast_offset(&os, n + a, h + b,
                                                                          w + d, c + e)]
                                                + params->other_offset) * params->other_scale;
                                    const float term = dy[pe_reduce_offset(
                                        dy_dims, n + a, h + b, w + d, c + e)] * o_r;
                                    acc = params->reduce != 0 ? acc + term : term;
                                }
                            }
                        }
                    }
                    *dx++ = acc;
                }
            }
        }
    }
}

void pe_mean_grad_f32(const pe_mean_grad_params_f32 *params, const pe_dims *dy_dims,
                      const float *dy, const pe_dims *dx_dims, float *dx)
{
    const pe_dims s = pe_broadcast_strides(dy_dims);
    int32_t n, h, w, c;
    for (n = 0; n < dx_dims->n; ++n) {
        for (h = 0; h < dx_dims->h; ++h) {
            for (w = 0; w < dx_dims->w; ++w) {
                for (c = 0; c < dx_dims->c; ++c) {
                    *dx++ = dy[pe_broadcast_offset(&s, n, h, w, c)] / params->count;
                }
            }
        }
    }
}
