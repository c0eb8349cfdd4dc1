/* pe_mean_f32 - float32 MEAN over the dimensions that output_dims reduces to 1. */
#include "pe_kernels.h"

void pe_mean_f32(const pe_dims *input_dims, const float *input, const pe_dims *output_dims,
                 float *output)
{
    const int32_t rn = output_dims->n == 1 ? input_dims->n : 1;
    const int32_t rh = output_dims->h == 1 ? input_dims->h : 1;
    const int32_t rw = output_dims->w == 1 ? input_dims->w : 1;
    const int32_t rc = output_dims->c == 1 ? input_dims->c : 1;
    const float count = (float)(rn * rh * rw * rc);
    int32_t on, oh, ow, oc, n, h, w, c;
    for (on = 0; on < output_dims->n; ++on) {
        for (oh = 0; oh < output_dims->h; ++oh) {
            for (ow = 0; ow < output_dims->w; ++ow) {
                for (oc = 0; oc < output_dims->c; ++oc) {
                    float sum = 0.0f;
                    for (n = 0; n < rn; ++n) {
                        for (h = 0; h < rh; ++h) {
                            for (w = 0; w < rw; ++w) {
                                for (c = 0; c < rc; ++c) {
                                    sum += input[(((on + n) * input_dims->h + oh + h)
                                                  * input_dims->w + ow + w) * input_dims->c
                                                 + oc + c];
                                }
                            }
                        }
                    }
                    *output++ = sum / count;
                }
            }
        }
    }
}
