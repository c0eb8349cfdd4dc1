/*
 * pe_profile.h - phase markers for deterministic instruction counting.
 *
 *     pe_prof_begin(PE_PROF_FORWARD);  ...forward pass...  pe_prof_end(PE_PROF_FORWARD);
 *
 * The firmware itself counts nothing: each marker is one store by pe_prof_mark() into
 * pe_prof_marks[2 * phase + (0 begin | 1 end)]. Under QEMU the project's TCG plugin
 * (runtime_c/runtime/qemu/pe_insn_count.c, loaded by codegen/targets) counts every executed
 * guest instruction (Hexagon: every packet), watches the stores made by pe_prof_mark (it is
 * told the function's address range and the array's address from the ELF symbol table) and
 * reports, per phase, the number of completed begin/end pairs and the instructions executed
 * between them, to the host. Counts are exact and identical from run to run; the marker
 * itself adds a small constant per pair. Nested begin of the same phase (recursion) counts
 * the outermost pair only; different phases may nest or overlap freely.
 *
 * On a host build or real hardware the markers cost a call and a store and report nothing.
 */
#ifndef PE_PROFILE_H
#define PE_PROFILE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Phase numbers the host knows by name (codegen/targets/profile.py: PHASE_NAMES). */
enum {
    PE_PROF_STEP = 0,     /* one whole training step */
    PE_PROF_FORWARD = 1,
    PE_PROF_LOSS = 2,
    PE_PROF_BACKWARD = 3,
    PE_PROF_UPDATE = 4,
    PE_PROF_INFER = 5,    /* one inference */
    PE_PROF_INIT = 6,
    PE_PROF_EVAL = 7,
    PE_PROF_USER = 8      /* first free number: per-op phases, tests, ... (phase "p8"...) */
};

/* Phases the marker array has room for; a build may raise it (the QEMU plugin counts up to
 * 256), e.g. -DPE_PROF_MAX_PHASES=256 for per-op counts of a long training step. */
#ifndef PE_PROF_MAX_PHASES
#define PE_PROF_MAX_PHASES 64
#endif

/* The marker array the plugin watches (2 slots per phase: begin, end). */
extern volatile uint32_t pe_prof_marks[2 * PE_PROF_MAX_PHASES];

void pe_prof_mark(uint32_t slot);
void pe_prof_begin(int phase);
void pe_prof_end(int phase);

#ifdef __cplusplus
}
#endif

#endif /* PE_PROFILE_H */
