/* pe_conv2d_s8_hvx, pe_fully_connected_s8_hvx - int8 convolution (one group, any kernel,
 * stride, padding, dilation) and fully connected layer on HVX, bit-exact with TFLM's
 * reference kernels: rows of K values times the packed weights on vrmpy (pe_hvx_gemm.h).
 *
 * Rows: the input pixels themselves for a 1x1 convolution with stride 1, no padding and a
 * multiple of four input channels (and for FC rows of a multiple of four), else each output
 * pixel's receptive field gathered into a row of the scratch (im2col, four rows at a time;
 * padding taps and the tail past K hold the input's zero point, whose products the folded
 * input offset cancels).
 *
 * Scratch (ctx->buf, codegen/backends/hvx.py gemm_scratch): 128 bytes of alignment slack,
 * bias + ksum (OB vectors), the packed weights when the record has none (weights that
 * training changes: packed at every call), four gathered rows when the layer needs them.
 */
#include "pe_hvx_gemm.h"
#include "pe_hvx_kernels.h"

/* n bytes from src to dst, or the byte zp when src is NULL (vector loads and masked stores:
 * a few packets whatever n, where a byte loop takes three a byte). */
PE_HVX_INLINE void pe_hvx_bytes(int8_t *dst, const int8_t *src, int8_t zp, int32_t n)
{
    if (src != 0) {
        pe_hvx_copy(dst, src, n);
    } else {
        pe_hvx_fill(dst, zp, n);
    }
}

/* The gemm of a layer: weights (packed now into the scratch when `packed` is NULL), bias +
 * ksum; returns the scratch after what it used. */
static uint8_t *pe_hvx_gemm_setup(pe_hvx_gemm *g, uint8_t *scratch, const int32_t *rq,
                                  const int8_t *packed, const int8_t *filter,
                                  const int32_t *ksum, const int32_t *bias, int32_t out_c,
                                  int32_t k, int32_t input_offset, int32_t output_offset,
                                  int32_t act_min, int32_t act_max)
{
    uint8_t *p = (uint8_t *)pe_hvx_align(scratch);
    g->groups = (k + 3) / 4;
    g->blocks = (out_c + 31) / 32;
    g->out_c = out_c;
    g->rq = rq;
    g->zp = Q6_V_vsplat_R(output_offset);
    g->lo = Q6_V_vsplat_R(act_min);
    g->hi = Q6_V_vsplat_R(act_max);
    g->bk = (const int32_t *)p;
    p += g->blocks * 128;
    if (packed == 0) {
        pe_hvx_gemm_pack((int8_t *)p, filter, out_c, k);
        packed = (const int8_t *)p;
        p += g->blocks * g->groups * 128;
    }
    g->w = packed;
    pe_hvx_gemm_bias((int32_t *)g->bk, packed, g->groups, out_c, bias, ksum, input_offset);
    return p;
}

void pe_conv2d_s8_hvx(const pe_context *ctx, const pe_conv_params *params, const int32_t *rq,
                      const int8_t *packed, const int32_t *ksum, const pe_dims *input_dims,
                      const int8_t *input, const pe_dims *filter_dims, const int8_t *filter,
                      const int32_t *bias, const pe_dims *output_dims, int8_t *output)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, in_c = input_dims->c;
    const int32_t out_h = output_dims->h, out_w = output_dims->w, out_c = output_dims->c;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t k = k_h * k_w * in_c;
    const int32_t pixels = output_dims->n * out_h * out_w;
    const int8_t zp = (int8_t)(-params->input_offset);
    pe_hvx_gemm g;
    uint8_t *rows = pe_hvx_gemm_setup(&g, (uint8_t *)ctx->buf, rq, packed, filter, ksum, bias,
                                      out_c, k, params->input_offset, params->output_offset,
                                      params->activation.min, params->activation.max);
    const int32_t row_bytes = g.groups * 4;
    const int32_t stride_r = row_bytes <= 128 ? 128 : row_bytes;  /* gemm_scratch's rows */
    const int32_t span = k_w * in_c, pitch = in_w * in_c;
    const int vec_rows = row_bytes <= 128 && params->dilation.h == 1
                         && params->dilation.w == 1;
    pe_hvx_pos at = {0, 0, 0};
    const int direct = k_h == 1 && k_w == 1 && params->stride.h == 1 && params->stride.w == 1
                       && params->padding.h == 0 && params->padding.w == 0 && in_h == out_h
                       && in_w == out_w && (in_c & 3) == 0;
    int32_t p;
    if (direct) {
        const int aligned = ((uintptr_t)input & 3u) == 0;
        for (p = 0; p < pixels; p += 4) {
            const int8_t *r[4];
            const int32_t n = pixels - p < 4 ? pixels - p : 4;
            int32_t q;
            for (q = 0; q < n; ++q) {
                r[q] = input + (p + q) * in_c;
            }
            pe_hvx_gemm_tile(&g, r, n, aligned, output + p * out_c, out_c);
        }
        return;
    }
    for (p = 0; p < pixels; p += 4) {
        const int8_t *r[4];
        const int32_t n = pixels - p < 4 ? pixels - p : 4;
        int32_t q;
        for (q = 0; q < n; ++q, pe_hvx_pos_next(&at, out_h, out_w)) {
            const int32_t b = at.b, oy = at.y, ox = at.x;
            int8_t *row = (int8_t *)rows + q * stride_r;
            int8_t *d = row;
            int32_t ky, kx;
            r[q] = row;
            if (vec_rows) {
                const int32_t iy0 = oy * params->stride.h - params->padding.h;
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                if (iy0 >= 0 && iy0 + k_h <= in_h && ix0 >= 0 && ix0 + k_w <= in_w) {
                    /* inside the input: the k_h spans shifted in at the top of v one after
                     * the other, then down to byte 0 with the zero point behind (K <= 128) */
                    const int8_t *src = input + ((b * in_h + iy0) * in_w + ix0) * in_c;
                    HVX_Vector v = Q6_V_vzero();
                    for (ky = 0; ky < k_h; ++ky) {
                        v = Q6_V_valign_VVR(pe_hvx_load_n(src + ky * pitch, span), v, span);
                    }
                    *(pe_hvx_block *)row = Q6_V_valign_VVR(Q6_Vb_vsplat_R(zp), v, 128 - k);
                    continue;
                }
            }
            for (ky = 0; ky < k_h; ++ky) {
                const int32_t iy = oy * params->stride.h - params->padding.h
                                   + ky * params->dilation.h;
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                const int8_t *src = input + ((b * in_h + iy) * in_w) * in_c;
                if (iy < 0 || iy >= in_h) {
                    pe_hvx_bytes(d, 0, zp, k_w * in_c);
                } else if (params->dilation.w == 1) {     /* the taps of a row: one span */
                    const int32_t lo = ix0 < 0 ? -ix0 : 0;
                    const int32_t hi = in_w - ix0 < k_w ? in_w - ix0 : k_w;
                    const int32_t n = hi > lo ? hi - lo : 0;
                    pe_hvx_bytes(d, 0, zp, (lo < k_w ? lo : k_w) * in_c);
                    pe_hvx_bytes(d + lo * in_c, src + (ix0 + lo) * in_c, zp, n * in_c);
                    if (lo + n < k_w) {
                        pe_hvx_bytes(d + (lo + n) * in_c, 0, zp, (k_w - lo - n) * in_c);
                    }
                } else {
                    for (kx = 0; kx < k_w; ++kx) {
                        const int32_t ix = ix0 + kx * params->dilation.w;
                        pe_hvx_bytes(d + kx * in_c, ix < 0 || ix >= in_w ? 0 : src + ix * in_c,
                                     zp, in_c);
                    }
                }
                d += k_w * in_c;
            }
            pe_hvx_bytes(d, 0, zp, row_bytes - k);
        }
        pe_hvx_gemm_tile(&g, r, n, 1, output + p * out_c, out_c);
    }
}

void pe_fully_connected_s8_hvx(const pe_context *ctx, const pe_fc_params *params,
                               const int32_t *rq, const int8_t *packed, const int32_t *ksum,
                               const pe_dims *input_dims, const int8_t *input,
                               const pe_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const pe_dims *output_dims,
                               int8_t *output)
{
    const int32_t depth = input_dims->c;
    const int32_t rows_n = output_dims->n * output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    pe_hvx_gemm g;
    uint8_t *stage = pe_hvx_gemm_setup(&g, (uint8_t *)ctx->buf, rq, packed, filter, ksum, bias,
                                       out_c, depth, params->input_offset,
                                       params->output_offset, params->activation.min,
                                       params->activation.max);
    const int aligned = (depth & 3) == 0 && ((uintptr_t)input & 3u) == 0;
    int32_t p;
    (void)filter_dims;
    for (p = 0; p < rows_n; p += 4) {
        const int8_t *r[4];
        const int32_t n = rows_n - p < 4 ? rows_n - p : 4;
        int32_t q;
        for (q = 0; q < n; ++q) {
            r[q] = input + (p + q) * depth;
            if (!aligned) {            /* a row of its own, padded with the zero point */
                int8_t *row = (int8_t *)stage + q * g.groups * 4;
                pe_hvx_bytes(row, r[q], 0, depth);
                pe_hvx_bytes(row + depth, 0, (int8_t)(-params->input_offset),
                             g.groups * 4 - depth);
                r[q] = row;
            }
        }
        pe_hvx_gemm_tile(&g, r, n, 1, output + p * out_c, out_c);
    }
}
