/* Pooling windows clipped to the image, shared by the int8 and float32 pooling kernels. */
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

#endif
