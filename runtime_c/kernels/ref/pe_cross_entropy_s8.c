/* pe_softmax_cross_entropy_s8 - int8 cross-entropy (batch 1), integer gradient with Q16
 * probabilities (codegen/golden/train_loss.py softmax_cross_entropy_i8):
 *
 *   p = SOFTMAX(logits) with TFLM's int8 -> int16 recipe (output scale 1/65536, zp -32768;
 *       the arithmetic of pe_softmax_s8_s16, recomputed per class: no int16 buffer)
 *   u_i = p_i + 32768 in [0, 65535];  d_i = u_i - 65536 * (i == label)
 *   beta == 1 (beta_multiplier 0): (dlogits, e) = normalise(d, -16)
 *   else:                          (dlogits, e) = rescale(d, -16, beta_multiplier, beta_shift)
 *   loss = NEGLOG[min(RDBPOT(u_label, 8), 255)]          (a table lookup, no arithmetic)
 */
#include "pe_fixedpoint.h"
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"

enum {
    PE_CE_ACCUMULATION_INTEGER_BITS = 12,
    PE_CE_OUTPUT_BITS = 16
};

/* The row's maximum and the reciprocal of its sum of exps (TFLM SoftmaxInt8 preparation). */
typedef struct {
    int32_t max_in;
    int32_t shifted_scale;
    int32_t exponent;
} pe_ce_row;

static int32_t pe_ce_exp(const pe_softmax_params *params, int32_t diff)
{
    return pe_exp_on_negative_values_q5_26(pe_multiply_by_quantized_multiplier_gt_one(
        diff, params->input_multiplier, params->input_left_shift));
}

static pe_ce_row pe_ce_prepare(const pe_softmax_params *params, int32_t classes,
                               const int8_t *logits)
{
    pe_ce_row row;
    uint32_t sum = 0u;                       /* Q12.19, wrapping like TFLM's int32 sum */
    int32_t bits_over_unit;
    int32_t i;
    row.max_in = INT8_MIN;
    for (i = 0; i < classes; ++i) {
        row.max_in = logits[i] > row.max_in ? logits[i] : row.max_in;
    }
    for (i = 0; i < classes; ++i) {
        const int32_t diff = (int32_t)logits[i] - row.max_in;
        if (diff >= params->diff_min) {
            sum += (uint32_t)pe_rounding_divide_by_pot(pe_ce_exp(params, diff),
                                                       PE_CE_ACCUMULATION_INTEGER_BITS);
        }
    }
    row.shifted_scale = pe_get_reciprocal(pe_s32_from_u32(sum),
                                          PE_CE_ACCUMULATION_INTEGER_BITS, &bits_over_unit);
    row.exponent = bits_over_unit + 31 - PE_CE_OUTPUT_BITS;
    return row;
}

/* u = int16 softmax output + 32768, in [0, 65535]. */
static int32_t pe_ce_u(const pe_softmax_params *params, const pe_ce_row *row, int32_t x)
{
    const int32_t diff = x - row->max_in;
    int32_t unsat;
    if (diff < params->diff_min) {
        return 0;
    }
    unsat = pe_rounding_divide_by_pot(
        pe_sat_rounding_doubling_high_mul(row->shifted_scale, pe_ce_exp(params, diff)),
        row->exponent);
    return pe_offset_clamp_s32(unsat, INT16_MIN, INT16_MIN, INT16_MAX) + 32768;
}

static int32_t pe_ce_delta(const pe_softmax_params *params, const pe_ce_row *row, int32_t x,
                           int32_t i, int32_t label)
{
    return pe_ce_u(params, row, x) - (i == label ? 65536 : 0);
}

void pe_softmax_cross_entropy_s8(const pe_cross_entropy_params *params, int32_t classes,
                                 const int8_t *logits, const int32_t *label,
                                 const float *table, float *loss, int8_t *dlogits,
                                 int32_t *dlogits_exp)
{
    const pe_softmax_params *sm = &params->softmax;
    const pe_ce_row row = pe_ce_prepare(sm, classes, logits);
    const int32_t target = *label;
    const int32_t multiplier = params->beta_multiplier;
    pe_range range = pe_range_zero();
    int32_t i;
    if (target >= 0 && target < classes) {
        const int32_t k = pe_rounding_divide_by_pot(pe_ce_u(sm, &row, logits[target]), 8);
        *loss = table[k < 255 ? k : 255];
    } else {
        union {
            uint32_t u;
            float f;
        } nan;
        nan.u = 0x7FC00000u;
        *loss = nan.f;
    }
    for (i = 0; i < classes; ++i) {
        pe_range_add(&range, pe_ce_delta(sm, &row, logits[i], i, target));
    }
    if (multiplier == 0) {                                   /* beta == 1: normalise */
        const int32_t shift = pe_normalise_shift(pe_range_max_abs(&range));
        for (i = 0; i < classes; ++i) {
            dlogits[i] = pe_normalise_value(pe_ce_delta(sm, &row, logits[i], i, target), shift);
        }
        *dlogits_exp = -16 + shift;
    } else {
        const pe_rescale_plan plan = pe_rescale_plan_make(&range, multiplier);
        for (i = 0; i < classes; ++i) {
            dlogits[i] = pe_rescale_value(pe_ce_delta(sm, &row, logits[i], i, target),
                                          multiplier, &plan);
        }
        *dlogits_exp = pe_rescale_exponent(-16, params->beta_shift, &plan);
    }
}
