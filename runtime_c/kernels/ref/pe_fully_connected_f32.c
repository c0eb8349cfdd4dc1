/* pe_fully_connected_f32 - float32 fully connected layer (TFLite reference order). */
#include "pe_kernels.h"
#include "pe_float.h"

void pe_fully_connected_f32(const pe_context *ctx, const pe_fc_params_f32 *params,
                            const pe_dims *input_dims, const float *input,
                            const pe_dims *filter_dims, const float *filter, const float *bias,
                            const pe_dims *output_dims, float *output)
{
    const int32_t depth = input_dims->c;
    const int32_t rows = output_dims->n * output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    int32_t r, oc, d;
    (void)ctx;
    (void)filter_dims;
    for (r = 0; r < rows; ++r) {
        for (oc = 0; oc < out_c; ++oc) {
            const float *x = input + r * depth;
            const float *w = filter + oc * depth;
            float acc = 0.0f;
            for (d = 0; d < depth; ++d) {
                acc += x[d] * w[d];
            }
            if (bias != 0) {
                acc += bias[oc];
            }
            output[r * out_c + oc] = pe_clamp_f32(acc, params->activation.min,
                                                  params->activation.max);
        }
    }
}
