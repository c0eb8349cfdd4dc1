/* pe_step_counter_s8 - the last op of an int8-mode training step: *step += 1 (int8 mode has
 * no learning-rate schedule, no Adam and no accumulation, so lr and pows are NULL and
 * ignored; integer only). */
#include "pe_requant.h"
#include "pe_train_kernels.h"

void pe_step_counter_s8(const pe_step_counter_params *params, int32_t *step, float *lr,
                        float *pows)
{
    (void)params;
    (void)lr;
    (void)pows;
    *step = pe_s32_from_u32((uint32_t)*step + 1u);
}
