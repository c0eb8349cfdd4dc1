/* pe_softmax_s8, pe_softmax_s8_s16 - int8 softmax over rows, bit-exact with TFLM's reference
 * SoftmaxInt8 (gemmlowp fixed-point exp, sum of exps in Q12.19, reciprocal by
 * Newton-Raphson). */
#include "pe_fixedpoint.h"
#include "pe_kernels.h"
#include "pe_requant.h"

enum {
    PE_SOFTMAX_ACCUMULATION_INTEGER_BITS = 12
};

/* What one row needs for its outputs: its maximum and the reciprocal of its sum of exps. */
typedef struct {
    int32_t max_in;
    int32_t shifted_scale;
    int32_t exponent;           /* num_bits_over_unit + 31 - output bits */
} pe_softmax_row;

/* exp(beta * s_in * diff) in Q0.31 for an in-range diff = x - max_row (<= 0). */
static int32_t pe_softmax_exp(const pe_softmax_params *params, int32_t diff)
{
    const int32_t scaled = pe_multiply_by_quantized_multiplier_gt_one(
        diff, params->input_multiplier, params->input_left_shift);
    return pe_exp_on_negative_values_q5_26(scaled);
}

static pe_softmax_row pe_softmax_prepare_row(const pe_softmax_params *params,
                                             int32_t row_size, const int8_t *input,
                                             int32_t out_bits)
{
    pe_softmax_row row;
    uint32_t sum = 0u;          /* Q12.19, wrapping like TFLM's int32 sum */
    int32_t num_bits_over_unit;
    int32_t i;
    row.max_in = INT8_MIN;
    for (i = 0; i < row_size; ++i) {
        row.max_in = input[i] > row.max_in ? input[i] : row.max_in;
    }
    for (i = 0; i < row_size; ++i) {
        const int32_t diff = (int32_t)input[i] - row.max_in;
        if (diff >= params->diff_min) {
            sum += (uint32_t)pe_rounding_divide_by_pot(pe_softmax_exp(params, diff),
                                                       PE_SOFTMAX_ACCUMULATION_INTEGER_BITS);
        }
    }
    row.shifted_scale = pe_get_reciprocal(pe_s32_from_u32(sum),
                                          PE_SOFTMAX_ACCUMULATION_INTEGER_BITS,
                                          &num_bits_over_unit);
    row.exponent = num_bits_over_unit + 31 - out_bits;
    return row;
}

/* The output of one input value, in [qmin, qmax]. */
static int32_t pe_softmax_value(const pe_softmax_params *params, const pe_softmax_row *row,
                                int32_t x, int32_t qmin, int32_t qmax)
{
    const int32_t diff = x - row->max_in;
    int32_t unsat;
    if (diff < params->diff_min) {
        return qmin;
    }
    unsat = pe_rounding_divide_by_pot(
        pe_sat_rounding_doubling_high_mul(row->shifted_scale, pe_softmax_exp(params, diff)),
        row->exponent);
    return pe_offset_clamp_s32(unsat, qmin, qmin, qmax);
}

void pe_softmax_s8(const pe_softmax_params *params, int32_t num_rows, int32_t row_size,
                   const int8_t *input, int8_t *output)
{
    int32_t r, i;
    for (r = 0; r < num_rows; ++r) {
        const int8_t *in = input + r * row_size;
        const pe_softmax_row row = pe_softmax_prepare_row(params, row_size, in, 8);
        for (i = 0; i < row_size; ++i) {
            output[r * row_size + i] =
                (int8_t)pe_softmax_value(params, &row, in[i], INT8_MIN, INT8_MAX);
        }
    }
}

void pe_softmax_s8_s16(const pe_softmax_params *params, int32_t num_rows, int32_t row_size,
                       const int8_t *input, int16_t *output)
{
    int32_t r, i;
    for (r = 0; r < num_rows; ++r) {
        const int8_t *in = input + r * row_size;
        const pe_softmax_row row = pe_softmax_prepare_row(params, row_size, in, 16);
        for (i = 0; i < row_size; ++i) {
            output[r * row_size + i] =
                (int16_t)pe_softmax_value(params, &row, in[i], INT16_MIN, INT16_MAX);
        }
    }
}
