/* pe_grad_add_s8 - sum of two int8 gradients (codegen/golden/train_grads.py grad_add_i8):
 *
 *   an all-zero input does not decide the exponent: the result is the other input
 *   E = max(e1, e2); t_j = shift_exp(q_j, e_j - E + 16); (g, e) = normalise(t1 + t2, E - 16)
 *
 * g may alias g1 or g2 (every pass reads element i before the last one writes it).
 */
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"

void pe_grad_add_s8(int32_t size, const int8_t *g1, const int32_t *g1_exp, const int8_t *g2,
                    const int32_t *g2_exp, int8_t *g, int32_t *g_exp)
{
    const int32_t e1 = *g1_exp;
    const int32_t e2 = *g2_exp;
    const int8_t *only = 0;
    int32_t only_exp = 0;
    pe_range range = pe_range_zero();
    int32_t big, s1, s2, shift, i;
    if (pe_all_zero(size, g2)) {
        only = g1;
        only_exp = e1;
    } else if (pe_all_zero(size, g1)) {
        only = g2;
        only_exp = e2;
    }
    if (only != 0) {
        if (only != g) {
            for (i = 0; i < size; ++i) {
                g[i] = only[i];
            }
        }
        *g_exp = only_exp;
        return;
    }
    big = e1 > e2 ? e1 : e2;
    s1 = e1 - big + PE_GRAD_ADD_BITS;
    s2 = e2 - big + PE_GRAD_ADD_BITS;
    for (i = 0; i < size; ++i) {
        pe_range_add(&range, pe_shift_exp(g1[i], s1) + pe_shift_exp(g2[i], s2));
    }
    shift = pe_normalise_shift(pe_range_max_abs(&range));
    for (i = 0; i < size; ++i) {
        g[i] = pe_normalise_value(pe_shift_exp(g1[i], s1) + pe_shift_exp(g2[i], s2), shift);
    }
    *g_exp = big - PE_GRAD_ADD_BITS + shift;
}
