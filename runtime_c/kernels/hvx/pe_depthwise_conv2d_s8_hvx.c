/* pe_depthwise_conv2d_s8_hvx - int8 depthwise convolution (depth multiplier 1, any window,
 * stride, padding, dilation) on HVX, bit-exact with TFLM's reference kernel.
 *
 * Lanes. 128 output values per step, in one of two layouts the code generator chooses
 * (codegen/backends/hvx.py, `flat`):
 *   flat (stride_w 1): the output row as one run of out_w * C values; step k covers values
 *       128 k .. 128 k + 127, tap (ky, kx) reads the staged input row ky at 128 k + kx*dw*C;
 *   per pixel: step (ox, k) covers channels 128 k .. 128 k + 127 of pixel ox.
 * Lane l of a step then holds channel (start + l) mod C, so the channels of a step repeat with
 * a period of `patterns` steps (flat: C / gcd(C, 128); per pixel: ceil(C / 128)); the
 * weights and requantization constants are laid out per pattern at compile time.
 *
 * Products. vsxt widens the 128 input bytes to halfwords, even and odd bytes apart, and
 * vmpy(Vu.h, Vv.h) accumulates each into two vectors of words, so the four accumulators hold
 * lanes 4i, 4i+2 (even bytes) and 4i+1, 4i+3 (odd bytes) of the step; the weight vectors
 * (int16, per pattern and tap: 64 weights of even lanes, then 64 of odd lanes) and the
 * requantization vectors (per pattern: the four accumulators' 5 x 32 words) are in that order,
 * and the two interleaving narrowing shifts put the bytes back in lane order.
 *
 * Input offset and padding: the kh input rows of an output row are staged in the scratch
 * with the padding columns (and rows outside the image) set to the input's zero point; the
 * offset is folded into the bias (ksum[c] = off * sum of channel c's weights: every tap is
 * present, padding included).
 *
 * Scratch (hvx.py dw_scratch): 128 bytes of slack, patterns * 4 bias vectors, the int16
 * weights when training changes them (patterns * taps * 256 bytes; `weights` and `ksum` are
 * NULL, `filter` the weights as they are), k_h staged rows of ((out_w - 1) * stride_w +
 * (k_w - 1) * dilation_w + 1) * C + 128 bytes, each rounded up to 128.
 */
#include "pe_hvx.h"
#include "pe_hvx_kernels.h"

void pe_depthwise_conv2d_s8_hvx(const pe_context *ctx, const pe_dw_conv_params *params,
                                const int32_t *rq, const int16_t *weights, const int32_t *ksum,
                                int32_t flat, int32_t patterns, const pe_dims *input_dims,
                                const int8_t *input, const pe_dims *filter_dims,
                                const int8_t *filter, const int32_t *bias,
                                const pe_dims *output_dims, int8_t *output)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, c_n = input_dims->c;
    const int32_t out_h = output_dims->h, out_w = output_dims->w;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w, taps = k_h * k_w;
    const int32_t s_h = params->stride.h, s_w = params->stride.w;
    const int32_t d_h = params->dilation.h, d_w = params->dilation.w;
    const int32_t p_t = params->padding.h, p_l = params->padding.w;
    const int32_t cols = (out_w - 1) * s_w + (k_w - 1) * d_w + 1;      /* staged columns */
    const int32_t row_bytes = ((cols * c_n + 128) + 127) & ~127;
    const int32_t zp = -params->input_offset;
    const int32_t row_len = out_w * c_n;
    const int32_t chunks = flat ? (row_len + 127) / 128 : (c_n + 127) / 128;
    const int32_t steps = flat ? chunks : out_w * chunks;
    const HVX_Vector out_zp = Q6_V_vsplat_R(params->output_offset);
    const HVX_Vector lo = Q6_V_vsplat_R(params->activation.min);
    const HVX_Vector hi = Q6_V_vsplat_R(params->activation.max);
    int32_t *bk = (int32_t *)pe_hvx_align(ctx->buf);
    int16_t *wbuf = (int16_t *)(bk + patterns * 4 * 32);
    int8_t *stage = (int8_t *)(void *)(wbuf + (weights != 0 ? 0 : patterns * taps * 128));
    int32_t p, l, b, oy, ky, st, t;

    /* bias + ksum per pattern, in the accumulators' lane order; weights that training
     * changes laid out per pattern and tap (as hvx.py dw_layout does for frozen ones) */
    for (p = 0; p < patterns; ++p) {
        for (l = 0; l < 128; ++l) {
            const int32_t lane = flat ? (128 * p + l) % c_n : 128 * p + l;
            uint32_t v = 0u;
            if (lane < c_n) {
                v = (uint32_t)(bias != 0 ? bias[lane] : 0);
                if (ksum != 0) {
                    v += (uint32_t)ksum[lane];
                } else {
                    int32_t sum = 0;
                    for (t = 0; t < taps; ++t) {
                        sum += filter[t * c_n + lane];
                    }
                    v += (uint32_t)sum * (uint32_t)params->input_offset;
                }
            }
            bk[(p * 4 + (l & 3)) * 32 + (l >> 2)] = (int32_t)v;
            if (weights == 0) {
                for (t = 0; t < taps; ++t) {
                    wbuf[(p * taps + t) * 128 + (l & 1) * 64 + (l >> 1)] =
                        (int16_t)(lane < c_n ? filter[t * c_n + lane] : 0);
                }
            }
        }
    }
    if (weights == 0) {
        weights = wbuf;
    }
    for (b = 0; b < output_dims->n; ++b) {
        for (oy = 0; oy < out_h; ++oy) {
            int8_t *out_row = output + (b * out_h + oy) * row_len;
            int32_t pc = 0, kc = 0, oxc = 0;
            for (ky = 0; ky < k_h; ++ky) {
                const int32_t iy = oy * s_h - p_t + ky * d_h;
                int8_t *row = stage + ky * row_bytes;
                if (iy < 0 || iy >= in_h) {
                    pe_hvx_fill(row, zp, cols * c_n);
                } else {
                    const int32_t first = p_l < cols ? p_l : cols;         /* padding left */
                    const int32_t avail = in_w < cols - first ? in_w : cols - first;
                    pe_hvx_fill(row, zp, first * c_n);
                    pe_hvx_copy(row + first * c_n,
                                input + ((b * in_h + iy) * in_w) * c_n, avail * c_n);
                    pe_hvx_fill(row + (first + avail) * c_n, zp,
                                (cols - first - avail) * c_n);
                }
            }
            for (st = 0; st < steps; ++st) {
                const int32_t k = flat ? st : kc;
                const int32_t ox = flat ? 0 : oxc;
                const int32_t pat = flat ? pc : k;
                const int32_t start = flat ? 128 * k : ox * s_w * c_n + 128 * k;
                const int32_t left = flat ? row_len - 128 * k : c_n - 128 * k;
                const int16_t *w = weights + pat * taps * 128;
                const HVX_Vector *bv = (const HVX_Vector *)(bk + pat * 4 * 32);
                HVX_VectorPair e = Q6_W_vcombine_VV(bv[2], bv[0]);
                HVX_VectorPair o = Q6_W_vcombine_VV(bv[3], bv[1]);
                int32_t kx, t = 0;
                for (ky = 0; ky < k_h; ++ky) {
                    const int8_t *src = stage + ky * row_bytes + start;
                    for (kx = 0; kx < k_w; ++kx, ++t) {
                        const HVX_VectorPair xs = Q6_Wh_vsxt_Vb(pe_hvx_loadu(src + kx * d_w * c_n));
                        e = Q6_Ww_vmpyacc_WwVhVh(e, Q6_V_lo_W(xs), pe_hvx_loadu(w + t * 128));
                        o = Q6_Ww_vmpyacc_WwVhVh(o, Q6_V_hi_W(xs),
                                                 pe_hvx_loadu(w + t * 128 + 64));
                    }
                }
                {
                    const int32_t *q = rq + pat * 4 * PE_HVX_RQ * 32;
                    const HVX_Vector a0 = pe_hvx_requant(Q6_V_lo_W(e), q, out_zp, lo, hi);
                    const HVX_Vector a1 = pe_hvx_requant(Q6_V_lo_W(o), q + 160, out_zp, lo, hi);
                    const HVX_Vector a2 = pe_hvx_requant(Q6_V_hi_W(e), q + 320, out_zp, lo, hi);
                    const HVX_Vector a3 = pe_hvx_requant(Q6_V_hi_W(o), q + 480, out_zp, lo, hi);
                    const HVX_Vector he = Q6_Vh_vasr_VwVwR_sat(a2, a0, 0);
                    const HVX_Vector ho = Q6_Vh_vasr_VwVwR_sat(a3, a1, 0);
                    const int32_t at = flat ? 128 * k : ox * c_n + 128 * k;
                    pe_hvx_store(out_row + at, Q6_Vb_vasr_VhVhR_sat(ho, he, 0),
                                 left < 128 ? left : 128);
                }
                if (++pc == patterns) {               /* flat: the next step's pattern */
                    pc = 0;
                }
                if (++kc == chunks) {                 /* per pixel: the next chunk, pixel */
                    kc = 0;
                    ++oxc;
                }
            }
        }
    }
}
