/* pe_broadcast.h - 4-D numpy-style broadcasting for the ref element-wise kernels. */
#ifndef PE_BROADCAST_H
#define PE_BROADCAST_H

#include "pe_kernels.h"

/* Element strides of a contiguous NHWC tensor of shape `in` read as broadcast to any
 * output shape: a dimension of 1 gets stride 0. */
static inline pe_dims pe_broadcast_strides(const pe_dims *in)
{
    pe_dims s;
    s.c = in->c == 1 ? 0 : 1;
    s.w = in->w == 1 ? 0 : in->c;
    s.h = in->h == 1 ? 0 : in->w * in->c;
    s.n = in->n == 1 ? 0 : in->h * in->w * in->c;
    return s;
}

/* Offset of output element (n, h, w, c) in an input with broadcast strides s. */
static inline int32_t pe_broadcast_offset(const pe_dims *s, int32_t n, int32_t h, int32_t w,
                                          int32_t c)
{
    return n * s->n + h * s->h + w * s->w + c * s->c;
}

#endif /* PE_BROADCAST_H */
