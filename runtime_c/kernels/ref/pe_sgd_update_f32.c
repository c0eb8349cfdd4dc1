/* pe_sgd_update_f32_s8, pe_sgd_update_f32_s32 - fp32 SGD on an int8 weight / int32 bias
 * (codegen/golden/train_optim.py sgd_update_f32), float32, one rounding per operation:
 *
 *   [accumulate k > 1: if (step + 1) % k != 0: accum += grad, stop;
 *                      else g = accum + grad, accum = 0]
 *   lr_t = *lr if given, else params->lr
 *   buf1 given (momentum > 0): buf1 = momentum * buf1 + g; g = buf1
 *   u = (lr_t * g) * qas[j]                      (j: the trained channel)
 *   no master: p = sat(round_half_away(float32(p) - u))
 *   master:    master = master - u; p = sat(round_half_away(master))
 *   saturated += the entries whose update saturated (pe_apply_f32)
 */
#include "pe_train_float.h"
#include "pe_train_kernels.h"
#include "pe_update.h"
#include "pe_update_f32.h"

static void pe_sgd_f32(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                       const int32_t *channels, const pe_param_ref *param, const float *grad,
                       const float *qas, float *buf1, float *master, const float *lr,
                       float *accum, const int32_t *step, int32_t *saturated)
{
    const float lr_t = lr != 0 ? *lr : params->lr;
    const int accumulate = params->accumulate > 1;
    const int apply = !accumulate || pe_update_applies(*step, params->accumulate);
    int32_t count = 0;
    int32_t o, j, k;
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            const int32_t p0 = pe_update_param_base(dims, channels, o, j);
            const int32_t g0 = pe_update_grad_base(dims, o, j);
            for (k = 0; k < dims->inner; ++k) {
                const int32_t i = g0 + k;
                float g = grad[i];
                if (accumulate) {
                    const float total = accum[i] + g;
                    if (!apply) {
                        accum[i] = total;
                        continue;
                    }
                    g = total;
                    accum[i] = 0.0f;
                }
                if (buf1 != 0) {
                    buf1[i] = params->momentum * buf1[i] + g;
                    g = buf1[i];
                }
                count += pe_apply_f32(param, p0 + k, (lr_t * g) * qas[j],
                                      master != 0 ? &master[i] : 0);
            }
        }
    }
    pe_count_saturated(saturated, count);
}

void pe_sgd_update_f32_s8(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                          const int32_t *channels, int8_t *param, const float *grad,
                          const float *qas, float *buf1, float *master, const float *lr,
                          float *accum, const int32_t *step, int32_t *saturated)
{
    const pe_param_ref p = pe_param_s8(param);
    pe_sgd_f32(params, dims, channels, &p, grad, qas, buf1, master, lr, accum, step, saturated);
}

void pe_sgd_update_f32_s32(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                           const int32_t *channels, int32_t *param, const float *grad,
                           const float *qas, float *buf1, float *master, const float *lr,
                           float *accum, const int32_t *step, int32_t *saturated)
{
    const pe_param_ref p = pe_param_s32(param, dims);
    pe_sgd_f32(params, dims, channels, &p, grad, qas, buf1, master, lr, accum, step, saturated);
}
