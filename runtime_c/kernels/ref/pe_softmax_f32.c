/* pe_softmax_f32 - float32 softmax over rows: exp((x - max) * beta) / sum, in float32
 * (pe_exp_f32: no libm). */
#include "pe_float.h"
#include "pe_kernels.h"

void pe_softmax_f32(const pe_softmax_params_f32 *params, int32_t num_rows, int32_t row_size,
                    const float *input, float *output)
{
    int32_t r, i;
    for (r = 0; r < num_rows; ++r) {
        const float *in = input + r * row_size;
        float *out = output + r * row_size;
        float max = in[0];
        float sum = 0.0f;
        for (i = 1; i < row_size; ++i) {
            max = in[i] > max ? in[i] : max;
        }
        for (i = 0; i < row_size; ++i) {
            out[i] = pe_exp_f32((in[i] - max) * params->beta);
            sum += out[i];
        }
        for (i = 0; i < row_size; ++i) {
            out[i] = out[i] / sum;
        }
    }
}
