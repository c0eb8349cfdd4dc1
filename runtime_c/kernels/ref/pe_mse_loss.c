/* pe_mse_loss_f32, pe_mse_loss_s8 - mean squared error of int8 y against an int8 target of
 * the same quantization (codegen/golden/train_loss.py mse_loss_f32 / mse_loss_i8).
 *
 * fp32: d_i = float32(y_i - t_i) * scale; loss = (sum d_i * d_i, i ascending) / float32(N);
 *       dy_i = (2 * d_i) / float32(N).
 * int8: d_i = y_i - t_i; loss = float32(sum d_i^2) * loss_scale (the one float operation of
 *       the int8 mode: the reported loss); dy = rescale(d, 0, multiplier, shift).
 *       N * 255^2 must fit int32 (checked by the code generator).
 * Both modes live in this file because the int8 one reports a float loss.
 */
#include "pe_grad_fixed.h"
#include "pe_train_kernels.h"

void pe_mse_loss_f32(const pe_mse_params_f32 *params, int32_t size, const int8_t *y,
                     const int8_t *target, float *loss, float *dy)
{
    const float n = (float)size;
    float sum = 0.0f;
    int32_t i;
    for (i = 0; i < size; ++i) {
        const float d = (float)(y[i] - target[i]) * params->scale;
        sum = sum + d * d;
        dy[i] = d;
    }
    for (i = 0; i < size; ++i) {
        dy[i] = (2.0f * dy[i]) / n;
    }
    *loss = sum / n;
}

void pe_mse_loss_s8(const pe_mse_params *params, int32_t size, const int8_t *y,
                    const int8_t *target, float *loss, int8_t *dy, int32_t *dy_exp)
{
    pe_range range = pe_range_zero();
    pe_rescale_plan plan = {0, 0};
    int32_t sum = 0;
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t d = y[i] - target[i];
        sum += d * d;
        pe_range_add(&range, d);
    }
    *loss = (float)sum * params->loss_scale;
    plan = pe_rescale_plan_make(&range, params->multiplier);
    for (i = 0; i < size; ++i) {
        dy[i] = pe_rescale_value(y[i] - target[i], params->multiplier, &plan);
    }
    *dy_exp = pe_rescale_exponent(0, params->shift, &plan);
}
