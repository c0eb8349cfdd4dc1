/*
 * pe_cmsis_kernels.h - the CMSIS-NN backend's kernels (runtime_c/kernels/cmsis_nn): the ref
 * kernels' signatures (pe_kernels.h) under the ref name plus "_cmsis", implemented by thin
 * wrappers around Arm's CMSIS-NN v7.0.0. One extra argument: fully connected takes the kernel
 * sums CMSIS-NN's Helium (MVE) path needs (bias + input offset x row sums of the weights,
 * precomputed in flash by codegen/backends/cmsis_nn.py; NULL on other cores, and on MVE when
 * training changes the weights: the wrapper then computes them into ctx->buf).
 *
 * ctx->buf must hold the bytes the record's scratch_bytes names (CMSIS-NN's *_get_buffer_size
 * for the core). The Python side only emits calls CMSIS-NN computes bit-exactly like TFLM's
 * reference kernels; everything else runs on the ref kernels. Prototypes only: this header
 * needs no CMSIS-NN header, so every generated model can include it.
 */
#ifndef PE_CMSIS_KERNELS_H
#define PE_CMSIS_KERNELS_H

#include "pe_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* arm_convolve_wrapper_s8 */
void pe_conv2d_s8_cmsis(const pe_context *ctx, const pe_conv_params *params,
                        const pe_per_channel_quant *quant, const pe_dims *input_dims,
                        const int8_t *input, const pe_dims *filter_dims, const int8_t *filter,
                        const int32_t *bias, const pe_dims *output_dims, int8_t *output);

/* arm_depthwise_conv_wrapper_s8 */
void pe_depthwise_conv2d_s8_cmsis(const pe_context *ctx, const pe_dw_conv_params *params,
                                  const pe_per_channel_quant *quant, const pe_dims *input_dims,
                                  const int8_t *input, const pe_dims *filter_dims,
                                  const int8_t *filter, const int32_t *bias,
                                  const pe_dims *output_dims, int8_t *output);

/* arm_fully_connected_s8 / arm_fully_connected_per_channel_s8 */
void pe_fully_connected_s8_cmsis(const pe_context *ctx, const pe_fc_params *params,
                                 const pe_per_tensor_quant *quant, const int32_t *kernel_sum,
                                 const pe_dims *input_dims, const int8_t *input,
                                 const pe_dims *filter_dims, const int8_t *filter,
                                 const int32_t *bias, const pe_dims *output_dims,
                                 int8_t *output);
void pe_fully_connected_s8_per_channel_cmsis(const pe_context *ctx, const pe_fc_params *params,
                                             const pe_per_channel_quant *quant,
                                             const int32_t *kernel_sum,
                                             const pe_dims *input_dims, const int8_t *input,
                                             const pe_dims *filter_dims, const int8_t *filter,
                                             const int32_t *bias, const pe_dims *output_dims,
                                             int8_t *output);

/* arm_avgpool_s8, arm_max_pool_s8 */
void pe_avg_pool2d_s8_cmsis(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *filter_dims, const pe_dims *output_dims,
                            int8_t *output);
void pe_max_pool2d_s8_cmsis(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *filter_dims, const pe_dims *output_dims,
                            int8_t *output);

/* arm_elementwise_add_s8, arm_elementwise_mul_s8: equal shapes only (no broadcasting) */
void pe_add_s8_cmsis(const pe_add_params *params, const pe_dims *input1_dims,
                     const int8_t *input1, const pe_dims *input2_dims, const int8_t *input2,
                     const pe_dims *output_dims, int8_t *output);
void pe_mul_s8_cmsis(const pe_mul_params *params, const pe_dims *input1_dims,
                     const int8_t *input1, const pe_dims *input2_dims, const int8_t *input2,
                     const pe_dims *output_dims, int8_t *output);

/* arm_softmax_s8, arm_softmax_s8_s16 */
void pe_softmax_s8_cmsis(const pe_softmax_params *params, int32_t num_rows, int32_t row_size,
                         const int8_t *input, int8_t *output);
void pe_softmax_s8_s16_cmsis(const pe_softmax_params *params, int32_t num_rows,
                             int32_t row_size, const int8_t *input, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PE_CMSIS_KERNELS_H */
