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
 * there). Conv: one group; depthwise: depth multiplier 1; FC: symmetric
 * weights (filter_offset 0); add, mul: equal shapes.
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

/* One sample (or a few): per unit the dot product of its weight row with the input; the
 * weights as they are (no packed copy), the input offset applied at run time; no scratch. */
void pe_fully_connected_s8_dot_hvx(const pe_context *ctx, const pe_fc_params *params,
                                   const int32_t *rq, const pe_dims *input_dims,
                                   const int8_t *input, const pe_dims *filter_dims,
                                   const int8_t *filter, const int32_t *bias,
                                   const pe_dims *output_dims, int8_t *output);

/* The same for few units (at most 32 of at most 32 inputs, 16 of at most 64 or 8 of at most
 * 512: a classifier): pe_fully_connected_s8_small_hvx, static inline in hvx/pe_hvx_fc_small.h
 * (brought in at the end of this header when compiling for HVX). */

void pe_depthwise_conv2d_s8_hvx(const pe_context *ctx, const pe_dw_conv_params *params,
                                const int32_t *rq, const int16_t *weights, const int32_t *ksum,
                                int32_t flat, int32_t patterns, const pe_dims *input_dims,
                                const int8_t *input, const pe_dims *filter_dims,
                                const int8_t *filter, const int32_t *bias,
                                const pe_dims *output_dims, int8_t *output);

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
void pe_mul_s8_hvx(const pe_mul_params *params, int32_t size, const int8_t *input1,
                   const int8_t *input2, int8_t *output);

/* int8 backward (pe_grad_s8_hvx.c): the ref kernels' arguments, plus for the input gradients
 * `pre` (the prescale MBQM(dy << b, M_o, k_o) as rq vectors over the output channels, the
 * left shifts including b) and `packed` (the weights as int16 pairs per input-channel lane,
 * NULL: packed at run time from `filter`). One group. */
void pe_conv2d_grad_input_s8_hvx(const pe_context *ctx, const pe_conv_grad_params *params,
                                 const pe_grad_input_quant *quant, const int32_t *pre,
                                 const int16_t *packed, const pe_dims *dy_dims,
                                 const int8_t *dy, const int32_t *dy_exp,
                                 const pe_dims *filter_dims, const int8_t *filter,
                                 const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
/* FC (pe_fully_connected_hvx.c): the weights as they are, no packed copy */
void pe_fully_connected_grad_input_s8_hvx(const pe_context *ctx,
                                          const pe_grad_input_quant *quant,
                                          const int32_t *pre, const pe_dims *dy_dims,
                                          const int8_t *dy, const int32_t *dy_exp,
                                          const pe_dims *filter_dims, const int8_t *filter,
                                          const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
void pe_conv2d_grad_weight_s8_hvx(const pe_context *ctx,
                                  const pe_conv_grad_weight_params *params,
                                  const int32_t *channels, const pe_dims *x_dims,
                                  const int8_t *x, const pe_dims *dy_dims, const int8_t *dy,
                                  const int32_t *dy_exp, const pe_dims *dw_dims, int32_t *dw,
                                  int32_t *dw_exp);
void pe_fully_connected_grad_weight_s8_hvx(const pe_context *ctx,
                                           const pe_fc_grad_weight_params *params,
                                           const int32_t *channels, const pe_dims *x_dims,
                                           const int8_t *x, const pe_dims *dy_dims,
                                           const int8_t *dy, const int32_t *dy_exp,
                                           const pe_dims *dw_dims, int32_t *dw,
                                           int32_t *dw_exp);
/* depth multiplier 1, k_h <= 16; the filter as it is (frozen or trained) */
void pe_depthwise_conv2d_grad_input_s8_hvx(const pe_context *ctx,
                                           const pe_dw_conv_grad_params *params,
                                           const pe_grad_input_quant *quant,
                                           const int32_t *pre, const pe_dims *dy_dims,
                                           const int8_t *dy, const int32_t *dy_exp,
                                           const pe_dims *filter_dims, const int8_t *filter,
                                           const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
void pe_depthwise_conv2d_grad_weight_s8_hvx(const pe_context *ctx,
                                            const pe_dw_conv_grad_weight_params *params,
                                            const int32_t *channels, const pe_dims *x_dims,
                                            const int8_t *x, const pe_dims *dy_dims,
                                            const int8_t *dy, const int32_t *dy_exp,
                                            const pe_dims *dw_dims, int32_t *dw,
                                            int32_t *dw_exp);
void pe_bias_grad_s8_hvx(int32_t num_rows, int32_t row_size, const int8_t *dy,
                         const int32_t *dy_exp, int32_t *db, int32_t *db_exp);
void pe_avg_pool2d_grad_s8_hvx(const pe_context *ctx, const pe_avg_pool_grad_params *params,
                               const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                               const pe_dims *filter_dims, const pe_dims *dx_dims, int8_t *dx,
                               int32_t *dx_exp);

/* the 1-bit activation masks and the masked int8 gradient (pe_mask_s8_hvx.c) */
void pe_act_mask_s8_hvx(const pe_activation *params, int32_t size, const int8_t *y,
                        uint8_t *mask);
void pe_mask_grad_s8_hvx(int32_t size, const int8_t *dy, const int32_t *dy_exp,
                         const uint8_t *mask, int8_t *dx, int32_t *dx_exp);

/* int8-mode SGD (pe_sgd_update_s8_hvx.c): pe_sgd_update_s8_s8's and _s8_s32's arguments */
void pe_sgd_update_s8_s8_hvx(const pe_sgd_params *params, const pe_update_dims *dims,
                             const int32_t *channels, int8_t *param, const int32_t *grad,
                             const int32_t *qas, const int32_t *grad_exp,
                             const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                             int32_t *saturated);
void pe_sgd_update_s8_s32_hvx(const pe_sgd_params *params, const pe_update_dims *dims,
                              const int32_t *channels, int32_t *param, const int32_t *grad,
                              const int32_t *qas, const int32_t *grad_exp,
                              const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                              int32_t *saturated);

#ifdef __cplusplus
}
#endif

#if defined(__HVX__) && __HVX_LENGTH__ == 128
#include "hvx/pe_hvx_fc_small.h"
#endif

#endif /* PE_HVX_KERNELS_H */
