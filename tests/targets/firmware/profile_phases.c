/*
 * profile_phases.c - known work inside known phases, for the instruction-count plugin:
 * the same loop 1000 / 2000 / 3000 times (counts must grow linearly), one phase entered
 * three times (calls accumulate), one phase begun twice before it ends (only the outermost
 * pair counts), one end without a begin (reported as unbalanced), and the named phases of a
 * training step.
 */
#include <stdint.h>

#include "pe_profile.h"
#include "pe_runtime.h"

__attribute__((noinline)) static uint32_t spin(uint32_t n)
{
    volatile uint32_t x = 0;
    uint32_t i;
    for (i = 0; i < n; i++) {
        x += i;
    }
    return x;
}

/* one code path for every measured call: the counts differ only by the loop's work */
__attribute__((noinline)) static uint32_t measured(int phase, uint32_t n)
{
    uint32_t r;
    pe_prof_begin(phase);
    r = spin(n);
    pe_prof_end(phase);
    return r;
}

int main(void)
{
    uint32_t sum = 0;
    int k;
    sum += measured(PE_PROF_USER + 0, 1000);
    sum += measured(PE_PROF_USER + 1, 2000);
    sum += measured(PE_PROF_USER + 2, 3000);
    for (k = 0; k < 3; k++) {
        sum += measured(PE_PROF_USER + 3, 1000);
    }

    pe_prof_begin(PE_PROF_USER + 4);
    pe_prof_begin(PE_PROF_USER + 4);
    sum += spin(1000);
    pe_prof_end(PE_PROF_USER + 4);
    sum += spin(1000);
    pe_prof_end(PE_PROF_USER + 4);

    pe_prof_end(PE_PROF_USER + 5);

    pe_prof_begin(PE_PROF_STEP);
    pe_prof_begin(PE_PROF_FORWARD);
    sum += spin(100);
    pe_prof_end(PE_PROF_FORWARD);
    pe_prof_begin(PE_PROF_BACKWARD);
    sum += spin(200);
    pe_prof_end(PE_PROF_BACKWARD);
    pe_prof_begin(PE_PROF_UPDATE);
    sum += spin(50);
    pe_prof_end(PE_PROF_UPDATE);
    pe_prof_end(PE_PROF_STEP);

    pe_printf("sum %lu\n", (unsigned long)sum);
    return 0;
}
