/* The native backend's int8 forward bodies out of line (run-time shapes): what tests call
 * through ctypes, the same code a generated model inlines with literal shapes. */
#include "pe_native_kernels.h"

void pe_conv2d_s8_native(const pe_context *ctx, const int8_t *input, const int8_t *w8,
                         const int32_t *corr, const int8_t *filter, const int32_t *bias,
                         const int32_t *rq,
                         int8_t *output, int32_t batches, int32_t in_h, int32_t in_w,
                         int32_t in_c, int32_t out_h, int32_t out_w, int32_t out_c,
                         int32_t k_h, int32_t k_w, int32_t s_h, int32_t s_w, int32_t pad_h,
                         int32_t pad_w, int32_t d_h, int32_t d_w, int32_t input_offset,
                         int32_t out_offset, int32_t act_min, int32_t act_max)
{
    pe_nv_conv_s8(ctx, input, w8, corr, filter, bias, rq, output, batches, in_h, in_w, in_c, out_h,
                  out_w, out_c, k_h, k_w, s_h, s_w, pad_h, pad_w, d_h, d_w, input_offset,
                  out_offset, act_min, act_max);
}

void pe_depthwise_conv2d_s8_native(const pe_context *ctx, const int8_t *input,
                                   const int32_t *w32, const int8_t *filter,
                                   const int32_t *bias, const int32_t *rq, int8_t *output,
                                   int32_t batches, int32_t in_h, int32_t in_w,
                                   int32_t channels, int32_t out_h, int32_t out_w,
                                   int32_t k_h, int32_t k_w, int32_t s_h, int32_t s_w,
                                   int32_t pad_h, int32_t pad_w, int32_t d_h, int32_t d_w,
                                   int32_t input_offset, int32_t out_offset, int32_t act_min,
                                   int32_t act_max)
{
    pe_nv_dw_s8(ctx, input, w32, filter, bias, rq, output, batches, in_h, in_w, channels,
                out_h, out_w, k_h, k_w, s_h, s_w, pad_h, pad_w, d_h, d_w, input_offset,
                out_offset, act_min, act_max);
}

void pe_fully_connected_s8_native(const pe_context *ctx, const int8_t *input,
                                  const int8_t *filter, const int32_t *bias, const int32_t *rq,
                                  int8_t *output, int32_t rows, int32_t depth, int32_t units,
                                  int32_t input_offset, int32_t out_offset, int32_t act_min,
                                  int32_t act_max)
{
    pe_nv_fc_s8(ctx, input, filter, bias, rq, output, rows, depth, units, input_offset,
                out_offset, act_min, act_max);
}

void pe_avg_pool2d_s8_native(const int8_t *input, int8_t *output, int32_t batches,
                             int32_t in_h, int32_t in_w, int32_t channels, int32_t out_h,
                             int32_t out_w, int32_t f_h, int32_t f_w, int32_t s_h, int32_t s_w,
                             int32_t pad_h, int32_t pad_w, int32_t act_min, int32_t act_max)
{
    pe_nv_avg_pool_s8(input, output, batches, in_h, in_w, channels, out_h, out_w, f_h, f_w, s_h,
                      s_w, pad_h, pad_w, act_min, act_max);
}

void pe_add_s8_native(const int32_t *tables, const int32_t *rq, const int8_t *input1,
                      const int8_t *input2, int8_t *output, int32_t size, int32_t out_offset,
                      int32_t act_min, int32_t act_max)
{
    pe_nv_add_s8(tables, rq, input1, input2, output, size, out_offset, act_min, act_max);
}

const char *pe_native_path(void)
{
    return PE_NV_PATH;
}
