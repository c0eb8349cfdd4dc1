/*
 * console/semihosting.c - console and exit over Arm semihosting (BKPT 0xAB on M-profile).
 *
 * QEMU: -semihosting-config enable=on,target=native (codegen/targets routes the output to
 * stdout through a chardev). On hardware this needs a debugger attached; without one BKPT
 * escalates to HardFault, so boards meant to run detached use a UART console instead.
 *
 * SYS_WRITE0 (0x04) writes a NUL-terminated string: output is chunked through a small stack
 * buffer (NUL bytes in the data end a chunk early: text only). SYS_EXIT_EXTENDED (0x20) with
 * ADP_Stopped_ApplicationExit carries the full exit status to the host.
 */
#include "pe_runtime.h"

#define PE_SYS_WRITE0 0x04
#define PE_SYS_EXIT 0x18
#define PE_SYS_EXIT_EXTENDED 0x20
#define PE_ADP_STOPPED_APPLICATION_EXIT 0x20026

static int semihost_call(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void pe_console_init(void)
{
}

void pe_console_write(const char *s, size_t n)
{
    char chunk[65];
    while (n > 0u) {
        size_t k = n < sizeof(chunk) - 1u ? n : sizeof(chunk) - 1u;
        size_t i;
        for (i = 0; i < k; i++) {
            chunk[i] = s[i];
        }
        chunk[k] = '\0';
        (void)semihost_call(PE_SYS_WRITE0, chunk);
        s += k;
        n -= k;
    }
}

void pe_platform_exit(int status)
{
    uint32_t block[2];
    block[0] = PE_ADP_STOPPED_APPLICATION_EXIT;
    block[1] = (uint32_t)status;
    (void)semihost_call(PE_SYS_EXIT_EXTENDED, block);
    /* a host without the extended call: plain SYS_EXIT (status 0 or 1 only) */
    (void)semihost_call(PE_SYS_EXIT, (const void *)(uintptr_t)(status == 0
        ? PE_ADP_STOPPED_APPLICATION_EXIT : 0x20024 /* ADP_Stopped_RunTimeErrorUnknown */));
    for (;;) {
    }
}
