/*
 * console/host_stdio.c - the runtime on a host build: stdout through the C library, exit(),
 * no stack measurement (the operating system owns the stack).
 */
#include <stdio.h>
#include <stdlib.h>

#include "pe_runtime.h"

void pe_console_init(void)
{
}

void pe_console_write(const char *s, size_t n)
{
    (void)fwrite(s, 1, n, stdout);
}

void pe_platform_exit(int status)
{
    (void)fflush(stdout);
    exit(status);
}

size_t pe_stack_size(void)
{
    return 0;
}

size_t pe_stack_used(void)
{
    return 0;
}
