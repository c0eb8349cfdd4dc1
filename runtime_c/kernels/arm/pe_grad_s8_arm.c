/* pe_conv2d_grad_input_s8_arm - the int8 backward's input gradient of a pointwise convolution
 * (1x1, stride 1, no padding, one group, an even number of input channels), bit-exact with
 * pe_conv2d_grad_s8.c (codegen/golden/train_conv.py conv2d_grad_input_i8):
 *
 *   dys[p, o] = MBQM(dy[p, o] << b, M_o, k_o)             (|dys| <= 127 * 2^b, an int16)
 *   acc[p, c] = sum over o of dys[p, o] * w[o, c]        (int32, exact in any order)
 *   (dx, e_dx) = rescale(acc, e - b, M_ref, k_ref)
 *
 * The sums are the forward's pair loop (pe_arm_raw_pairs): two positions' prescaled dy rows as
 * the two int16 columns, the stream (codegen/backends/arm.py) the transposed weights, int8,
 * per pair of input channels. They are kept in the scratch (int32, one
 * per dx value), so that the range pass of the rescale reads them instead of summing twice.
 * Scratch: two int16 columns of the output channels rounded up to a multiple of 8, then
 * (N * H * W + 1) * C int32 (a spare row for the partner of a last unpaired position), and
 * when `stream` is NULL (weights that training changes) the stream built at run time: C / 2
 * times (16 + 2 * that rounded count) bytes.
 */
#include "pe_arm_conv.h"
#include "pe_arm_kernels.h"
#include "pe_grad_fixed.h"

void pe_conv2d_grad_input_s8_arm(const pe_context *ctx, const pe_conv_grad_params *params,
                                 const pe_grad_input_quant *quant, const int32_t *stream,
                                 const pe_dims *dy_dims, const int8_t *dy,
                                 const int32_t *dy_exp, const pe_dims *filter_dims,
                                 const int8_t *filter, const pe_dims *dx_dims, int8_t *dx,
                                 int32_t *dx_exp)
{
    const int32_t o_n = dy_dims->c;
    const int32_t c_n = dx_dims->c;
    const int32_t positions = dx_dims->n * dx_dims->h * dx_dims->w;
    const int32_t k8 = (o_n + 7) & ~7;
    int16_t *const cols = (int16_t *)ctx->buf;
    int32_t *const acc = (int32_t *)(void *)(cols + 2 * k8);
    const int32_t total = positions * c_n;
    pe_range range = pe_range_zero();
    pe_rescale_plan plan;
    int32_t p, j, o, i;
    (void)params;
    (void)filter_dims;
    if (stream == 0) {
        /* weights that training changes: the stream of their transpose, built into the
         * scratch after the sums (per pair of input channels four zero words, then per group
         * of four output channels the pair's four bytes each) */
        int32_t *const words = acc + (positions + 1) * c_n;
        int8_t *b = (int8_t *)(void *)words;
        int32_t c;
        for (c = 0; c < c_n; c += 2) {
            int32_t *z = (int32_t *)(void *)b;
            z[0] = z[1] = z[2] = z[3] = 0;
            b += 16;
            for (o = 0; o < k8; o += 4) {
                for (j = 0; j < 8; ++j) {
                    const int32_t oo = o + (j & 3);
                    *b++ = oo < o_n ? filter[oo * c_n + c + (j >> 2)] : 0;
                }
            }
        }
        stream = words;
    }
    for (i = 0; i < 2 * k8; ++i) {
        cols[i] = 0;
    }
    for (p = 0; p < positions; p += 2) {
        for (j = 0; j < 2; ++j) {
            const int8_t *g = dy + (p + j) * o_n;
            if (p + j >= positions) {
                for (o = 0; o < o_n; ++o) {
                    cols[pe_arm_at(pe_arm_slot(o), j)] = 0;
                }
                continue;
            }
            for (o = 0; o < o_n; ++o) {
                cols[pe_arm_at(pe_arm_slot(o), j)] = (int16_t)pe_multiply_by_quantized_multiplier(
                    (int32_t)g[o] * (1 << quant->prescale_shift), quant->multiplier[o],
                    quant->shift[o]);
            }
        }
        /* a last unpaired position: its zero partner's sums go to the spare row */
        pe_arm_raw_pairs(cols, k8 >> 2, stream, acc + p * c_n,
                         acc + (p + 1 < positions ? p + 1 : positions) * c_n, c_n >> 1);
    }
    for (i = 0; i < total; ++i) {
        pe_range_add(&range, acc[i]);
    }
    plan = pe_rescale_plan_make(&range, quant->output_multiplier);
    for (i = 0; i < total; ++i) {
        dx[i] = pe_rescale_value(acc[i], quant->output_multiplier, &plan);
    }
    *dx_exp = pe_rescale_exponent(*dy_exp - quant->prescale_shift, quant->output_shift, &plan);
}
