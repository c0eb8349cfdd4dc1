/*
 * builtins_check.c - table-driven check of the Hexagon runtime helpers
 * (runtime_c/startup/hexagon/pe_builtins_hexagon.c): every case of builtins_vectors.h (written
 * by tests/targets/test_hexagon_builtins.py, expected values computed on the host) is
 * recomputed by calling the helper directly. Prints "<helper> <cases> <mismatches>" per helper
 * and the first mismatches; the exit status is the number of mismatching helpers.
 */
#include <stdint.h>

#include "builtins_vectors.h"
#include "pe_runtime.h"

int32_t __hexagon_divsi3(int32_t a, int32_t b);
uint32_t __hexagon_udivsi3(uint32_t a, uint32_t b);
int32_t __hexagon_modsi3(int32_t a, int32_t b);
uint32_t __hexagon_umodsi3(uint32_t a, uint32_t b);
int64_t __hexagon_divdi3(int64_t a, int64_t b);
uint64_t __hexagon_udivdi3(uint64_t a, uint64_t b);
int64_t __hexagon_moddi3(int64_t a, int64_t b);
uint64_t __hexagon_umoddi3(uint64_t a, uint64_t b);
float __hexagon_divsf3(float a, float b);
double __hexagon_divdf3(double a, double b);
double __hexagon_muldf3(double a, double b);
float __hexagon_sqrtf(float a);

typedef union {
    float f;
    uint32_t u;
} f32u;

typedef union {
    double f;
    uint64_t u;
} f64u;

static int failed_helpers;

static void summary(const char *name, uint32_t cases, uint32_t bad)
{
    pe_printf("%s %lu %lu\n", name, (unsigned long)cases, (unsigned long)bad);
    if (bad != 0u) {
        failed_helpers++;
    }
}

static void show64(const char *name, uint32_t i, uint64_t got, uint64_t want)
{
    pe_printf("  %s case %lu: got %08lx%08lx want %08lx%08lx\n", name, (unsigned long)i,
              (unsigned long)(got >> 32), (unsigned long)(got & 0xFFFFFFFFu),
              (unsigned long)(want >> 32), (unsigned long)(want & 0xFFFFFFFFu));
}

static int32_t s32(uint32_t u)
{
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(0xFFFFFFFFu - u) - 1;
}

static int64_t s64(uint64_t u)
{
    return u <= 0x7FFFFFFFFFFFFFFFull ? (int64_t)u : -(int64_t)(0xFFFFFFFFFFFFFFFFull - u) - 1;
}

static void check_int32(void)
{
    uint32_t i, bad[4] = {0, 0, 0, 0};
    static const char *const names[4] = {"__hexagon_divsi3", "__hexagon_modsi3",
                                         "__hexagon_udivsi3", "__hexagon_umodsi3"};
    for (i = 0; i < N_INT32; i++) {
        const uint32_t *c = int32_cases[i];
        uint32_t got[4];
        int k;
        got[0] = (uint32_t)__hexagon_divsi3(s32(c[0]), s32(c[1]));
        got[1] = (uint32_t)__hexagon_modsi3(s32(c[0]), s32(c[1]));
        got[2] = __hexagon_udivsi3(c[0], c[1]);
        got[3] = __hexagon_umodsi3(c[0], c[1]);
        for (k = 0; k < 4; k++) {
            if (got[k] != c[2 + k] && bad[k]++ < 3u) {
                show64(names[k], i, got[k], c[2 + k]);
            }
        }
    }
    for (i = 0; i < 4; i++) {
        summary(names[i], N_INT32, bad[i]);
    }
}

static void check_int64(void)
{
    uint32_t i, bad[4] = {0, 0, 0, 0};
    static const char *const names[4] = {"__hexagon_divdi3", "__hexagon_moddi3",
                                         "__hexagon_udivdi3", "__hexagon_umoddi3"};
    for (i = 0; i < N_INT64; i++) {
        const uint64_t *c = int64_cases[i];
        uint64_t got[4];
        int k;
        got[0] = (uint64_t)__hexagon_divdi3(s64(c[0]), s64(c[1]));
        got[1] = (uint64_t)__hexagon_moddi3(s64(c[0]), s64(c[1]));
        got[2] = __hexagon_udivdi3(c[0], c[1]);
        got[3] = __hexagon_umoddi3(c[0], c[1]);
        for (k = 0; k < 4; k++) {
            if (got[k] != c[2 + k] && bad[k]++ < 3u) {
                show64(names[k], i, got[k], c[2 + k]);
            }
        }
    }
    for (i = 0; i < 4; i++) {
        summary(names[i], N_INT64, bad[i]);
    }
}

static void check_float(void)
{
    uint32_t i, bad_div = 0, bad_sqrt = 0;
    for (i = 0; i < N_DIVSF; i++) {
        f32u a, b, q;
        a.u = divsf_cases[i][0];
        b.u = divsf_cases[i][1];
        q.f = __hexagon_divsf3(a.f, b.f);
        if (q.u != divsf_cases[i][2] && bad_div++ < 3u) {
            show64("__hexagon_divsf3", i, q.u, divsf_cases[i][2]);
        }
    }
    summary("__hexagon_divsf3", N_DIVSF, bad_div);
    for (i = 0; i < N_SQRTF; i++) {
        f32u a, r;
        a.u = sqrtf_cases[i][0];
        r.f = __hexagon_sqrtf(a.f);
        if (r.u != sqrtf_cases[i][1] && bad_sqrt++ < 3u) {
            show64("__hexagon_sqrtf", i, r.u, sqrtf_cases[i][1]);
        }
    }
    summary("__hexagon_sqrtf", N_SQRTF, bad_sqrt);
}

static void check_double(void)
{
    uint32_t i, bad_div = 0, bad_mul = 0;
    for (i = 0; i < N_F64; i++) {
        f64u a, b, q, p;
        a.u = f64_cases[i][0];
        b.u = f64_cases[i][1];
        q.f = __hexagon_divdf3(a.f, b.f);
        p.f = __hexagon_muldf3(a.f, b.f);
        if (q.u != f64_cases[i][2] && bad_div++ < 3u) {
            show64("__hexagon_divdf3", i, q.u, f64_cases[i][2]);
        }
        if (p.u != f64_cases[i][3] && bad_mul++ < 3u) {
            show64("__hexagon_muldf3", i, p.u, f64_cases[i][3]);
        }
    }
    summary("__hexagon_divdf3", N_F64, bad_div);
    summary("__hexagon_muldf3", N_F64, bad_mul);
}

int main(void)
{
    check_int32();
    check_int64();
    check_float();
    check_double();
    return failed_helpers;
}
