/* pe_merge_rows_s8 - the whole int8 weight of a partial trainable tensor (codegen/partial.py,
 * golden: train_kernels.merge_channels): the runs of pe_merge.h, byte by byte. */
#include "pe_merge.h"
#include "pe_train_kernels.h"

static void pe_merge_bytes(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; ++i) {
        dst[i] = src[i];
    }
}

void pe_merge_rows_s8(int32_t num_runs, const int32_t *runs, int32_t row_size,
                      const int8_t *trained, const int8_t *frozen, int8_t *output)
{
    pe_merge_runs(num_runs, runs, row_size, trained, frozen, output, pe_merge_bytes);
}
