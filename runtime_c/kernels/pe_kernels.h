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
