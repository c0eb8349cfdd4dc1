/*
 * pe_train_kernels.h - the training kernels of pockengine: one per training op of
 * docs/training.md and backward mode, bit-exact with codegen/golden/train_*.py (the oracle;
 * every golden kernel's docstring gives the recipe these follow).
 *
 * Names:  pe_<op>_f32 (backward: fp32, float32 gradients) and pe_<op>_s8 (backward: int8,
 *         integer only: int8 gradients with an int32 exponent, value = q * 2^e). Update
 *         kernels add the parameter's dtype: pe_sgd_update_f32_s8 updates an int8 weight,
 *         pe_sgd_update_f32_s32 an int32 bias.
 *
 * Arguments, in the order of pe_kernels.h: ctx (conv / pool / FC families; the ref kernels
 * need no scratch and accept NULL), params, quant (or the constant array that takes its
 * place: weight scales, trained channels), then the tensors in IR input order, outputs last.
 * Gradients are named dy (incoming), dx / dw / db (outgoing); in int8 mode each gradient is
 * followed by its exponent (const int32_t *dy_exp in, int32_t *dx_exp out, one value).
 *
 * fp32 kernels: every operation is one float32 rounding in the documented order; compile
 * with -ffp-contract=off. No libm: pe_logf, round-half-away and sqrt are exactly specified
 * in ref/pe_train_float.h. int8 kernels do no floating-point arithmetic (pe_mse_loss_s8's
 * reported loss is the one float multiply of the golden recipe).
 *
 * No kernel allocates memory: int8 kernels that normalise a tensor compute it twice (extremes
 * first, then the values) instead of keeping an int32 copy (pe_grad_fixed.h).
 *
 * Masks (act_mask) are packed 1 bit per element, element i in bit (i & 7) of byte i >> 3
 * (LSB first); unused bits of the last byte are written as 0.
 */
#ifndef PE_TRAIN_KERNELS_H
#define PE_TRAIN_KERNELS_H

#include <stdint.h>

#include "pe_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Activation masks: mask = min < y < max (strict), the clamp bounds of the fused activation.
 */
void pe_act_mask_s8(const pe_activation *params, int32_t size, const int8_t *y, uint8_t *mask);

/* dx = mask ? dy : 0 (int8: exponent copied). */
void pe_mask_grad_f32(int32_t size, const float *dy, const uint8_t *mask, float *dx);
void pe_mask_grad_s8(int32_t size, const int8_t *dy, const int32_t *dy_exp,
                     const uint8_t *mask, int8_t *dx, int32_t *dx_exp);

/* ------------------------------------------------------------------------------------------
 * Losses (batch 1). label is one int32 class index; a label outside [0, classes) gives a NaN
 * loss and the gradient without the one-hot term (the golden model rejects it).
 * table: fp32 the EXP table, int8 the NEGLOG table (256 float32 each).
 */
void pe_softmax_cross_entropy_f32(const pe_cross_entropy_params_f32 *params, int32_t classes,
                                  const int8_t *logits, const int32_t *label,
                                  const float *table, float *loss, float *dlogits);
void pe_softmax_cross_entropy_s8(const pe_cross_entropy_params *params, int32_t classes,
                                 const int8_t *logits, const int32_t *label,
                                 const float *table, float *loss, int8_t *dlogits,
                                 int32_t *dlogits_exp);
void pe_mse_loss_f32(const pe_mse_params_f32 *params, int32_t size, const int8_t *y,
                     const int8_t *target, float *loss, float *dy);
void pe_mse_loss_s8(const pe_mse_params *params, int32_t size, const int8_t *y,
                    const int8_t *target, float *loss, int8_t *dy, int32_t *dy_exp);

/* ------------------------------------------------------------------------------------------
 * conv2d / depthwise_conv2d / fully_connected: input gradients (dims of dy, the int8 filter,
 * dx as in the forward kernels; filter_scale: float32 per output channel) and weight gradients
 * (channels: the trained output channels, ascending, dw_dims->n of them for conv and FC,
 * dw_dims->c for depthwise; NULL = all). Grouped conv2d when dx_dims->c > filter_dims->c.
 */
void pe_conv2d_grad_input_f32(const pe_context *ctx, const pe_conv_grad_params *params,
                              const float *filter_scale, const pe_dims *dy_dims,
                              const float *dy, const pe_dims *filter_dims,
                              const int8_t *filter, const pe_dims *dx_dims, float *dx);
void pe_conv2d_grad_input_s8(const pe_context *ctx, const pe_conv_grad_params *params,
                             const pe_grad_input_quant *quant, const pe_dims *dy_dims,
                             const int8_t *dy, const int32_t *dy_exp,
                             const pe_dims *filter_dims, const int8_t *filter,
                             const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
void pe_conv2d_grad_weight_f32(const pe_context *ctx,
                               const pe_conv_grad_weight_params_f32 *params,
                               const int32_t *channels, const pe_dims *x_dims, const int8_t *x,
                               const pe_dims *dy_dims, const float *dy, const pe_dims *dw_dims,
                               float *dw);
void pe_conv2d_grad_weight_s8(const pe_context *ctx, const pe_conv_grad_weight_params *params,
                              const int32_t *channels, const pe_dims *x_dims, const int8_t *x,
                              const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                              const pe_dims *dw_dims, int32_t *dw, int32_t *dw_exp);

void pe_depthwise_conv2d_grad_input_f32(const pe_context *ctx,
                                        const pe_dw_conv_grad_params *params,
                                        const float *filter_scale, const pe_dims *dy_dims,
                                        const float *dy, const pe_dims *filter_dims,
                                        const int8_t *filter, const pe_dims *dx_dims,
                                        float *dx);
void pe_depthwise_conv2d_grad_input_s8(const pe_context *ctx,
                                       const pe_dw_conv_grad_params *params,
                                       const pe_grad_input_quant *quant,
                                       const pe_dims *dy_dims, const int8_t *dy,
                                       const int32_t *dy_exp, const pe_dims *filter_dims,
                                       const int8_t *filter, const pe_dims *dx_dims,
                                       int8_t *dx, int32_t *dx_exp);
void pe_depthwise_conv2d_grad_weight_f32(const pe_context *ctx,
                                         const pe_dw_conv_grad_weight_params_f32 *params,
                                         const int32_t *channels, const pe_dims *x_dims,
                                         const int8_t *x, const pe_dims *dy_dims,
                                         const float *dy, const pe_dims *dw_dims, float *dw);
void pe_depthwise_conv2d_grad_weight_s8(const pe_context *ctx,
                                        const pe_dw_conv_grad_weight_params *params,
                                        const int32_t *channels, const pe_dims *x_dims,
                                        const int8_t *x, const pe_dims *dy_dims,
                                        const int8_t *dy, const int32_t *dy_exp,
                                        const pe_dims *dw_dims, int32_t *dw, int32_t *dw_exp);

/* FC: dy_dims = {rows, 1, 1, out_c}, filter_dims = {out_c, 1, 1, accum_depth},
 * dx_dims / x_dims = {rows, 1, 1, accum_depth}, dw_dims = {count, 1, 1, accum_depth}. */
void pe_fully_connected_grad_input_f32(const pe_context *ctx, const float *filter_scale,
                                       const pe_dims *dy_dims, const float *dy,
                                       const pe_dims *filter_dims, const int8_t *filter,
                                       const pe_dims *dx_dims, float *dx);
void pe_fully_connected_grad_input_s8(const pe_context *ctx, const pe_grad_input_quant *quant,
                                      const pe_dims *dy_dims, const int8_t *dy,
                                      const int32_t *dy_exp, const pe_dims *filter_dims,
                                      const int8_t *filter, const pe_dims *dx_dims, int8_t *dx,
                                      int32_t *dx_exp);
void pe_fully_connected_grad_weight_f32(const pe_context *ctx,
                                        const pe_fc_grad_weight_params_f32 *params,
                                        const int32_t *channels, const pe_dims *x_dims,
                                        const int8_t *x, const pe_dims *dy_dims,
                                        const float *dy, const pe_dims *dw_dims, float *dw);
void pe_fully_connected_grad_weight_s8(const pe_context *ctx,
                                       const pe_fc_grad_weight_params *params,
                                       const int32_t *channels, const pe_dims *x_dims,
                                       const int8_t *x, const pe_dims *dy_dims,
                                       const int8_t *dy, const int32_t *dy_exp,
                                       const pe_dims *dw_dims, int32_t *dw, int32_t *dw_exp);

/* db[c] = sum over the num_rows rows of dy (row_size = channels). */
void pe_bias_grad_f32(int32_t num_rows, int32_t row_size, const float *dy, float *db);

/* The fp32 backward of a 1x1 conv (n_out output channels, int8 filter [n_out][C], per-channel
 * filter_scale) with a ReLU mask (bits, [N][H][W][n_out]) under a global average pool, from the
 * pool's gradient g [N][n_out], position by position: dy = mask ? 0 + g / (H * W) : 0, db =
 * sum of dy over the positions, dx (dx_dims) = dy times the dequantised filter, summed over
 * the output channels in order; dy never exists whole (codegen/pool_grads.py). */
void pe_pool_conv_grad_f32(const float *filter_scale, const float *g, const uint8_t *mask,
                           const int8_t *filter, const pe_dims *dx_dims, int32_t n_out,
                           float *dx, float *db);
void pe_bias_grad_s8(int32_t num_rows, int32_t row_size, const int8_t *dy,
                     const int32_t *dy_exp, int32_t *db, int32_t *db_exp);

/* ------------------------------------------------------------------------------------------
 * Pooling gradients: dy_dims = the forward output, dx_dims = the forward input,
 * filter_dims = {1, f_h, f_w, 1}. max_pool2d routes dy to the first maximum of x in each
 * window (scan order (kh, kw), in-image taps only).
 */
void pe_avg_pool2d_grad_f32(const pe_context *ctx, const pe_pool_grad_params *params,
                            const pe_dims *dy_dims, const float *dy, const pe_dims *filter_dims,
                            const pe_dims *dx_dims, float *dx);
void pe_avg_pool2d_grad_s8(const pe_context *ctx, const pe_avg_pool_grad_params *params,
                           const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                           const pe_dims *filter_dims, const pe_dims *dx_dims, int8_t *dx,
                           int32_t *dx_exp);
void pe_max_pool2d_grad_f32(const pe_context *ctx, const pe_pool_grad_params *params,
                            const pe_dims *dy_dims, const float *dy, const int8_t *x,
                            const pe_dims *filter_dims, const pe_dims *dx_dims, float *dx);
void pe_max_pool2d_grad_s8(const pe_context *ctx, const pe_pool_grad_params *params,
                           const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                           const int8_t *x, const pe_dims *filter_dims, const pe_dims *dx_dims,
                           int8_t *dx, int32_t *dx_exp);

/* ------------------------------------------------------------------------------------------
 * Broadcast gradients (4-D after the Python side's collapse): dx sums dy over the dimensions
 * where dx_dims has 1 and dy_dims does not, in row-major order of those positions. mul_grad
 * multiplies by the other factor (other_dims: 1 where it was broadcast) first; mean_grad
 * broadcasts dy (1 on the reduced dimensions) back to dx.
 */
void pe_add_grad_f32(const pe_dims *dy_dims, const float *dy, const pe_dims *dx_dims,
                     float *dx);
void pe_add_grad_s8(const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                    const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
void pe_mul_grad_f32(const pe_mul_grad_params_f32 *params, const pe_dims *dy_dims,
                     const float *dy, const pe_dims *other_dims, const int8_t *other,
                     const pe_dims *dx_dims, float *dx);
void pe_mul_grad_s8(const pe_mul_grad_params *params, const pe_dims *dy_dims, const int8_t *dy,
                    const int32_t *dy_exp, const pe_dims *other_dims, const int8_t *other,
                    const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp);
void pe_mean_grad_f32(const pe_mean_grad_params_f32 *params, const pe_dims *dy_dims,
                      const float *dy, const pe_dims *dx_dims, float *dx);
void pe_mean_grad_s8(const pe_per_tensor_quant *quant, const pe_dims *dy_dims,
                     const int8_t *dy, const int32_t *dy_exp, const pe_dims *dx_dims,
                     int8_t *dx, int32_t *dx_exp);

/* ------------------------------------------------------------------------------------------
 * Data movement (int8: q moved, exponent copied). reshape_grad is a view: it copies unless
 * dy == dx.
 */
void pe_pad_grad_f32(const pe_pad_grad_params *params, const pe_dims *dy_dims, const float *dy,
                     const pe_dims *dx_dims, float *dx);
void pe_pad_grad_s8(const pe_pad_grad_params *params, const pe_dims *dy_dims, const int8_t *dy,
                    const int32_t *dy_exp, const pe_dims *dx_dims, int8_t *dx,
                    int32_t *dx_exp);
void pe_concat_grad_f32(const pe_concat_grad_params *params, const float *dy, float *dx);
void pe_concat_grad_s8(const pe_concat_grad_params *params, const int8_t *dy,
                       const int32_t *dy_exp, int8_t *dx, int32_t *dx_exp);
void pe_reshape_grad_f32(int32_t size, const float *dy, float *dx);
void pe_reshape_grad_s8(int32_t size, const int8_t *dy, const int32_t *dy_exp, int8_t *dx,
                        int32_t *dx_exp);

/* The whole weight of a partial trainable tensor: runs[r] rows of row_size bytes from trained
 * (even r) and frozen (odd r) in turn (codegen/partial.py). */
void pe_merge_rows_s8(int32_t num_runs, const int32_t *runs, int32_t row_size,
                      const int8_t *trained, const int8_t *frozen, int8_t *output);

/* ------------------------------------------------------------------------------------------
 * Softmax gradient over rows: dx = beta * y_r * (dy - sum(dy * y_r)). int8: y has scale 1/256
 * and zero point -128.
 */
void pe_softmax_grad_f32(const pe_softmax_grad_params_f32 *params, int32_t num_rows,
                         int32_t row_size, const float *dy, const int8_t *y, float *dx);
void pe_softmax_grad_s8(const pe_softmax_grad_params *params, int32_t num_rows,
                        int32_t row_size, const int8_t *dy, const int32_t *dy_exp,
                        const int8_t *y, int8_t *dx, int32_t *dx_exp);

/* g = g1 + g2 (g may alias g1 or g2). */
void pe_grad_add_f32(int32_t size, const float *g1, const float *g2, float *g);
void pe_grad_add_s8(int32_t size, const int8_t *g1, const int32_t *g1_exp, const int8_t *g2,
                    const int32_t *g2_exp, int8_t *g, int32_t *g_exp);

/* ------------------------------------------------------------------------------------------
 * Updates (ops.UPDATE_INPUTS slots; an absent slot is NULL). channels: the trained channels
 * (dims->count of them, ascending; NULL = all); qas: one factor per trained channel (fp32)
 * or multiplier + shift (int8 mode). Parameters saturate: int8 weights to [-127, 127], int32
 * biases to [dims->lo, dims->hi] (forward-safe: the layer's int32 accumulator cannot wrap);
 * nothing wraps. saturated (int32, one value; NULL: not counted): the kernel
 * adds, saturating at INT32_MAX, the number of trained entries whose update clamped a value
 * or met a NaN (codegen/golden/train_optim.py lists the conditions per kernel).
 */
void pe_sgd_update_f32_s8(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                          const int32_t *channels, int8_t *param, const float *grad,
                          const float *qas, float *buf1, float *master, const float *lr,
                          float *accum, const int32_t *step, int32_t *saturated);
void pe_sgd_update_f32_s32(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                           const int32_t *channels, int32_t *param, const float *grad,
                           const float *qas, float *buf1, float *master, const float *lr,
                           float *accum, const int32_t *step, int32_t *saturated);
void pe_sgd_update_s8_s8(const pe_sgd_params *params, const pe_update_dims *dims,
                         const int32_t *channels, int8_t *param, const int32_t *grad,
                         const int32_t *qas, const int32_t *grad_exp, const int32_t *qas_shift,
                         int32_t *buf1, int32_t *master, int32_t *saturated);
void pe_sgd_update_s8_s32(const pe_sgd_params *params, const pe_update_dims *dims,
                          const int32_t *channels, int32_t *param, const int32_t *grad,
                          const int32_t *qas, const int32_t *grad_exp,
                          const int32_t *qas_shift, int32_t *buf1, int32_t *master,
                          int32_t *saturated);
void pe_adam_update_f32_s8(const pe_adam_params_f32 *params, const pe_update_dims *dims,
                           const int32_t *channels, int8_t *param, const float *grad,
                           const float *qas, float *buf1, float *buf2, const float *pows,
                           float *master, const float *lr, float *accum, const int32_t *step,
                           int32_t *saturated);
void pe_adam_update_f32_s32(const pe_adam_params_f32 *params, const pe_update_dims *dims,
                            const int32_t *channels, int32_t *param, const float *grad,
                            const float *qas, float *buf1, float *buf2, const float *pows,
                            float *master, const float *lr, float *accum,
                            const int32_t *step, int32_t *saturated);

/* The last op of a step: step += 1; when an update was applied, Adam's powers advance and the
 * lr schedule moves (lr, pows: NULL when absent). pe_step_counter_s8 (backward: int8) only
 * counts: int8 mode has no schedule, no Adam and no accumulation. */
void pe_step_counter_f32(const pe_step_counter_params *params, int32_t *step, float *lr,
                         float *pows);
void pe_step_counter_s8(const pe_step_counter_params *params, int32_t *step, float *lr,
                        float *pows);

#ifdef __cplusplus
}
#endif

#endif /* PE_TRAIN_KERNELS_H */
