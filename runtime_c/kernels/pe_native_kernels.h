/*
 * pe_native_kernels.h - the native backend's kernels (runtime_c/kernels/native): pockengine's
 * own C for the machine pockengine runs on (board "host"), written for its vector units
 * (AVX-512 / AVX2 intrinsics where the compiler targets them, portable C elsewhere; see
 * native/pe_native.h).
 *
 * Generated models call the bodies (pe_nv_conv_s8, pe_nv_dw_s8, pe_nv_fc_s8, pe_nv_add_s8,
 * pe_nv_avg_pool_s8: static inline, every shape
 * a literal, so each layer gets code of its own), which this header brings in on the targets
 * the backend builds for; the out-of-line kernels below run the same bodies with run-time
 * arguments (tests call them through ctypes). The training kernels take pe_train_kernels.h's
 * signatures under the ref name plus "_native".
 */
#ifndef PE_NATIVE_KERNELS_H
#define PE_NATIVE_KERNELS_H

#include "pe_kernels.h"
#include "pe_train_kernels.h"

#if !defined(__arm__) && !defined(__hexagon__)
#include "pe_native_add.h"
#include "pe_native_conv.h"
#include "pe_native_dw.h"
#include "pe_native_fc.h"
#include "pe_native_pool.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* the bodies with run-time arguments (pe_native_forward.c) */
void pe_conv2d_s8_native(const pe_context *ctx, const int8_t *input, const int8_t *w8,
                         const int32_t *corr, const int8_t *filter, const int32_t *bias,
                         const int32_t *rq,
                         int8_t *output, int32_t batches, int32_t in_h, int32_t in_w,
                         int32_t in_c, int32_t out_h, int32_t out_w, int32_t out_c,
                         int32_t k_h, int32_t k_w, int32_t s_h, int32_t s_w, int32_t pad_h,
                         int32_t pad_w, int32_t d_h, int32_t d_w, int32_t input_offset,
                         int32_t out_offset, int32_t act_min, int32_t act_max);
void pe_depthwise_conv2d_s8_native(const pe_context *ctx, const int8_t *input,
                                   const int32_t *w32, const int8_t *filter,
                                   const int32_t *bias, const int32_t *rq, int8_t *output,
                                   int32_t batches, int32_t in_h, int32_t in_w,
                                   int32_t channels, int32_t out_h, int32_t out_w,
                                   int32_t k_h, int32_t k_w, int32_t s_h, int32_t s_w,
                                   int32_t pad_h, int32_t pad_w, int32_t d_h, int32_t d_w,
                                   int32_t input_offset, int32_t out_offset, int32_t act_min,
                                   int32_t act_max);
void pe_fully_connected_s8_native(const pe_context *ctx, const int8_t *input,
                                  const int8_t *filter, const int32_t *bias, const int32_t *rq,
                                  int8_t *output, int32_t rows, int32_t depth, int32_t units,
                                  int32_t input_offset, int32_t out_offset, int32_t act_min,
                                  int32_t act_max);
void pe_avg_pool2d_s8_native(const int8_t *input, int8_t *output, int32_t batches,
                             int32_t in_h, int32_t in_w, int32_t channels, int32_t out_h,
                             int32_t out_w, int32_t f_h, int32_t f_w, int32_t s_h, int32_t s_w,
                             int32_t pad_h, int32_t pad_w, int32_t act_min, int32_t act_max);
void pe_add_s8_native(const int32_t *tables, const int32_t *rq, const int8_t *input1,
                      const int8_t *input2, int8_t *output, int32_t size, int32_t out_offset,
                      int32_t act_min, int32_t act_max);
/* fp32 backward (pe_native_grad.c): pe_train_kernels.h's signatures and arguments; the input
 * gradients take one more, wr_const: the dequantised weights w_r = float32(w) * scale[o]
 * computed at compile time for a filter nothing changes (conv: [kh][kw][o][c], FC: the
 * filter's layout, depthwise: [tap][c]), NULL for a trained one. Input gradients of
 * convolutions with one group (scratch: w_r when it is not given, out_c * k float32, and four
 * rows of taps * out_c float32) and of FC (none: a trained filter is dequantised as it is
 * read), of depthwise convolutions (multiplier 1, at most 64 taps; per input column a uint64
 * mask and k_w int32, then w_r when not given, taps * c float32); weight gradients of convolutions with one group (the input dequantised
 * and the trained channels' gradients gathered: (n h w c + positions * 4) float32) and of FC
 * (the input, rows * depth float32); bias gradients, masks, masked gradients, gradient sums,
 * average-pooling gradients (the quotients dy / count, one float32 per dy value), and the fp32
 * SGD of int8 weights. */
void pe_conv2d_grad_input_f32_native(const pe_context *ctx, const pe_conv_grad_params *params,
                                     const float *filter_scale, const pe_dims *dy_dims,
                                     const float *dy, const pe_dims *filter_dims,
                                     const int8_t *filter, const float *wr_const,
                                     const pe_dims *dx_dims, float *dx);
void pe_fully_connected_grad_input_f32_native(const pe_context *ctx, const float *filter_scale,
                                              const pe_dims *dy_dims, const float *dy,
                                              const pe_dims *filter_dims, const int8_t *filter,
                                              const float *wr_const, const pe_dims *dx_dims,
                                              float *dx);
void pe_depthwise_conv2d_grad_input_f32_native(const pe_context *ctx,
                                               const pe_dw_conv_grad_params *params,
                                               const float *filter_scale,
                                               const pe_dims *dy_dims, const float *dy,
                                               const pe_dims *filter_dims,
                                               const int8_t *filter, const float *wr_const,
                                               const pe_dims *dx_dims, float *dx);
void pe_conv2d_grad_weight_f32_native(const pe_context *ctx,
                                      const pe_conv_grad_weight_params_f32 *params,
                                      const int32_t *channels, const pe_dims *x_dims,
                                      const int8_t *x, const pe_dims *dy_dims, const float *dy,
                                      const pe_dims *dw_dims, float *dw);
void pe_fully_connected_grad_weight_f32_native(const pe_context *ctx,
                                               const pe_fc_grad_weight_params_f32 *params,
                                               const int32_t *channels, const pe_dims *x_dims,
                                               const int8_t *x, const pe_dims *dy_dims,
                                               const float *dy, const pe_dims *dw_dims,
                                               float *dw);
void pe_bias_grad_f32_native(int32_t num_rows, int32_t row_size, const float *dy, float *db);
void pe_mask_grad_f32_native(int32_t size, const float *dy, const uint8_t *mask, float *dx);
void pe_act_mask_s8_native(const pe_activation *params, int32_t size, const int8_t *y,
                           uint8_t *mask);
void pe_grad_add_f32_native(int32_t size, const float *g1, const float *g2, float *g);
void pe_avg_pool2d_grad_f32_native(const pe_context *ctx, const pe_pool_grad_params *params,
                                   const pe_dims *dy_dims, const float *dy,
                                   const pe_dims *filter_dims, const pe_dims *dx_dims,
                                   float *dx);
/* fp32 SGD on an int8 weight (every case of pe_sgd_update_f32_s8: momentum, master copy,
 * accumulation) along the trained channels' values, and on an int32 bias */
void pe_sgd_update_f32_s8_native(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                                 const int32_t *channels, int8_t *param, const float *grad,
                                 const float *qas, float *buf1, float *master, const float *lr,
                                 float *accum, const int32_t *step, int32_t *saturated);
void pe_sgd_update_f32_s32_native(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                                  const int32_t *channels, int32_t *param, const float *grad,
                                  const float *qas, float *buf1, float *master, const float *lr,
                                  float *accum, const int32_t *step, int32_t *saturated);

/* which code path the kernels were compiled for: "avx512-vnni", "avx512", "avx2", "portable" */
const char *pe_native_path(void);

#ifdef __cplusplus
}
#endif

#endif /* PE_NATIVE_KERNELS_H */
