/* The native backend's fp32 backward kernels: pe_train_kernels.h's signatures under the ref
 * name plus "_native", the same float32 sums in the same order (docs/training.md: every
 * element's sum from +0.0 over its terms in the documented order, one rounding per multiply
 * and per add, no FMA), vectorised over an index whose elements are independent sums
 * (channels, or outputs) with PE_NV_F32 lanes, several positions or vectors at a time so that
 * the adds' latency is hidden. Values past the last whole vector run the same operations one
 * by one.
 *
 * Scratch (codegen/backends/native.py grad_scratch): the input gradients of convolutions hold
 * the dequantised weights w_r = float32(w) * scale[o] (the filter's layout), weight gradients
 * the dequantised input x_r = float32(x + offset) * scale, as float32. */
#include "pe_native.h"
#include "pe_pool2d_grad.h"
#include "pe_train_float.h"
#include "pe_train_kernels.h"
#include "pe_update.h"

#if defined(__GNUC__) && !defined(__clang__)
#define PE_NV_UNROLL_F _Pragma("GCC unroll 4")
#else
#define PE_NV_UNROLL_F
#endif

enum { PE_NV_T = 4, PE_NV_V = 4 };        /* a tile: positions x vectors of lanes */
enum { PE_NV_DW_TAPS = 64 };              /* depthwise input gradients: taps of a window */

typedef int32_t pe_nv_i32 __attribute__((vector_size(PE_NV_F32 * 4)));
/* half a vector: the lanes after the last whole vector (8 of AVX-512, 4 of AVX2) */
enum { PE_NV_H = PE_NV_F32 / 2 };
typedef float pe_nv_f32h __attribute__((vector_size(PE_NV_H * 4)));

static inline pe_nv_f32h pe_nv_load_h(const float *p)
{
    pe_nv_f32h v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline pe_nv_f32h pe_nv_splat_h(float x)
{
    pe_nv_f32h v = {0.0f};
    int i;
    for (i = 0; i < PE_NV_H; ++i) {
        v[i] = x;
    }
    return v;
}
typedef int8_t pe_nv_i8 __attribute__((vector_size(PE_NV_F32)));

/* pe_tap_source (pe_window.h) without a division for strides 1 and 2 */
static inline int32_t pe_nv_tap(int32_t i, int32_t k, int32_t stride, int32_t pad,
                                int32_t dilation, int32_t out_size)
{
    const int32_t p = i + pad - k * dilation;
    int32_t o;
    if (p < 0) {
        return -1;
    }
    if (stride == 1) {
        o = p;
    } else if (stride == 2) {
        if (p & 1) {
            return -1;
        }
        o = p >> 1;
    } else {
        if (p % stride != 0) {
            return -1;
        }
        o = p / stride;
    }
    return o < out_size ? o : -1;
}

/* float32 of PE_NV_F32 int8 values (one sign extension and one conversion: the compilers
 * widen a vector-extension int8 vector lane by lane) */
static inline pe_nv_f32 pe_nv_cvt_s8(const int8_t *p)
{
#if defined(PE_NV_AVX512)
    return (pe_nv_f32)_mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
#elif defined(PE_NV_AVX2)
    return (pe_nv_f32)_mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
#else
    pe_nv_i8 b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(__builtin_convertvector(b, pe_nv_i32), pe_nv_f32);
#endif
}

typedef int8_t pe_nv_i8h __attribute__((vector_size(PE_NV_H)));
typedef int32_t pe_nv_i32h __attribute__((vector_size(PE_NV_H * 4)));

/* float32 of PE_NV_H int8 values */
static inline pe_nv_f32h pe_nv_cvt_s8_h(const int8_t *p)
{
#if defined(PE_NV_AVX512)
    return (pe_nv_f32h)_mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
#elif defined(PE_NV_AVX2)
    int32_t w;
    memcpy(&w, p, sizeof w);
    return (pe_nv_f32h)_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(w)));
#else
    pe_nv_i8h b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(__builtin_convertvector(b, pe_nv_i32h), pe_nv_f32h);
#endif
}

/* dst[o][k] = float32(w[o][k]) * scale[o] for rows of k values */
static void pe_nv_dequant_rows(const int8_t *w, const float *scale, int32_t rows, int32_t k,
                               float *dst)
{
    int32_t o, i;
    for (o = 0; o < rows; ++o) {
        const pe_nv_f32 s = pe_nv_splat_f32(scale[o]);
        const int8_t *src = w + o * k;
        float *d = dst + o * k;
        for (i = 0; i + PE_NV_F32 <= k; i += PE_NV_F32) {
            pe_nv_store_f32(d + i, pe_nv_cvt_s8(src + i) * s);
        }
        for (; i < k; ++i) {
            d[i] = (float)src[i] * scale[o];
        }
    }
}

/* dst[i] = float32(x[i] + offset) * scale */
static void pe_nv_dequant_input(const int8_t *x, int32_t offset, float scale, int32_t size,
                                float *dst)
{
    const pe_nv_f32 s = pe_nv_splat_f32(scale);
    const pe_nv_i32 off = (pe_nv_i32){0} + offset;
    pe_nv_i8 b;
    int32_t i;
    for (i = 0; i + PE_NV_F32 <= size; i += PE_NV_F32) {
        memcpy(&b, x + i, sizeof b);
        pe_nv_store_f32(dst + i, __builtin_convertvector(
            __builtin_convertvector(b, pe_nv_i32) + off, pe_nv_f32) * s);
    }
    for (; i < size; ++i) {
        dst[i] = (float)(x[i] + offset) * scale;
    }
}

/* -- products of a gradient row and a matrix --------------------------------------------------
 * out[t][c] = sum over terms q ascending of g[t][q] * m[q][c] for t < nt positions (g rows
 * ``gstep`` apart, terms ``gq`` apart within a row), q < nq, lanes c of nv whole vectors from
 * ``m`` (rows ``mstep`` apart); the sums start at ``start`` (+0.0 or the partial sums of earlier
 * terms) and are stored back there. */
static inline __attribute__((always_inline)) void
pe_nv_gemm_tile(const float *g, int32_t gstep, int32_t gq, const int32_t nt, const float *m,
                const int8_t *m8, const float *mscale, int32_t mstep, const int32_t nv,
                int32_t nq, float *sums, int32_t sstep)
{
    pe_nv_f32 acc[PE_NV_T][PE_NV_V];
    int32_t t, v, q;
    PE_NV_UNROLL_F
    for (t = 0; t < PE_NV_T; ++t) {
        PE_NV_UNROLL_F
        for (v = 0; v < PE_NV_V; ++v) {
            acc[t][v] = t < nt && v < nv ? pe_nv_load_f32(sums + t * sstep + v * PE_NV_F32)
                                         : pe_nv_splat_f32(0.0f);
        }
    }
    for (q = 0; q < nq; ++q) {
        pe_nv_f32 mv[PE_NV_V];
        PE_NV_UNROLL_F
        for (v = 0; v < PE_NV_V; ++v) {
            mv[v] = v >= nv ? pe_nv_splat_f32(0.0f)
                    : m8 != 0 ? pe_nv_cvt_s8(m8 + q * mstep + v * PE_NV_F32) *
                                    pe_nv_splat_f32(mscale[q])
                              : pe_nv_load_f32(m + q * mstep + v * PE_NV_F32);
        }
        PE_NV_UNROLL_F
        for (t = 0; t < nt; ++t) {
            const pe_nv_f32 d = pe_nv_splat_f32(g[t * gstep + q * gq]);
            PE_NV_UNROLL_F
            for (v = 0; v < nv; ++v) {
                acc[t][v] = acc[t][v] + d * mv[v];
            }
        }
    }
    PE_NV_UNROLL_F
    for (t = 0; t < nt; ++t) {
        PE_NV_UNROLL_F
        for (v = 0; v < nv; ++v) {
            pe_nv_store_f32(sums + t * sstep + v * PE_NV_F32, acc[t][v]);
        }
    }
}

/* the same for every lane count: whole tiles with literal counts, then the lanes past the last
 * whole vector one by one (the same operations). The matrix is float32 (m), or int8 (m8) whose
 * row q is dequantised as it is read: float32(m8[q][c]) * mscale[q], the value w_r the golden
 * model multiplies, rounded once as there. */
static inline __attribute__((always_inline)) void
pe_nv_gemm_any(const float *g, int32_t gstep, int32_t gq, int32_t nt, const float *m,
               const int8_t *m8, const float *mscale, int32_t mstep, int32_t lanes, int32_t nq,
               float *sums, int32_t sstep)
{
    const int32_t whole = lanes / PE_NV_F32;
    int32_t v0, t, q, c;
    for (v0 = 0; v0 < whole; v0 += PE_NV_V) {
        const int32_t nv = whole - v0 < PE_NV_V ? whole - v0 : PE_NV_V;
        const float *mv = m8 != 0 ? m : m + v0 * PE_NV_F32;
        const int8_t *mv8 = m8 != 0 ? m8 + v0 * PE_NV_F32 : m8;
        float *sv = sums + v0 * PE_NV_F32;
        if (nt == PE_NV_T && nv == PE_NV_V) {
            pe_nv_gemm_tile(g, gstep, gq, PE_NV_T, mv, mv8, mscale, mstep, PE_NV_V, nq, sv, sstep);
        } else if (nt == PE_NV_T && nv == 2) {
            pe_nv_gemm_tile(g, gstep, gq, PE_NV_T, mv, mv8, mscale, mstep, 2, nq, sv, sstep);
        } else if (nt == PE_NV_T && nv == 1) {
            pe_nv_gemm_tile(g, gstep, gq, PE_NV_T, mv, mv8, mscale, mstep, 1, nq, sv, sstep);
        } else if (nt == 1 && nv == PE_NV_V) {
            pe_nv_gemm_tile(g, gstep, gq, 1, mv, mv8, mscale, mstep, PE_NV_V, nq, sv, sstep);
        } else {
            pe_nv_gemm_tile(g, gstep, gq, nt, mv, mv8, mscale, mstep, nv, nq, sv, sstep);
        }
    }
    c = whole * PE_NV_F32;
    if (lanes - c >= PE_NV_H) {
        /* half a vector, positions side by side */
        pe_nv_f32h acc[PE_NV_T];
        for (t = 0; t < PE_NV_T; ++t) {
            acc[t] = t < nt ? pe_nv_load_h(sums + t * sstep + c) : pe_nv_splat_h(0.0f);
        }
        for (q = 0; q < nq; ++q) {
            const pe_nv_f32h mv = m8 != 0 ? pe_nv_cvt_s8_h(m8 + q * mstep + c) *
                                                pe_nv_splat_h(mscale[q])
                                          : pe_nv_load_h(m + q * mstep + c);
            PE_NV_UNROLL_F
            for (t = 0; t < PE_NV_T; ++t) {
                acc[t] = acc[t] + pe_nv_splat_h(g[(t < nt ? t : 0) * gstep + q * gq]) * mv;
            }
        }
        for (t = 0; t < nt; ++t) {
            memcpy(sums + t * sstep + c, &acc[t], sizeof acc[t]);
        }
        c += PE_NV_H;
    }
    for (t = 0; t < nt; ++t) {
        int32_t c1;
        for (c1 = c; c1 < lanes; ++c1) {
            float acc = sums[t * sstep + c1];
            for (q = 0; q < nq; ++q) {
                const float w = m8 != 0 ? (float)m8[q * mstep + c1] * mscale[q]
                                        : m[q * mstep + c1];
                acc = acc + g[t * gstep + q * gq] * w;
            }
            sums[t * sstep + c1] = acc;
        }
    }
}

static void pe_nv_gemm(const float *g, int32_t gstep, int32_t gq, int32_t nt, const float *m,
                       int32_t mstep, int32_t lanes, int32_t nq, float *sums, int32_t sstep)
{
    pe_nv_gemm_any(g, gstep, gq, nt, m, 0, 0, mstep, lanes, nq, sums, sstep);
}

static void pe_nv_gemm_s8(const float *g, int32_t gstep, int32_t gq, int32_t nt,
                          const int8_t *m8, const float *mscale, int32_t mstep, int32_t lanes,
                          int32_t nq, float *sums, int32_t sstep)
{
    pe_nv_gemm_any(g, gstep, gq, nt, 0, m8, mscale, mstep, lanes, nq, sums, sstep);
}

static void pe_nv_zero(float *p, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; ++i) {
        p[i] = 0.0f;
    }
}

/* -- input gradients ----------------------------------------------------------------------- */
void pe_conv2d_grad_input_f32_native(const pe_context *ctx, const pe_conv_grad_params *params,
                                     const float *filter_scale, const pe_dims *dy_dims,
                                     const float *dy, const pe_dims *filter_dims,
                                     const int8_t *filter, const float *wr_const,
                                     const pe_dims *dx_dims, float *dx)
{
    /* dx[p][c] = sum over (kh, kw, o) ascending of dy[src(p, kh, kw)][o] * w_r[o][kh][kw][c].
     * Pointwise: the product of the dy rows and w_r, four positions a tile. Stride 1: per tile
     * of four positions the rows of dy for every tap one after another (G, zeros where a tap
     * has no source: a term +0 * w_r, finite, leaves a sum from +0.0 as it is), times w_r in
     * the order (kh, kw, o) (the scratch's layout), one product of taps * out_c terms. Other
     * strides: tap by tap, positions with the same taps four at a time. */
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w, out_c = dy_dims->c;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w, c_n = dx_dims->c;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    const int32_t s_h = params->stride.h, s_w = params->stride.w;
    const int32_t p_h = params->padding.h, p_w = params->padding.w;
    const int32_t d_h = params->dilation.h, d_w = params->dilation.w;
    const int32_t taps = k_h * k_w;
    const int32_t k = taps * c_n;
    const int32_t positions = dx_dims->n * in_h * in_w;
    /* w_r [kh][kw][o][c]: the model's constant for a frozen filter, else the scratch's start */
    float *buf = (float *)ctx->buf;
    const float *wr = wr_const != 0 ? wr_const : buf;
    float *rows = wr_const != 0 ? buf : buf + out_c * k;   /* G: four rows of taps * out_c */
    int32_t n, ih, iw, ky, kx, o, t, p0;
    if (wr_const == 0) {
        for (o = 0; o < out_c; ++o) {
            for (t = 0; t < taps; ++t) {
                pe_nv_dequant_rows(filter + (o * taps + t) * c_n, filter_scale + o, 1, c_n,
                                   buf + (t * out_c + o) * c_n);
            }
        }
    }
    pe_nv_zero(dx, positions * c_n);
    if (taps == 1 && s_h == 1 && s_w == 1 && p_h == 0 && p_w == 0 && out_h == in_h &&
        out_w == in_w) {
        for (p0 = 0; p0 < positions; p0 += PE_NV_T) {
            const int32_t nt = positions - p0 < PE_NV_T ? positions - p0 : PE_NV_T;
            pe_nv_gemm(dy + p0 * out_c, out_c, 1, nt, wr, c_n, c_n, out_c, dx + p0 * c_n, c_n);
        }
        return;
    }
    if (s_h == 1 && s_w == 1) {
        const int32_t q = taps * out_c;
        for (p0 = 0; p0 < positions; p0 += PE_NV_T) {
            const int32_t nt = positions - p0 < PE_NV_T ? positions - p0 : PE_NV_T;
            for (t = 0; t < nt; ++t) {
                const int32_t p = p0 + t;
                const int32_t b = p / (in_h * in_w);
                const int32_t y = p / in_w % in_h;
                const int32_t x = p % in_w;
                for (ky = 0; ky < k_h; ++ky) {
                    const int32_t oy = pe_nv_tap(y, ky, 1, p_h, d_h, out_h);
                    for (kx = 0; kx < k_w; ++kx) {
                        const int32_t ox = oy < 0 ? -1 : pe_nv_tap(x, kx, 1, p_w, d_w, out_w);
                        float *g = rows + t * q + (ky * k_w + kx) * out_c;
                        if (ox < 0) {
                            pe_nv_zero(g, out_c);
                        } else {
                            memcpy(g, dy + ((b * out_h + oy) * out_w + ox) * out_c,
                                   (size_t)out_c * sizeof(float));
                        }
                    }
                }
            }
            pe_nv_gemm(rows, q, 1, nt, wr, c_n, c_n, q, dx + p0 * c_n, c_n);
        }
        return;
    }
    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < in_h; ++ih) {
            for (iw = 0; iw < in_w; ++iw) {
                float *out = dx + ((n * in_h + ih) * in_w + iw) * c_n;
                for (ky = 0; ky < k_h; ++ky) {
                    const int32_t oy = pe_nv_tap(ih, ky, s_h, p_h, d_h, out_h);
                    if (oy < 0) {
                        continue;
                    }
                    for (kx = 0; kx < k_w; ++kx) {
                        const int32_t ox = pe_nv_tap(iw, kx, s_w, p_w, d_w, out_w);
                        if (ox < 0) {
                            continue;
                        }
                        pe_nv_gemm(dy + ((n * out_h + oy) * out_w + ox) * out_c, out_c, 1, 1,
                                   wr + (ky * k_w + kx) * out_c * c_n, c_n, c_n, out_c, out,
                                   c_n);
                    }
                }
            }
        }
    }
}

void pe_fully_connected_grad_input_f32_native(const pe_context *ctx, const float *filter_scale,
                                              const pe_dims *dy_dims, const float *dy,
                                              const pe_dims *filter_dims, const int8_t *filter,
                                              const float *wr_const, const pe_dims *dx_dims,
                                              float *dx)
{
    /* the products of four dy rows and w_r: the model's constant w_r of a frozen filter, else
     * the filter's rows dequantised as they are read (no scratch) */
    const int32_t out_c = filter_dims->n;
    const int32_t depth = filter_dims->c;
    const int32_t rows = dy_dims->n;
    int32_t r0;
    (void)ctx;
    (void)dx_dims;
    pe_nv_zero(dx, rows * depth);
    for (r0 = 0; r0 < rows; r0 += PE_NV_T) {
        const int32_t nt = rows - r0 < PE_NV_T ? rows - r0 : PE_NV_T;
        if (wr_const != 0) {
            pe_nv_gemm(dy + r0 * out_c, out_c, 1, nt, wr_const, depth, depth, out_c,
                       dx + r0 * depth, depth);
        } else {
            pe_nv_gemm_s8(dy + r0 * out_c, out_c, 1, nt, filter, filter_scale, depth, depth,
                          out_c, dx + r0 * depth, depth);
        }
    }
}

/* the kernel columns kx whose tap reaches input column iw, as bits (k_w <= 64: at most
 * PE_NV_DW_TAPS taps), and their dy columns ox[kx] (-1: none) */
static inline uint64_t pe_nv_dw_cols(const pe_dw_conv_grad_params *params, int32_t out_w,
                                     int32_t k_w, int32_t iw, int32_t *ox)
{
    uint64_t bits = 0;
    int32_t kx;
    for (kx = 0; kx < k_w; ++kx) {
        ox[kx] = pe_nv_tap(iw, kx, params->stride.w, params->padding.w, params->dilation.w,
                           out_w);
        bits |= (uint64_t)(ox[kx] >= 0) << kx;
    }
    return bits;
}

/* out[j * ostep + c] = sum over the taps t ascending of dy[src[t] + j * c_n + c] *
 * w_r[tap[t] + c] for np positions j side by side (np a literal: 1, or 4 positions of a row
 * ``ostep`` values apart whose taps are the same and whose sources are one dy position
 * apart), every channel */
static inline __attribute__((always_inline)) void
pe_nv_dw_gi(const float *dy, const float *wr, const int32_t *src, const int32_t *tap,
            int32_t taps, int32_t c_n, const int32_t np, int32_t ostep, float *out)
{
    const int32_t whole = c_n / PE_NV_F32 * PE_NV_F32;
    int32_t c = 0, t, j;
    if (np == 1) {
        for (; c + PE_NV_V * PE_NV_F32 <= whole; c += PE_NV_V * PE_NV_F32) {
            pe_nv_f32 acc[PE_NV_V];
            PE_NV_UNROLL_F
            for (j = 0; j < PE_NV_V; ++j) {
                acc[j] = pe_nv_splat_f32(0.0f);
            }
            for (t = 0; t < taps; ++t) {
                PE_NV_UNROLL_F
                for (j = 0; j < PE_NV_V; ++j) {
                    acc[j] = acc[j] + pe_nv_load_f32(dy + src[t] + c + j * PE_NV_F32) *
                                      pe_nv_load_f32(wr + tap[t] + c + j * PE_NV_F32);
                }
            }
            PE_NV_UNROLL_F
            for (j = 0; j < PE_NV_V; ++j) {
                pe_nv_store_f32(out + c + j * PE_NV_F32, acc[j]);
            }
        }
    }
    for (; c < whole; c += PE_NV_F32) {
        pe_nv_f32 acc[4];
        PE_NV_UNROLL_F
        for (j = 0; j < np; ++j) {
            acc[j] = pe_nv_splat_f32(0.0f);
        }
        for (t = 0; t < taps; ++t) {
            const pe_nv_f32 w = pe_nv_load_f32(wr + tap[t] + c);
            PE_NV_UNROLL_F
            for (j = 0; j < np; ++j) {
                acc[j] = acc[j] + pe_nv_load_f32(dy + src[t] + j * c_n + c) * w;
            }
        }
        PE_NV_UNROLL_F
        for (j = 0; j < np; ++j) {
            pe_nv_store_f32(out + j * ostep + c, acc[j]);
        }
    }
    if (c_n - c >= PE_NV_H) {
        pe_nv_f32h acc[4];
        PE_NV_UNROLL_F
        for (j = 0; j < np; ++j) {
            acc[j] = pe_nv_splat_h(0.0f);
        }
        for (t = 0; t < taps; ++t) {
            const pe_nv_f32h w = pe_nv_load_h(wr + tap[t] + c);
            PE_NV_UNROLL_F
            for (j = 0; j < np; ++j) {
                acc[j] = acc[j] + pe_nv_load_h(dy + src[t] + j * c_n + c) * w;
            }
        }
        PE_NV_UNROLL_F
        for (j = 0; j < np; ++j) {
            memcpy(out + j * ostep + c, &acc[j], sizeof acc[j]);
        }
        c += PE_NV_H;
    }
    for (; c < c_n; ++c) {
        for (j = 0; j < np; ++j) {
            float acc = 0.0f;
            for (t = 0; t < taps; ++t) {
                acc = acc + dy[src[t] + j * c_n + c] * wr[tap[t] + c];
            }
            out[j * ostep + c] = acc;
        }
    }
}

void pe_depthwise_conv2d_grad_input_f32_native(const pe_context *ctx,
                                               const pe_dw_conv_grad_params *params,
                                               const float *filter_scale,
                                               const pe_dims *dy_dims, const float *dy,
                                               const pe_dims *filter_dims,
                                               const int8_t *filter, const float *wr_const,
                                               const pe_dims *dx_dims, float *dx)
{
    /* depth multiplier 1, at most PE_NV_DW_TAPS taps: dx[p][c] = sum over the taps (kh, kw)
     * ascending that reach p of dy[src][c] * w_r[tap][c]. With stride 1 or 2 along the
     * width, four positions of a row s_w apart whose first and last have the same taps run
     * side by side (independent sums: the adds' latency hidden). The two between have those
     * taps too, each tap's source one dy position further per position: a tap reaches the
     * columns of one parity (stride 2) over an interval of them, and one missing at both
     * ends lies on the same side of it at both (the other case needs an interval shorter
     * than 3: at least 3 dy columns are asked). Other positions one at a time, four vectors
     * of channels. */
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w, c_n = dx_dims->c;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    /* scratch: per input column the kernel columns that reach it (bits) and their dy columns,
     * the same for every row; then w_r [tap][c] unless given */
    uint64_t *cm = (uint64_t *)ctx->buf;
    int32_t *oxs = (int32_t *)(void *)(cm + in_w);
    float *buf = (float *)(void *)(oxs + in_w * k_w);
    const float *wr = wr_const != 0 ? wr_const : buf;
    int32_t n, ih, iw, c, t;
    if (wr_const == 0) {
        for (t = 0; t < k_h * k_w; ++t) {
            for (c = 0; c < c_n; ++c) {
                buf[t * c_n + c] = (float)filter[t * c_n + c] * filter_scale[c];
            }
        }
    }
    for (iw = 0; iw < in_w; ++iw) {
        cm[iw] = pe_nv_dw_cols(params, out_w, k_w, iw, oxs + iw * k_w);
    }
    for (n = 0; n < dx_dims->n; ++n) {
        for (ih = 0; ih < in_h; ++ih) {
            /* the kernel rows that reach row ih: dy row offsets and w_r row offsets */
            int32_t yrow[PE_NV_DW_TAPS], ytap[PE_NV_DW_TAPS], rows = 0, ky;
            for (ky = 0; ky < k_h; ++ky) {
                const int32_t oy = pe_nv_tap(ih, ky, params->stride.h, params->padding.h,
                                             params->dilation.h, out_h);
                if (oy >= 0) {
                    yrow[rows] = (n * out_h + oy) * out_w;
                    ytap[rows] = ky * k_w;
                    ++rows;
                }
            }
            for (iw = 0; iw < in_w;) {
                float *out = dx + ((n * in_h + ih) * in_w + iw) * c_n;
                int32_t src[PE_NV_DW_TAPS], tap[PE_NV_DW_TAPS];
                const int32_t s_w = params->stride.w;
                /* groups of four positions s_w apart: stride 1, iw .. iw + 3; stride 2, the
                 * even and the odd positions of iw .. iw + 7 */
                const int32_t span = 4 * s_w;
                int32_t group = (s_w == 1 || s_w == 2) && out_w >= 3 && iw + span <= in_w;
                int32_t g, r, kx;
                for (g = 0; group && g < s_w; ++g) {
                    group = cm[iw + g] == cm[iw + g + 3 * s_w];
                }
                for (g = 0; g < (group ? s_w : 1); ++g) {
                    const uint64_t cols = cm[iw + g];
                    const int32_t *ox = oxs + (iw + g) * k_w;
                    int32_t taps = 0;
                    for (r = 0; r < rows; ++r) {
                        for (kx = 0; kx < k_w; ++kx) {
                            if (cols >> kx & 1u) {
                                src[taps] = (yrow[r] + ox[kx]) * c_n;
                                tap[taps] = (ytap[r] + kx) * c_n;
                                ++taps;
                            }
                        }
                    }
                    if (group) {
                        pe_nv_dw_gi(dy, wr, src, tap, taps, c_n, 4, s_w * c_n, out + g * c_n);
                    } else {
                        pe_nv_dw_gi(dy, wr, src, tap, taps, c_n, 1, c_n, out);
                    }
                }
                iw += group ? span : 1;
            }
        }
    }
}

/* -- weight gradients ---------------------------------------------------------------------- */
void pe_conv2d_grad_weight_f32_native(const pe_context *ctx,
                                      const pe_conv_grad_weight_params_f32 *params,
                                      const int32_t *channels, const pe_dims *x_dims,
                                      const int8_t *x, const pe_dims *dy_dims, const float *dy,
                                      const pe_dims *dw_dims, float *dw)
{
    /* one group: dw[j][kh][kw][c] = sum over (n, oh, ow) ascending of dy[p][o_j] * x_r[src][c]:
     * four trained channels a tile, their gradients read from dy (every channel trains) or
     * gathered (dyt[p][t]); per tap and output row the sources of the positions lie
     * stride * c_n apart in x_r */
    const int32_t in_h = x_dims->h, in_w = x_dims->w, c_n = x_dims->c;
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w, out_c = dy_dims->c;
    const int32_t k_h = dw_dims->h, k_w = dw_dims->w, count = dw_dims->n;
    const int32_t s_h = params->stride.h, s_w = params->stride.w;
    const int32_t k = k_h * k_w * c_n;
    const int32_t positions = dy_dims->n * out_h * out_w;
    float *xr = (float *)ctx->buf;
    float *dyt = xr + x_dims->n * in_h * in_w * c_n;
    int32_t j0, ky, kx, n, oy, t, p;
    pe_nv_dequant_input(x, params->input_offset, params->input_scale,
                        x_dims->n * in_h * in_w * c_n, xr);
    for (j0 = 0; j0 < count; j0 += PE_NV_T) {
        const int32_t nt = count - j0 < PE_NV_T ? count - j0 : PE_NV_T;
        /* the tile's gradients: dy itself when every channel trains, else gathered */
        const float *gt = dy + j0;
        int32_t gq = out_c;
        if (channels != 0) {
            for (p = 0; p < positions; ++p) {
                for (t = 0; t < nt; ++t) {
                    dyt[p * PE_NV_T + t] = dy[p * out_c + channels[j0 + t]];
                }
            }
            gt = dyt;
            gq = PE_NV_T;
        }
        pe_nv_zero(dw + j0 * k, nt * k);
        if (k_h == 1 && k_w == 1 && s_h == 1 && s_w == 1 && params->padding.h == 0 &&
            params->padding.w == 0 && in_h == out_h && in_w == out_w) {
            /* pointwise: every position's source is itself, one product over them all */
            pe_nv_gemm(gt, 1, gq, nt, xr, c_n, c_n, positions, dw + j0 * k, k);
            continue;
        }
        for (ky = 0; ky < k_h; ++ky) {
            for (kx = 0; kx < k_w; ++kx) {
                /* the outputs whose tap (ky, kx) lies in the image: ox0 <= ox < ox1 */
                const int32_t off_w = kx * params->dilation.w - params->padding.w;
                int32_t ox0 = 0, ox1 = out_w;
                float *sums = dw + j0 * k + (ky * k_w + kx) * c_n;
                while (ox0 < out_w && ox0 * s_w + off_w < 0) {
                    ++ox0;
                }
                while (ox1 > ox0 && (ox1 - 1) * s_w + off_w >= in_w) {
                    --ox1;
                }
                if (ox1 <= ox0) {
                    continue;
                }
                for (n = 0; n < dy_dims->n; ++n) {
                    for (oy = 0; oy < out_h; ++oy) {
                        const int32_t iy = oy * s_h - params->padding.h +
                                           ky * params->dilation.h;
                        if (iy < 0 || iy >= in_h) {
                            continue;
                        }
                        pe_nv_gemm(gt + ((n * out_h + oy) * out_w + ox0) * gq, 1, gq, nt,
                                   xr + ((n * in_h + iy) * in_w + ox0 * s_w + off_w) * c_n,
                                   s_w * c_n, c_n, ox1 - ox0, sums, k);
                    }
                }
            }
        }
    }
}

void pe_fully_connected_grad_weight_f32_native(const pe_context *ctx,
                                               const pe_fc_grad_weight_params_f32 *params,
                                               const int32_t *channels, const pe_dims *x_dims,
                                               const int8_t *x, const pe_dims *dy_dims,
                                               const float *dy, const pe_dims *dw_dims,
                                               float *dw)
{
    /* dw[j][i] = sum over rows n ascending of dy[n][o_j] * x_r[n][i] */
    const int32_t depth = x_dims->c, rows = x_dims->n, out_c = dy_dims->c;
    const int32_t count = dw_dims->n;
    float *xr = (float *)ctx->buf;
    int32_t j0, n, t;
    pe_nv_dequant_input(x, params->input_offset, params->input_scale, rows * depth, xr);
    pe_nv_zero(dw, count * depth);
    for (j0 = 0; j0 < count; j0 += PE_NV_T) {
        const int32_t nt = count - j0 < PE_NV_T ? count - j0 : PE_NV_T;
        for (n = 0; n < rows; ++n) {
            float gt[PE_NV_T];
            for (t = 0; t < nt; ++t) {
                gt[t] = dy[n * out_c + (channels != 0 ? channels[j0 + t] : j0 + t)];
            }
            pe_nv_gemm(gt, 1, 0, nt, xr + n * depth, 0, depth, 1, dw + j0 * depth, depth);
        }
    }
}

void pe_bias_grad_f32_native(int32_t num_rows, int32_t row_size, const float *dy, float *db)
{
    /* db[c] = sum over rows ascending of dy[row][c] from +0.0, the sums in registers over
     * every row: four vectors of channels, one, half a vector, then channels one by one */
    int32_t r, c = 0, v;
    for (; c + PE_NV_V * PE_NV_F32 <= row_size; c += PE_NV_V * PE_NV_F32) {
        pe_nv_f32 acc[PE_NV_V];
        for (v = 0; v < PE_NV_V; ++v) {
            acc[v] = pe_nv_splat_f32(0.0f);
        }
        for (r = 0; r < num_rows; ++r) {
            PE_NV_UNROLL_F
            for (v = 0; v < PE_NV_V; ++v) {
                acc[v] = acc[v] + pe_nv_load_f32(dy + r * row_size + c + v * PE_NV_F32);
            }
        }
        for (v = 0; v < PE_NV_V; ++v) {
            pe_nv_store_f32(db + c + v * PE_NV_F32, acc[v]);
        }
    }
    for (; c + PE_NV_F32 <= row_size; c += PE_NV_F32) {
        pe_nv_f32 acc = pe_nv_splat_f32(0.0f);
        for (r = 0; r < num_rows; ++r) {
            acc = acc + pe_nv_load_f32(dy + r * row_size + c);
        }
        pe_nv_store_f32(db + c, acc);
    }
    if (row_size - c >= PE_NV_H) {
        pe_nv_f32h acc = pe_nv_splat_h(0.0f);
        for (r = 0; r < num_rows; ++r) {
            acc = acc + pe_nv_load_h(dy + r * row_size + c);
        }
        memcpy(db + c, &acc, sizeof acc);
        c += PE_NV_H;
    }
    for (; c < row_size; ++c) {
        float acc = 0.0f;
        for (r = 0; r < num_rows; ++r) {
            acc = acc + dy[r * row_size + c];
        }
        db[c] = acc;
    }
}

/* -- masks, sums, pooling ------------------------------------------------------------------ */
void pe_mask_grad_f32_native(int32_t size, const float *dy, const uint8_t *mask, float *dx)
{
    /* dx = dy where the mask bit is set, else +0.0 (dx may be dy) */
    int32_t i = 0;
#if defined(PE_NV_AVX512)
    for (; i + 16 <= size; i += 16) {
        uint16_t bits;
        memcpy(&bits, mask + (i >> 3), sizeof bits);
        _mm512_storeu_ps(dx + i, _mm512_maskz_mov_ps((__mmask16)bits, _mm512_loadu_ps(dy + i)));
    }
#elif defined(PE_NV_AVX2)
    {
        const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        for (; i + 8 <= size; i += 8) {
            const __m256i b = _mm256_and_si256(_mm256_set1_epi32(mask[i >> 3]), lanes);
            const __m256 keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, lanes));
            _mm256_storeu_ps(dx + i, _mm256_and_ps(keep, _mm256_loadu_ps(dy + i)));
        }
    }
#endif
    for (; i < size; ++i) {
        dx[i] = ((mask[i >> 3] >> (i & 7)) & 1u) != 0u ? dy[i] : 0.0f;
    }
}

void pe_act_mask_s8_native(const pe_activation *params, int32_t size, const int8_t *y,
                           uint8_t *mask)
{
    /* bit i: lo < y[i] < hi, eight values a byte (LSB first) */
    const int32_t lo = params->min;
    const int32_t hi = params->max;
    int32_t i = 0;
#if defined(PE_NV_AVX512)
    {
        const __m512i vlo = _mm512_set1_epi8((char)(lo < -128 ? -128 : lo > 127 ? 127 : lo));
        const __m512i vhi = _mm512_set1_epi8((char)(hi < -128 ? -128 : hi > 127 ? 127 : hi));
        const int below = lo < -128, above = hi > 127;
        for (; i + 64 <= size; i += 64) {
            const __m512i v = _mm512_loadu_si512((const void *)(y + i));
            __mmask64 m = (below ? ~(__mmask64)0 : _mm512_cmpgt_epi8_mask(v, vlo)) &
                          (above ? ~(__mmask64)0 : _mm512_cmplt_epi8_mask(v, vhi));
            memcpy(mask + (i >> 3), &m, 8);
        }
    }
#elif defined(PE_NV_AVX2)
    if (lo >= -128 && hi <= 127) {
        const __m256i vlo = _mm256_set1_epi8((char)lo);
        const __m256i vhi = _mm256_set1_epi8((char)hi);
        for (; i + 32 <= size; i += 32) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(y + i));
            const __m256i in = _mm256_and_si256(_mm256_cmpgt_epi8(v, vlo),
                                                _mm256_cmpgt_epi8(vhi, v));
            const uint32_t m = (uint32_t)_mm256_movemask_epi8(in);
            memcpy(mask + (i >> 3), &m, 4);
        }
    }
#endif
    for (; i < size; i += 8) {
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

void pe_grad_add_f32_native(int32_t size, const float *g1, const float *g2, float *g)
{
    int32_t i = 0;
    for (; i + PE_NV_F32 <= size; i += PE_NV_F32) {
        pe_nv_store_f32(g + i, pe_nv_load_f32(g1 + i) + pe_nv_load_f32(g2 + i));
    }
    for (; i < size; ++i) {
        g[i] = g1[i] + g2[i];
    }
}

void pe_avg_pool2d_grad_f32_native(const pe_context *ctx, const pe_pool_grad_params *params,
                                   const pe_dims *dy_dims, const float *dy,
                                   const pe_dims *filter_dims, const pe_dims *dx_dims,
                                   float *dx)
{
    /* dx[p][c] = sum over the taps (kh, kw) ascending that reach p of dy[o][c] / count[o]:
     * the quotients once per output (the scratch), then the sums per input position */
    const int32_t out_h = dy_dims->h, out_w = dy_dims->w, c_n = dx_dims->c;
    const int32_t in_h = dx_dims->h, in_w = dx_dims->w;
    const int32_t f_h = filter_dims->h, f_w = filter_dims->w;
    const int32_t whole = c_n / PE_NV_F32 * PE_NV_F32;
    float *q = (float *)ctx->buf;
    int32_t n, oy, ox, ih, iw, fy, fx, c;
    for (n = 0; n < dy_dims->n; ++n) {
        for (oy = 0; oy < out_h; ++oy) {
            const int32_t rows = pe_pool_taps(oy * params->stride.h - params->padding.h,
                                                     f_h, in_h);
            for (ox = 0; ox < out_w; ++ox) {
                const int32_t p = (n * out_h + oy) * out_w + ox;
                const float count = (float)(rows * pe_pool_taps(
                    ox * params->stride.w - params->padding.w, f_w, in_w));
                const pe_nv_f32 cv = pe_nv_splat_f32(count);
                for (c = 0; c < whole; c += PE_NV_F32) {
                    pe_nv_store_f32(q + p * c_n + c, pe_nv_load_f32(dy + p * c_n + c) / cv);
                }
                for (; c < c_n; ++c) {
                    q[p * c_n + c] = dy[p * c_n + c] / count;
                }
            }
        }
        if (params->stride.h >= f_h && params->stride.w >= f_w) {
            /* windows that do not overlap: each position takes at most one term, +0.0 + q */
            const pe_nv_f32 zero = pe_nv_splat_f32(0.0f);
            pe_nv_zero(dx + n * in_h * in_w * c_n, in_h * in_w * c_n);
            for (oy = 0; oy < out_h; ++oy) {
                for (ox = 0; ox < out_w; ++ox) {
                    const float *src = q + ((n * out_h + oy) * out_w + ox) * c_n;
                    const int32_t y0 = oy * params->stride.h - params->padding.h;
                    const int32_t x0 = ox * params->stride.w - params->padding.w;
                    for (ih = y0 < 0 ? 0 : y0; ih < y0 + f_h && ih < in_h; ++ih) {
                        for (iw = x0 < 0 ? 0 : x0; iw < x0 + f_w && iw < in_w; ++iw) {
                            float *out = dx + ((n * in_h + ih) * in_w + iw) * c_n;
                            for (c = 0; c < whole; c += PE_NV_F32) {
                                pe_nv_store_f32(out + c, zero + pe_nv_load_f32(src + c));
                            }
                            for (; c < c_n; ++c) {
                                out[c] = 0.0f + src[c];
                            }
                        }
                    }
                }
            }
            continue;
        }
        for (ih = 0; ih < in_h; ++ih) {
            for (iw = 0; iw < in_w; ++iw) {
                float *out = dx + ((n * in_h + ih) * in_w + iw) * c_n;
                pe_nv_zero(out, c_n);
                for (fy = 0; fy < f_h; ++fy) {
                    const int32_t wy = pe_nv_tap(ih, fy, params->stride.h, params->padding.h,
                                                     1, out_h);
                    if (wy < 0) {
                        continue;
                    }
                    for (fx = 0; fx < f_w; ++fx) {
                        const int32_t wx = pe_nv_tap(iw, fx, params->stride.w,
                                                         params->padding.w, 1, out_w);
                        const float *src;
                        if (wx < 0) {
                            continue;
                        }
                        src = q + ((n * out_h + wy) * out_w + wx) * c_n;
                        for (c = 0; c < whole; c += PE_NV_F32) {
                            pe_nv_store_f32(out + c, pe_nv_load_f32(out + c) +
                                                         pe_nv_load_f32(src + c));
                        }
                        for (; c < c_n; ++c) {
                            out[c] = out[c] + src[c];
                        }
                    }
                }
            }
        }
    }
}

/* -- fp32 SGD on int8 weights ---------------------------------------------------------------
 * pe_sgd_update_f32_s8's arithmetic (ref/pe_sgd_update_f32.c) along each trained channel's
 * values, PE_NV_F32 at a time: round half away from zero (pe_roundf) and the saturation to
 * [-127, 127] (NaN: 0, counted) as lane masks. */
static inline pe_nv_i32 pe_nv_bits(pe_nv_f32 v)
{
    pe_nv_i32 b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static inline pe_nv_f32 pe_nv_float(pe_nv_i32 b)
{
    pe_nv_f32 v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* lanes of ``mask`` (-1 / 0) from ``a``, the others from ``b`` */
static inline pe_nv_f32 pe_nv_select(pe_nv_i32 mask, pe_nv_f32 a, pe_nv_f32 b)
{
    return pe_nv_float((mask & pe_nv_bits(a)) | (~mask & pe_nv_bits(b)));
}

/* pe_roundf lane by lane: |x| < 2^23 truncated, one added where the exact remainder is at
 * least 0.5, x's sign put back (-0.0 stays -0.0); larger values, inf and NaN as they are */
static inline pe_nv_f32 pe_nv_roundf(pe_nv_f32 x)
{
    const pe_nv_i32 sign = pe_nv_bits(x) & (int32_t)0x80000000u;
    const pe_nv_f32 a = pe_nv_float(pe_nv_bits(x) & 0x7FFFFFFF);
    const pe_nv_i32 small = a < 8388608.0f;
    const pe_nv_f32 ac = pe_nv_select(small, a, pe_nv_splat_f32(0.0f));
    pe_nv_f32 t = __builtin_convertvector(__builtin_convertvector(ac, pe_nv_i32), pe_nv_f32);
    t = t + pe_nv_float((ac - t >= 0.5f) & pe_nv_bits(pe_nv_splat_f32(1.0f)));
    return pe_nv_float(pe_nv_bits(pe_nv_select(small, t, a)) | sign);
}

/* sat(round_half_away(x)) into [-127, 127] per lane (NaN: 0); ``sat`` gets -1 in the lanes
 * that saturated (or were NaN). |x| < 127.5 is exactly where the rounded value lies inside
 * [-127, 127] (NaN fails the test), so the magnitude is rounded in int32 lanes and the sign
 * applied after: (m ^ s) - s. */
static inline pe_nv_i32 pe_nv_round_sat_s8(pe_nv_f32 x, pe_nv_i32 *sat)
{
    const pe_nv_i32 s = pe_nv_bits(x) >> 31;                     /* -1 where negative */
    const pe_nv_f32 a = pe_nv_float(pe_nv_bits(x) & 0x7FFFFFFF);
    const pe_nv_i32 ok = a < 127.5f;
    const pe_nv_f32 ac = pe_nv_select(ok, a, pe_nv_splat_f32(0.0f));
    pe_nv_i32 m = __builtin_convertvector(ac, pe_nv_i32);
    m -= ac - __builtin_convertvector(m, pe_nv_f32) >= 0.5f;    /* + 1 where the remainder */
    m = (m & ok) | (127 & ~ok);
    *sat = ~ok;
    return ((m ^ s) - s) & ~(pe_nv_i32)(x != x);
}

/* the low bytes of int32 lanes holding values of int8 */
static inline void pe_nv_store_s8(int8_t *p, pe_nv_i32 q)
{
#if defined(PE_NV_AVX512)
    _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8((__m512i)q));
#elif defined(PE_NV_AVX2)
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128((__m256i)q),
                                      _mm256_extracti128_si256((__m256i)q, 1));
    _mm_storel_epi64((__m128i *)(void *)p, _mm_packs_epi16(w, w));
#else
    const pe_nv_i8 bytes = __builtin_convertvector(q, pe_nv_i8);
    memcpy(p, &bytes, sizeof bytes);
#endif
}

/* the loops of pe_sgd_update_f32_s8_native; ``plain``: no accumulation, momentum or master
 * copy (literal at each call: the compiler drops the branches). Without a master copy a
 * weight p in [-127, 127] keeps its value when |u| <= 0.25: p - u rounds to within 0.25 of p
 * (p +- 0.25 are float32 values), so round_half_away gives p back and nothing saturates; a
 * vector whose every lane keeps its value is not written. */
static inline __attribute__((always_inline)) int32_t
pe_nv_sgd_s8_loops(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                   const int32_t *channels, int8_t *param, const float *grad, const float *qas,
                   float *buf1, float *master, float lr_t, float *accum, int apply,
                   const int plain)
{
    const int accumulate = !plain && params->accumulate > 1;
    const pe_nv_f32 vlr = pe_nv_splat_f32(lr_t);
    const pe_nv_f32 vmom = pe_nv_splat_f32(params->momentum);
    const pe_nv_f32 keep = pe_nv_splat_f32(0.25f);
    pe_nv_i32 count_v = (pe_nv_i32){0};
    int32_t count = 0;
    int32_t o, j, k, l;
    if (plain) {
        buf1 = 0;
        master = 0;
    }
    for (o = 0; o < dims->outer; ++o) {
        for (j = 0; j < dims->count; ++j) {
            const int32_t p0 = pe_update_param_base(dims, channels, o, j);
            const int32_t g0 = pe_update_grad_base(dims, o, j);
            const pe_nv_f32 vq = pe_nv_splat_f32(qas[j]);
            for (k = 0; k + PE_NV_F32 <= dims->inner; k += PE_NV_F32) {
                const int32_t i = g0 + k;
                pe_nv_f32 g = pe_nv_load_f32(grad + i);
                pe_nv_f32 u, v;
                pe_nv_i32 sat, q;
                if (accumulate) {
                    const pe_nv_f32 total = pe_nv_load_f32(accum + i) + g;
                    if (!apply) {
                        pe_nv_store_f32(accum + i, total);
                        continue;
                    }
                    g = total;
                    pe_nv_store_f32(accum + i, pe_nv_splat_f32(0.0f));
                }
                if (buf1 != 0) {
                    g = vmom * pe_nv_load_f32(buf1 + i) + g;
                    pe_nv_store_f32(buf1 + i, g);
                }
                u = (vlr * g) * vq;
                if (master != 0) {
                    v = pe_nv_load_f32(master + i) - u;
                    pe_nv_store_f32(master + i, v);
                } else {
                    const pe_nv_f32 p = pe_nv_cvt_s8(param + p0 + k);
                    const pe_nv_f32 a = pe_nv_float(pe_nv_bits(u) & 0x7FFFFFFF);
                    const pe_nv_i32 moves = ~(a <= keep) | (p < -127.0f);
                    int32_t any = 0;
                    for (l = 0; l < PE_NV_F32; ++l) {
                        any |= moves[l];
                    }
                    if (!any) {
                        continue;
                    }
                    v = p - u;
                }
                q = pe_nv_round_sat_s8(v, &sat);
                count_v -= sat;
                pe_nv_store_s8(param + p0 + k, q);
            }
            for (; k < dims->inner; ++k) {
                const int32_t i = g0 + k;
                float g = grad[i];
                float u, v;
                int s = 0;
                if (accumulate) {
                    const float total = accum[i] + g;
                    if (!apply) {
                        accum[i] = total;
                        continue;
                    }
                    g = total;
                    accum[i] = 0.0f;
                }
                if (buf1 != 0) {
                    buf1[i] = params->momentum * buf1[i] + g;
                    g = buf1[i];
                }
                u = (lr_t * g) * qas[j];
                if (master != 0) {
                    master[i] = master[i] - u;
                    v = master[i];
                } else {
                    v = (float)param[p0 + k] - u;
                }
                param[p0 + k] = (int8_t)pe_round_sat_flag_f32(v, -127, 127, &s);
                count += s;
            }
        }
    }
    for (l = 0; l < PE_NV_F32; ++l) {
        count += count_v[l];
    }
    return count;
}

void pe_sgd_update_f32_s8_native(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                                 const int32_t *channels, int8_t *param, const float *grad,
                                 const float *qas, float *buf1, float *master, const float *lr,
                                 float *accum, const int32_t *step, int32_t *saturated)
{
    const float lr_t = lr != 0 ? *lr : params->lr;
    const int accumulate = params->accumulate > 1;
    const int apply = !accumulate || pe_update_applies(*step, params->accumulate);
    const int32_t count =
        !accumulate && buf1 == 0 && master == 0
            ? pe_nv_sgd_s8_loops(params, dims, channels, param, grad, qas, buf1, master, lr_t,
                                 accum, apply, 1)
            : pe_nv_sgd_s8_loops(params, dims, channels, param, grad, qas, buf1, master, lr_t,
                                 accum, apply, 0);
    pe_count_saturated(saturated, count);
}

/* -- fp32 SGD on int32 biases ----------------------------------------------------------------
 * The new value as a double (exact: an int32 less an integer step below 2^33 in magnitude, or
 * a rounded float32), saturated to [lo, hi]: a step clamped to 2^32 first (the ref kernel's
 * int64 arithmetic) saturates the same, as lo and hi lie inside int32. */
typedef double pe_nv_f64h __attribute__((vector_size(PE_NV_H * 8)));
typedef int64_t pe_nv_i64h __attribute__((vector_size(PE_NV_H * 8)));

/* sat(v) into [lo, hi] for half a vector of lanes (the doubles of a whole one would not fit
 * a register), stored at dst; returns -1 in the lanes that saturated */
static inline pe_nv_i32h pe_nv_sat_i32h(pe_nv_f64h v, int32_t lo, int32_t hi, int32_t *dst)
{
    const pe_nv_i64h above = v > (double)hi, below = v < (double)lo;
    const pe_nv_i64h out = above | below;
    pe_nv_i64h b;
    pe_nv_i32h r;
    memcpy(&b, &v, sizeof b);
    b = (b & ~out) | (above & (pe_nv_i64h)((pe_nv_f64h){0} + (double)hi)) |
        (below & (pe_nv_i64h)((pe_nv_f64h){0} + (double)lo));
    memcpy(&v, &b, sizeof v);
    r = __builtin_convertvector(v, pe_nv_i32h);
    memcpy(dst, &r, sizeof r);
    return __builtin_convertvector(out, pe_nv_i32h);
}

/* fp32 SGD on an int32 bias: pe_sgd_update_f32_s32's arithmetic (ref/pe_update_f32.h), one
 * value after another without the ref kernel's generic parameter access; plain SGD (no
 * momentum, no accumulation) over contiguous values (every channel, one value a channel: the
 * biases) PE_NV_F32 at a time */
void pe_sgd_update_f32_s32_native(const pe_sgd_params_f32 *params, const pe_update_dims *dims,
                                  const int32_t *channels, int32_t *param, const float *grad,
                                  const float *qas, float *buf1, float *master, const float *lr,
                                  float *accum, const int32_t *step, int32_t *saturated)
{
    const float lr_t = lr != 0 ? *lr : params->lr;
    const int accumulate = params->accumulate > 1;
    const int apply = !accumulate || pe_update_applies(*step, params->accumulate);
    const int32_t lo = dims->lo, hi = dims->hi;
    int32_t count = 0, j0 = 0;
    int32_t o, j, k;
    if (!accumulate && buf1 == 0 && channels == 0 && dims->inner == 1 && dims->outer == 1) {
        const int32_t n = dims->count;
        const pe_nv_f32 vlr = pe_nv_splat_f32(lr_t);
        pe_nv_i32 count_v = (pe_nv_i32){0};
        int32_t i;
        for (i = 0; i + PE_NV_F32 <= n; i += PE_NV_F32) {
            const pe_nv_f32 u = (vlr * pe_nv_load_f32(grad + i)) * pe_nv_load_f32(qas + i);
            float r[PE_NV_F32];
            int32_t sats[PE_NV_F32], h;
            pe_nv_i32 nan, satv;
            if (master != 0) {
                /* round(master - u); NaN: 0 */
                const pe_nv_f32 m = pe_nv_load_f32(master + i) - u;
                pe_nv_store_f32(master + i, m);
                nan = m != m;
                pe_nv_store_f32(r, pe_nv_select(nan, pe_nv_splat_f32(0.0f), pe_nv_roundf(m)));
            } else {
                /* param - round(u); NaN: a step of 0 */
                nan = u != u;
                pe_nv_store_f32(r, pe_nv_select(nan, pe_nv_splat_f32(0.0f), pe_nv_roundf(u)));
            }
            for (h = 0; h < PE_NV_F32; h += PE_NV_H) {
                pe_nv_f32h rh;
                pe_nv_f64h t;
                pe_nv_i32h sat;
                memcpy(&rh, r + h, sizeof rh);
                t = __builtin_convertvector(rh, pe_nv_f64h);
                if (master == 0) {
                    pe_nv_i32h q;
                    memcpy(&q, param + i + h, sizeof q);
                    t = __builtin_convertvector(q, pe_nv_f64h) - t;
                }
                sat = pe_nv_sat_i32h(t, lo, hi, param + i + h);
                memcpy(sats + h, &sat, sizeof sat);
            }
            memcpy(&satv, sats, sizeof satv);
            count_v -= satv | nan;
        }
        for (k = 0; k < PE_NV_F32; ++k) {
            count += count_v[k];
        }
        j0 = i;                                   /* the rest one by one below */
    }
    for (o = 0; o < dims->outer; ++o) {
        for (j = o == 0 ? j0 : 0; j < dims->count; ++j) {
            const int32_t p0 = pe_update_param_base(dims, channels, o, j);
            const int32_t g0 = pe_update_grad_base(dims, o, j);
            for (k = 0; k < dims->inner; ++k) {
                const int32_t i = g0 + k;
                float g = grad[i];
                float u;
                int s = 0;
                if (accumulate) {
                    const float total = accum[i] + g;
                    if (!apply) {
                        accum[i] = total;
                        continue;
                    }
                    g = total;
                    accum[i] = 0.0f;
                }
                if (buf1 != 0) {
                    buf1[i] = params->momentum * buf1[i] + g;
                    g = buf1[i];
                }
                u = (lr_t * g) * qas[j];
                if (master != 0) {
                    master[i] = master[i] - u;
                    param[p0 + k] = pe_round_sat_flag_f32(master[i], lo, hi, &s);
                } else {
                    const int64_t v = (int64_t)param[p0 + k] - pe_round_step_i64(u);
                    s = u != u || v > hi || v < lo;
                    param[p0 + k] = v > hi ? hi : v < lo ? lo : (int32_t)v;
                }
                count += s;
            }
        }
    }
    pe_count_saturated(saturated, count);
}
