/* pe_adam_update_f32_s8, pe_adam_update_f32_s32 - fp32 Adam on an int8 weight / int32 bias
 * (codegen/golden/train_optim.py adam_update_f32), float32, one rounding per operation:
 *
 *   [accumulation as pe_sgd_update_f32_*]
 *   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * (g * g)      (buf1 = m, buf2 = v)
 *   b1t = pows[0] * b1;  b2t = pows[1] * b2
 *   u = ((lr_t * (m / (1 - b1t))) / (sqrt(v / (1 - b2t)) + eps)) * qas[j]
 *   then as SGD (master copy, or round half away and saturate; saturated entries counted).
 * sqrt is pe_sqrtf, correctly rounded (IEEE), as numpy's float32 sqrt.
 */
#include "pe_train_float.h"
#include "pe_train_kernels.h"
#include "pe_update.h"
#include "pe_update_f32.h"

static void pe_adam_f32(const pe_adam_params_f32 *params, const pe_update_dims *dims,
                        const int32_t *channels, const pe_param_ref *param, const float *grad,
                        const float *qas, float *buf1, float *buf2, const float *pows,
                        float *master, const float *lr, float *accum, const int32_t *step,
                        int32_t *saturated)
{
    const float lr_t = lr != 0 ? *lr : params->lr;
    const float b1 = params->beta1;
    const float b2 = params->beta2;
    const float c1 = 1.0f - b1;
    const float c2 = 1.0f - b2;
    const float d1 = 1.0f - pows[0] * b1;          /* 1 - b1t */
    const float d2 = 1.0f - pows[1] * b2;          /* 1 - b2t */
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
                float m, v, u;
                if (accumulate) {
                    const float total = accum[i] + g;
                    if (!apply) {
                        accum[i] = total;
                        continue;
                    }
                    g = total;
                    accum[i] = 0.0f;
                }
                m = b1 * buf1[i] + c1 * g;
                v = b2 * buf2[i] + c2 * (g * g);
                buf1[i] = m;
                buf2[i] = v;
                u = ((lr_t * (m / d1)) / (pe_sqrtf(v / d2) + params->eps)) * qas[j];
                count += pe_apply_f32(param, p0 + k, u, master != 0 ? &master[i] : 0);
            }
        }
    }
    pe_count_saturated(saturated, count);
}

void pe_adam_update_f32_s8(const pe_adam_params_f32 *params, const pe_update_dims *dims,
                           const int32_t *channels, int8_t *param, const float *grad,
                           const float *qas, float *buf1, float *buf2, const float *pows,
                           float *master, const float *lr, float *accum, const int32_t *step,
                           int32_t *saturated)
{
    const pe_param_ref p = pe_param_s8(param);
    pe_adam_f32(params, dims, channels, &p, grad, qas, buf1, buf2, pows, master, lr, accum,
                step, saturated);
}

void pe_adam_update_f32_s32(const pe_adam_params_f32 *params, const pe_update_dims *dims,
                            const int32_t *channels, int32_t *param, const float *grad,
                            const float *qas, float *buf1, float *buf2, const float *pows,
                            float *master, const float *lr, float *accum,
                            const int32_t *step, int32_t *saturated)
{
    const pe_param_ref p = pe_param_s32(param, dims);
    pe_adam_f32(params, dims, channels, &p, grad, qas, buf1, buf2, pows, master, lr, accum,
                step, saturated);
}
