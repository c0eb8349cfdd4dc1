/* pe_update.h - what the update kernels share (ref): the (outer, channels, inner) walk over
 * the trained entries, int8 / int32 parameter access through one code path, and the count of
 * saturated updates. */
#ifndef PE_UPDATE_H
#define PE_UPDATE_H

#include "pe_kernels.h"

/* A parameter tensor: exactly one of p8 (int8 weight) and p32 (int32 bias) is set. */
typedef struct {
    int8_t *p8;
    int32_t *p32;
    int32_t lo;
    int32_t hi;
} pe_param_ref;

/* An int8 weight: saturates to [-127, 127]. */
static inline pe_param_ref pe_param_s8(int8_t *p)
{
    pe_param_ref r;
    r.p8 = p;
    r.p32 = 0;
    r.lo = -127;
    r.hi = 127;
    return r;
}

/* An int32 bias: saturates to [dims->lo, dims->hi] (the forward-safe bias range). */
static inline pe_param_ref pe_param_s32(int32_t *p, const pe_update_dims *dims)
{
    pe_param_ref r;
    r.p8 = 0;
    r.p32 = p;
    r.lo = dims->lo;
    r.hi = dims->hi;
    return r;
}

static inline int32_t pe_param_get(const pe_param_ref *r, int32_t i)
{
    return r->p8 != 0 ? (int32_t)r->p8[i] : r->p32[i];
}

/* Stores v, which the caller has saturated to [lo, hi]. */
static inline void pe_param_set(const pe_param_ref *r, int32_t i, int32_t v)
{
    if (r->p8 != 0) {
        r->p8[i] = (int8_t)v;
    } else {
        r->p32[i] = v;
    }
}

/* The walk over the trained entries: gradient element g = (outer, j, inner) of trained
 * channel j belongs to parameter element pe_update_param(...). Kernels loop
 *     for (o) for (j) { p0 = pe_update_param_base(dims, channels, o, j); g0 = ...;
 *                       for (i < inner) use grad[g0 + i] and param[p0 + i] }
 * (no division per element). */
static inline int32_t pe_update_param_base(const pe_update_dims *dims, const int32_t *channels,
                                           int32_t outer, int32_t j)
{
    const int32_t c = channels != 0 ? channels[j] : j;
    return (outer * dims->channels + c) * dims->inner;
}

static inline int32_t pe_update_grad_base(const pe_update_dims *dims, int32_t outer, int32_t j)
{
    return (outer * dims->count + j) * dims->inner;
}

/* Whether the update of step t (the step counter before this step's step_counter) applies
 * with accumulation over k steps: (t + 1) % k == 0. The step counts up from 0 (t >= 0), so
 * unsigned 32-bit arithmetic is exact (no 64-bit division helper on small cores). */
static inline int pe_update_applies(int32_t t, int32_t k)
{
    return ((uint32_t)t + 1u) % (uint32_t)k == 0u;
}

/* The update kernels' saturation count: counter += n, saturating at INT32_MAX (NULL: the
 * graph has no counter). */
static inline void pe_count_saturated(int32_t *counter, int32_t n)
{
    if (counter != 0 && n > 0) {
        *counter = *counter > INT32_MAX - n ? INT32_MAX : *counter + n;
    }
}

#endif /* PE_UPDATE_H */
