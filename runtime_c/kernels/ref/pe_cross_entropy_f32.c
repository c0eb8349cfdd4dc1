/* pe_softmax_cross_entropy_f32 - fp32 cross-entropy of int8 logits (batch 1) and its
 * gradient w.r.t. the real logits (codegen/golden/train_loss.py softmax_cross_entropy_f32):
 *
 *   m = max q;  e_i = EXP[q_i - m + 255];  S = sum e_i (i ascending, from +0.0)
 *   dlogits_i = p_i - (i == label), p_i = e_i / S   (times beta when beta != 1)
 *   loss = pe_logf(S) - float32(q_label - m) * scale
 */
#include "pe_train_float.h"
#include "pe_train_kernels.h"

void pe_softmax_cross_entropy_f32(const pe_cross_entropy_params_f32 *params, int32_t classes,
                                  const int8_t *logits, const int32_t *label,
                                  const float *table, float *loss, float *dlogits)
{
    const int32_t target = *label;
    const int valid = target >= 0 && target < classes;
    int32_t m = INT8_MIN;
    float sum = 0.0f;
    int32_t i;
    for (i = 0; i < classes; ++i) {
        m = logits[i] > m ? logits[i] : m;
    }
    for (i = 0; i < classes; ++i) {
        dlogits[i] = table[logits[i] - m + 255];          /* e_i */
        sum = sum + dlogits[i];
    }
    for (i = 0; i < classes; ++i) {
        float d = dlogits[i] / sum;                        /* p_i */
        if (i == target) {
            d = d - 1.0f;
        }
        if (params->beta != 1.0f) {
            d = params->beta * d;
        }
        dlogits[i] = d;
    }
    if (!valid) {
        *loss = pe_f32_nan();
        return;
    }
    *loss = pe_logf(sum) - (float)(logits[target] - m) * params->scale;
}
