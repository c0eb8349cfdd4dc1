/* pe_sgd_update_f32_s8_arm - pe_sgd_update_f32_s8 (ref, pe_sgd_update_f32.c) for the plain
 * case the sparse fine-tunes use: no gradient accumulation, no momentum, no master copy. Then
 * each trained int8 weight is w = sat(round_half_away(float32(w) - (lr * g) * qas[j])), the
 * same float32 operations in the same order as ref, in one loop per trained channel with the
 * channel's factor and pointers hoisted (ref decides accumulation, momentum, master copy and
 * the parameter's type per element). Other cases go to ref. */
#include "pe_arm_kernels.h"
#include "pe_train_float.h"
#include "pe_train_kernels.h"
#include "pe_update.h"

void pe_sgd_update_f32_s8_arm(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                              const int32_t *channels, int8_t *param, const float *grad,
                              const float *qas, float *buf1, float *master, const float *lr,
                              float *accum, const int32_t *step, int32_t *saturated)
{
    const float lr_t = lr != 0 ? *lr : params->lr;
    int32_t count = 0;
    int32_t o, j, k;
    if (buf1 != 0 || master != 0 || params->accumulate > 1) {
        pe_sgd_update_f32_s8(params, dims, channels, param, grad, qas, buf1, master, lr, accum,
                             step, saturated);
        return;
    }
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            int8_t *p = param + pe_update_param_base(dims, channels, o, j);
            const float *g = grad + pe_update_grad_base(dims, o, j);
            const float s = qas[j];
            for (k = 0; k < dims->inner; ++k) {
                int sat;
                p[k] = (int8_t)pe_round_sat_flag_f32((float)p[k] - (lr_t * g[k]) * s, dims->lo,
                                                     dims->hi, &sat);
                count += sat;
            }
        }
    }
    pe_count_saturated(saturated, count);
}
