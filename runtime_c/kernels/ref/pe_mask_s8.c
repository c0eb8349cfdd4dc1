/* pe_act_mask_s8, pe_mask_grad_s8 - 1-bit activation masks and the int8 masked gradient
 * (codegen/golden/train_grads.py act_mask, mask_grad_i8). Bit i of a mask is bit (i & 7) of
 * byte i >> 3. */
#include "pe_train_kernels.h"

void pe_act_mask_s8(const pe_activation *params, int32_t size, const int8_t *y, uint8_t *mask)
{
    const int32_t lo = params->min;
    const int32_t hi = params->max;
    int32_t i;
    for (i = 0; i < size; i += 8) {
        const int32_t n = size - i < 8 ? size - i : 8;
        uint32_t byte = 0u;
        int32_t j;
        for (j = 0; j < n; ++j) {
            const int32_t v = y[i + j];
            if (v > lo && v < hi) {
                byte |= 1u << j;
            }
        }
        mask[i >> 3] = (uint8_t)byte;
    }
}

void pe_mask_grad_s8(int32_t size, const int8_t *dy, const int32_t *dy_exp,
                     const uint8_t *mask, int8_t *dx, int32_t *dx_exp)
{
    const int32_t e = *dy_exp;
    int32_t i;
    for (i = 0; i < size; ++i) {
        dx[i] = ((mask[i >> 3] >> (i & 7)) & 1u) != 0u ? dy[i] : 0;
    }
    *dx_exp = e;
}
