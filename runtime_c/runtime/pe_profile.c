/*
 * pe_profile.c - phase markers (see pe_profile.h). pe_prof_mark must stay a real function
 * (noinline, never cloned) whose only store is to pe_prof_marks: the instruction-count
 * plugin identifies markers by the address range of this function.
 */
#include "pe_profile.h"

volatile uint32_t pe_prof_marks[2 * PE_PROF_MAX_PHASES];

#if defined(__clang__)
__attribute__((noinline, used))
#elif defined(__GNUC__)
__attribute__((noinline, noclone, used))
#endif
void pe_prof_mark(uint32_t slot)
{
    pe_prof_marks[slot] = pe_prof_marks[slot] + 1u;
}

void pe_prof_begin(int phase)
{
    if (phase >= 0 && phase < PE_PROF_MAX_PHASES) {
        pe_prof_mark(2u * (uint32_t)phase);
    }
}

void pe_prof_end(int phase)
{
    if (phase >= 0 && phase < PE_PROF_MAX_PHASES) {
        pe_prof_mark(2u * (uint32_t)phase + 1u);
    }
}
