/* pe_fully_connected_s8[_per_channel]_cmsis - int8 fully connected layers through CMSIS-NN's
 * arm_fully_connected_s8 (per tensor) and arm_fully_connected_per_channel_s8.
 *
 * pockengine's FC filter_dims is {out_c, 1, 1, accum_depth}; CMSIS-NN's is {accum_depth, 1, 1,
 * out_c}. kernel_sum: the Helium path's bias + input offset x weight row sums (NULL elsewhere;
 * on MVE NULL means "compute them now into ctx->buf", for weights that training changes). */
#include "pe_cmsis_nn.h"

typedef struct {
    cmsis_nn_context ctx;
    cmsis_nn_fc_params params;
    cmsis_nn_dims input, filter, bias, output;
} pe_cmsis_fc;

static pe_cmsis_fc pe_cmsis_fc_setup(const pe_context *ctx, const pe_fc_params *params,
                                     const int32_t *kernel_sum, const pe_dims *input_dims,
                                     const pe_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const pe_dims *output_dims)
{
    pe_cmsis_fc s;
    s.ctx = pe_cmsis_context(ctx);
    s.params.input_offset = params->input_offset;
    s.params.filter_offset = params->filter_offset;
    s.params.output_offset = params->output_offset;
    s.params.activation = pe_cmsis_activation(&params->activation);
    s.input = pe_cmsis_dims(input_dims);
    s.input.n = input_dims->n * input_dims->h * input_dims->w;
    s.input.h = 1;
    s.input.w = 1;
    s.filter.n = filter_dims->c;
    s.filter.h = 1;
    s.filter.w = 1;
    s.filter.c = filter_dims->n;
    s.bias = pe_cmsis_bias_dims(filter_dims->n);
    s.output = pe_cmsis_dims(output_dims);
    if (kernel_sum != 0) {
        s.ctx.buf = (void *)kernel_sum;            /* read only: CMSIS-NN's const int32_t * */
        s.ctx.size = filter_dims->n * (int32_t)sizeof(int32_t);
    } else if (s.ctx.buf != 0) {
        (void)arm_vector_sum_s8((int32_t *)s.ctx.buf, filter_dims->c, filter_dims->n, filter,
                                params->input_offset, params->filter_offset, bias);
    }
    return s;
}

void pe_fully_connected_s8_cmsis(const pe_context *ctx, const pe_fc_params *params,
                                 const pe_per_tensor_quant *quant, const int32_t *kernel_sum,
                                 const pe_dims *input_dims, const int8_t *input,
                                 const pe_dims *filter_dims, const int8_t *filter,
                                 const int32_t *bias, const pe_dims *output_dims,
                                 int8_t *output)
{
    const pe_cmsis_fc s = pe_cmsis_fc_setup(ctx, params, kernel_sum, input_dims, filter_dims,
                                            filter, bias, output_dims);
    cmsis_nn_per_tensor_quant_params q;
    q.multiplier = quant->multiplier;
    q.shift = quant->shift;
    (void)arm_fully_connected_s8(&s.ctx, &s.params, &q, &s.input, input, &s.filter, filter,
                                 &s.bias, bias, &s.output, output);
}

void pe_fully_connected_s8_per_channel_cmsis(const pe_context *ctx, const pe_fc_params *params,
                                             const pe_per_channel_quant *quant,
                                             const int32_t *kernel_sum,
                                             const pe_dims *input_dims, const int8_t *input,
                                             const pe_dims *filter_dims, const int8_t *filter,
                                             const int32_t *bias, const pe_dims *output_dims,
                                             int8_t *output)
{
    const pe_cmsis_fc s = pe_cmsis_fc_setup(ctx, params, kernel_sum, input_dims, filter_dims,
                                            filter, bias, output_dims);
    const cmsis_nn_per_channel_quant_params q = pe_cmsis_per_channel(quant);
    (void)arm_fully_connected_per_channel_s8(&s.ctx, &s.params, &q, &s.input, input, &s.filter,
                                             filter, &s.bias, bias, &s.output, output);
}
