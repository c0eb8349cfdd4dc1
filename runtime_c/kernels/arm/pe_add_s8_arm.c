/* pe_add_s8_arm - the arm backend's int8 ADD (same shapes) with the ref kernel's parameters
 * plus its compile-time tables, out of line: the body of pe_arm_add.h. */
#include "pe_arm_add.h"
#include "pe_arm_kernels.h"

void pe_add_s8_arm(const pe_add_params *params, const int32_t *tables, const int32_t *rq,
                   int32_t size, const int8_t *input1, const int8_t *input2, int8_t *output)
{
    pe_arm_add_s8(tables, rq, input1, input2, output, size, params->output_multiplier,
                  params->output_shift, params->output_offset, params->activation.min,
                  params->activation.max);
}
