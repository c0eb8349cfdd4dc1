/*
 * pe_kernels.h - the kernel interface of pockengine: shared parameter structs and every
 * forward kernel's signature. One convention for all backends.
 *
 * Names:  pe_<op>_<dtype>[_<variant>]. dtype is s8 (int8), f32 (float32), or in_out for
 *         converting kernels (pe_quantize_f32_s8, pe_softmax_s8_s16). A variant names a
 *         specialisation with different arguments (pe_fully_connected_s8_per_channel).
 *         Backends other than ref (kernels/ref, portable C99) implement the SAME signature
 *         under the ref name plus a backend suffix (pe_conv2d_s8 -> pe_conv2d_s8_cmsis,
 *         pe_conv2d_s8_hvx), so one image can mix backends per op and fall back to ref.
 *
 * Arguments, always in this order:
 *   1. const pe_context *ctx      scratch memory, for the conv / pool / FC families only
 *                                 (ref kernels need none and accept NULL);
 *   2. const <params> *params     scalar parameters, when the op has any;
 *   3. const <quant> *quant       per-channel or per-tensor requantization, when needed;
 *   4. the tensors, inputs then the output, each as (const pe_dims *dims, data) when the
 *      kernel needs its shape, or as one leading int32_t element count for element-wise ops.
 *
 * Conventions (CMSIS-NN's, so a CMSIS-NN backend maps onto them field by field; the structs
 * have the same field order as their cmsis_nn_* counterparts):
 *   - layout NHWC; conv filters OHWI, depthwise filters 1HW(C*M), FC weights (O, I);
 *   - input_offset = -zero_point_in, output_offset = +zero_point_out, filter_offset = 0;
 *   - padding is the top/left pad only: the bottom/right pad follows from the output size;
 *   - activation = the output clamp [min, max] in the output's quantized domain;
 *   - requantization: multiplier Q31 in [0, 2^31), shift in [-31, 30], positive = left,
 *     from TFLM's QuantizeMultiplier, computed ahead of time (codegen/backends/ref_args.py).
 * int8 kernels are bit-exact with TFLite Micro's reference kernels (codegen/golden is the
 * oracle) and do no floating-point arithmetic. Float kernels accumulate in float32 in
 * TFLite's order; compile them with -ffp-contract=off.
 */
#ifndef PE_KERNELS_H
#define PE_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Shared parameter structs
 */

/* Kernel scratch memory (cmsis_nn_context). */
typedef struct {
    void *buf;
    int32_t size;
} pe_context;

/* A 4-D shape; n is the batch (or output channels for a conv filter). */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} pe_dims;

/* A 2-D (width, height) pair: stride, top/left padding, dilation (cmsis_nn_tile). */
typedef struct {
    int32_t w;
    int32_t h;
} pe_tile;

/* Output clamp in the quantized output domain. */
typedef struct {
    int32_t min;
    int32_t max;
} pe_activation;

/* Output clamp of a float kernel (-INFINITY / INFINITY when there is none). */
typedef struct {
    float min;
    float max;
} pe_activation_f32;

/* One multiplier and shift per output channel. */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
} pe_per_channel_quant;

/* One multiplier and shift for the whole tensor. */
typedef struct {
    int32_t multiplier;
    int32_t shift;
} pe_per_tensor_quant;

typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
    pe_activation activation;
} pe_conv_params;

typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t ch_mult;                  /* depth multiplier: output channels = ch_mult * input */
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
    pe_activation activation;
} pe_dw_conv_params;

typedef struct {
    int32_t input_offset;
    int32_t filter_offset;
    int32_t output_offset;
    pe_activation activation;
} pe_fc_params;

typedef struct {
    pe_tile stride;
    pe_tile padding;
    pe_activation activation;
} pe_pool_params;

typedef struct {
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
    pe_activation_f32 activation;
} pe_conv_params_f32;

typedef struct {
    int32_t ch_mult;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
    pe_activation_f32 activation;
} pe_dw_conv_params_f32;

typedef struct {
    pe_activation_f32 activation;
} pe_fc_params_f32;

typedef struct {
    pe_tile stride;
    pe_tile padding;
    pe_activation_f32 activation;
} pe_pool_params_f32;

/* int8 ADD (TFLM recipe): both inputs are shifted left by left_shift (20) and rescaled to a
 * common scale, summed, then rescaled to the output. */
typedef struct {
    int32_t input1_offset;
    int32_t input1_multiplier;
    int32_t input1_shift;
    int32_t input2_offset;
    int32_t input2_multiplier;
    int32_t input2_shift;
    int32_t left_shift;
    int32_t output_offset;
    int32_t output_multiplier;
    int32_t output_shift;
    pe_activation activation;
} pe_add_params;

typedef struct {
    int32_t input1_offset;
    int32_t input2_offset;
    int32_t output_offset;
    int32_t output_multiplier;
    int32_t output_shift;
    pe_activation activation;
} pe_mul_params;

/* int8 -> int8 requantization (QUANTIZE int8 -> int8, and int8 RELU, which requantizes). */
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t multiplier;
    int32_t shift;
    pe_activation activation;
} pe_requant_params;

/* int8 softmax (TFLM): input_multiplier / input_left_shift scale beta * s_in into Q5.26. */
typedef struct {
    int32_t input_multiplier;
    int32_t input_left_shift;
    int32_t diff_min;
} pe_softmax_params;

typedef struct {
    float beta;
} pe_softmax_params_f32;

/* MEAN: 1/count is folded into multiplier/shift (TFLM QuantizedMeanOrSum). */
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t multiplier;
    int32_t shift;
} pe_mean_params;

/* PAD: the before-padding per dimension; the after-padding follows from the output dims. */
typedef struct {
    pe_dims before;
    int32_t pad_value;
} pe_pad_params;

typedef struct {
    pe_dims before;
    float pad_value;
} pe_pad_params_f32;

/* CONCATENATION as `outer_size` rounds of copying each input's inner block in turn. */
typedef struct {
    int32_t outer_size;
    pe_activation activation;
} pe_concat_params;

typedef struct {
    int32_t outer_size;
    pe_activation_f32 activation;
} pe_concat_params_f32;

/* float32 -> int8 quantization and int8 -> float32 dequantization (per tensor). */
typedef struct {
    float scale;
    int32_t zero_point;
} pe_affine_params_f32;

/* A stream_chain op (codegen/ir/stream.py): a chain of int8 convolutions run in bands of
 * output rows. One pe_stream_stage per stage: kind PE_STREAM_CONV (params as
 * pe_conv_params's fields; ch_mult unused) or PE_STREAM_DEPTHWISE, the stage's requantization,
 * filter dims, output dims (the whole stage output), window = (k_h - 1) * dilation.h + 1, and
 * where its output rows are kept: buffer_rows rows from buffer_offset in ctx->buf (every stage
 * but the last, which writes the op's output). */
#define PE_STREAM_CONV 0
#define PE_STREAM_DEPTHWISE 1
#define PE_STREAM_MAX_STAGES 32

typedef struct {
    int32_t kind;
    pe_dw_conv_params params;
    pe_per_channel_quant quant;
    pe_dims filter_dims;
    pe_dims output_dims;
    int32_t window;
    int32_t buffer_offset;
    int32_t buffer_rows;
} pe_stream_stage;

/* residual: 0 none; 1 output = add(chain, input); 2 output = add(input, chain), with add's
 * parameters (input1 the first operand). band_rows: output rows per band; state_offset:
 * where in ctx->buf the schedule keeps its three int32 per stage (after the row buffers);
 * kernel_scratch_offset / _bytes: the part of ctx->buf the stage kernels get as theirs. */
typedef struct {
    int32_t num_stages;
    int32_t band_rows;
    int32_t residual;
    int32_t state_offset;
    int32_t kernel_scratch_offset;
    int32_t kernel_scratch_bytes;
    pe_add_params add;
} pe_stream_params;

/* One step of a stream_chain's band schedule (pe_stream.h), as its stage function gets it:
 * stage `index` produces out_dims.h rows into `output` from in_dims.h rows of its input at
 * `input` with top padding pad_h (negative: the window starts below the rows given);
 * index == num_stages: the residual add of `size` values, `input` the input's rows and
 * `output` the chain's, added in place. ctx: the stage kernels' scratch. */
typedef struct {
    const void *user;
    const pe_context *ctx;
    int32_t index;
    const pe_stream_stage *stage;
    int32_t pad_h;
    pe_dims in_dims;
    const int8_t *input;
    const int8_t *filter;
    const int32_t *bias;
    pe_dims out_dims;
    int8_t *output;
    int32_t size;
} pe_stream_call;

typedef void (*pe_stream_fn)(const pe_stream_call *call);

/* The arm backend's out-of-line stream_chain (pe_stream_chain_s8_arm, pe_arm_kernels.h) runs
 * each stage through the body of its arm kernel with run-time shapes: per stage the body
 * (form), its mode bits (w16 and depthwise modes; conv: 1 when `filter` is a packed copy), the
 * output offset it is given (0 when folded into the constants), and its compile-time arrays
 * (NULL: not used; filter NULL: the stage's weights as they are); bias from the biases list
 * when use_bias; a residual add runs pe_arm_add_s8 with add_tables / add_rq and the output
 * stage after them. */
#define PE_STREAM_ARM_W16 0
#define PE_STREAM_ARM_CONV 1
#define PE_STREAM_ARM_DEPTHWISE 2

typedef struct {
    int32_t form;
    int32_t mode;
    int32_t output_offset;
    int32_t use_bias;
    const int32_t *words;
    const int8_t *filter;
    const int32_t *ksum;
    const int32_t *rq;
} pe_stream_arm_stage;

typedef struct {
    const int32_t *add_tables;
    const int32_t *add_rq;
    int32_t add_multiplier;
    int32_t add_shift;
    int32_t add_offset;
    pe_activation add_activation;
} pe_stream_arm_params;

/* ------------------------------------------------------------------------------------------
 * Parameter structs of the training kernels (their prototypes: pe_train_kernels.h). Kept here
 * so that codegen/backends/kernel_call.py's STRUCTS mirrors one header.
 */

/* conv2d_grad_input (both modes): geometry of the forward convolution. */
typedef struct {
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
} pe_conv_grad_params;

typedef struct {
    int32_t ch_mult;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
} pe_dw_conv_grad_params;

/* int8 *_grad_input: dy is prescaled per output channel o by multiplier[o] * 2^(shift[o]-31)
 * after a left shift by prescale_shift, the int32 sum is rescaled by output_multiplier *
 * 2^(output_shift - 31) (codegen/golden/train_conv.py input_grad_prescale). */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
    int32_t prescale_shift;
    int32_t output_multiplier;
    int32_t output_shift;
} pe_grad_input_quant;

/* *_grad_weight: x is dequantized as (x + input_offset) * input_scale (fp32 mode) or used as
 * x + input_offset (int8 mode; the scale is folded into the update's QAS multiplier). */
typedef struct {
    int32_t input_offset;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
} pe_conv_grad_weight_params;

typedef struct {
    int32_t input_offset;
    float input_scale;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
} pe_conv_grad_weight_params_f32;

typedef struct {
    int32_t input_offset;
    int32_t ch_mult;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
} pe_dw_conv_grad_weight_params;

typedef struct {
    int32_t input_offset;
    float input_scale;
    int32_t ch_mult;
    pe_tile stride;
    pe_tile padding;
    pe_tile dilation;
} pe_dw_conv_grad_weight_params_f32;

typedef struct {
    int32_t input_offset;
} pe_fc_grad_weight_params;

typedef struct {
    int32_t input_offset;
    float input_scale;
} pe_fc_grad_weight_params_f32;

/* Pooling gradients: forward stride and top/left padding; int8 average pooling multiplies dy
 * by RECIP[count] = (2^recip_bits + count / 2) / count. */
typedef struct {
    pe_tile stride;
    pe_tile padding;
} pe_pool_grad_params;

typedef struct {
    pe_tile stride;
    pe_tile padding;
    int32_t recip_bits;
} pe_avg_pool_grad_params;

/* Losses. fp32 cross-entropy: scale = float32(beta * s_logits) (float32 product), beta =
 * float32(attr). int8: the int8 softmax's parameters (the int8 -> int16 recipe is used), and
 * beta != 1's static factor (beta_multiplier 0 when beta == 1: the gradient is normalised,
 * not rescaled). */
typedef struct {
    float scale;
    float beta;
} pe_cross_entropy_params_f32;

typedef struct {
    pe_softmax_params softmax;
    int32_t beta_multiplier;
    int32_t beta_shift;
} pe_cross_entropy_params;

/* MSE on int8 tensors of one quantization: fp32 d = float32(y - t) * scale; int8 loss =
 * float32(sum d^2) * loss_scale (float32(s^2 / N)), gradient rescaled by 2 s / N. */
typedef struct {
    float scale;
} pe_mse_params_f32;

typedef struct {
    float loss_scale;
    int32_t multiplier;
    int32_t shift;
} pe_mse_params;

/* mul_grad: the other factor's dequantization; int8 mode: its offset (-zp) and the static
 * factor s_other as multiplier * 2^(shift - 31). fp32 reduce: 1 when dx sums over broadcast
 * axes (float32 from +0.0, even over axes of size 1), 0 when dx is dy * other itself. */
typedef struct {
    int32_t other_offset;
    float other_scale;
    int32_t reduce;
} pe_mul_grad_params_f32;

typedef struct {
    int32_t other_offset;
    int32_t multiplier;
    int32_t shift;
} pe_mul_grad_params;

/* mean_grad fp32: dx = dy / count (count = float32 of the number of averaged values). */
typedef struct {
    float count;
} pe_mean_grad_params_f32;

/* pad_grad: the before-padding per dimension (dx = the interior of dy). */
typedef struct {
    pe_dims before;
} pe_pad_grad_params;

/* concat_grad: dy holds outer_size blocks of dy_inner_size values; dx takes dx_inner_size
 * values of each block starting at offset. */
typedef struct {
    int32_t outer_size;
    int32_t dy_inner_size;
    int32_t dx_inner_size;
    int32_t offset;
} pe_concat_grad_params;

/* softmax_grad: y (the int8 softmax output) dequantized as (y + y_offset) * y_scale; int8:
 * beta as multiplier * 2^(shift - 31). */
typedef struct {
    int32_t y_offset;
    float y_scale;
    float beta;
} pe_softmax_grad_params_f32;

typedef struct {
    int32_t y_offset;
    int32_t beta_multiplier;
    int32_t beta_shift;
} pe_softmax_grad_params;

/* Update ops: the parameter seen as (outer, channels, inner) around its channel axis; the
 * gradient and every per-parameter buffer as (outer, count, inner), count = trained channels
 * (= channels when the channel list is NULL). [lo, hi]: the parameter's saturation range
 * (train_optim.param_limits): [-127, 127] for int8 weights; for int32 biases +-bias_limit,
 * within which the layer's forward int32 accumulator cannot overflow, or the int32 range. */
typedef struct {
    int32_t outer;
    int32_t channels;
    int32_t inner;
    int32_t count;
    int32_t lo;
    int32_t hi;
} pe_update_dims;

/* fp32 SGD: lr = float32(attr lr) (used when the lr slot is NULL); momentum used when buf1
 * is given; accumulate > 1: gradient accumulation (accum and step slots). */
typedef struct {
    float lr;
    float momentum;
    int32_t accumulate;
} pe_sgd_params_f32;

/* int8-mode SGD: momentum_q15 = round_half_away(momentum * 2^15) (used when buf1 is given);
 * master_frac_bits F of an int32 master copy (used when master is given). */
typedef struct {
    int32_t momentum_q15;
    int32_t master_frac_bits;
} pe_sgd_params;

typedef struct {
    float lr;
    float beta1;
    float beta2;
    float eps;
    int32_t accumulate;
} pe_adam_params_f32;

/* step_counter: schedule 0 constant, 1 step (lr_t *= gamma every step_size updates),
 * 2 warmup (lr_t = lr * min(u + 1, W) / W), 3 cosine (warmup over W updates, then
 * min_lr + (lr - min_lr) * (1 + cos(pi * min(u - W, T - W) / (T - W))) / 2 with
 * T = total_steps); beta1/beta2 advance Adam's powers. */
typedef struct {
    int32_t accumulate;
    int32_t schedule;
    float lr;
    float gamma;
    int32_t step_size;
    int32_t warmup_steps;
    int32_t total_steps;
    float min_lr;
    float beta1;
    float beta2;
} pe_step_counter_params;

/* ------------------------------------------------------------------------------------------
 * Convolution, depthwise convolution, fully connected
 *
 * conv2d: filter_dims = {out_c, k_h, k_w, in_c / groups}; groups = input_dims->c /
 * filter_dims->c (1 for an ordinary convolution). Taps outside the input are skipped (they
 * read the zero point). bias may be NULL.
 */
void pe_conv2d_s8(const pe_context *ctx, const pe_conv_params *params,
                  const pe_per_channel_quant *quant, const pe_dims *input_dims,
                  const int8_t *input, const pe_dims *filter_dims, const int8_t *filter,
                  const int32_t *bias, const pe_dims *output_dims, int8_t *output);
void pe_conv2d_f32(const pe_context *ctx, const pe_conv_params_f32 *params,
                   const pe_dims *input_dims, const float *input, const pe_dims *filter_dims,
                   const float *filter, const float *bias, const pe_dims *output_dims,
                   float *output);

/* depthwise: filter_dims = {1, k_h, k_w, out_c}; output channel c * ch_mult + m reads input
 * channel c. */
void pe_depthwise_conv2d_s8(const pe_context *ctx, const pe_dw_conv_params *params,
                            const pe_per_channel_quant *quant, const pe_dims *input_dims,
                            const int8_t *input, const pe_dims *filter_dims,
                            const int8_t *filter, const int32_t *bias,
                            const pe_dims *output_dims, int8_t *output);
void pe_depthwise_conv2d_f32(const pe_context *ctx, const pe_dw_conv_params_f32 *params,
                             const pe_dims *input_dims, const float *input,
                             const pe_dims *filter_dims, const float *filter, const float *bias,
                             const pe_dims *output_dims, float *output);

/* fully connected: input_dims = {rows, 1, 1, accum_depth}, filter_dims = {out_c, 1, 1,
 * accum_depth} (OHWI like conv; CMSIS-NN's FC filter_dims is {accum_depth, .., out_c}),
 * output_dims = {rows, 1, 1, out_c}. */
void pe_fully_connected_s8(const pe_context *ctx, const pe_fc_params *params,
                           const pe_per_tensor_quant *quant, const pe_dims *input_dims,
                           const int8_t *input, const pe_dims *filter_dims,
                           const int8_t *filter, const int32_t *bias,
                           const pe_dims *output_dims, int8_t *output);
void pe_fully_connected_s8_per_channel(const pe_context *ctx, const pe_fc_params *params,
                                       const pe_per_channel_quant *quant,
                                       const pe_dims *input_dims, const int8_t *input,
                                       const pe_dims *filter_dims, const int8_t *filter,
                                       const int32_t *bias, const pe_dims *output_dims,
                                       int8_t *output);
void pe_fully_connected_f32(const pe_context *ctx, const pe_fc_params_f32 *params,
                            const pe_dims *input_dims, const float *input,
                            const pe_dims *filter_dims, const float *filter, const float *bias,
                            const pe_dims *output_dims, float *output);

/* stream_chain: the chain's output, band by band; ctx->buf holds the stages' row buffers
 * (pe_stream.h: the band schedule, the same steps as codegen/ir/stream.py band_plan).
 * filters[j] / biases[j]: stage j's weights and bias. The output must not overlap the input. */
void pe_stream_chain_s8(const pe_context *ctx, const pe_stream_params *params,
                        const pe_stream_stage *stages, const int8_t *const *filters,
                        const int32_t *const *biases, const pe_dims *input_dims,
                        const int8_t *input, const pe_dims *output_dims, int8_t *output);

/* ------------------------------------------------------------------------------------------
 * Pooling: filter_dims = {1, f_h, f_w, 1}. int8 pooling does not requantize (input and
 * output share quantization). Average pooling divides by the number of in-image taps.
 */
void pe_avg_pool2d_s8(const pe_context *ctx, const pe_pool_params *params,
                      const pe_dims *input_dims, const int8_t *input,
                      const pe_dims *filter_dims, const pe_dims *output_dims, int8_t *output);
void pe_avg_pool2d_f32(const pe_context *ctx, const pe_pool_params_f32 *params,
                       const pe_dims *input_dims, const float *input,
                       const pe_dims *filter_dims, const pe_dims *output_dims, float *output);
void pe_max_pool2d_s8(const pe_context *ctx, const pe_pool_params *params,
                      const pe_dims *input_dims, const int8_t *input,
                      const pe_dims *filter_dims, const pe_dims *output_dims, int8_t *output);
void pe_max_pool2d_f32(const pe_context *ctx, const pe_pool_params_f32 *params,
                       const pe_dims *input_dims, const float *input,
                       const pe_dims *filter_dims, const pe_dims *output_dims, float *output);

/* ------------------------------------------------------------------------------------------
 * Element-wise binary ops with broadcasting: the three shapes are 4-D; an input dimension
 * of 1 against a larger output dimension is broadcast (numpy rules, after the Python side
 * has collapsed higher-rank shapes to 4-D). Equal input and output dims = plain element-wise.
 */
void pe_add_s8(const pe_add_params *params, const pe_dims *input1_dims, const int8_t *input1,
               const pe_dims *input2_dims, const int8_t *input2, const pe_dims *output_dims,
               int8_t *output);
void pe_add_f32(const pe_activation_f32 *params, const pe_dims *input1_dims,
                const float *input1, const pe_dims *input2_dims, const float *input2,
                const pe_dims *output_dims, float *output);
void pe_mul_s8(const pe_mul_params *params, const pe_dims *input1_dims, const int8_t *input1,
               const pe_dims *input2_dims, const int8_t *input2, const pe_dims *output_dims,
               int8_t *output);
void pe_mul_f32(const pe_activation_f32 *params, const pe_dims *input1_dims,
                const float *input1, const pe_dims *input2_dims, const float *input2,
                const pe_dims *output_dims, float *output);

/* ------------------------------------------------------------------------------------------
 * Softmax over rows of row_size values. int8 output: scale 1/256, zero point -128; int16
 * output: scale 1/65536, zero point -32768. Rows of up to 4096 values (TFLM's int32 sum).
 */
void pe_softmax_s8(const pe_softmax_params *params, int32_t num_rows, int32_t row_size,
                   const int8_t *input, int8_t *output);
void pe_softmax_s8_s16(const pe_softmax_params *params, int32_t num_rows, int32_t row_size,
                       const int8_t *input, int16_t *output);
/* exp by pe_exp_f32 (no libm), about 1 ulp. */
void pe_softmax_f32(const pe_softmax_params_f32 *params, int32_t num_rows, int32_t row_size,
                    const float *input, float *output);

/* ------------------------------------------------------------------------------------------
 * Mean over the dimensions where output_dims has 1 and input_dims does not.
 */
void pe_mean_s8(const pe_mean_params *params, const pe_dims *input_dims, const int8_t *input,
                const pe_dims *output_dims, int8_t *output);
void pe_mean_f32(const pe_dims *input_dims, const float *input, const pe_dims *output_dims,
                 float *output);

/* ------------------------------------------------------------------------------------------
 * Data movement
 */
void pe_pad_s8(const pe_pad_params *params, const pe_dims *input_dims, const int8_t *input,
               const pe_dims *output_dims, int8_t *output);
void pe_pad_f32(const pe_pad_params_f32 *params, const pe_dims *input_dims, const float *input,
                const pe_dims *output_dims, float *output);

/* inputs[i] holds outer_size blocks of input_inner_sizes[i] values each. */
void pe_concat_s8(const pe_concat_params *params, int32_t num_inputs,
                  const int32_t *input_inner_sizes, const int8_t *const *inputs,
                  int8_t *output);
void pe_concat_f32(const pe_concat_params_f32 *params, int32_t num_inputs,
                   const int32_t *input_inner_sizes, const float *const *inputs,
                   float *output);

/* RESHAPE is a view: the code generator aliases input and output where the memory plan
 * allows; otherwise these copy (input == output is a no-op). */
void pe_reshape_s8(int32_t size, const int8_t *input, int8_t *output);
void pe_reshape_f32(int32_t size, const float *input, float *output);

/* ------------------------------------------------------------------------------------------
 * Quantization and activations (element-wise over `size` values)
 */
/* clamp(round_half_away(x / scale) + zero_point) with the division in float32; NaN -> zp. */
void pe_quantize_f32_s8(const pe_affine_params_f32 *params, int32_t size, const float *input,
                        int8_t *output);
/* int8 -> int8 requantization. */
void pe_quantize_s8_s8(const pe_requant_params *params, int32_t size, const int8_t *input,
                       int8_t *output);
/* scale * (q - zero_point), exact in float32 (the same value TFLM computes in double). */
void pe_dequantize_s8_f32(const pe_affine_params_f32 *params, int32_t size,
                          const int8_t *input, float *output);

/* int8 RELU requantizes to the output quantization (TFLM), then clamps at the output zero. */
void pe_relu_s8(const pe_requant_params *params, int32_t size, const int8_t *input,
                int8_t *output);
/* int8 RELU6 clamps in the input's quantization: x > max ? max : x < min ? min : x. */
void pe_relu6_s8(const pe_activation *params, int32_t size, const int8_t *input,
                 int8_t *output);
void pe_relu_f32(int32_t size, const float *input, float *output);
void pe_relu6_f32(int32_t size, const float *input, float *output);

#ifdef __cplusplus
}
#endif

#endif /* PE_KERNELS_H */
