/*
 * libc_check.c - memcpy / memmove / memset / memcmp / strlen of runtime_c/runtime/pe_libc.c
 * against byte-by-byte references, for every length 0..70 and every source / destination
 * misalignment 0..7, overlapping moves in both directions. Prints "libc <cases> <errors>";
 * exit status 0 when all agree.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pe_runtime.h"

#define SPAN 96

static unsigned char buf_a[SPAN + 16];
static unsigned char buf_b[SPAN + 16];
static unsigned char ref[SPAN + 16];

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++) {
        p[i] = (unsigned char)((i * 37u + seed * 11u + 5u) & 0xFFu);
    }
}

static int same(const unsigned char *x, const unsigned char *y, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    unsigned long cases = 0, errors = 0;
    size_t len, so, d;
    for (len = 0; len <= 70; len++) {
        for (so = 0; so < 8; so++) {
            for (d = 0; d < 8; d++) {
                size_t i;
                /* memcpy */
                fill(buf_a, sizeof(buf_a), 1);
                fill(buf_b, sizeof(buf_b), 2);
                fill(ref, sizeof(ref), 2);
                for (i = 0; i < len; i++) {
                    ref[d + i] = buf_a[so + i];
                }
                if (memcpy(buf_b + d, buf_a + so, len) != buf_b + d
                    || !same(buf_b, ref, sizeof(ref))) {
                    errors++;
                }
                /* memset */
                fill(buf_b, sizeof(buf_b), 3);
                fill(ref, sizeof(ref), 3);
                for (i = 0; i < len; i++) {
                    ref[d + i] = (unsigned char)(0xA0u + so);
                }
                if (memset(buf_b + d, (int)(0x7A0u + so), len) != buf_b + d
                    || !same(buf_b, ref, sizeof(ref))) {
                    errors++;
                }
                /* memmove within one buffer, both directions (d and so are the offsets) */
                fill(buf_b, sizeof(buf_b), 4);
                fill(ref, sizeof(ref), 4);
                for (i = 0; i < len; i++) {
                    buf_a[i] = ref[so * 2 + i];
                }
                for (i = 0; i < len; i++) {
                    ref[d * 2 + 1 + i] = buf_a[i];
                }
                if (memmove(buf_b + d * 2 + 1, buf_b + so * 2, len) != buf_b + d * 2 + 1
                    || !same(buf_b, ref, sizeof(ref))) {
                    errors++;
                }
                /* memcmp: equal, then one byte different */
                fill(buf_a, sizeof(buf_a), 5);
                fill(buf_b, sizeof(buf_b), 5);
                if (memcmp(buf_a + so, buf_b + so, len) != 0) {
                    errors++;
                }
                if (len > 0) {
                    buf_b[so + len - 1] = (unsigned char)(buf_b[so + len - 1] + 1u);
                    if (memcmp(buf_a + so, buf_b + so, len) >= 0
                        || memcmp(buf_b + so, buf_a + so, len) <= 0) {
                        errors++;
                    }
                }
                cases += 5;
            }
        }
        /* strlen */
        fill(buf_a, sizeof(buf_a), 6);
        for (so = 0; so < SPAN; so++) {
            if (buf_a[so] == 0u) {
                buf_a[so] = 1u;
            }
        }
        buf_a[8 + len] = 0u;
        if (strlen((const char *)buf_a + 8) != len) {
            errors++;
        }
        cases++;
    }
    pe_printf("libc %lu %lu\n", cases, errors);
    return errors == 0u ? 0 : 1;
}
