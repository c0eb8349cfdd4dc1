/* pe_avg_pool2d_s8_hvx, pe_max_pool2d_s8_hvx - int8 pooling on HVX (the ref kernels'
 * arguments), bit-exact with TFLM: windows clipped to the image, 128 channels of a pixel a
 * step.
 *
 * Average: int32 sums of the in-image taps, then TFLM's rounding division by the tap count n,
 * sign(s) * floor((|s| + floor(n / 2)) / n) (C division of s +- n/2), as an exact multiply:
 * for 2^e < n <= 2^(e+1) and m = ceil(2^(31+e) / n) < 2^31, floor(u * m / 2^(31+e)) =
 * floor(u / n) for every u <= 2^(31+e) / n (the error term u * (m n - 2^(31+e)) stays below
 * 2^(31+e)); the builder keeps windows below 2^20 taps, so |s| + n/2 < 2^28 is in range.
 */
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"
#include "pe_window.h"

/* m = ceil(2^(31+e) / n) and e, 2^e < n <= 2^(e+1), for n >= 2. */
static void pe_hvx_divisor(int32_t n, int32_t *m, int32_t *e)
{
    int32_t k = 0;
    while ((1 << (k + 1)) < n) {
        ++k;
    }
    *e = k;                                                   /* 2^k < n <= 2^(k+1) */
    *m = (int32_t)((((uint64_t)1 << (31 + k)) + (uint64_t)n - 1u) / (uint64_t)n);
}

void pe_avg_pool2d_s8_hvx(const pe_context *ctx, const pe_pool_params *params,
                          const pe_dims *input_dims, const int8_t *input,
                          const pe_dims *filter_dims, const pe_dims *output_dims,
                          int8_t *output)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, ch = input_dims->c;
    const int32_t out_h = output_dims->h, out_w = output_dims->w;
    const HVX_Vector lo = Q6_V_vsplat_R(params->activation.min);
    const HVX_Vector hi = Q6_V_vsplat_R(params->activation.max);
    int32_t b, oy, ox, c0, fy, fx, j;
    (void)ctx;
    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            int32_t fy0, fy1;
            pe_window(iy0, filter_dims->h, in_h, &fy0, &fy1);
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                int32_t fx0, fx1, n, m = 0, e = 0;
                HVX_Vector vm, ve, half;
                pe_window(ix0, filter_dims->w, in_w, &fx0, &fx1);
                n = (fy1 - fy0) * (fx1 - fx0);
                if (n > 1) {
                    pe_hvx_divisor(n, &m, &e);
                }
                vm = Q6_V_vsplat_R(m);
                ve = Q6_V_vsplat_R(e);
                half = Q6_V_vsplat_R(n / 2);
                for (c0 = 0; c0 < ch; c0 += 128) {
                    const int32_t len = ch - c0 < 128 ? ch - c0 : 128;
                    HVX_Vector acc[4] = {Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero(),
                                         Q6_V_vzero()};
                    HVX_Vector y[4];
                    for (fy = fy0; fy < fy1; ++fy) {
                        const int8_t *row = input + ((b * in_h + iy0 + fy) * in_w + ix0) * ch
                                            + c0;
                        for (fx = fx0; fx < fx1; ++fx) {
                            HVX_Vector w[4];
                            pe_hvx_words4(pe_hvx_load(row + fx * ch, len), w);
                            for (j = 0; j < 4; ++j) {
                                acc[j] = Q6_Vw_vadd_VwVw(acc[j], w[j]);
                            }
                        }
                    }
                    for (j = 0; j < 4; ++j) {
                        HVX_Vector q = acc[j];
                        if (n > 1) {
                            const HVX_VectorPred neg = Q6_Q_vcmp_gt_VwVw(Q6_V_vzero(), acc[j]);
                            const HVX_Vector u = Q6_Vw_vadd_VwVw(Q6_Vw_vabs_Vw(acc[j]), half);
                            q = Q6_Vw_vmpyoacc_VwVwVh_s1_sat_shift(Q6_Vw_vmpye_VwVuh(u, vm), u,
                                                                   vm);
                            q = Q6_Vw_vasr_VwVw(q, ve);
                            q = Q6_V_vmux_QVV(neg, Q6_Vw_vsub_VwVw(Q6_V_vzero(), q), q);
                        }
                        y[j] = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(q, lo), hi);
                    }
                    pe_hvx_store(output + ((b * out_h + oy) * out_w + ox) * ch + c0,
                                 pe_hvx_bytes4(y[0], y[1], y[2], y[3]), len);
                }
            }
        }
    }
}

void pe_max_pool2d_s8_hvx(const pe_context *ctx, const pe_pool_params *params,
                          const pe_dims *input_dims, const int8_t *input,
                          const pe_dims *filter_dims, const pe_dims *output_dims,
                          int8_t *output)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, ch = input_dims->c;
    const int32_t out_h = output_dims->h, out_w = output_dims->w;
    const HVX_Vector lo = Q6_Vb_vsplat_R(params->activation.min);
    const HVX_Vector hi = Q6_Vb_vsplat_R(params->activation.max);
    int32_t b, oy, ox, c0, fy, fx;
    (void)ctx;
    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            int32_t fy0, fy1;
            pe_window(iy0, filter_dims->h, in_h, &fy0, &fy1);
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                int32_t fx0, fx1;
                pe_window(ix0, filter_dims->w, in_w, &fx0, &fx1);
                for (c0 = 0; c0 < ch; c0 += 128) {
                    const int32_t len = ch - c0 < 128 ? ch - c0 : 128;
                    HVX_Vector mx = Q6_Vb_vsplat_R(-128);
                    for (fy = fy0; fy < fy1; ++fy) {
                        const int8_t *row = input + ((b * in_h + iy0 + fy) * in_w + ix0) * ch
                                            + c0;
                        for (fx = fx0; fx < fx1; ++fx) {
                            mx = Q6_Vb_vmax_VbVb(mx, pe_hvx_load(row + fx * ch, len));
                        }
                    }
                    mx = Q6_Vb_vmin_VbVb(Q6_Vb_vmax_VbVb(mx, lo), hi);
                    pe_hvx_store(output + ((b * out_h + oy) * out_w + ox) * ch + c0, mx, len);
                }
            }
        }
    }
}
