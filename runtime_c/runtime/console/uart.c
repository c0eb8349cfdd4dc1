/*
 * console/uart.c - the console on the board's UART (uart/pe_uart.h; one driver per build).
 *
 * Exit: on hardware there is nobody to return to, so after the "@pe:exit" line the core waits
 * for interrupts forever (a host watching the UART reads the status from that line). Under
 * QEMU (PE_UART_EXIT_SEMIHOSTING, set by codegen/targets for qemu boards) the status is also
 * handed to the emulator through semihosting, so the run ends with it.
 */
#include "pe_runtime.h"
#include "pe_uart.h"

void pe_console_init(void)
{
    pe_uart_init();
}

void pe_console_write(const char *s, size_t n)
{
    pe_uart_write((const uint8_t *)s, n);
}

void pe_platform_exit(int status)
{
#ifdef PE_UART_EXIT_SEMIHOSTING
    uint32_t block[2];
    register int r0 __asm__("r0") = 0x20; /* SYS_EXIT_EXTENDED */
    register const void *r1 __asm__("r1") = block;
    block[0] = 0x20026u; /* ADP_Stopped_ApplicationExit */
    block[1] = (uint32_t)status;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
#else
    (void)status;
#endif
    for (;;) {
#if defined(__arm__) || defined(__thumb__)
        __asm__ volatile("wfi");
#endif
    }
}
