/* pe_update_f32.h - the last step of every fp32 update (train_optim._apply_fp32), shared by
 * the SGD and Adam kernels (ref):
 *
 *   master:                 master = master - u; p = sat(round_half_away(master))
 *   no master, int8 weight: w = sat(round_half_away(float32(w) - u))
 *   no master, int32 bias:  b = sat32(b - round_step_i64(u))   (int64 difference: float32(b)
 *                           is inexact beyond 2^24)
 * NaN rounds to 0.
 */
#ifndef PE_UPDATE_F32_H
#define PE_UPDATE_F32_H

#include "pe_train_float.h"
#include "pe_update.h"

static inline void pe_apply_f32(const pe_param_ref *param, int32_t p, float u, float *master)
{
    if (master != 0) {
        *master = *master - u;
        pe_param_set(param, p, pe_round_sat_f32(*master, param->lo, param->hi));
    } else if (param->p8 != 0) {
        pe_param_set(param, p, pe_round_sat_f32((float)param->p8[p] - u, param->lo,
                                                param->hi));
    } else {
        const int64_t v = (int64_t)param->p32[p] - pe_round_step_i64(u);
        pe_param_set(param, p, v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN
                                                                            : (int32_t)v);
    }
}

#endif /* PE_UPDATE_F32_H */
