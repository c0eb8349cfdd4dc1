/* pe_pool2d_grad.h - window geometry shared by the pooling gradient kernels (ref). */
#ifndef PE_POOL2D_GRAD_H
#define PE_POOL2D_GRAD_H

#include "pe_kernels.h"

/* The window index along one axis whose tap k covers input coordinate i, or -1. */
static inline int32_t pe_pool_window(int32_t i, int32_t k, int32_t stride, int32_t pad,
                                     int32_t out_size)
{
    const int32_t p = i + pad - k;
    int32_t o;
    if (p < 0 || p % stride != 0) {
        return -1;
    }
    o = p / stride;
    return o < out_size ? o : -1;
}

/* Number of in-image taps of the window starting at `origin` along an axis. */
static inline int32_t pe_pool_taps(int32_t origin, int32_t size, int32_t extent)
{
    const int32_t start = origin < 0 ? 0 : origin;
    const int32_t end = origin + size < extent ? origin + size : extent;
    return end > start ? end - start : 0;
}

/* Tap index kh * f_w + kw of the first maximum of x over the in-image taps of window
 * (n, oy, ox) in channel c, scanning (kh, kw) ascending with a strict >; -1 if the window
 * lies entirely in the padding. */
static inline int32_t pe_pool_argmax(const pe_pool_grad_params *params, const int8_t *x,
                                     const pe_dims *x_dims, const pe_dims *filter_dims,
                                     int32_t n, int32_t oy, int32_t ox, int32_t c)
{
    const int32_t iy0 = oy * params->stride.h - params->padding.h;
    const int32_t ix0 = ox * params->stride.w - params->padding.w;
    int32_t best = 0;
    int32_t arg = -1;
    int32_t fy, fx;
    for (fy = 0; fy < filter_dims->h; ++fy) {
        const int32_t iy = iy0 + fy;
        if (iy < 0 || iy >= x_dims->h) {
            continue;
        }
        for (fx = 0; fx < filter_dims->w; ++fx) {
            const int32_t ix = ix0 + fx;
            int32_t v;
            if (ix < 0 || ix >= x_dims->w) {
                continue;
            }
            v = x[((n * x_dims->h + iy) * x_dims->w + ix) * x_dims->c + c];
            if (arg < 0 || v > best) {
                best = v;
                arg = fy * filter_dims->w + fx;
            }
        }
    }
    return arg;
}

#endif /* PE_POOL2D_GRAD_H */
