/* pe_fully_connected_s8[_per_channel] - int8 fully connected layer, bit-exact with TFLM's
 * reference FullyConnected (per tensor) and FullyConnectedPerChannel. */
#include "pe_kernels.h"
#include "pe_requant.h"

/* One output row: acc = sum((x + input_offset) * (w + filter_offset)) + bias, wrapping. */
static int32_t pe_fc_accumulate(const pe_fc_params *params, const int8_t *x, const int8_t *w,
                                int32_t depth)
{
    uint32_t acc = 0u;
    int32_t d;
    for (d = 0; d < depth; ++d) {
        acc += (uint32_t)(((int32_t)x[d] + params->input_offset)
                          * ((int32_t)w[d] + params->filter_offset));
    }
    return pe_s32_from_u32(acc);
}

static void pe_fc_s8(const pe_fc_params *params, const int32_t *multiplier,
                     const int32_t *shift, int32_t per_channel, const pe_dims *input_dims,
                     const int8_t *input, const int8_t *filter, const int32_t *bias,
                     const pe_dims *output_dims, int8_t *output)
{
    const int32_t depth = input_dims->c;
    const int32_t rows = output_dims->n * output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    int32_t r, oc;
    for (r = 0; r < rows; ++r) {
        for (oc = 0; oc < out_c; ++oc) {
            const int32_t q = per_channel ? oc : 0;
            int32_t acc = pe_fc_accumulate(params, input + r * depth, filter + oc * depth,
                                           depth);
            if (bias != 0) {
                acc = pe_add_wrap_s32(acc, bias[oc]);
            }
            acc = pe_multiply_by_quantized_multiplier(acc, multiplier[q], shift[q]);
            output[r * out_c + oc] = (int8_t)pe_offset_clamp_s32(acc, params->output_offset,
                                                                 params->activation.min,
                                                                 params->activation.max);
        }
    }
}

void pe_fully_connected_s8(const pe_context *ctx, const pe_fc_params *params,
                           const pe_per_tensor_quant *quant, const pe_dims *input_dims,
                           const int8_t *input, const pe_dims *filter_dims,
                           const int8_t *filter, const int32_t *bias,
                           const pe_dims *output_dims, int8_t *output)
{
    (void)ctx;
    (void)filter_dims;
    pe_fc_s8(params, &quant->multiplier, &quant->shift, 0, input_dims, input, filter, bias,
             output_dims, output);
}

void pe_fully_connected_s8_per_channel(const pe_context *ctx, const pe_fc_params *params,
                                       const pe_per_channel_quant *quant,
                                       const pe_dims *input_dims, const int8_t *input,
                                       const pe_dims *filter_dims, const int8_t *filter,
                                       const int32_t *bias, const pe_dims *output_dims,
                                       int8_t *output)
{
    (void)ctx;
    (void)filter_dims;
    pe_fc_s8(params, quant->multiplier, quant->shift, 1, input_dims, input, filter, bias,
             output_dims, output);
}
