/*
 * pe_libc.c - the few C library functions compilers call on their own (struct copies,
 * zero-initialisation, loop idioms): memcpy, memmove, memset, memcmp, strlen. For bare-metal and
 * Hexagon builds only (host builds use the system C library).
 *
 * Loop-idiom recognition is turned off for these bodies, or the compiler would turn the
 * loops back into calls to themselves. Word-at-a-time copies when both pointers share
 * alignment; byte loops otherwise.
 */
#include <stddef.h>
#include <stdint.h>

#if defined(__clang__)
#define PE_NO_LOOP_IDIOM __attribute__((no_builtin, used))
#elif defined(__GNUC__)
#define PE_NO_LOOP_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns"), used))
#else
#define PE_NO_LOOP_IDIOM
#endif

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);

typedef uint32_t __attribute__((may_alias)) pe_word;

PE_NO_LOOP_IDIOM void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if ((((uintptr_t)d ^ (uintptr_t)s) & 3u) == 0u) {
        while (n > 0u && ((uintptr_t)d & 3u) != 0u) {
            *d++ = *s++;
            n--;
        }
        while (n >= 16u) {
            pe_word *dw = (pe_word *)(void *)d;
            const pe_word *sw = (const pe_word *)(const void *)s;
            dw[0] = sw[0];
            dw[1] = sw[1];
            dw[2] = sw[2];
            dw[3] = sw[3];
            d += 16;
            s += 16;
            n -= 16u;
        }
        while (n >= 4u) {
            *(pe_word *)(void *)d = *(const pe_word *)(const void *)s;
            d += 4;
            s += 4;
            n -= 4u;
        }
    }
    while (n > 0u) {
        *d++ = *s++;
        n--;
    }
    return dst;
}

PE_NO_LOOP_IDIOM void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (d == s || n == 0u) {
        return dst;
    }
    if ((uintptr_t)d < (uintptr_t)s || (uintptr_t)d >= (uintptr_t)s + n) {
        return memcpy(dst, src, n); /* no harmful overlap going forward */
    }
    d += n;
    s += n;
    while (n > 0u) {
        *--d = *--s;
        n--;
    }
    return dst;
}

PE_NO_LOOP_IDIOM void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char b = (unsigned char)c;
    const uint32_t w = (uint32_t)b * 0x01010101u;
    while (n > 0u && ((uintptr_t)d & 3u) != 0u) {
        *d++ = b;
        n--;
    }
    while (n >= 16u) {
        pe_word *dw = (pe_word *)(void *)d;
        dw[0] = w;
        dw[1] = w;
        dw[2] = w;
        dw[3] = w;
        d += 16;
        n -= 16u;
    }
    while (n >= 4u) {
        *(pe_word *)(void *)d = w;
        d += 4;
        n -= 4u;
    }
    while (n > 0u) {
        *d++ = b;
        n--;
    }
    return dst;
}

PE_NO_LOOP_IDIOM int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *x = (const unsigned char *)a;
    const unsigned char *y = (const unsigned char *)b;
    size_t i;
    for (i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

PE_NO_LOOP_IDIOM size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}
