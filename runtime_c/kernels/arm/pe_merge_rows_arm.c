/* pe_merge_rows_s8_arm - pe_merge_rows_s8 (the whole weight of a partial trainable tensor,
 * codegen/partial.py) a word at a time: rows of a multiple of 4 bytes (the record says so),
 * one LDR and one STR per four bytes from any address. The same bytes. */
#include "pe_arm.h"
#include "pe_arm_kernels.h"
#include "pe_merge.h"

static void pe_merge_words(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i += 4) {
        pe_arm_st32(dst + i, pe_arm_ld32(src + i));
    }
}

void pe_merge_rows_s8_arm(int32_t num_runs, const int32_t *runs, int32_t row_size,
                          const int8_t *trained, const int8_t *frozen, int8_t *output)
{
    pe_merge_runs(num_runs, runs, row_size, trained, frozen, output, pe_merge_words);
}
