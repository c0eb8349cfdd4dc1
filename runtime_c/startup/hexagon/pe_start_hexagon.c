/*
 * pe_start_hexagon.c - C entry for Hexagon firmware: paint the stack, run main(), exit.
 * (Segments are mapped by the loader: no .data copy, .bss is already zero.)
 */
#include <stddef.h>
#include <stdint.h>

#include "pe_runtime.h"

extern uint32_t __pe_stack_limit[];
extern uint32_t __pe_stack_top[];

int main(void);
void pe_hexagon_start(void);

#define PE_STACK_PAINT 0xC0DEFACEu

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

__attribute__((noreturn)) void pe_hexagon_start(void)
{
    uint32_t *dst;
    uint32_t *sp;
    __asm__ volatile("%0 = r29" : "=r"(sp));
    for (dst = __pe_stack_limit; dst < sp - 16; dst++) {
        *(volatile uint32_t *)dst = PE_STACK_PAINT;
    }
    pe_console_init();
    pe_exit(main());
}
