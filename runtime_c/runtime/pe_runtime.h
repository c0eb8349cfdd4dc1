/*
 * pe_runtime.h - the board runtime of pockengine firmware: console, exit status, stack use.
 *
 * One interface on every board; the implementation is chosen by which files are compiled in
 * (codegen/targets picks them from the board file):
 *
 *   console/semihosting.c    Arm semihosting (QEMU mps2/mps3/netduino, a debugger on hardware)
 *   console/uart.c           the board's UART (uart/pe_uart.h: CMSDK UART, STM32 USART,
 *                            nRF52 UARTE drivers)
 *   console/hexagon_trap0.c  Linux syscalls through trap0 (qemu-hexagon user mode)
 *   console/host_stdio.c     the C library (host builds)
 *
 * plus pe_runtime.c (formatting, exit protocol) and one startup file
 * (runtime_c/startup/<arch>/).
 *
 * Exit protocol: pe_exit(status) prints the line
 *     @pe:exit <status> stack=<bytes>
 * then stops the program: the emulator's exit status on semihosting and trap0 consoles, an
 * endless wait-for-interrupt on UART consoles (a host watching the UART reads the status from
 * the line). Returning from main() is pe_exit(return value).
 *
 * No malloc, no libc stdio on the device: pe_printf understands %d %i %u %x %X %c %s %p %%
 * with the '0' and '-' flags, a width and the 'l' length modifier. Print floats as their bits
 * (%08lx of a uint32_t), which is exact.
 */
#ifndef PE_RUNTIME_H
#define PE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PE_NORETURN __attribute__((noreturn))
#define PE_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PE_NORETURN
#define PE_PRINTF_LIKE(f, a)
#endif

/* Exit statuses the runtime itself uses. */
#define PE_EXIT_OK 0
#define PE_EXIT_FAILURE 1
#define PE_EXIT_FAULT 99 /* CPU fault (HardFault, BusFault, stack overflow...) */

/* Bring up the console (clocks, pins, baud rate). Called by the startup code before main. */
void pe_console_init(void);

/* Write n bytes to the console. Blocking, unbuffered. */
void pe_console_write(const char *s, size_t n);

/* Write a NUL-terminated string (no newline is added). */
void pe_puts(const char *s);

/* Formatted output, see the subset above. */
void pe_printf(const char *fmt, ...) PE_PRINTF_LIKE(1, 2);

/* Print the exit line and stop. */
PE_NORETURN void pe_exit(int status);

/* Stop without printing (the console's own exit: semihosting, trap0, exit(), or a wait loop). */
PE_NORETURN void pe_platform_exit(int status);

/* Stack: bytes reserved for the stack, and the high-water mark of its use since reset
 * (measured by painting the stack at reset and finding the deepest overwritten word).
 * Both are 0 where the runtime does not own the stack (host builds). */
size_t pe_stack_size(void);
size_t pe_stack_used(void);

#ifdef __cplusplus
}
#endif

#endif /* PE_RUNTIME_H */
