/* pe_depthwise_conv2d_s8_arm - the arm backend's int8 depthwise convolution with the ref
 * kernel's arguments (plus rq), out of line: the body of pe_arm_dw.h with run-time shapes
 * (generated models call the body with literal shapes; see pe_conv2d_s8_arm.c). */
#include "pe_arm_dw.h"
#include "pe_arm_kernels.h"

void pe_depthwise_conv2d_s8_arm(const pe_context *ctx, const pe_dw_conv_params *params,
                                const pe_per_channel_quant *quant, const int32_t *rq,
                                const pe_dims *input_dims, const int8_t *input,
                                const pe_dims *filter_dims, const int8_t *filter,
                                const int32_t *bias, const pe_dims *output_dims,
                                int8_t *output)
{
    (void)quant;
    pe_arm_dw_s8(ctx, input, filter, bias, 0, rq, output, output_dims->n, input_dims->h,
                 input_dims->w, input_dims->c, output_dims->h, output_dims->w, filter_dims->h,
                 filter_dims->w, params->stride.h, params->stride.w, params->padding.h,
                 params->padding.w, params->input_offset, params->output_offset,
                 params->activation.min, params->activation.max, 0);
}
