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
/* which code path the kernels were compiled for: "avx512-vnni", "avx512", "avx2", "portable" */
const char *pe_native_path(void);

#ifdef __cplusplus
}
#endif

#endif /* PE_NATIVE_KERNELS_H */
