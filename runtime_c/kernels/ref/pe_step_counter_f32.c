/* pe_step_counter_f32 - the last op of an fp32-mode training step
 * (codegen/golden/train_optim.py step_counter), t = *step before the op:
 *
 *   *step = t + 1
 *   if (t + 1) % accumulate == 0 (an update was applied), with u = (t + 1) / accumulate:
 *       pows = (pows[0] * beta1, pows[1] * beta2)                    (if given)
 *       schedule step:   lr *= gamma when u % step_size == 0           (if lr given)
 *       schedule warmup: lr = (lr0 * float32(min(u + 1, W))) / float32(W)
 */
#include "pe_requant.h"
#include "pe_train_kernels.h"

void pe_step_counter_f32(const pe_step_counter_params *params, int32_t *step, float *lr,
                         float *pows)
{
    /* t counts up from 0 (t >= 0): unsigned 32-bit arithmetic is exact, t + 1 included. */
    const uint32_t done = (uint32_t)*step + 1u;
    const uint32_t k = params->accumulate > 1 ? (uint32_t)params->accumulate : 1u;
    uint32_t u;
    *step = pe_s32_from_u32(done);
    if (done % k != 0u) {
        return;
    }
    if (pows != 0) {
        pows[0] = pows[0] * params->beta1;
        pows[1] = pows[1] * params->beta2;
    }
    u = done / k;
    if (lr != 0) {
        if (params->schedule == 1) {
            if (params->step_size > 0 && u % (uint32_t)params->step_size == 0u) {
                *lr = *lr * params->gamma;
            }
        } else if (params->schedule == 2) {
            const int32_t w = params->warmup_steps;
            const int32_t n = u < (uint32_t)w ? (int32_t)u + 1 : w;
            *lr = (params->lr * (float)n) / (float)w;
        }
    }
}
