/*
 * pe_arm_kernels.h - the arm backend's kernels (runtime_c/kernels/arm): pockengine's own C for
 * Cortex-M cores with the DSP extension (SMLAD and friends through ACLE; the same C compiles
 * to exact portable code elsewhere, which is how the host tests it). The ref kernels'
 * signatures under the ref name plus "_arm", with the arguments that codegen/backends/arm.py
 * computes at compile time added after the ref ones they replace:
 *
 *   rq      three int32 per output channel, pe_arm.h's one-rounding requantization
 *           {2^(e-2), multiplier, e-1} (the builder takes layers whose right shifts e are at
 *           least 2 and multipliers above 2^30: every layer of the MLPerf Tiny models);
 *           the ref quant struct stays in the signature (unused) so records stay alike;
 *   tables  (add) the 2 x 256 rescaled input values.
 *
 * ctx->buf must hold the bytes of the record's scratch_bytes (codegen/backends/arm.py's
 * formulas; each kernel's comment says what the buffer holds). Depthwise: depth multiplier 1, dilation 1,
 * k_h * ceil(k_w / 2) <= PE_ARM_DW_MAX_PAIRS; conv: one group.
 *
 * These out-of-line kernels run the bodies of arm/pe_arm_*.h with run-time shapes. Generated
 * models call the bodies themselves (pe_arm_conv_s8, pe_arm_dw_s8, pe_arm_fc_s8,
 * pe_arm_add_s8: inlined, every shape a literal, so each layer gets its own specialised code),
 * which this header brings in (static inline: a model that calls none compiles none).
 */
#ifndef PE_ARM_KERNELS_H
#define PE_ARM_KERNELS_H

#include "pe_kernels.h"
#include "pe_train_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

void pe_conv2d_s8_arm(const pe_context *ctx, const pe_conv_params *params,
                      const pe_per_channel_quant *quant, const int32_t *rq,
                      const pe_dims *input_dims, const int8_t *input, const pe_dims *filter_dims,
                      const int8_t *filter, const int32_t *bias, const pe_dims *output_dims,
                      int8_t *output);

void pe_depthwise_conv2d_s8_arm(const pe_context *ctx, const pe_dw_conv_params *params,
                                const pe_per_channel_quant *quant, const int32_t *rq,
                                const pe_dims *input_dims, const int8_t *input,
                                const pe_dims *filter_dims, const int8_t *filter,
                                const int32_t *bias, const pe_dims *output_dims,
                                int8_t *output);

void pe_fully_connected_s8_arm(const pe_context *ctx, const pe_fc_params *params,
                               const int32_t *rq, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *filter_dims,
                               const int8_t *filter, const int32_t *bias,
                               const pe_dims *output_dims, int8_t *output);

/* stream_chain out of line (pe_stream_chain_s8_arm.c): pe_stream_chain_s8's arguments plus,
 * after stages, the bodies' constants (pe_kernels.h: pe_stream_arm_params, one
 * pe_stream_arm_stage per stage); ctx->buf holds the row buffers, the schedule's state and
 * the stage bodies' scratch (params->kernel_scratch_offset). */
void pe_stream_chain_s8_arm(const pe_context *ctx, const pe_stream_params *params,
                            const pe_stream_stage *stages, const pe_stream_arm_params *arm,
                            const pe_stream_arm_stage *arm_stages,
                            const int8_t *const *filters, const int32_t *const *biases,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *output_dims, int8_t *output);
/* stream_chain as generated models run it (pe_stream_chain_fn.c): the stages and the residual
 * add by `fn`, a stage function of the model's with every shape a literal. */
void pe_stream_chain_s8_arm_fn(const pe_context *ctx, const pe_stream_params *params,
                               const pe_stream_stage *stages, pe_stream_fn fn,
                               const pe_dims *input_dims, const int8_t *input,
                               const pe_dims *output_dims, int8_t *output);

void pe_add_s8_arm(const pe_add_params *params, const int32_t *tables, const int32_t *rq,
                   int32_t size, const int8_t *input1, const int8_t *input2, int8_t *output);

/* the whole weight of a partial trainable tensor (pe_merge_rows_arm.c): pe_merge_rows_s8's,
 * rows of a multiple of 4 bytes */
void pe_merge_rows_s8_arm(int32_t num_runs, const int32_t *runs, int32_t row_size,
                          const int8_t *trained, const int8_t *frozen, int8_t *output);

/* the 1-bit activation mask of training graphs (pe_mask_s8_arm.c): pe_act_mask_s8's */
void pe_act_mask_s8_arm(const pe_activation *params, int32_t size, const int8_t *y,
                        uint8_t *mask);
/* the masked gradients (pe_mask_s8_arm.c): pe_mask_grad_s8's and pe_mask_grad_f32's */
void pe_mask_grad_s8_arm(int32_t size, const int8_t *dy, const int32_t *dy_exp,
                         const uint8_t *mask, int8_t *dx, int32_t *dx_exp);
void pe_mask_grad_f32_arm(int32_t size, const float *dy, const uint8_t *mask, float *dx);

/* int8 backward (pe_grad_s8_arm.c): pe_conv2d_grad_input_s8's arguments plus, after quant,
 * the transposed weights as a stream (int16, pairs of rows per group of four; see
 * codegen/backends/arm.py raw_stream; NULL: built at run time from the weights) and the
 * prescale's words; pointwise convolutions with an even number of input channels. */
void pe_conv2d_grad_input_s8_arm(const pe_context *ctx, const pe_conv_grad_params *params,
                                 const pe_grad_input_quant *quant, const int32_t *stream,
                                 const int32_t *pre,
                                 const pe_dims *dy_dims, const int8_t *dy,
                                 const int32_t *dy_exp, const pe_dims *filter_dims,
                                 const int8_t *filter, const pe_dims *dx_dims, int8_t *dx,
                                 int32_t *dx_exp);

void pe_fully_connected_grad_input_s8_arm(const pe_context *ctx,
                                          const pe_grad_input_quant *quant,
                                          const int32_t *stream, const int32_t *pre,
                                          const pe_dims *dy_dims, const int8_t *dy,
                                          const int32_t *dy_exp, const pe_dims *filter_dims,
                                          const int8_t *filter, const pe_dims *dx_dims,
                                          int8_t *dx, int32_t *dx_exp);
void pe_depthwise_conv2d_grad_input_s8_arm(const pe_context *ctx,
                                           const pe_dw_conv_grad_params *params,
                                           const pe_grad_input_quant *quant,
                                           const int32_t *pre, const pe_dims *dy_dims,
                                           const int8_t *dy, const int32_t *dy_exp,
                                           const pe_dims *filter_dims, const int8_t *filter,
                                           const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
void pe_avg_pool2d_grad_s8_arm(const pe_context *ctx, const pe_avg_pool_grad_params *params,
                               const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                               const pe_dims *filter_dims, const pe_dims *dx_dims, int8_t *dx,
                               int32_t *dx_exp);
void pe_conv2d_grad_weight_s8_arm(const pe_context *ctx, const pe_conv_grad_weight_params *params,
                                  const int32_t *channels, const pe_dims *x_dims,
                                  const int8_t *x, const pe_dims *dy_dims, const int8_t *dy,
                                  const int32_t *dy_exp, const pe_dims *dw_dims, int32_t *dw,
                                  int32_t *dw_exp);

/* fp32 SGD on int8 weights without accumulation, momentum or master copy (pe_update_f32_arm.c;
 * other cases call ref): pe_sgd_update_f32_s8's arguments */
void pe_sgd_update_f32_s8_arm(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                              const int32_t *channels, int8_t *param, const float *grad,
                              const float *qas, float *buf1, float *master, const float *lr,
                              float *accum, const int32_t *step, int32_t *saturated);

/* int8 bias gradients four channels a step (pe_grad_s8_arm.c): pe_bias_grad_s8's arguments */
void pe_bias_grad_s8_arm(int32_t num_rows, int32_t row_size, const int8_t *dy,
                         const int32_t *dy_exp, int32_t *db, int32_t *db_exp);

/* int8 gradient sums with exponents at most 16 apart (pe_grad_add_s8_arm.c; ref otherwise):
 * pe_grad_add_s8's arguments */
void pe_grad_add_s8_arm(int32_t size, const int8_t *g1, const int32_t *g1_exp, const int8_t *g2,
                        const int32_t *g2_exp, int8_t *g, int32_t *g_exp);

/* int8-mode SGD without momentum or master copy (pe_update_s8_arm.c; other cases call ref):
 * pe_sgd_update_s8_s8's / _s32's arguments */
void pe_sgd_update_s8_s8_arm(const pe_sgd_params *params, const pe_update_dims *dims,
                             const int32_t *channels, int8_t *param, const int32_t *grad,
                             const int32_t *qas, const int32_t *grad_exp,
                             const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                             int32_t *saturated);
void pe_sgd_update_s8_s32_arm(const pe_sgd_params *params, const pe_update_dims *dims,
                              const int32_t *channels, int32_t *param, const int32_t *grad,
                              const int32_t *qas, const int32_t *grad_exp,
                              const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                              int32_t *saturated);

/* fp32 backward (pe_train_f32_arm.c): pe_train_kernels.h's signatures. Pointwise conv and FC
 * input / weight gradients, depthwise input gradients (multiplier 1, dilation 1), average-
 * pooling gradients of windows that do not overlap. */
void pe_conv2d_grad_input_f32_arm(const pe_context *ctx, const pe_conv_grad_params *params,
                                  const float *filter_scale, const pe_dims *dy_dims,
                                  const float *dy, const pe_dims *filter_dims,
                                  const int8_t *filter, const pe_dims *dx_dims, float *dx);
/* The fused head backward: pe_train_kernels.h's pe_pool_conv_grad_f32 with a scratch of
 * 4 * (8 * 64 + N * n_out + N * H * W * min(n_out, 64)) bytes (codegen/backends/arm.py). */
void pe_pool_conv_grad_f32_arm(const pe_context *ctx, const float *filter_scale,
                               const float *g, const uint8_t *mask, const int8_t *filter,
                               const pe_dims *dx_dims, int32_t n_out, float *dx, float *db);
void pe_fully_connected_grad_input_f32_arm(const pe_context *ctx, const float *filter_scale,
                                           const pe_dims *dy_dims, const float *dy,
                                           const pe_dims *filter_dims, const int8_t *filter,
                                           const pe_dims *dx_dims, float *dx);
void pe_conv2d_grad_weight_f32_arm(const pe_context *ctx,
                                   const pe_conv_grad_weight_params_f32 *params,
                                   const int32_t *channels, const pe_dims *x_dims,
                                   const int8_t *x, const pe_dims *dy_dims, const float *dy,
                                   const pe_dims *dw_dims, float *dw);
void pe_fully_connected_grad_weight_f32_arm(const pe_context *ctx,
                                            const pe_fc_grad_weight_params_f32 *params,
                                            const int32_t *channels, const pe_dims *x_dims,
                                            const int8_t *x, const pe_dims *dy_dims,
                                            const float *dy, const pe_dims *dw_dims, float *dw);
void pe_depthwise_conv2d_grad_input_f32_arm(const pe_context *ctx,
                                            const pe_dw_conv_grad_params *params,
                                            const float *filter_scale, const pe_dims *dy_dims,
                                            const float *dy, const pe_dims *filter_dims,
                                            const int8_t *filter, const pe_dims *dx_dims,
                                            float *dx);
void pe_avg_pool2d_grad_f32_arm(const pe_context *ctx, const pe_pool_grad_params *params,
                                const pe_dims *dy_dims, const float *dy,
                                const pe_dims *filter_dims, const pe_dims *dx_dims, float *dx);

#ifdef __cplusplus
}
#endif

#include "arm/pe_arm_add.h"
#include "arm/pe_arm_conv.h"
#include "arm/pe_arm_dw.h"
#include "arm/pe_arm_fc.h"

#endif /* PE_ARM_KERNELS_H */
