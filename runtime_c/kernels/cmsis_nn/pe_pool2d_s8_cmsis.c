/* pe_avg_pool2d_s8_cmsis, pe_max_pool2d_s8_cmsis - int8 pooling through CMSIS-NN's
 * arm_avgpool_s8 (ctx->buf: one int32 per channel on DSP cores) and arm_max_pool_s8. */
#include "pe_cmsis_nn.h"

typedef arm_cmsis_nn_status (*pe_cmsis_pool_fn)(const cmsis_nn_context *ctx,
                                                const cmsis_nn_pool_params *params,
                                                const cmsis_nn_dims *input_dims,
                                                const int8_t *input,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims,
                                                int8_t *output);

static void pe_cmsis_pool(pe_cmsis_pool_fn pool, const pe_context *ctx,
                          const pe_pool_params *params, const pe_dims *input_dims,
                          const int8_t *input, const pe_dims *filter_dims,
                          const pe_dims *output_dims, int8_t *output)
{
    const cmsis_nn_context c = pe_cmsis_context(ctx);
    const cmsis_nn_pool_params p = pe_cmsis_pool_params(params);
    const cmsis_nn_dims in = pe_cmsis_dims(input_dims);
    const cmsis_nn_dims f = pe_cmsis_dims(filter_dims);
    const cmsis_nn_dims out = pe_cmsis_dims(output_dims);
    (void)pool(&c, &p, &in, input, &f, &out, output);
}

void pe_avg_pool2d_s8_cmsis(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *filter_dims, const pe_dims *output_dims,
                            int8_t *output)
{
    pe_cmsis_pool(arm_avgpool_s8, ctx, params, input_dims, input, filter_dims, output_dims,
                  output);
}

void pe_max_pool2d_s8_cmsis(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *input_dims, const int8_t *input,
                            const pe_dims *filter_dims, const pe_dims *output_dims,
                            int8_t *output)
{
    pe_cmsis_pool(arm_max_pool_s8, ctx, params, input_dims, input, filter_dims, output_dims,
                  output);
}
