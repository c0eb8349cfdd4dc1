/*
 * kernel_checksum.c - test firmware: runs portable kernels (runtime_c/kernels/ref) on fixed
 * pseudo-random data, prints one FNV-1a checksum per kernel, and exercises the arithmetic the
 * compiler may hand to runtime helpers (integer and float division, 64-bit division, double
 * multiply). The same lines must come out of every board and the host build. Each kernel runs
 * inside its own profiling phase (PE_PROF_USER + k), all of them inside PE_PROF_FORWARD.
 */
#include <stdint.h>

#include "pe_kernels.h"
#include "pe_profile.h"
#include "pe_runtime.h"

static uint32_t lcg_state = 12345u;

static uint32_t lcg(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

static int8_t rand_s8(void)
{
    return (int8_t)((int32_t)(lcg() & 0xFFu) - 128);
}

static float rand_f32(void)
{
    /* in [-1, 1): exact in float32 */
    return (float)((int32_t)(lcg() & 0xFFFFu) - 32768) / 32768.0f;
}

static uint32_t fnv1a(uint32_t h, const void *data, uint32_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t i;
    for (i = 0; i < n; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

#define FNV_INIT 2166136261u

static void report(const char *name, uint32_t h)
{
    pe_printf("%s %08lx\n", name, (unsigned long)h);
}

/* shapes: an 8x8x4 image, 8 output channels */
#define H 8
#define W 8
#define C 4
#define OC 8

static int8_t in_s8[H * W * C];
static int8_t filt_s8[OC * 3 * 3 * C];
static int8_t dw_filt_s8[3 * 3 * C * 2];
static int32_t bias_s32[OC];
static int32_t mult[OC];
static int32_t shift[OC];
static int8_t out_s8[H * W * OC];
static int8_t fc_w_s8[10 * H * W * C];
static int8_t fc_out_s8[10];
static int8_t sm_out_s8[4 * 10];
static int8_t add_in_s8[H * W * C];
static int8_t add_out_s8[H * W * C];

static float in_f32[H * W * C];
static float filt_f32[OC * 3 * 3 * C];
static float bias_f32[OC];
static float fc_bias_f32[10];
static float out_f32[H * W * OC];
static float fc_w_f32[10 * H * W * C];
static float fc_out_f32[10];
static float sm_out_f32[10];

static void fill(void)
{
    uint32_t i;
    for (i = 0; i < sizeof(in_s8); i++) in_s8[i] = rand_s8();
    for (i = 0; i < sizeof(filt_s8); i++) filt_s8[i] = rand_s8();
    for (i = 0; i < sizeof(dw_filt_s8); i++) dw_filt_s8[i] = rand_s8();
    for (i = 0; i < sizeof(fc_w_s8); i++) fc_w_s8[i] = rand_s8();
    for (i = 0; i < sizeof(add_in_s8); i++) add_in_s8[i] = rand_s8();
    for (i = 0; i < OC; i++) {
        bias_s32[i] = (int32_t)(lcg() & 0x3FFFu) - 8192;
        mult[i] = 1073741824 + (int32_t)(lcg() & 0x3FFFFFFFu);
        shift[i] = -8 - (int32_t)(i & 3u);
    }
    for (i = 0; i < H * W * C; i++) in_f32[i] = rand_f32();
    for (i = 0; i < OC * 3 * 3 * C; i++) filt_f32[i] = rand_f32();
    for (i = 0; i < OC; i++) bias_f32[i] = rand_f32();
    for (i = 0; i < 10; i++) fc_bias_f32[i] = rand_f32();
    for (i = 0; i < 10 * H * W * C; i++) fc_w_f32[i] = rand_f32();
}

static void run_int8(void)
{
    const pe_dims in_dims = {1, H, W, C};
    const pe_dims filt_dims = {OC, 3, 3, C};
    const pe_dims out_dims = {1, H, W, OC};
    const pe_per_channel_quant quant = {mult, shift};
    const pe_conv_params conv = {3, -5, {1, 1}, {1, 1}, {1, 1}, {-128, 127}};
    const pe_dw_conv_params dw = {3, -5, 2, {1, 1}, {1, 1}, {1, 1}, {-128, 127}};
    const pe_dims dw_filt_dims = {1, 3, 3, C * 2};
    const pe_dims dw_out_dims = {1, H, W, C * 2};
    const pe_dims fc_in_dims = {1, 1, 1, H * W * C};
    const pe_dims fc_filt_dims = {10, 1, 1, H * W * C};
    const pe_dims fc_out_dims = {1, 1, 1, 10};
    const pe_fc_params fc = {7, 0, -3, {-128, 127}};
    const pe_per_tensor_quant fc_quant = {1518500250, -9};
    const pe_pool_params pool = {{2, 2}, {0, 0}, {-128, 127}};
    const pe_dims pool_filt = {1, 2, 2, 1};
    const pe_dims pool_out = {1, H / 2, W / 2, C};
    const pe_softmax_params sm = {1717986918, 23, -248};
    const pe_add_params add = {3, 1073741824, -1, -7, 1518500250, -1, 20, -2, 1431655765,
                               -19, {-128, 127}};

    pe_prof_begin(PE_PROF_USER + 0);
    pe_conv2d_s8(0, &conv, &quant, &in_dims, in_s8, &filt_dims, filt_s8, bias_s32, &out_dims,
                 out_s8);
    pe_prof_end(PE_PROF_USER + 0);
    report("conv2d_s8", fnv1a(FNV_INIT, out_s8, sizeof(out_s8)));

    pe_prof_begin(PE_PROF_USER + 1);
    pe_depthwise_conv2d_s8(0, &dw, &quant, &in_dims, in_s8, &dw_filt_dims, dw_filt_s8,
                           bias_s32, &dw_out_dims, out_s8);
    pe_prof_end(PE_PROF_USER + 1);
    report("depthwise_conv2d_s8", fnv1a(FNV_INIT, out_s8, H * W * C * 2));

    pe_prof_begin(PE_PROF_USER + 2);
    pe_fully_connected_s8(0, &fc, &fc_quant, &fc_in_dims, in_s8, &fc_filt_dims, fc_w_s8, 0,
                          &fc_out_dims, fc_out_s8);
    pe_prof_end(PE_PROF_USER + 2);
    report("fully_connected_s8", fnv1a(FNV_INIT, fc_out_s8, sizeof(fc_out_s8)));

    pe_prof_begin(PE_PROF_USER + 3);
    pe_avg_pool2d_s8(0, &pool, &in_dims, in_s8, &pool_filt, &pool_out, out_s8);
    pe_prof_end(PE_PROF_USER + 3);
    report("avg_pool2d_s8", fnv1a(FNV_INIT, out_s8, H / 2 * W / 2 * C));

    pe_prof_begin(PE_PROF_USER + 4);
    pe_softmax_s8(&sm, 4, 10, in_s8, sm_out_s8);
    pe_prof_end(PE_PROF_USER + 4);
    report("softmax_s8", fnv1a(FNV_INIT, sm_out_s8, sizeof(sm_out_s8)));

    pe_prof_begin(PE_PROF_USER + 5);
    pe_add_s8(&add, &in_dims, in_s8, &in_dims, add_in_s8, &in_dims, add_out_s8);
    pe_prof_end(PE_PROF_USER + 5);
    report("add_s8", fnv1a(FNV_INIT, add_out_s8, sizeof(add_out_s8)));
}

static void run_f32(void)
{
    const pe_dims in_dims = {1, H, W, C};
    const pe_dims filt_dims = {OC, 3, 3, C};
    const pe_dims out_dims = {1, H, W, OC};
    const pe_conv_params_f32 conv = {{1, 1}, {1, 1}, {1, 1}, {0.0f, 6.0f}};
    const pe_dims fc_in_dims = {1, 1, 1, H * W * C};
    const pe_dims fc_filt_dims = {10, 1, 1, H * W * C};
    const pe_dims fc_out_dims = {1, 1, 1, 10};
    const pe_fc_params_f32 fc = {{-1000.0f, 1000.0f}};
    const pe_softmax_params_f32 sm = {1.0f};

    pe_prof_begin(PE_PROF_USER + 6);
    pe_conv2d_f32(0, &conv, &in_dims, in_f32, &filt_dims, filt_f32, bias_f32, &out_dims,
                  out_f32);
    pe_prof_end(PE_PROF_USER + 6);
    report("conv2d_f32", fnv1a(FNV_INIT, out_f32, sizeof(out_f32)));

    pe_prof_begin(PE_PROF_USER + 7);
    pe_fully_connected_f32(0, &fc, &fc_in_dims, in_f32, &fc_filt_dims, fc_w_f32, fc_bias_f32,
                           &fc_out_dims, fc_out_f32);
    pe_prof_end(PE_PROF_USER + 7);
    report("fully_connected_f32", fnv1a(FNV_INIT, fc_out_f32, sizeof(fc_out_f32)));

    pe_prof_begin(PE_PROF_USER + 8);
    pe_softmax_f32(&sm, 1, 10, fc_out_f32, sm_out_f32);
    pe_prof_end(PE_PROF_USER + 8);
    report("softmax_f32", fnv1a(FNV_INIT, sm_out_f32, sizeof(sm_out_f32)));
}

/* arithmetic that becomes runtime-helper calls on some targets */
static void run_arith(void)
{
    uint32_t h_int = FNV_INIT;
    uint32_t h_flt = FNV_INIT;
    uint32_t i;
    pe_prof_begin(PE_PROF_USER + 9);
    for (i = 0; i < 256u; i++) {
        int32_t a = (int32_t)lcg() - 4194304;
        int32_t b = (int32_t)(lcg() & 0xFFFu) - 2048;
        uint32_t ua = lcg() * 977u;
        uint32_t ub = (lcg() & 0xFFFFu) + 1u;
        int64_t la = (int64_t)a * 1048576 + (int64_t)ua;
        int64_t lb = (int64_t)b * 1000 + 7;
        uint64_t ula = ((uint64_t)ua << 32) | lcg();
        uint64_t ulb = ((uint64_t)ub << 12) | 1u;
        int32_t r32[4];
        int64_t r64[4];
        float x = rand_f32() * 1000.0f;
        float y = rand_f32() + 1.5f;
        double dx = (double)x * 3.0;
        double dy = (double)y - 0.25;
        float fr[2];
        double dr[2];
        if (b == 0) {
            b = 1;
        }
        r32[0] = a / b;
        r32[1] = a % b;
        r32[2] = (int32_t)(ua / ub);
        r32[3] = (int32_t)(ua % ub);
        r64[0] = la / lb;
        r64[1] = la % lb;
        r64[2] = (int64_t)(ula / ulb);
        r64[3] = (int64_t)(ula % ulb);
        h_int = fnv1a(h_int, r32, sizeof(r32));
        h_int = fnv1a(h_int, r64, sizeof(r64));
        fr[0] = x / y;
        fr[1] = y / x;
        dr[0] = dx / dy;
        dr[1] = dx * dy;
        h_flt = fnv1a(h_flt, fr, sizeof(fr));
        h_flt = fnv1a(h_flt, dr, sizeof(dr));
    }
    pe_prof_end(PE_PROF_USER + 9);
    report("integer_division", h_int);
    report("float_division", h_flt);
}

int main(void)
{
    fill();
    pe_prof_begin(PE_PROF_FORWARD);
    run_int8();
    run_f32();
    pe_prof_end(PE_PROF_FORWARD);
    run_arith();
    return 0;
}
