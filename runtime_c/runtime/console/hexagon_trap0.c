/*
 * console/hexagon_trap0.c - console and exit through Linux system calls (qemu-hexagon user
 * mode): trap0(#1) with the call number in r6, arguments in r0..r5, result in r0.
 * write = 64, exit = 93 (the program has one thread, so exit ends the process).
 */
#include "pe_runtime.h"

#define PE_NR_WRITE 64
#define PE_NR_EXIT 93

static long pe_syscall3(long nr, long a0, long a1, long a2)
{
    register long r0 __asm__("r0") = a0;
    register long r1 __asm__("r1") = a1;
    register long r2 __asm__("r2") = a2;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

void pe_console_init(void)
{
}

void pe_console_write(const char *s, size_t n)
{
    while (n > 0u) {
        long done = pe_syscall3(PE_NR_WRITE, 1, (long)(uintptr_t)s, (long)n);
        if (done <= 0) {
            return;
        }
        s += done;
        n -= (size_t)done;
    }
}

void pe_platform_exit(int status)
{
    (void)pe_syscall3(PE_NR_EXIT, status, 0, 0);
    for (;;) {
    }
}
