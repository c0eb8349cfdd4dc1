/* pe_stream_chain_s8 - a chain of int8 convolutions run in bands of output rows
 * (pe_stream.h), each band computed by the ref kernels of the ops the chain stands for: the
 * same arithmetic, so the same bytes, as the chain run op by op. */
#include "pe_kernels.h"
#include "pe_stream.h"

static void pe_stream_ref(const pe_stream_call *c)
{
    const pe_stream_params *params = (const pe_stream_params *)c->user;
    const pe_dw_conv_params *s;
    if (c->stage == 0) {                        /* the residual add, in place */
        pe_dims d;
        d.n = 1;
        d.h = 1;
        d.w = 1;
        d.c = c->size;
        if (params->residual == 1) {
            pe_add_s8(&params->add, &d, c->output, &d, c->input, &d, c->output);
        } else {
            pe_add_s8(&params->add, &d, c->input, &d, c->output, &d, c->output);
        }
        return;
    }
    s = &c->stage->params;
    /* field by field (a struct copy may become a memcpy call, and kernels have no libc) */
    if (c->stage->kind == PE_STREAM_DEPTHWISE) {
        pe_dw_conv_params p;
        p.input_offset = s->input_offset;
        p.output_offset = s->output_offset;
        p.ch_mult = s->ch_mult;
        p.stride.w = s->stride.w;
        p.stride.h = s->stride.h;
        p.padding.w = s->padding.w;
        p.padding.h = c->pad_h;
        p.dilation.w = s->dilation.w;
        p.dilation.h = s->dilation.h;
        p.activation.min = s->activation.min;
        p.activation.max = s->activation.max;
        pe_depthwise_conv2d_s8(0, &p, &c->stage->quant, &c->in_dims, c->input,
                               &c->stage->filter_dims, c->filter, c->bias, &c->out_dims,
                               c->output);
    } else {
        pe_conv_params p;
        p.input_offset = s->input_offset;
        p.output_offset = s->output_offset;
        p.stride.w = s->stride.w;
        p.stride.h = s->stride.h;
        p.padding.w = s->padding.w;
        p.padding.h = c->pad_h;
        p.dilation.w = s->dilation.w;
        p.dilation.h = s->dilation.h;
        p.activation.min = s->activation.min;
        p.activation.max = s->activation.max;
        pe_conv2d_s8(0, &p, &c->stage->quant, &c->in_dims, c->input, &c->stage->filter_dims,
                     c->filter, c->bias, &c->out_dims, c->output);
    }
}

void pe_stream_chain_s8(const pe_context *ctx, const pe_stream_params *params,
                        const pe_stream_stage *stages, const int8_t *const *filters,
                        const int32_t *const *biases, const pe_dims *input_dims,
                        const int8_t *input, const pe_dims *output_dims, int8_t *output)
{
    pe_stream_run(ctx, params, stages, filters, biases, input_dims, input, output_dims, output,
                  pe_stream_ref, params);
}
