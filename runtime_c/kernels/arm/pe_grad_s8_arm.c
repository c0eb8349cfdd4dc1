/* The int8 backward's kernels of the arm backend, bit-exact with pe_conv2d_grad_s8.c
 * (codegen/golden/train_conv.py *_i8). Integer sums are exact in any order, so each kernel
 * sums in the order its loop reads fastest.
 *
 * pe_conv2d_grad_input_s8_arm - the input gradient of a pointwise convolution
 * (1x1, stride 1, no padding, one group, an even number of input channels), bit-exact with
 * pe_conv2d_grad_s8.c (codegen/golden/train_conv.py conv2d_grad_input_i8):
 *
 *   dys[p, o] = MBQM(dy[p, o] << b, M_o, k_o)             (|dys| <= 127 * 2^b, an int16)
 *   acc[p, c] = sum over o of dys[p, o] * w[o, c]        (int32, exact in any order)
 *   (dx, e_dx) = rescale(acc, e - b, M_ref, k_ref)
 *
 * The sums are the forward's pair loop (pe_arm_raw_pairs): two positions' prescaled dy rows
 * as the two int16 columns, the stream the transposed weights per pair of input channels as
 * int16: `stream` for frozen weights (codegen/backends/arm.py raw_stream, in flash; `filter`
 * may then be NULL), or, when `stream` is NULL (weights that training changes), built from
 * `filter` at run time. The sums are kept in the scratch (int32, one per dx value), so that
 * the range pass of the rescale reads them instead of summing twice.
 * Scratch: two int16 columns of the output channels rounded up to a multiple of 8, then
 * (N * H * W + 1) * C int32 (a spare row for the partner of a last unpaired position), and
 * when `stream` is NULL the stream: C / 2 times (16 + 4 * that rounded count) bytes.
 * `pre`: the prescale's words per output channel (pe_arm_prescale; codegen/backends/arm.py
 * keeps layers whose channels are outside their form on ref).
 */
#include "pe_arm_conv.h"
#include "pe_arm_kernels.h"
#include "pe_grad_fixed.h"
#include "pe_pool2d_grad.h"

/* One prescaled gradient MBQM(dy << b, M_o, k_o) from the five words codegen/backends/arm.py
 * computes per channel (`pre`: m, c, e, s, z): with x = dy << (b + max(k, 0)) (|x| < 2^17)
 * the double rounding is exactly SMMLAR(x << 1, m, c) >> e, c = 2^(e-1) (0 for e = 0) one
 * less for a negative x when e > 0 (pe_arm.h's fast form; e = max(-k, 0), s = b + max(k, 0)
 * + 1): z is -1 when e > 0 (else 0), the one less is x's sign AND z. */
enum { PE_ARM_PRE_WORDS = 5 };

static inline int32_t pe_arm_prescale(int32_t dy, const int32_t *pre)
{
    const int32_t x = dy * (1 << pre[3]);
    const int32_t c = pre[1] + (pre[4] & (dy < 0 ? -1 : 0));
    return pe_asr_s32(pe_arm_smmlar(x, pre[0], c), pre[2]);
}

#if PE_ARM_DSP
/* one value of pe_arm_range's assembly: lo = min(lo, v), hi = max(hi, v) */
#define PE_ARM_RANGE_ONE(v)                              \
    "cmp %[" v "], %[lo]\n\t"                           \
    "it lt\n\t"                                         \
    "movlt %[lo], %[" v "]\n\t"                         \
    "cmp %[" v "], %[hi]\n\t"                           \
    "it gt\n\t"                                         \
    "movgt %[hi], %[" v "]\n\t"

/* one value of pe_arm_prescale_groups' assembly: byte `lsb` of u (sign-extended), its
 * channel's words loaded into m c e s z (ascending registers), the result at dst + `off`
 * bytes */
#define PE_ARM_PRESCALE_ONE(lsb, off)                    \
    "sbfx %[x], %[u], #" lsb ", #8\n\t"                  \
    "ldm %[pre]!, {%[m], %[c], %[e], %[s], %[z]}\n\t"    \
    "and %[z], %[z], %[x], asr #31\n\t"                 \
    "add %[c], %[c], %[z]\n\t"                          \
    "lsl %[x], %[x], %[s]\n\t"                          \
    "smmlar %[x], %[x], %[m], %[c]\n\t"                 \
    "asr %[x], %[x], %[e]\n\t"                          \
    "strh %[x], [%[dst], #" off "]\n\t"
#endif

/* the prescaled gradients of one position's `count` values from `pre`'s words in SXTB16's
 * pair order, group g of four at dst + g * stride (4: a row; 8: a column of an interleaved
 * pair); on DSP cores whole groups in one assembly loop (a word of dy a group,
 * pe_arm_prescale's sign fix as an AND with z) */
static void pe_arm_prescale_groups(int16_t *dst, int32_t stride, const int8_t *dy,
                                   int32_t count, const int32_t *pre)
{
    int32_t o = 0;
#if PE_ARM_DSP
    if (count >= 4) {
        register uint32_t m __asm__("r4");
        register uint32_t c __asm__("r5");
        register uint32_t e __asm__("r6");
        register uint32_t s __asm__("r7");
        register uint32_t z __asm__("r8");
        const int8_t *const end = dy + (count & ~3);
        const int32_t step = 2 * stride;
        uint32_t u, x;
        __asm__ volatile(
            "1:\n\t"
            "ldr %[u], [%[dy]], #4\n\t"
            PE_ARM_PRESCALE_ONE("0", "0")
            PE_ARM_PRESCALE_ONE("8", "4")
            PE_ARM_PRESCALE_ONE("16", "2")
            PE_ARM_PRESCALE_ONE("24", "6")
            "add %[dst], %[dst], %[step]\n\t"
            "cmp %[dy], %[end]\n\t"
            "bne 1b\n\t"
            : [m] "=&r"(m), [c] "=&r"(c), [e] "=&r"(e), [s] "=&r"(s), [z] "=&r"(z),
              [u] "=&r"(u),
              [x] "=&r"(x), [dy] "+r"(dy), [dst] "+r"(dst), [pre] "+r"(pre)
            : [end] "r"(end), [step] "r"(step)
            : "cc", "memory");
        (void)m;
        (void)c;
        (void)e;
        (void)s;
        (void)z;
        o = count & ~3;
        dy -= o;
    }
#else
    for (; o + 4 <= count; o += 4, dst += stride, pre += 4 * PE_ARM_PRE_WORDS) {
        dst[0] = (int16_t)pe_arm_prescale(dy[o], pre);
        dst[2] = (int16_t)pe_arm_prescale(dy[o + 1], pre + PE_ARM_PRE_WORDS);
        dst[1] = (int16_t)pe_arm_prescale(dy[o + 2], pre + 2 * PE_ARM_PRE_WORDS);
        dst[3] = (int16_t)pe_arm_prescale(dy[o + 3], pre + 3 * PE_ARM_PRE_WORDS);
    }
#endif
    for (; o < count; ++o, pre += PE_ARM_PRE_WORDS) {
        dst[pe_arm_slot(o) & 3] = (int16_t)pe_arm_prescale(dy[o], pre);
    }
}

/* the range of n int32 sums: on DSP cores four a step in assembly (one LDM, a compare and a
 * conditional move per bound), then two a step */
static pe_range pe_arm_range(const int32_t *acc, int32_t n)
{
    int32_t lo = 0, hi = 0, i = 0;
#if PE_ARM_DSP
    if (n >= 4) {
        register int32_t a __asm__("r0");
        register int32_t b __asm__("r1");
        register int32_t c __asm__("r2");
        register int32_t d __asm__("r3");
        const int32_t *p = acc;
        const int32_t *const end = acc + (n & ~3);
        __asm__ volatile(
            "1:\n\t"
            "ldm %[p]!, {r0, r1, r2, r3}\n\t"
            PE_ARM_RANGE_ONE("a") PE_ARM_RANGE_ONE("b") PE_ARM_RANGE_ONE("c")
            PE_ARM_RANGE_ONE("d")
            "cmp %[p], %[end]\n\t"
            "bne 1b\n\t"
            : [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d), [p] "+r"(p),
              [lo] "+r"(lo), [hi] "+r"(hi)
            : [end] "r"(end)
            : "cc", "memory");
        (void)a;
        (void)b;
        (void)c;
        (void)d;
        i = n & ~3;
    }
#endif
    for (; i + 2 <= n; i += 2) {
        const int32_t a = acc[i], b = acc[i + 1];
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    if (i < n) {
        lo = acc[i] < lo ? acc[i] : lo;
        hi = acc[i] > hi ? acc[i] : hi;
    }
    {
        pe_range r;
        r.lo = lo;
        r.hi = hi;
        return r;
    }
}

/* one rescaled value of the fast form: t = SMMULR(acc << l1, M), v = RDBPOT(t, r) =
 * (t + 2^(r-1) - [t < 0]) >> r for r > 0 (`round`), t for r = 0; |v| <= 128, clamped to
 * +-127 (SSAT, then -128 -> -127) */
static inline int8_t pe_arm_rescale_one(int32_t acc, int32_t l1, int32_t m, int32_t r,
                                        int round)
{
    const int32_t t = pe_arm_smmlar(pe_shl_wrap_s32(acc, l1), m, 0);
    int32_t v = round ? pe_asr_s32(pe_s32_from_u32((uint32_t)t + (1u << (r - 1))
                                                   - ((uint32_t)t >> 31)), r)
                      : t;
#if PE_ARM_DSP
    v = (int32_t)__ssat(v, 8);
#else
    v = v > PE_GRAD_MAX ? PE_GRAD_MAX : v;
#endif
    return (int8_t)(v < -PE_GRAD_MAX ? -PE_GRAD_MAX : v);
}

#if PE_ARM_DSP
/* pe_arm_rescale_one(acc, l1, m, r, 1) of register v (t a scratch): the rounding constant
 * rides in SMMLAR's accumulator, and -[t < 0] is x's sign (x = acc << l1, t = SMMULR(x, m)
 * has x's sign or is 0, where both give 0 for r > 0) */
#define PE_ARM_RESCALE_ONE(v)                            \
    "lsl %[" v "], %[" v "], %[l1]\n\t"                  \
    "smmlar %[t], %[" v "], %[m], %[rnd]\n\t"           \
    "add %[t], %[t], %[" v "], asr #31\n\t"              \
    "asr %[" v "], %[t], %[r]\n\t"

/* pe_arm_rescale_one(acc[i], l1, m, r, 1) for i < n (a multiple of four, n > 0): four a step,
 * values of [-128, 128] packed as int16 lanes, SSAT16 to [-128, 127], the four bytes in one
 * word, -128 lifted to -127 (SSUB8 and SEL against -127 in every byte) */
static void pe_arm_rescale_fast(const int32_t *acc, int32_t n, int32_t l1, int32_t m,
                                int32_t r, int8_t *dx)
{
    register int32_t a __asm__("r0");
    register int32_t b __asm__("r1");
    register int32_t c __asm__("r2");
    register int32_t d __asm__("r3");
    const int32_t *const end = acc + n;
    const int32_t rnd = 1 << (r - 1);
    const uint32_t m127 = 0x81818181u;
    int32_t t;
    __asm__ volatile(
        "1:\n\t"
        "ldm %[p]!, {r0, r1, r2, r3}\n\t"
        PE_ARM_RESCALE_ONE("a") PE_ARM_RESCALE_ONE("b") PE_ARM_RESCALE_ONE("c")
        PE_ARM_RESCALE_ONE("d")
        "pkhbt %[a], %[a], %[c], lsl #16\n\t"
        "pkhbt %[b], %[b], %[d], lsl #16\n\t"
        "ssat16 %[a], #8, %[a]\n\t"
        "ssat16 %[b], #8, %[b]\n\t"
        "uxtb16 %[a], %[a]\n\t"
        "uxtb16 %[b], %[b]\n\t"
        "orr %[a], %[a], %[b], lsl #8\n\t"
        "ssub8 %[t], %[a], %[m127]\n\t"
        "sel %[a], %[a], %[m127]\n\t"
        "str %[a], [%[dx]], #4\n\t"
        "cmp %[p], %[end]\n\t"
        "bne 1b\n\t"
        : [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d), [t] "=&r"(t),
          [p] "+r"(acc), [dx] "+r"(dx)
        : [end] "r"(end), [l1] "r"(l1), [m] "r"(m), [rnd] "r"(rnd), [r] "r"(r),
          [m127] "r"(m127)
        : "cc", "memory");
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    (void)t;
}
#endif

/* dx = the rescaled sums, two a step (round: r > 0, constant in each loop) */
#define PE_ARM_RESCALE_LOOP(round)                                        \
    do {                                                                  \
        for (i = 0; i + 2 <= total; i += 2) {                             \
            dx[i] = pe_arm_rescale_one(acc[i], l1, m, r, round);          \
            dx[i + 1] = pe_arm_rescale_one(acc[i + 1], l1, m, r, round);  \
        }                                                                 \
        if (i < total) {                                                  \
            dx[i] = pe_arm_rescale_one(acc[i], l1, m, r, round);          \
        }                                                                 \
    } while (0)

/* the int32 sums of an input gradient, their range, the rescale into dx and its exponent.
 * When the largest |sum| has at most 30 bits, SRDHM(acc << l, M) is SMMULR(acc << (l + 1), M)
 * exactly and RDBPOT(t, r) = (t + 2^(r-1) - [t < 0]) >> r; otherwise pe_grad_fixed.h's. */
static void pe_arm_rescale_sums(const int32_t *acc, int32_t total,
                                const pe_grad_input_quant *quant, int32_t dy_exp, int8_t *dx,
                                int32_t *dx_exp)
{
    const int32_t m = quant->output_multiplier;
    const pe_range range = pe_arm_range(acc, total);
    const pe_rescale_plan plan = pe_rescale_plan_make(&range, m);
    int32_t i;
    if (pe_bitlen_u32(pe_range_max_abs(&range)) <= 30) {
        const int32_t l1 = plan.left + 1, r = plan.right;
        if (r > 0) {
#if PE_ARM_DSP
            if (total >= 4) {
                pe_arm_rescale_fast(acc, total & ~3, l1, m, r, dx);
                acc += total & ~3;
                dx += total & ~3;
                total &= 3;
            }
#endif
            PE_ARM_RESCALE_LOOP(1);
        } else {
            PE_ARM_RESCALE_LOOP(0);
        }
    } else {
        for (i = 0; i < total; ++i) {
            dx[i] = pe_rescale_value(acc[i], m, &plan);
        }
    }
    *dx_exp = pe_rescale_exponent(dy_exp - quant->prescale_shift, quant->output_shift, &plan);
}

void pe_conv2d_grad_input_s8_arm(const pe_context *ctx, const pe_conv_grad_params *params,
                                 const pe_grad_input_quant *quant, const int32_t *stream,
                                 const int32_t *pre,
                                 const pe_dims *dy_dims, const int8_t *dy,
                                 const int32_t *dy_exp, const pe_dims *filter_dims,
                                 const int8_t *filter, const pe_dims *dx_dims, int8_t *dx,
                                 int32_t *dx_exp)
{
    const int32_t o_n = dy_dims->c;
    const int32_t c_n = dx_dims->c;
    const int32_t positions = dx_dims->n * dx_dims->h * dx_dims->w;
    const int32_t k8 = (o_n + 7) & ~7;
    int16_t *const cols = (int16_t *)ctx->buf;
    int32_t *const acc = (int32_t *)(void *)(cols + 2 * k8);
    const int32_t total = positions * c_n;
    int32_t p, j, o, i;
    (void)params;
    (void)filter_dims;
    if (stream == 0) {
        /* weights that training changes: the stream of their transpose (raw_stream's
         * layout) built into the scratch after the sums: per pair of input channels four
         * zero words, then per group of four output channels 16 bytes, input channel c + r of
         * the pair at int16 4 r + the output channel's slot */
        int32_t *const words = acc + (positions + 1) * c_n;
        const int32_t per_pair = 4 + k8;              /* words: 4 + 4 * (k8 / 4) groups */
        int32_t c;
        for (c = 0; c < c_n; c += 2) {
            int32_t *const z = words + (c >> 1) * per_pair;
            z[0] = z[1] = z[2] = z[3] = 0;
        }
        for (o = 0; o < k8; ++o) {
            const int8_t *const row = filter + o * c_n;
            int16_t *h = (int16_t *)(void *)(words + 4) + (o >> 2) * 8 + pe_arm_slot(o & 3);
            for (c = 0; c < c_n; c += 2, h += 2 * per_pair) {
                h[0] = o < o_n ? row[c] : 0;
                h[4] = o < o_n ? row[c + 1] : 0;
            }
        }
        stream = words;
    }
    for (i = 0; i < 2 * k8; ++i) {
        cols[i] = 0;
    }
    for (p = 0; p < positions; p += 2) {
        for (j = 0; j < 2; ++j) {
            const int8_t *g = dy + (p + j) * o_n;
            if (p + j >= positions) {
                for (o = 0; o < o_n; ++o) {
                    cols[pe_arm_at(pe_arm_slot(o), j)] = 0;
                }
                continue;
            }
            pe_arm_prescale_groups(cols + 4 * j, 8, g, o_n, pre);
        }
        /* a last unpaired position: its zero partner's sums go to the spare row */
        pe_arm_raw_pairs(cols, k8 >> 2, stream, acc + p * c_n,
                         acc + (p + 1 < positions ? p + 1 : positions) * c_n, c_n >> 1);
    }
    pe_arm_rescale_sums(acc, total, quant, *dy_exp, dx, dx_exp);
}



/* pe_fully_connected_grad_input_s8_arm - the int8 input gradient of a fully connected layer
 * (pe_fully_connected_grad_s8.c): the pointwise kernel above over dy's rows as positions, the
 * units as output channels and the depth (even) as input channels; same stream, prescale
 * words and scratch. */
void pe_fully_connected_grad_input_s8_arm(const pe_context *ctx,
                                          const pe_grad_input_quant *quant,
                                          const int32_t *stream, const int32_t *pre,
                                          const pe_dims *dy_dims, const int8_t *dy,
                                          const int32_t *dy_exp, const pe_dims *filter_dims,
                                          const int8_t *filter, const pe_dims *dx_dims,
                                          int8_t *dx, int32_t *dx_exp)
{
    pe_dims g, f, x;
    g.n = dy_dims->n;
    g.h = 1;
    g.w = 1;
    g.c = filter_dims->n;
    f.n = filter_dims->n;
    f.h = 1;
    f.w = 1;
    f.c = filter_dims->c;
    x = g;
    x.c = filter_dims->c;
    (void)dx_dims;
    pe_conv2d_grad_input_s8_arm(ctx, 0, quant, stream, pre, &g, dy, dy_exp, &f, filter, &x, dx,
                                dx_exp);
}

/* a[c] += d[slot(c)] * w[c] for c < n (a multiple of four), four channels a step: the weights'
 * SXTB16 pairs (c, c+2), (c+1, c+3) against the prescaled row in the same order (SMLABB,
 * SMLATT), the sums loaded and stored two at a time */
static inline void pe_arm_dw_scatter(int32_t *a, const int16_t *d, const int8_t *w, int32_t n)
{
#if PE_ARM_DSP
    const int32_t *const end = a + n;
    uint32_t a0, a1, a2, a3, u, e, d0, d1;
    if (n <= 0) {
        return;
    }
    __asm__ volatile(
        "1:\n\t"
        "ldr %[u], [%[w]], #4\n\t"
        "ldrd %[d0], %[d1], [%[d]], #8\n\t"
        "ldrd %[a0], %[a1], [%[a]]\n\t"
        "ldrd %[a2], %[a3], [%[a], #8]\n\t"
        "sxtb16 %[e], %[u]\n\t"
        "sxtb16 %[u], %[u], ror #8\n\t"
        "smlabb %[a0], %[d0], %[e], %[a0]\n\t"
        "smlatt %[a2], %[d0], %[e], %[a2]\n\t"
        "smlabb %[a1], %[d1], %[u], %[a1]\n\t"
        "smlatt %[a3], %[d1], %[u], %[a3]\n\t"
        "strd %[a2], %[a3], [%[a], #8]\n\t"
        "strd %[a0], %[a1], [%[a]], #16\n\t"
        "cmp %[a], %[end]\n\t"
        "bne 1b\n\t"
        : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [u] "=&r"(u),
          [e] "=&r"(e), [d0] "=&r"(d0), [d1] "=&r"(d1), [a] "+r"(a), [d] "+r"(d), [w] "+r"(w)
        : [end] "r"(end)
        : "cc", "memory");
#else
    int32_t c;
    for (c = 0; c < n; c += 4) {
        const uint32_t u = pe_arm_ld32(w + c);
        const uint32_t e0 = pe_arm_sxtb16(u), e1 = pe_arm_sxtb16_ror8(u);
        const uint32_t d0 = pe_arm_ld32(d + c), d1 = pe_arm_ld32(d + c + 2);
        a[c] = pe_arm_smlabb(d0, e0, a[c]);
        a[c + 2] = pe_arm_smlatt(d0, e0, a[c + 2]);
        a[c + 1] = pe_arm_smlabb(d1, e1, a[c + 1]);
        a[c + 3] = pe_arm_smlatt(d1, e1, a[c + 3]);
    }
#endif
}

/* pe_depthwise_conv2d_grad_input_s8_arm - the input gradient of a depthwise convolution (depth
 * multiplier 1, dilation 1, any window, stride and padding), scattered: each dy position's
 * prescaled row (one int16 per channel, in SXTB16's pair order) times each tap's weight row is
 * added to the int32 sums of the input position the tap reads, four channels a step (SMLABB,
 * SMLATT). Scratch: N * H * W * C int32 (the sums) and C int16 rounded up to 4. */
void pe_depthwise_conv2d_grad_input_s8_arm(const pe_context *ctx,
                                           const pe_dw_conv_grad_params *params,
                                           const pe_grad_input_quant *quant,
                                           const int32_t *pre, const pe_dims *dy_dims,
                                           const int8_t *dy, const int32_t *dy_exp,
                                           const pe_dims *filter_dims, const int8_t *filter,
                                           const pe_dims *dx_dims, int8_t *dx, int32_t *dx_exp)
{
    const int32_t c_n = dx_dims->c, in_h = dx_dims->h, in_w = dx_dims->w;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t total = dx_dims->n * in_h * in_w * c_n;
    int32_t *const acc = (int32_t *)ctx->buf;
    int16_t *const dys = (int16_t *)(void *)(acc + total);
    int32_t n, oy, ox, ky, kx, c, i;
    for (i = 0; i < total; ++i) {
        acc[i] = 0;
    }
    for (n = 0; n < dy_dims->n; ++n) {
        for (oy = 0; oy < dy_dims->h; ++oy) {
            for (ox = 0; ox < dy_dims->w; ++ox) {
                const int8_t *const g = dy + ((n * dy_dims->h + oy) * dy_dims->w + ox) * c_n;
                pe_arm_prescale_groups(dys, 4, g, c_n, pre);
                for (ky = 0; ky < k_h; ++ky) {
                    const int32_t iy = oy * params->stride.h - params->padding.h + ky;
                    if (iy < 0 || iy >= in_h) {
                        continue;
                    }
                    for (kx = 0; kx < k_w; ++kx) {
                        const int32_t ix = ox * params->stride.w - params->padding.w + kx;
                        int32_t *a;
                        const int8_t *w;
                        if (ix < 0 || ix >= in_w) {
                            continue;
                        }
                        a = acc + ((n * in_h + iy) * in_w + ix) * c_n;
                        w = filter + (ky * k_w + kx) * c_n;
                        pe_arm_dw_scatter(a, dys, w, c_n & ~3);
                        for (c = c_n & ~3; c < c_n; ++c) {
                            a[c] = pe_s32_from_u32((uint32_t)a[c]
                                                   + (uint32_t)((int32_t)dys[pe_arm_slot(c)]
                                                                * w[c]));
                        }
                    }
                }
            }
        }
    }
    pe_arm_rescale_sums(acc, total, quant, *dy_exp, dx, dx_exp);
}

/* row[c] += d * x[c] for c < n (a multiple of four; x word-aligned int16), four a step: SMLABB
 * and SMLATB of d against the two int16 of each word of x, the sums loaded and stored two at a
 * time */
static inline void pe_arm_axpy(int32_t *row, const int16_t *x, int32_t d, int32_t n)
{
#if PE_ARM_DSP
    const int32_t *const end = row + n;
    uint32_t r0, r1, r2, r3, x0, x1;
    if (n <= 0) {
        return;
    }
    __asm__ volatile(
        "1:\n\t"
        "ldrd %[x0], %[x1], [%[x]], #8\n\t"
        "ldrd %[r0], %[r1], [%[row]]\n\t"
        "ldrd %[r2], %[r3], [%[row], #8]\n\t"
        "smlabb %[r0], %[x0], %[d], %[r0]\n\t"
        "smlatb %[r1], %[x0], %[d], %[r1]\n\t"
        "smlabb %[r2], %[x1], %[d], %[r2]\n\t"
        "smlatb %[r3], %[x1], %[d], %[r3]\n\t"
        "strd %[r2], %[r3], [%[row], #8]\n\t"
        "strd %[r0], %[r1], [%[row]], #16\n\t"
        "cmp %[row], %[end]\n\t"
        "bne 1b\n\t"
        : [r0] "=&r"(r0), [r1] "=&r"(r1), [r2] "=&r"(r2), [r3] "=&r"(r3), [x0] "=&r"(x0),
          [x1] "=&r"(x1), [row] "+r"(row), [x] "+r"(x)
        : [d] "r"(d), [end] "r"(end)
        : "cc", "memory");
#else
    int32_t c;
    for (c = 0; c < n; ++c) {
        row[c] = pe_s32_from_u32((uint32_t)row[c] + (uint32_t)(d * x[c]));
    }
#endif
}

/* pe_conv2d_grad_weight_s8_arm - the weight gradient of a pointwise convolution (1x1, stride
 * 1, no padding, one group) over the trained channels: dw[j, c] = sum over positions p of
 * dy[p, o_j] * (x[p, c] + input_offset), int32 with the exponent of dy, accumulated in dw
 * itself position by position (each x row offset once into an int16 row of the scratch; a
 * trained channel whose dy is 0 there skipped), four input channels a step (pe_arm_axpy).
 * Scratch: C int16. */
void pe_conv2d_grad_weight_s8_arm(const pe_context *ctx, const pe_conv_grad_weight_params *params,
                                  const int32_t *channels, const pe_dims *x_dims,
                                  const int8_t *x, const pe_dims *dy_dims, const int8_t *dy,
                                  const int32_t *dy_exp, const pe_dims *dw_dims, int32_t *dw,
                                  int32_t *dw_exp)
{
    const int32_t c_n = x_dims->c, o_n = dy_dims->c, count = dw_dims->n;
    const int32_t positions = x_dims->n * x_dims->h * x_dims->w;
    int16_t *const xr = (int16_t *)ctx->buf;
    int32_t p, j, c;
    for (j = 0; j < count * c_n; ++j) {
        dw[j] = 0;
    }
    for (p = 0; p < positions; ++p) {
        const int8_t *xp = x + p * c_n;
        const int8_t *g = dy + p * o_n;
        for (c = 0; c < c_n; ++c) {
            xr[c] = (int16_t)(xp[c] + params->input_offset);
        }
        for (j = 0; j < count; ++j) {
            const int32_t d = g[channels != 0 ? channels[j] : j];
            int32_t *row = dw + j * c_n;
            if (d == 0) {
                continue;
            }
            pe_arm_axpy(row, xr, d, c_n & ~3);
            for (c = c_n & ~3; c < c_n; ++c) {
                row[c] += d * xr[c];
            }
        }
    }
    *dw_exp = *dy_exp;
}

/* pe_avg_pool2d_grad_s8_arm - the average-pooling gradient of windows that do not overlap
 * (stride >= window): each input position lies in at most one window, so its sum is that
 * window's dy * RECIP(count) alone (pe_pool2d_grad_s8.c). One pass over dy for the range,
 * then per window its normalised row (C int8, the scratch) copied to every position of the
 * window; positions in no window are 0. Scratch: C bytes. */
void pe_avg_pool2d_grad_s8_arm(const pe_context *ctx, const pe_avg_pool_grad_params *params,
                               const pe_dims *dy_dims, const int8_t *dy, const int32_t *dy_exp,
                               const pe_dims *filter_dims, const pe_dims *dx_dims, int8_t *dx,
                               int32_t *dx_exp)
{
    const int32_t unit = (int32_t)1 << params->recip_bits;
    const int32_t c_n = dy_dims->c, in_h = dx_dims->h, in_w = dx_dims->w;
    int8_t *const row = (int8_t *)ctx->buf;
    pe_range range = pe_range_zero();
    int32_t shift, pass, n, oy, ox, iy, ix, c, i;
    for (i = 0; i < dx_dims->n * in_h * in_w * c_n; ++i) {
        dx[i] = 0;
    }
    shift = 0;
    for (pass = 0; pass < 2; ++pass) {
        for (n = 0; n < dy_dims->n; ++n) {
            for (oy = 0; oy < dy_dims->h; ++oy) {
                const int32_t y0 = oy * params->stride.h - params->padding.h;
                const int32_t rows = pe_pool_taps(y0, filter_dims->h, in_h);
                for (ox = 0; ox < dy_dims->w; ++ox) {
                    const int32_t x0 = ox * params->stride.w - params->padding.w;
                    const int32_t count = rows * pe_pool_taps(x0, filter_dims->w, in_w);
                    const int8_t *g = dy + ((n * dy_dims->h + oy) * dy_dims->w + ox) * c_n;
                    int32_t recip;
                    if (count <= 0) {
                        continue;
                    }
                    recip = (unit + count / 2) / count;
                    if (pass == 0) {
                        for (c = 0; c < c_n; ++c) {
                            pe_range_add(&range, g[c] * recip);
                        }
                        continue;
                    }
                    for (c = 0; c < c_n; ++c) {
                        row[c] = pe_normalise_value(g[c] * recip, shift);
                    }
                    for (iy = y0 < 0 ? 0 : y0; iy < y0 + filter_dims->h && iy < in_h; ++iy) {
                        for (ix = x0 < 0 ? 0 : x0; ix < x0 + filter_dims->w && ix < in_w;
                             ++ix) {
                            memcpy(dx + ((n * in_h + iy) * in_w + ix) * c_n, row, (size_t)c_n);
                        }
                    }
                }
            }
        }
        shift = pe_normalise_shift(pe_range_max_abs(&range));
    }
    *dx_exp = *dy_exp - params->recip_bits + shift;
}

/* pe_bias_grad_s8_arm - pe_bias_grad_s8 (db[c] = sum over rows of dy[row, c], int32, the
 * exponent of dy) four channels a step: SXTB16 pairs (c, c+2), (c+1, c+3) added with SADD16
 * into int16 lanes over at most 256 rows (|sum| <= 256 * 128 = 2^15 fits: -32768 at worst),
 * then widened into the int32 sums. */
void pe_bias_grad_s8_arm(int32_t num_rows, int32_t row_size, const int8_t *dy,
                         const int32_t *dy_exp, int32_t *db, int32_t *db_exp)
{
    int32_t c, n, n0;
    for (c = 0; c + 4 <= row_size; c += 4) {
        int32_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
        for (n0 = 0; n0 < num_rows; n0 += 256) {
            const int32_t end = num_rows - n0 < 256 ? num_rows : n0 + 256;
            const int8_t *p = dy + n0 * row_size + c;
            uint32_t s02 = 0, s13 = 0;
            for (n = n0; n < end; ++n, p += row_size) {
                const uint32_t u = pe_arm_ld32(p);
                s02 = pe_arm_sadd16(s02, pe_arm_sxtb16(u));
                s13 = pe_arm_sadd16(s13, pe_arm_sxtb16_ror8(u));
            }
            t0 += pe_arm_lo16(s02);
            t2 += pe_arm_hi16(s02);
            t1 += pe_arm_lo16(s13);
            t3 += pe_arm_hi16(s13);
        }
        db[c] = t0;
        db[c + 1] = t1;
        db[c + 2] = t2;
        db[c + 3] = t3;
    }
    for (; c < row_size; ++c) {
        int32_t acc = 0;
        for (n = 0; n < num_rows; ++n) {
            acc += dy[n * row_size + c];
        }
        db[c] = acc;
    }
    *db_exp = *dy_exp;
}
