/* pe_fully_connected_s8[_per_channel]_cmsis - int8 fully connected layers through CMSIS-NN's
 * arm_fully_connected_s8 (per tensor) and arm_fully_connected_per_channel_s8.
 *
 * pockengine's FC filter_dims is {out_c, 1, 1, accum_depth}; CMSIS-NN's is {accum_depth, 1, 1,
 * out_c}. kernel_sum: the Helium path's bias + input offset x weight row sums (NULL elsewhere;
 * on MVE NULL means "compute them now into ctx->buf", for weights that training changes). */
#include "pe_cmsis_nn.h"

/* per_tensor or per_channel: the layer's requantization (the other is NULL). */
static void pe_cmsis_fc(const pe_context *ctx, const pe_fc_params *params,
                        const pe_per_tensor_quant *per_tensor,
                        const pe_per_channel_quant *per_channel, const int32_t *kernel_sum,
                        const pe_dims *input_dims, const int8_t *input,
                        const pe_dims *filter_dims, const int8_t *filter, const int32_t *bias,
                        const pe_dims *output_dims, int8_t *output)
{
    cmsis_nn_context c = pe_cmsis_context(ctx);
    cmsis_nn_fc_params p;
    cmsis_nn_dims in, f, b, out;
    p.input_offset = params->input_offset;
    p.filter_offset = params->filter_offset;
    p.output_offset = params->output_offset;
    p.activation = pe_cmsis_activation(&params->activation);
    in = pe_cmsis_dims(input_dims);
    in.n = input_dims->n * input_dims->h * input_dims->w;
    in.h = 1;
    in.w = 1;
    f.n = filter_dims->c;
    f.h = 1;
    f.w = 1;
    f.c = filter_dims->n;
    b = pe_cmsis_bias_dims(filter_dims->n);
    out = pe_cmsis_dims(output_dims);
    if (kernel_sum != 0) {
        c.buf = (void *)kernel_sum;                /* read only: CMSIS-NN's const int32_t * */
        c.size = filter_dims->n * (int32_t)sizeof(int32_t);
    } else if (c.buf != 0) {
        (void)arm_vector_sum_s8((int32_t *)c.buf, filter_dims->c, filter_dims->n, filter,
                                params->input_offset, params->filter_offset, bias);
    }
    if (per_channel != 0) {
        const cmsis_nn_per_channel_quant_params q = pe_cmsis_per_channel(per_channel);
        (void)arm_fully_connected_per_channel_s8(&c, &p, &q, &in, input, &f, filter, &b, bias,
                                                 &out, output);
    } else {
        cmsis_nn_per_tensor_quant_params q;
        q.multiplier = per_tensor->multiplier;
        q.shift = per_tensor->shift;
        (void)arm_fully_connected_s8(&c, &p, &q, &in, input, &f, filter, &b, bias, &out,
                                     output);
    }
}

void pe_fully_connected_s8_cmsis(const pe_context *ctx, const pe_fc_params *params,
                                 const pe_per_tensor_quant *quant, const int32_t *kernel_sum,
                                 const pe_dims *input_dims, const int8_t *input,
                                 const pe_dims *filter_dims, const int8_t *filter,
                                 const int32_t *bias, const pe_dims *output_dims,
                                 int8_t *output)
{
    pe_cmsis_fc(ctx, params, quant, 0, kernel_sum, input_dims, input, filter_dims, filter,
                bias, output_dims, output);
}

void pe_fully_connected_s8_per_channel_cmsis(const pe_context *ctx, const pe_fc_params *params,
                                             const pe_per_channel_quant *quant,
                                             const int32_t *kernel_sum,
                                             const pe_dims *input_dims, const int8_t *input,
                                             const pe_dims *filter_dims, const int8_t *filter,
                                             const int32_t *bias, const pe_dims *output_dims,
                                             int8_t *output)
{
    pe_cmsis_fc(ctx, params, 0, quant, kernel_sum, input_dims, input, filter_dims, filter,
                bias, output_dims, output);
}
