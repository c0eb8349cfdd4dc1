/*
 * pe_hvx_kernels.h - the hvx backend's kernels (runtime_c/kernels/hvx): pockengine's own C
 * with Hexagon HVX intrinsics (128-byte vectors, v66 and later; integer only). They compile
 * only for Hexagon with -mhvx -mhvx-length=128b; this header is plain C (any compiler may
 * include it).
 *
 * The ref kernels' arguments under the ref name plus "_hvx", with what
 * codegen/backends/hvx.py computes at compile time in place of the ref quant struct:
 *
 *   rq      per 32 output lanes five vectors of int32 {multiplier, left shift, right shift,
 *           2^right - 1, (2^right - 1) >> 1} (TFLM's double rounding per lane, hvx/pe_hvx.h),
 *           in the lane order of the kernel's accumulators;
 *   packed  (conv, FC) the weights packed for vrmpy (hvx/pe_hvx_gemm.h), NULL when training
 *           changes them (the kernel packs `filter` into its scratch at every call; `filter`
 *           is NULL otherwise);
 *   ksum    input_offset * sum of each output channel's weights (the folded input offset),
 *           NULL when computed at run time;
 *   weights (depthwise) int16 weights per lane pattern and tap; flat / patterns choose the
 *           lane layout (hvx/pe_depthwise_conv2d_s8_hvx.c).
 *
 * ctx->buf must hold the record's scratch_bytes (each kernel's comment says what it keeps
 * there). Conv: one group; depthwise: depth multiplier 1, weights frozen; FC: symmetric
 * weights (filter_offset 0); add: equal shapes.
 */
#ifndef PE_HVX_KERNELS_H
#define PE_HVX_KERNELS_H

#include "pe_kernels.h"
#include "pe_train_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

void pe_conv2d_s8_hvx(const pe_context *ctx, const pe_conv_params *params, const int32_t *rq,
                      const int8_t *packed, const int32_t *ksum, const pe_dims *input_dims,
                      const int8_t *input, const pe_dims *filter_dims, const int8_t *filter,
                      const int32_t *bias, const pe_dims *output_dims, int8_t *output);

void pe_fully_connected_s8_hvx(const pe_context *ctx, const pe_fc_params *params,
                               const int32_t *rq, const int8_t *packed, const int32_t *ksum,
                               const pe_dims *input_dims, const int8_t *input,
                               const pe_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const pe_dims *output_dims,
                               int8_t *output);

void pe_depthwise_conv2d_s8_hvx(const pe_context *ctx, const pe_dw_conv_params *params,
                                const int32_t *rq, const int16_t *weights, const int32_t *ksum,
                                int32_t flat, int32_t patterns, const pe_dims *input_dims,
                                const int8_t *input, const pe_dims *filter_dims,
                                const int32_t *bias, const pe_dims *output_dims,
                                int8_t *output);

void pe_avg_pool2d_s8_hvx(const pe_context *ctx, const pe_pool_params *params,
                          const pe_dims *input_dims, const int8_t *input,
                          const pe_dims *filter_dims, const pe_dims *output_dims,
                          int8_t *output);
void pe_max_pool2d_s8_hvx(const pe_context *ctx, const pe_pool_params *params,
                          const pe_dims *input_dims, const int8_t *input,
                          const pe_dims *filter_dims, const pe_dims *output_dims,
                          int8_t *output);

void pe_add_s8_hvx(const pe_add_params *params, int32_t size, const int8_t *input1,
                   const int8_t *input2, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PE_HVX_KERNELS_H */
