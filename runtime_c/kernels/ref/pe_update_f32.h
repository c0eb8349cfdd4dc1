/* pe_update_f32.h - the last step of every fp32 update (train_optim._apply_fp32), shared by
 * the SGD and Adam kernels (ref):
 *
 *   master:                 master = master - u; p = sat(round_half_away(master))
 *   no master, int8 weight: w = sat(round_half_away(float32(w) - u))
 *   no master, int32 bias:  b = sat(b - round_step_i64(u))   (int64 difference: float32(b)
 *                           is inexact beyond 2^24)
 * sat: into the parameter's [lo, hi] (int8 weights +-127, biases pe_update_dims' range).
 * NaN rounds to 0. The result says whether the update saturated (train_optim._apply_fp32).
 */
#ifndef PE_UPDATE_F32_H
#define PE_UPDATE_F32_H

#include "pe_train_float.h"
#include "pe_update.h"

/* Returns 1 when the update saturated (the rounded value outside the parameter's range, or a
 * NaN; int32 bias: the int64 difference outside int32, or u NaN). */
static inline int pe_apply_f32(const pe_param_ref *param, int32_t p, float u, float *master)
{
    int saturated;
    if (master != 0) {
        *master = *master - u;
        pe_param_set(param, p, pe_round_sat_flag_f32(*master, param->lo, param->hi,
                                                     &saturated));
    } else if (param->p8 != 0) {
        pe_param_set(param, p, pe_round_sat_flag_f32((float)param->p8[p] - u, param->lo,
                                                     param->hi, &saturated));
    } else {
        const int64_t v = (int64_t)param->p32[p] - pe_round_step_i64(u);
        saturated = u != u || v > param->hi || v < param->lo;
        pe_param_set(param, p, v > param->hi ? param->hi : v < param->lo ? param->lo
                                                                          : (int32_t)v);
    }
    return saturated;
}

#endif /* PE_UPDATE_F32_H */
