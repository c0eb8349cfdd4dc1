/* pe_fully_connected_grad_input_f32, pe_fully_connected_grad_weight_f32, pe_bias_grad_f32 -
 * fp32 gradients of a fully connected layer and of any bias (codegen/golden/train_conv.py),
 * float32 from +0.0 in the documented orders:
 *
 *   dx[n,i] = sum over o ascending of dy[n,o] * w_r[o,i]        w_r = float32(w_q) * scale[o]
 *   dw[j,i] = sum over n ascending of dy[n,o_j] * x_r[n,i]      x_r = float32(x_q + offset) * s
 *   db[c]   = sum over rows ascending of dy[row, c]
 */
#include "pe_train_kernels.h"

void pe_fully_connected_grad_input_f32(const pe_context *ctx, const float *filter_scale,
                                       const pe_dims *dy_dims, const float *dy,
                                       const pe_dims *filter_dims, const int8_t *filter,
                                       const pe_dims *dx_dims, float *dx)
{
    const int32_t out_c = filter_dims->n;
    const int32_t depth = filter_dims->c;
    int32_t n, i, o;
    (void)ctx;
    (void)dx_dims;

    for (n = 0; n < dy_dims->n; ++n) {
        const float *g = dy + n * out_c;
        for (i = 0; i < depth; ++i) {
            float acc = 0.0f;
            for (o = 0; o < out_c; ++o) {
                const float w_r = (float)filter[o * depth + i] * filter_scale[o];
                acc = acc + g[o] * w_r;
            }
            dx[n * depth + i] = acc;
        }
    }
}

void pe_fully_connected_grad_weight_f32(const pe_context *ctx,
                                        const pe_fc_grad_weight_params_f32 *params,
                                        const int32_t *channels, const pe_dims *x_dims,
                                        const int8_t *x, const pe_dims *dy_dims,
                                        const float *dy, const pe_dims *dw_dims, float *dw)
{
    const int32_t rows = dy_dims->n;
    const int32_t out_c = dy_dims->c;
    const int32_t depth = x_dims->c;
    int32_t j, i, n;
    (void)ctx;

    for (j = 0; j < dw_dims->n; ++j) {
        const int32_t o = channels != 0 ? channels[j] : j;
        for (i = 0; i < depth; ++i) {
            float acc = 0.0f;
            for (n = 0; n < rows; ++n) {
                const float x_r = (float)(x[n * depth + i] + params->input_offset)
                                  * params->input_scale;
                acc = acc + dy[n * out_c + o] * x_r;
            }
            dw[j * depth + i] = acc;
        }
    }
}

void pe_bias_grad_f32(int32_t num_rows, int32_t row_size, const float *dy, float *db)
{
    int32_t c, n;
    for (c = 0; c < row_size; ++c) {
        float acc = 0.0f;
        for (n = 0; n < num_rows; ++n) {
            acc = acc + dy[n * row_size + c];
        }
        db[c] = acc;
    }
}
