/*
 * pe_startup_cortex_m.c - vector table, reset handler and fault handlers for Cortex-M
 * (ARMv6-M, v7-M, v7E-M, v8-M, v8.1-M; Secure state on TrustZone parts).
 *
 * Reset: enable the FPU / MVE (CPACR CP10+CP11) when the build uses them, set MSPLIM on
 * ARMv8-M Mainline (hardware stack-overflow check), enable the MemManage / BusFault /
 * UsageFault exceptions (v7-M and up), copy .data from flash, zero .bss, paint the unused
 * stack, bring up the console, run main() and pe_exit() with its result.
 *
 * The linker script (templates/startup/linker_cortex_m.ld.j2, rendered from the board's
 * memory map) provides the __pe_* symbols used here; the initial stack pointer is the top of
 * the .stack section, so the stack has a fixed size checked at link time.
 *
 * Faults print "@pe:fault <exception> cfsr=... hfsr=... pc=... bfar=..." and exit with
 * PE_EXIT_FAULT (99).
 */
#include <stddef.h>
#include <stdint.h>

#include "pe_runtime.h"

extern uint32_t __pe_data_load[];
extern uint32_t __pe_data_start[];
extern uint32_t __pe_data_end[];
extern uint32_t __pe_bss_start[];
extern uint32_t __pe_bss_end[];
extern uint32_t __pe_stack_limit[];
extern uint32_t __pe_stack_top[];

int main(void);

void pe_reset_handler(void);
void pe_fault_handler(void);
void pe_fault_report(const uint32_t *frame, uint32_t ipsr);

#define PE_STACK_PAINT 0xC0DEFACEu

/* an empty writable NOBITS input section: gives the linker script's .stack its flags */
__asm__(".section .pe_stack, \"aw\", %nobits\n\t.p2align 3\n\t.previous");

#define PE_SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define PE_SCB_SHCSR (*(volatile uint32_t *)0xE000ED24u)
#define PE_SCB_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define PE_SCB_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define PE_SCB_BFAR (*(volatile uint32_t *)0xE000ED38u)

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
#define PE_HAS_MSPLIM 1
#endif
#if !defined(__ARM_ARCH_6M__) && !defined(__ARM_ARCH_8M_BASE__)
#define PE_HAS_CFSR 1
#endif

/* A vector is a handler address, except entry 0, the initial stack pointer. */
typedef union {
    void (*handler)(void);
    const void *stack_top;
} pe_vector;

__attribute__((section(".isr_vector"), used)) const pe_vector pe_vectors[16] = {
    {.stack_top = __pe_stack_top},
    {.handler = pe_reset_handler},
    {.handler = pe_fault_handler}, /* NMI */
    {.handler = pe_fault_handler}, /* HardFault */
    {.handler = pe_fault_handler}, /* MemManage */
    {.handler = pe_fault_handler}, /* BusFault */
    {.handler = pe_fault_handler}, /* UsageFault (also v8-M stack-limit violations) */
    {.handler = pe_fault_handler}, /* SecureFault (v8-M) */
    {.handler = 0},
    {.handler = 0},
    {.handler = 0},
    {.handler = pe_fault_handler}, /* SVCall */
    {.handler = pe_fault_handler}, /* DebugMonitor */
    {.handler = 0},
    {.handler = pe_fault_handler}, /* PendSV */
    {.handler = pe_fault_handler}, /* SysTick */
};

size_t pe_stack_size(void)
{
    return (size_t)((uintptr_t)__pe_stack_top - (uintptr_t)__pe_stack_limit);
}

size_t pe_stack_used(void)
{
    const volatile uint32_t *p = __pe_stack_limit;
    while (p < __pe_stack_top && *p == PE_STACK_PAINT) {
        p++;
    }
    return (size_t)((uintptr_t)__pe_stack_top - (uintptr_t)p);
}

__attribute__((noreturn, used)) void pe_reset_handler(void)
{
    uint32_t *src;
    uint32_t *dst;
    uint32_t *sp;

#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* full access to CP10/CP11 (FPU and Helium) before any floating-point instruction */
    PE_SCB_CPACR = PE_SCB_CPACR | (0xFu << 20);
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
#ifdef PE_HAS_MSPLIM
    __asm__ volatile("msr msplim, %0" : : "r"(__pe_stack_limit));
#endif
#ifdef PE_HAS_CFSR
    /* report MemManage, BusFault and UsageFault as themselves, not as HardFault */
    PE_SCB_SHCSR = PE_SCB_SHCSR | (7u << 16);
#endif

    for (src = __pe_data_load, dst = __pe_data_start; dst < __pe_data_end;) {
        *dst++ = *src++;
    }
    for (dst = __pe_bss_start; dst < __pe_bss_end;) {
        *dst++ = 0u;
    }
    /* paint the stack below the current frame (16 words of margin) */
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (dst = __pe_stack_limit; dst < sp - 16; dst++) {
        *(volatile uint32_t *)dst = PE_STACK_PAINT;
    }

    pe_console_init();
    pe_exit(main());
}

/* Entry of every fault: pass the exception frame and IPSR to pe_fault_report on a fresh
 * stack (the old one may have overflowed; this handler never returns). */
__attribute__((naked, used)) void pe_fault_handler(void)
{
    __asm__ volatile(
        "mrs r0, msp\n\t"
        "mrs r1, ipsr\n\t"
        "ldr r2, =__pe_stack_top\n\t"
        "mov sp, r2\n\t"
        "b pe_fault_report\n\t"
        ".ltorg\n\t");
}

__attribute__((noreturn, used)) void pe_fault_report(const uint32_t *frame, uint32_t ipsr)
{
    static const char *const names[16] = {
        "thread", "reset", "nmi", "hardfault", "memmanage", "busfault", "usagefault",
        "securefault", "reserved", "reserved", "reserved", "svc", "debugmon", "reserved",
        "pendsv", "systick"};
    uint32_t exc = ipsr & 0x1FFu;
    uint32_t pc = 0u;
    uint32_t cfsr = 0u;
    uint32_t hfsr = 0u;
    uint32_t bfar = 0u;
    /* the frame is readable only if it lies inside the stack */
    if ((uintptr_t)frame >= (uintptr_t)__pe_stack_limit
        && (uintptr_t)frame + 32u <= (uintptr_t)__pe_stack_top) {
        pc = frame[6];
    }
#ifdef PE_HAS_CFSR
    cfsr = PE_SCB_CFSR;
    hfsr = PE_SCB_HFSR;
    bfar = PE_SCB_BFAR;
#endif
    pe_printf("@pe:fault %s cfsr=0x%08lx hfsr=0x%08lx pc=0x%08lx bfar=0x%08lx\n",
              exc < 16u ? names[exc] : "irq", (unsigned long)cfsr, (unsigned long)hfsr,
              (unsigned long)pc, (unsigned long)bfar);
    pe_exit(PE_EXIT_FAULT);
}
