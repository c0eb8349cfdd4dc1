/*
 * stack_use.c - a known amount of stack: a non-inlined function keeps a 3000-byte array on
 * the stack and touches all of it; the painted-stack measurement must see at least that.
 * With -DPE_OVERFLOW it asks for more than the whole stack (a fault on cores with MSPLIM).
 */
#include <stdint.h>

#include "pe_runtime.h"

#ifdef PE_OVERFLOW
#define BYTES 65536u
#else
#define BYTES 3000u
#endif

__attribute__((noinline)) static uint32_t deep(uint32_t seed)
{
    volatile uint8_t buf[BYTES];
    uint32_t i, sum = 0;
    for (i = 0; i < BYTES; i++) {
        buf[i] = (uint8_t)(seed + i);
    }
    for (i = 0; i < BYTES; i += 7u) {
        sum += buf[i];
    }
    return sum;
}

int main(void)
{
    pe_printf("sum %lu stack %lu\n", (unsigned long)deep(3u), (unsigned long)pe_stack_size());
    return 0;
}
