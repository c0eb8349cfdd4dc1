/* pe_stream_chain_s8_arm_fn - the arm backend's stream_chain as generated models run it: the
 * band schedule of pe_stream.h over a stage function the model defines
 * (codegen/backends/arm.py _stream_chain_fn), which calls each stage's arm body with its
 * shapes, offsets and clamps as literals (every stage gets the specialised code its own op
 * would get) and the residual add's body likewise. */
#include "pe_arm_kernels.h"
#include "pe_arm.h"
#define PE_STREAM_COPY_WORD(dst, src) pe_arm_st32((dst), pe_arm_ld32(src))
#include "pe_stream.h"

void pe_stream_chain_s8_arm_fn(const pe_context *ctx, const pe_stream_params *params,
                               const pe_stream_stage *stages, pe_stream_fn fn,
                               const pe_dims *input_dims, const int8_t *input,
                               const pe_dims *output_dims, int8_t *output)
{
    pe_stream_run(ctx, params, stages, 0, 0, input_dims, input, output_dims, output, fn, 0);
}
