/* pe_stream_chain_s8_arm - the arm backend's stream_chain: the band schedule of pe_stream.h,
 * each stage computed by the body of its arm kernel with the constants its own op's record
 * would carry (codegen/backends/arm.py _stream_chain): the packed weight stream of a
 * pointwise or k x k convolution, the folded kernel sums of a depthwise one, the one-rounding
 * requantization; the residual add by pe_arm_add_s8. Same bytes as the chain run op by op. */
#include "pe_arm_add.h"
#include "pe_arm_conv.h"
#include "pe_arm_dw.h"
#include "pe_arm_kernels.h"
#include "pe_stream.h"

typedef struct {
    const pe_stream_arm_params *arm;
    const pe_stream_arm_stage *stages;
} pe_stream_arm_user;

/* One function per body (not inlined into one another): only the running body's frame is on
 * the stack. */
#if defined(__GNUC__)
#define PE_STREAM_BODY static __attribute__((noinline)) void
#else
#define PE_STREAM_BODY static void
#endif

PE_STREAM_BODY pe_stream_w16(const pe_context *ctx, const pe_stream_arm_stage *a,
                             const pe_stream_stage *stage, int32_t pad_h, const pe_dims *in,
                             const int8_t *input, const int32_t *bias, const pe_dims *out,
                             int8_t *output)
{
    const pe_dw_conv_params *p = &stage->params;
    pe_arm_conv_w16_s8(ctx, input, a->words, bias, a->mode, output, 1, in->h, in->w, in->c,
                       out->h, out->w, out->c, stage->filter_dims.h, stage->filter_dims.w,
                       p->stride.h, p->stride.w, pad_h, p->padding.w, p->dilation.h,
                       p->dilation.w, p->input_offset);
}

PE_STREAM_BODY pe_stream_conv(const pe_context *ctx, const pe_stream_arm_stage *a,
                              const pe_stream_stage *stage, int32_t pad_h, const pe_dims *in,
                              const int8_t *input, const int8_t *filter, const int32_t *bias,
                              const pe_dims *out, int8_t *output)
{
    const pe_dw_conv_params *p = &stage->params;
    pe_arm_conv_s8(ctx, input, a->filter != 0 ? a->filter : filter, a->mode, bias, a->rq,
                   output, 1, in->h, in->w, in->c, out->h, out->w, out->c,
                   stage->filter_dims.h, stage->filter_dims.w, p->stride.h, p->stride.w, pad_h,
                   p->padding.w, p->dilation.h, p->dilation.w, p->input_offset,
                   a->output_offset, p->activation.min, p->activation.max);
}

PE_STREAM_BODY pe_stream_dw(const pe_context *ctx, const pe_stream_arm_stage *a,
                            const pe_stream_stage *stage, int32_t pad_h, const pe_dims *in,
                            const int8_t *input, const int8_t *filter, const int32_t *bias,
                            const pe_dims *out, int8_t *output)
{
    const pe_dw_conv_params *p = &stage->params;
    pe_arm_dw_s8(ctx, input, filter, bias, a->ksum, a->rq, output, 1, in->h, in->w, in->c,
                 out->h, out->w, stage->filter_dims.h, stage->filter_dims.w, p->stride.h,
                 p->stride.w, pad_h, p->padding.w, p->input_offset, a->output_offset,
                 p->activation.min, p->activation.max, a->mode);
}

static void pe_stream_stage_arm(const void *user, const pe_context *ctx, int32_t index,
                                const pe_stream_stage *stage, int32_t pad_h,
                                const pe_dims *in, const int8_t *input, const int8_t *filter,
                                const int32_t *bias, const pe_dims *out, int8_t *output)
{
    const pe_stream_arm_user *u = (const pe_stream_arm_user *)user;
    const pe_stream_arm_stage *a = &u->stages[index];
    const int32_t *b = a->use_bias ? bias : 0;
    pe_context sub;
    sub.buf = (int8_t *)ctx->buf + u->arm->scratch_offset;
    sub.size = u->arm->scratch_bytes;
    if (a->form == PE_STREAM_ARM_W16) {
        pe_stream_w16(&sub, a, stage, pad_h, in, input, b, out, output);
    } else if (a->form == PE_STREAM_ARM_CONV) {
        pe_stream_conv(&sub, a, stage, pad_h, in, input, filter, b, out, output);
    } else {
        pe_stream_dw(&sub, a, stage, pad_h, in, input, filter, b, out, output);
    }
}

static void pe_stream_add_arm(const void *user, const pe_stream_params *params, int32_t size,
                              const int8_t *skip, int8_t *chain)
{
    const pe_stream_arm_params *a = ((const pe_stream_arm_user *)user)->arm;
    const int8_t *first = params->residual == 1 ? chain : skip;
    const int8_t *second = params->residual == 1 ? skip : chain;
    pe_arm_add_s8(a->add_tables, a->add_rq, first, second, chain, size, a->add_multiplier,
                  a->add_shift, a->add_offset, a->add_activation.min, a->add_activation.max);
}

void pe_stream_chain_s8_arm(const pe_context *ctx, const pe_stream_params *params,
                            const pe_stream_stage *stages, const pe_stream_arm_params *arm,
                            const pe_stream_arm_stage *arm_stages,
                            const int8_t *const *filters, const int32_t *const *biases,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *output_dims, int8_t *output)
{
    pe_stream_arm_user user;
    user.arm = arm;
    user.stages = arm_stages;
    pe_stream_run(ctx, params, stages, filters, biases, input_dims, input, output_dims, output,
                  pe_stream_stage_arm, pe_stream_add_arm, &user);
}
