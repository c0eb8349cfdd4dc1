/* pe_stream_chain_s8_arm - the arm backend's stream_chain out of line: the band schedule of
 * pe_stream.h, each stage computed by the body of its arm kernel (with run-time shapes) and
 * the constants its own op's record would carry (codegen/backends/arm.py _stream_chain): the
 * packed weight stream of a convolution, the folded kernel sums of a depthwise one, the
 * one-rounding requantization; the residual add by pe_arm_add_s8. Same bytes as the chain run
 * op by op. Generated models run the same bodies with every shape a literal instead
 * (pe_stream_chain_fn.c); this form serves builds that keep code small and the host tests. */
#include "pe_arm_add.h"
#include "pe_arm_conv.h"
#include "pe_arm_dw.h"
#include "pe_arm_kernels.h"
#include "pe_arm.h"
#define PE_STREAM_COPY_WORD(dst, src) pe_arm_st32((dst), pe_arm_ld32(src))
#include "pe_stream.h"

typedef struct {
    const pe_stream_params *params;
    const pe_stream_arm_params *arm;
    const pe_stream_arm_stage *stages;
} pe_stream_arm_user;

static void pe_stream_arm(const pe_stream_call *c)
{
    const pe_stream_arm_user *u = (const pe_stream_arm_user *)c->user;
    const pe_stream_arm_stage *a;
    const pe_dw_conv_params *p;
    const int32_t *b;
    if (c->stage == 0) {                        /* the residual add, in place */
        const pe_stream_arm_params *m = u->arm;
        const int8_t *first = u->params->residual == 1 ? c->output : c->input;
        const int8_t *second = u->params->residual == 1 ? c->input : c->output;
        pe_arm_add_s8(m->add_tables, m->add_rq, first, second, c->output, c->size,
                      m->add_multiplier, m->add_shift, m->add_offset, m->add_activation.min,
                      m->add_activation.max);
        return;
    }
    a = &u->stages[c->index];
    p = &c->stage->params;
    b = a->use_bias ? c->bias : 0;
    if (a->form == PE_STREAM_ARM_W16) {
        pe_arm_conv_w16_s8(c->ctx, c->input, a->words, b, a->mode, c->output, 1, c->in_dims.h,
                           c->in_dims.w, c->in_dims.c, c->out_dims.h, c->out_dims.w,
                           c->out_dims.c, c->stage->filter_dims.h, c->stage->filter_dims.w,
                           p->stride.h, p->stride.w, c->pad_h, p->padding.w, p->dilation.h,
                           p->dilation.w, p->input_offset);
    } else if (a->form == PE_STREAM_ARM_CONV) {
        pe_arm_conv_s8(c->ctx, c->input, a->filter != 0 ? a->filter : c->filter, a->mode, b,
                       a->rq, c->output, 1, c->in_dims.h, c->in_dims.w, c->in_dims.c,
                       c->out_dims.h, c->out_dims.w, c->out_dims.c, c->stage->filter_dims.h,
                       c->stage->filter_dims.w, p->stride.h, p->stride.w, c->pad_h,
                       p->padding.w, p->dilation.h, p->dilation.w, p->input_offset,
                       a->output_offset, p->activation.min, p->activation.max);
    } else {
        pe_arm_dw_s8(c->ctx, c->input, c->filter, b, a->ksum, a->rq, c->output, 1,
                     c->in_dims.h, c->in_dims.w, c->in_dims.c, c->out_dims.h, c->out_dims.w,
                     c->stage->filter_dims.h, c->stage->filter_dims.w, p->stride.h,
                     p->stride.w, c->pad_h, p->padding.w, p->input_offset, a->output_offset,
                     p->activation.min, p->activation.max, a->mode);
    }
}

void pe_stream_chain_s8_arm(const pe_context *ctx, const pe_stream_params *params,
                            const pe_stream_stage *stages, const pe_stream_arm_params *arm,
                            const pe_stream_arm_stage *arm_stages,
                            const int8_t *const *filters, const int32_t *const *biases,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *output_dims, int8_t *output)
{
    pe_stream_arm_user user;
    user.params = params;
    user.arm = arm;
    user.stages = arm_stages;
    pe_stream_run(ctx, params, stages, filters, biases, input_dims, input, output_dims, output,
                  pe_stream_arm, &user);
}
