/*
 * pe_libc.c - the few C library functions compilers call on their own (struct copies,
 * zero-initialisation, loop idioms): memcpy, memmove, memset, memcmp, strlen. For bare-metal and
 * Hexagon builds only (host builds use the system C library).
 *
 * Loop-idiom recognition is turned off for these bodies, or the compiler would turn the
 * loops back into calls to themselves. Word-at-a-time copies when both pointers share
 * alignment, or on cores that load and store words at any address (__ARM_FEATURE_UNALIGNED:
 * Cortex-M3 and up; CMSIS-NN's im2col copies rows of a few channels, rarely aligned); byte
 * loops otherwise.
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
#if defined(__ARM_FEATURE_UNALIGNED)
typedef uint32_t __attribute__((may_alias, aligned(1))) pe_uword;   /* any address */
typedef uint16_t __attribute__((may_alias, aligned(1))) pe_uhalf;
#define PE_ANY_ALIGNMENT 1
typedef pe_uword pe_set_word;
#else
#define PE_ANY_ALIGNMENT 0
typedef pe_word pe_set_word;
#endif

PE_NO_LOOP_IDIOM void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
#if PE_ANY_ALIGNMENT
    /* Branch order for CMSIS-NN's im2col: rows of 16+ bytes first, then one to three bytes. */
    if (n >= 16u) {
        size_t k = n >> 4;
        do {
            const uint32_t w0 = ((const pe_uword *)(const void *)s)[0];
            const uint32_t w1 = ((const pe_uword *)(const void *)s)[1];
            const uint32_t w2 = ((const pe_uword *)(const void *)s)[2];
            const uint32_t w3 = ((const pe_uword *)(const void *)s)[3];
            ((pe_uword *)(void *)d)[0] = w0;
            ((pe_uword *)(void *)d)[1] = w1;
            ((pe_uword *)(void *)d)[2] = w2;
            ((pe_uword *)(void *)d)[3] = w3;
            d += 16;
            s += 16;
        } while (--k != 0u);
        n &= 15u;
        if (n == 0u) {
            return dst;
        }
    }
    while (n >= 4u) {
        *(pe_uword *)(void *)d = *(const pe_uword *)(const void *)s;
        d += 4;
        s += 4;
        n -= 4u;
    }
    if (n >= 2u) {
        *(pe_uhalf *)(void *)d = *(const pe_uhalf *)(const void *)s;
        d += 2;
        s += 2;
        n -= 2u;
    }
    if (n != 0u) {
        *d = *s;
    }
    return dst;
#else
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
#endif
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
#if !PE_ANY_ALIGNMENT
    while (n > 0u && ((uintptr_t)d & 3u) != 0u) {
        *d++ = b;
        n--;
    }
#endif
    if (n >= 16u) {
        size_t k = n >> 4;
        do {
            pe_set_word *dw = (pe_set_word *)(void *)d;
            dw[0] = w;
            dw[1] = w;
            dw[2] = w;
            dw[3] = w;
            d += 16;
        } while (--k != 0u);
        n &= 15u;
        if (n == 0u) {
            return dst;
        }
    }
    while (n >= 4u) {
        *(pe_set_word *)(void *)d = w;
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
