/* Windows clipped to the image, shared by the pooling kernels, and the output position a
 * convolution tap reaches from an input position, shared by the convolution gradients (ref
 * and arm). */
#ifndef PE_WINDOW_H
#define PE_WINDOW_H

#include <stdint.h>

/* The in-image part [*start, *end) of a window of `size` taps beginning at `origin`. */
static inline void pe_window(int32_t origin, int32_t size, int32_t extent, int32_t *start,
                             int32_t *end)
{
    *start = origin < 0 ? -origin : 0;
    *end = extent - origin < size ? extent - origin : size;
    if (*end < *start) {
        *end = *start;              /* the window lies entirely in the padding */
    }
}

/* The output coordinate that reads input coordinate i through tap k (i = o * stride - pad +
 * k * dilation), or -1 when no output does. */
static inline int32_t pe_tap_source(int32_t i, int32_t k, int32_t stride, int32_t pad,
                                    int32_t dilation, int32_t out_size)
{
    const int32_t p = i + pad - k * dilation;
    int32_t o;
    if (p < 0 || p % stride != 0) {
        return -1;
    }
    o = p / stride;
    return o < out_size ? o : -1;
}

#endif
