/* pe_softmax_grad_f32 - fp32 gradient of a mid-graph softmax over rows
 * (codegen/golden/train_grads.py softmax_grad_f32):
 *   y_r = float32(y + y_offset) * y_scale;  S = sum over j ascending of dy[j] * y_r[j];
 *   dx = (beta * y_r) * (dy - S)
 */
#include "pe_train_kernels.h"

void pe_softmax_grad_f32(const pe_softmax_grad_params_f32 *params, int32_t num_rows,
                         int32_t row_size, const float *dy, const int8_t *y, float *dx)
{
    int32_t r, j;
    for (r = 0; r < num_rows; ++r) {
        const float *g = dy + r * row_size;
        const int8_t *p = y + r * row_size;
        float *out = dx + r * row_size;
        float sum = 0.0f;
        for (j = 0; j < row_size; ++j) {
            const float y_r = (float)(p[j] + params->y_offset) * params->y_scale;
            sum = sum + g[j] * y_r;
        }
        for (j = 0; j < row_size; ++j) {
            const float y_r = (float)(p[j] + params->y_offset) * params->y_scale;
            out[j] = (params->beta * y_r) * (g[j] - sum);
        }
    }
}
