/* pe_fully_connected_grad_input_s8, pe_fully_connected_grad_weight_s8, pe_bias_grad_s8 -
 * int8 gradients of a fully connected layer and of any bias, integer only
 * (codegen/golden/train_conv.py *_i8):
 *
 *   dx: dys[n,o] = MBQM(dy_q << b, M_o, k_o); acc[n,i] = sum over o of dys[n,o] * w_q[o,i];
 *       (dx, e_dx) = rescale(acc, e - b, output_multiplier, output_shift)
 *   dw[j,i] = sum over n of dy_q[n,o_j] * (x_q[n,i] + input_offset), int32, exponent e
 *   db[c]   = sum over rows of dy_q[row, c], int32, exponent e
 */
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"

static int32_t pe_fc_acc(const pe_grad_input_quant *quant, const int8_t *g, int32_t out_c,
                         const int8_t *filter, int32_t depth, int32_t i)
{
    int32_t acc = 0;
    int32_t o;
    for (o = 0; o < out_c; ++o) {
        acc += pe_multiply_by_quantized_multiplier(g[o] * (1 << quant->prescale_shift),
                                                   quant->multiplier[o], quant->shift[o])
               * filter[o * depth + i];
    }
    return acc;
}

void pe_fully_connected_grad_input_s8(const pe_context *ctx, const pe_grad_input_quant *quant,
                                      const pe_dims *dy_dims, const int8_t *dy,
                                      const int32_t *dy_exp, const pe_dims *filter_dims,
                                      const int8_t *filter, const pe_dims *dx_dims, int8_t *dx,
                                      int32_t *dx_exp)
{
    const int32_t out_c = filter_dims->n;
    const int32_t depth = filter_dims->c;
    pe_range range = pe_range_zero();
    pe_rescale_plan plan;
    int32_t n, i;
    (void)ctx;
    (void)dx_dims;

    for (n = 0; n < dy_dims->n; ++n) {
        for (i = 0; i < depth; ++i) {
            pe_range_add(&range, pe_fc_acc(quant, dy + n * out_c, out_c, filter, depth, i));
        }
    }
    plan = pe_rescale_plan_make(&range, quant->output_multiplier);
    for (n = 0; n < dy_dims->n; ++n) {
        for (i = 0; i < depth; ++i) {
            dx[n * depth + i] = pe_rescale_value(
                pe_fc_acc(quant, dy + n * out_c, out_c, filter, depth, i),
                quant->output_multiplier, &plan);
        }
    }
    *dx_exp = pe_rescale_exponent(*dy_exp - quant->prescale_shift, quant->output_shift, &plan);
}

void pe_fully_connected_grad_weight_s8(const pe_context *ctx,
                                       const pe_fc_grad_weight_params *params,
                                       const int32_t *channels, const pe_dims *x_dims,
                                       const int8_t *x, const pe_dims *dy_dims,
                                       const int8_t *dy, const int32_t *dy_exp,
                                       const pe_dims *dw_dims, int32_t *dw, int32_t *dw_exp)
{
    const int32_t rows = dy_dims->n;
    const int32_t out_c = dy_dims->c;
    const int32_t depth = x_dims->c;
    int32_t j, i, n;
    (void)ctx;

    for (j = 0; j < dw_dims->n; ++j) {
        const int32_t o = channels != 0 ? channels[j] : j;
        for (i = 0; i < depth; ++i) {
            int32_t acc = 0;
            for (n = 0; n < rows; ++n) {
                acc += dy[n * out_c + o] * (x[n * depth + i] + params->input_offset);
            }
            dw[j * depth + i] = acc;
        }
    }
    *dw_exp = *dy_exp;
}

void pe_bias_grad_s8(int32_t num_rows, int32_t row_size, const int8_t *dy,
                     const int32_t *dy_exp, int32_t *db, int32_t *db_exp)
{
    int32_t c, n;
    for (c = 0; c < row_size; ++c) {
        int32_t acc = 0;
        for (n = 0; n < num_rows; ++n) {
            acc += dy[n * row_size + c];
        }
        db[c] = acc;
    }
    *db_exp = *dy_exp;
}
