/* pe_merge_rows_s8 - the whole int8 weight of a partial trainable tensor (codegen/partial.py,
 * golden: train_kernels.merge_channels): runs[r] rows of row_size bytes, taken in turn from
 * trained (even r, RAM) and frozen (odd r, flash), each source read in order. */
#include "pe_train_kernels.h"

void pe_merge_rows_s8(int32_t num_runs, const int32_t *runs, int32_t row_size,
                      const int8_t *trained, const int8_t *frozen, int8_t *output)
{
    int32_t r;
    for (r = 0; r < num_runs; ++r) {
        const int32_t n = runs[r] * row_size;
        const int8_t *src = (r & 1) ? frozen : trained;
        int32_t i;
        for (i = 0; i < n; ++i) {
            output[i] = src[i];
        }
        output += n;
        if (r & 1) {
            frozen += n;
        } else {
            trained += n;
        }
    }
}
