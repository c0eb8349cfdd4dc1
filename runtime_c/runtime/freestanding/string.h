/*
 * string.h - the memory functions of the C library for builds without one (Hexagon:
 * -nostdlibinc). Implemented by runtime_c/runtime/pe_libc.c. Only on the include path of
 * freestanding builds; elsewhere the toolchain's own <string.h> is used.
 */
#ifndef PE_FREESTANDING_STRING_H
#define PE_FREESTANDING_STRING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);

#ifdef __cplusplus
}
#endif

#endif /* PE_FREESTANDING_STRING_H */
