/* pe_softmax_s8_cmsis, pe_softmax_s8_s16_cmsis - int8 softmax (int8 / int16 output) through
 * CMSIS-NN's arm_softmax_s8 / arm_softmax_s8_s16. */
#include "pe_cmsis_nn.h"

void pe_softmax_s8_cmsis(const pe_softmax_params *params, int32_t num_rows, int32_t row_size,
                         const int8_t *input, int8_t *output)
{
    arm_softmax_s8(input, num_rows, row_size, params->input_multiplier,
                   params->input_left_shift, params->diff_min, output);
}

void pe_softmax_s8_s16_cmsis(const pe_softmax_params *params, int32_t num_rows,
                             int32_t row_size, const int8_t *input, int16_t *output)
{
    arm_softmax_s8_s16(input, num_rows, row_size, params->input_multiplier,
                       params->input_left_shift, params->diff_min, output);
}
