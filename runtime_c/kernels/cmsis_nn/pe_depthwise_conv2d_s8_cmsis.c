/* pe_depthwise_conv2d_s8_cmsis - int8 depthwise convolution through CMSIS-NN's
 * arm_depthwise_conv_wrapper_s8 (3x3, opt, generic kernels; on MVE a one-input-channel
 * depthwise conv runs as a convolution on the filter transposed into ctx->buf). */
#include "pe_cmsis_nn.h"

void pe_depthwise_conv2d_s8_cmsis(const pe_context *ctx, const pe_dw_conv_params *params,
                                  const pe_per_channel_quant *quant, const pe_dims *input_dims,
                                  const int8_t *input, const pe_dims *filter_dims,
                                  const int8_t *filter, const int32_t *bias,
                                  const pe_dims *output_dims, int8_t *output)
{
    const pe_cmsis_conv_args a = pe_cmsis_conv_args_of(ctx, quant, input_dims, filter_dims,
                                                       output_dims);
    cmsis_nn_dw_conv_params p;
    p.input_offset = params->input_offset;
    p.output_offset = params->output_offset;
    p.ch_mult = params->ch_mult;
    p.stride = pe_cmsis_tile(&params->stride);
    p.padding = pe_cmsis_tile(&params->padding);
    p.dilation = pe_cmsis_tile(&params->dilation);
    p.activation = pe_cmsis_activation(&params->activation);
    (void)arm_depthwise_conv_wrapper_s8(&a.ctx, &p, &a.quant, &a.input, input, &a.filter,
                                        filter, &a.bias, bias, &a.output, output);
}
