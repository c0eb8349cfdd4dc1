/* pe_fully_connected_s8_arm - the arm backend's int8 fully connected layer with the ref
 * kernel's arguments (rq in place of quant), out of line: the body of pe_arm_fc.h with
 * run-time shapes (generated models call the body with literal shapes). */
#include "pe_arm_fc.h"
#include "pe_arm_kernels.h"

void pe_fully_connected_s8_arm(const pe_context *ctx, const pe_fc_params *params,
                               const int32_t *rq, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *filter_dims,
                               const int8_t *filter, const int32_t *bias,
                               const pe_dims *output_dims, int8_t *output)
{
    (void)filter_dims;
    pe_arm_fc_s8(ctx, input, filter, 0, bias, rq, output,
                 output_dims->n * output_dims->h * output_dims->w, input_dims->c,
                 output_dims->c, params->input_offset, params->output_offset,
                 params->activation.min, params->activation.max);
}
