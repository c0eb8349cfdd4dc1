/* pe_mask_grad_f32 - the fp32 masked gradient (codegen/golden/train_grads.py mask_grad_f32):
 * dx = mask ? dy : +0.0f. Bit i of a mask is bit (i & 7) of byte i >> 3. */
#include "pe_train_kernels.h"

void pe_mask_grad_f32(int32_t size, const float *dy, const uint8_t *mask, float *dx)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        dx[i] = ((mask[i >> 3] >> (i & 7)) & 1u) != 0u ? dy[i] : 0.0f;
    }
}
