/* pe_merge.h - the row runs of pe_merge_rows_s8 (ref) and pe_merge_rows_s8_arm: the whole
 * weight of a partial trainable tensor (codegen/partial.py), runs[r] rows of row_size bytes
 * taken in turn from trained (even r) and frozen (odd r), each part read in order; `copy`
 * moves one run (the backend's way: bytes, or words). */
#ifndef PE_MERGE_H
#define PE_MERGE_H

#include <stdint.h>

typedef void (*pe_merge_copy)(int8_t *dst, const int8_t *src, int32_t n);

static inline void pe_merge_runs(int32_t num_runs, const int32_t *runs, int32_t row_size,
                                 const int8_t *trained, const int8_t *frozen, int8_t *output,
                                 pe_merge_copy copy)
{
    int32_t r;
    for (r = 0; r < num_runs; ++r) {
        const int32_t n = runs[r] * row_size;
        if (r & 1) {
            copy(output, frozen, n);
            frozen += n;
        } else {
            copy(output, trained, n);
            trained += n;
        }
        output += n;
    }
}

#endif /* PE_MERGE_H */
