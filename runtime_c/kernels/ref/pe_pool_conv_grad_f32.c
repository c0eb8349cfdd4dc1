/* pe_pool_conv_grad_f32 - a global average pool's gradient through a ReLU mask into a 1x1
 * conv's input gradient and bias gradient, one position at a time (codegen/golden/
 * train_kernels.py _b_pool_conv_grad: avg_pool2d_grad_f32, mask_grad_f32, bias_grad_f32 and
 * conv2d_grad_input_f32 one after the other, the same float32 operations in the same order).
 * Bit i of the mask is bit (i & 7) of byte i >> 3. */
#include <stddef.h>

#include "pe_train_kernels.h"

void pe_pool_conv_grad_f32(const float *filter_scale, const float *g, const uint8_t *mask,
                           const int8_t *filter, const pe_dims *dx_dims, int32_t n_out,
                           float *dx, float *db)
{
    const int32_t positions = dx_dims->h * dx_dims->w, depth = dx_dims->c;
    const int32_t rows = dx_dims->n * positions;
    const float count = (float)positions;
    int32_t row, o, c;
    /* the sums start at +0.0f as the ops' do, added to in the first pass (no zeroing loop: a
     * compiler may make one a call to memset, which a freestanding build does not have) */
    for (row = 0; row < rows; ++row) {
        float *d = dx + (size_t)row * (size_t)depth;
        for (o = 0; o < n_out; ++o) {
            const int32_t i = row * n_out + o;
            const float dy = ((mask[i >> 3] >> (i & 7)) & 1u) != 0u
                                 ? 0.0f + g[(row / positions) * n_out + o] / count : 0.0f;
            const int8_t *w = filter + (size_t)o * (size_t)depth;
            const float s = filter_scale[o];
            db[o] = (row == 0 ? 0.0f : db[o]) + dy;
            if (o == 0) {
                for (c = 0; c < depth; ++c) {
                    d[c] = 0.0f + dy * ((float)w[c] * s);
                }
            } else {
                for (c = 0; c < depth; ++c) {
                    d[c] = d[c] + dy * ((float)w[c] * s);
                }
            }
        }
    }
}
