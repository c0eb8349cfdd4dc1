/* pe_add_s8_cmsis, pe_mul_s8_cmsis - int8 ADD / MUL of equally shaped tensors through
 * CMSIS-NN's arm_elementwise_add_s8 / arm_elementwise_mul_s8 (no broadcasting: the input dims
 * equal the output dims). The output may overwrite an input: each group of four elements is
 * read before it is written. */
#include "pe_cmsis_nn.h"

void pe_add_s8_cmsis(const pe_add_params *params, const pe_dims *input1_dims,
                     const int8_t *input1, const pe_dims *input2_dims, const int8_t *input2,
                     const pe_dims *output_dims, int8_t *output)
{
    (void)input1_dims;
    (void)input2_dims;
    (void)arm_elementwise_add_s8(input1, input2, params->input1_offset,
                                 params->input1_multiplier, params->input1_shift,
                                 params->input2_offset, params->input2_multiplier,
                                 params->input2_shift, params->left_shift, output,
                                 params->output_offset, params->output_multiplier,
                                 params->output_shift, params->activation.min,
                                 params->activation.max, pe_cmsis_size(output_dims));
}

void pe_mul_s8_cmsis(const pe_mul_params *params, const pe_dims *input1_dims,
                     const int8_t *input1, const pe_dims *input2_dims, const int8_t *input2,
                     const pe_dims *output_dims, int8_t *output)
{
    (void)input1_dims;
    (void)input2_dims;
    (void)arm_elementwise_mul_s8(input1, input2, params->input1_offset, params->input2_offset,
                                 output, params->output_offset, params->output_multiplier,
                                 params->output_shift, params->activation.min,
                                 params->activation.max, pe_cmsis_size(output_dims));
}
