/* pe_reduce_grad.h - the 4-D reduction walk shared by add_grad and mul_grad (ref): for each
 * element of dx, the positions of dy it sums, in row-major order of the reduced dimensions
 * (those where dx has 1 and dy does not). */
#ifndef PE_REDUCE_GRAD_H
#define PE_REDUCE_GRAD_H

#include "pe_kernels.h"

/* Sizes of the reduced dimensions (1 where dx keeps dy's size). */
static inline pe_dims pe_reduced_dims(const pe_dims *dy_dims, const pe_dims *dx_dims)
{
    pe_dims r;
    r.n = dx_dims->n == 1 ? dy_dims->n : 1;
    r.h = dx_dims->h == 1 ? dy_dims->h : 1;
    r.w = dx_dims->w == 1 ? dy_dims->w : 1;
    r.c = dx_dims->c == 1 ? dy_dims->c : 1;
    return r;
}

/* Offset in dy of dx element (n, h, w, c) moved by reduced position (a, b, d, e). */
static inline int32_t pe_reduce_offset(const pe_dims *dy_dims, int32_t n, int32_t h, int32_t w,
                                       int32_t c)
{
    return ((n * dy_dims->h + h) * dy_dims->w + w) * dy_dims->c + c;
}

#endif /* PE_REDUCE_GRAD_H */
