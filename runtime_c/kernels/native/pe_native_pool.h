/*
 * pe_native_pool.h - the native backend's int8 average pooling, bit-exact with TFLM's reference
 * AveragePool: windows clipped to the image (padding taps not counted), the sum divided by the
 * count with rounding half away from zero (C's truncating division of sum +- count / 2),
 * clamped. Sums over the window run sixteen channels at a time (int32 lanes the compiler
 * vectorises); the divisions are per value.
 */
#ifndef PE_NATIVE_POOL_H
#define PE_NATIVE_POOL_H

#include "pe_native.h"

PE_NV_KERNEL void pe_nv_avg_pool_s8(const int8_t *input, int8_t *output, int32_t batches,
                                    int32_t in_h, int32_t in_w, int32_t channels,
                                    int32_t out_h, int32_t out_w, int32_t f_h, int32_t f_w,
                                    int32_t s_h, int32_t s_w, int32_t pad_h, int32_t pad_w,
                                    int32_t act_min, int32_t act_max)
{
    int32_t n, oy, ox, c0, y, x, l;
    for (n = 0; n < batches; ++n) {
        const int8_t *image = input + n * in_h * in_w * channels;
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * s_h - pad_h;
            const int32_t y0 = iy0 < 0 ? 0 : iy0;
            const int32_t y1e = iy0 + f_h > in_h ? in_h : iy0 + f_h;
            const int32_t y1 = y1e < y0 ? y0 : y1e;
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * s_w - pad_w;
                const int32_t x0 = ix0 < 0 ? 0 : ix0;
                const int32_t x1e = ix0 + f_w > in_w ? in_w : ix0 + f_w;
                const int32_t x1 = x1e < x0 ? x0 : x1e;
                const int32_t count = (y1 - y0) * (x1 - x0);
                int8_t *out = output + ((n * out_h + oy) * out_w + ox) * channels;
                for (c0 = 0; c0 < channels; c0 += PE_NV_LANES) {
                    const int32_t m = channels - c0 < PE_NV_LANES ? channels - c0 : PE_NV_LANES;
                    int32_t acc[PE_NV_LANES];
                    for (l = 0; l < PE_NV_LANES; ++l) {
                        acc[l] = 0;
                    }
                    for (y = y0; y < y1; ++y) {
                        for (x = x0; x < x1; ++x) {
                            const int8_t *p = image + (y * in_w + x) * channels + c0;
                            if (m == PE_NV_LANES) {
                                for (l = 0; l < PE_NV_LANES; ++l) {
                                    acc[l] += p[l];
                                }
                            } else {
                                for (l = 0; l < m; ++l) {
                                    acc[l] += p[l];
                                }
                            }
                        }
                    }
                    for (l = 0; l < m; ++l) {
                        const int32_t v = count > 0 ? (acc[l] > 0 ? (acc[l] + count / 2) / count
                                                                  : (acc[l] - count / 2) / count)
                                                    : 0;
                        out[c0 + l] = (int8_t)pe_clamp_s32(v, act_min, act_max);
                    }
                }
            }
        }
    }
}

#endif /* PE_NATIVE_POOL_H */
