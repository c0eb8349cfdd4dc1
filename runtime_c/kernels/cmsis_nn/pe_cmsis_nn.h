/*
 * pe_cmsis_nn.h - pe_* structs to CMSIS-NN's cmsis_nn_* structs, field by field (the layouts
 * are the same by design, but the wrappers copy rather than cast). CMSIS-NN's quantization
 * structs hold non-const pointers it only reads: the const is dropped here, as TFLM does.
 */
#ifndef PE_CMSIS_NN_H
#define PE_CMSIS_NN_H

#include "arm_nnfunctions.h"
#include "pe_cmsis_kernels.h"

static inline cmsis_nn_dims pe_cmsis_dims(const pe_dims *d)
{
    cmsis_nn_dims r;
    r.n = d->n;
    r.h = d->h;
    r.w = d->w;
    r.c = d->c;
    return r;
}

/* The bias shape CMSIS-NN is given (it reads none of it). */
static inline cmsis_nn_dims pe_cmsis_bias_dims(int32_t channels)
{
    cmsis_nn_dims r;
    r.n = 1;
    r.h = 1;
    r.w = 1;
    r.c = channels;
    return r;
}

static inline cmsis_nn_tile pe_cmsis_tile(const pe_tile *t)
{
    cmsis_nn_tile r;
    r.w = t->w;
    r.h = t->h;
    return r;
}

static inline cmsis_nn_activation pe_cmsis_activation(const pe_activation *a)
{
    cmsis_nn_activation r;
    r.min = a->min;
    r.max = a->max;
    return r;
}

static inline cmsis_nn_context pe_cmsis_context(const pe_context *ctx)
{
    cmsis_nn_context r;
    r.buf = ctx != 0 ? ctx->buf : 0;
    r.size = ctx != 0 ? ctx->size : 0;
    return r;
}

static inline cmsis_nn_per_channel_quant_params pe_cmsis_per_channel(
    const pe_per_channel_quant *q)
{
    cmsis_nn_per_channel_quant_params r;
    r.multiplier = (int32_t *)q->multiplier;
    r.shift = (int32_t *)q->shift;
    return r;
}

static inline cmsis_nn_pool_params pe_cmsis_pool_params(const pe_pool_params *p)
{
    cmsis_nn_pool_params r;
    r.stride = pe_cmsis_tile(&p->stride);
    r.padding = pe_cmsis_tile(&p->padding);
    r.activation = pe_cmsis_activation(&p->activation);
    return r;
}

/* What the convolution kernels take besides their parameters. */
typedef struct {
    cmsis_nn_context ctx;
    cmsis_nn_per_channel_quant_params quant;
    cmsis_nn_dims input;
    cmsis_nn_dims filter;
    cmsis_nn_dims bias;
    cmsis_nn_dims output;
} pe_cmsis_conv_args;

static inline pe_cmsis_conv_args pe_cmsis_conv_args_of(const pe_context *ctx,
                                                       const pe_per_channel_quant *quant,
                                                       const pe_dims *input_dims,
                                                       const pe_dims *filter_dims,
                                                       const pe_dims *output_dims)
{
    pe_cmsis_conv_args a;
    a.ctx = pe_cmsis_context(ctx);
    a.quant = pe_cmsis_per_channel(quant);
    a.input = pe_cmsis_dims(input_dims);
    a.filter = pe_cmsis_dims(filter_dims);
    a.bias = pe_cmsis_bias_dims(output_dims->c);
    a.output = pe_cmsis_dims(output_dims);
    return a;
}

static inline int32_t pe_cmsis_size(const pe_dims *d)
{
    return d->n * d->h * d->w * d->c;
}

#endif /* PE_CMSIS_NN_H */
