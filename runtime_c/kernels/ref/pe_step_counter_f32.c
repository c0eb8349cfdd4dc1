/* pe_step_counter_f32 - the last op of an fp32-mode training step
 * (codegen/golden/train_optim.py step_counter), t = *step before the op:
 *
 *   *step = t + 1
 *   if (t + 1) % accumulate == 0 (an update was applied), with u = (t + 1) / accumulate:
 *       pows = (pows[0] * beta1, pows[1] * beta2)                    (if given)
 *       schedule step:   lr *= gamma when u % step_size == 0           (if lr given)
 *       schedule warmup: lr = (lr0 * float32(min(u + 1, W))) / float32(W)
 *       schedule cosine: lr = pe_cosine_lr(u) (below; golden cosine_lr)
 */
#include "pe_requant.h"
#include "pe_train_kernels.h"

/* (lr0 * float32(min(u + 1, W))) / float32(W), W < 1 taken as 1 (golden warmup_lr). */
static float pe_warmup_lr(float lr0, uint32_t u, int32_t warmup_steps)
{
    const int32_t w = warmup_steps > 1 ? warmup_steps : 1;
    const int32_t n = u < (uint32_t)w ? (int32_t)u + 1 : w;
    return (lr0 * (float)n) / (float)w;
}

/* The cosine schedule's lr after u updates (golden cosine_lr / cosine_halves), float32 +, -,
 * * and / only (no libm), in this order:
 *   u < W: the warmup formula; else T' = max(T - W, 1), k = min(u - W, T') (p = k / T'),
 *   r = k > T' - k (reflect: cos(pi p) = -cos(pi (1 - p))), q = float32(r ? T' - k : k) / T',
 *   x = pi * q, z = x * x, t = z * (c0 + z * (c1 + ... + z * c5)) = cos(x) - 1 (Taylor to
 *   x^12), a = 0.5 * (2 + t), b = 0.5 * (-t): (1 + cos(pi p))/2 and (1 - cos(pi p))/2, swapped
 *   when reflected; lr = lr0 * a + min_lr * b. */
static float pe_cosine_lr(const pe_step_counter_params *params, uint32_t u)
{
    const int32_t w = params->warmup_steps > 0 ? params->warmup_steps : 0;
    const int64_t span = (int64_t)params->total_steps - w;
    int32_t tp;
    uint32_t done;
    int32_t k;
    int reflect;
    float q, x, z, t, a, b;
    if (u < (uint32_t)w) {
        return pe_warmup_lr(params->lr, u, w);
    }
    tp = span > 1 ? (int32_t)span : 1;
    done = u - (uint32_t)w;
    k = done < (uint32_t)tp ? (int32_t)done : tp;
    reflect = k > tp - k;
    q = (float)(reflect ? tp - k : k) / (float)tp;
    x = 3.1415927f * q;
    z = x * x;
    t = z * (-0.5f + z * (4.1666668e-02f + z * (-1.3888889e-03f + z * (2.4801588e-05f
        + z * (-2.755732e-07f + z * 2.0876756e-09f)))));
    a = 0.5f * (2.0f + t);
    b = 0.5f * (-t);
    if (reflect) {
        const float s = a;
        a = b;
        b = s;
    }
    return params->lr * a + params->min_lr * b;
}

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
            *lr = pe_warmup_lr(params->lr, u, params->warmup_steps);
        } else if (params->schedule == 3) {
            *lr = pe_cosine_lr(params, u);
        }
    }
}
