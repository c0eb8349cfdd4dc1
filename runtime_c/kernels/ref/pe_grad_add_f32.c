/* pe_grad_add_f32 - sum of two fp32 gradient contributions (residuals): g = g1 + g2. */
#include "pe_train_kernels.h"

void pe_grad_add_f32(int32_t size, const float *g1, const float *g2, float *g)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        g[i] = g1[i] + g2[i];
    }
}
