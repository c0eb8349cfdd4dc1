/* pe_stream.h - the band schedule of a stream_chain op: a chain of convolutions run in bands
 * of output rows, each intermediate kept only as the rows the next stage's window still needs.
 *
 * pe_stream_run takes the same steps as codegen/ir/stream.py band_plan (which sized the row
 * buffers at compile time). For each band [o0, o1) of the last stage's output rows:
 *   1. from the last stage back to the first, the rows each stage must have produced
 *      (target): enough for the windows of the rows the next stage produces in this band;
 *   2. from the first stage on, a stage with rows to produce drops from its row buffer the
 *      rows the next stage no longer reads (above the top of its first window this band),
 *      copying the rest to the buffer's front, and appends its new rows: one call of the
 *      stage's kernel over its input rows (from the first row its window reads: the chain's
 *      input, or the previous buffer) with the top padding shifted so that the kernel sees
 *      the rows where they are; rows outside what it is given are exactly the padding rows,
 *      which the kernels skip as always;
 *   3. with a residual, the band's rows are added to the input's in place.
 * Every row is computed once (the rows a window needs again are carried over).
 *
 * The stage kernels are the caller's: `fn` gets one pe_stream_call (pe_kernels.h) per stage
 * step and per residual add, with the caller's `user` data. ref/pe_stream_chain_s8.c calls the
 * ref kernels, arm/pe_stream_chain_s8_arm.c the arm bodies with run-time shapes, and a
 * generated model's stage function (arm/pe_stream_chain_fn.c) the arm bodies specialised for
 * each stage's shapes: the same arithmetic as the whole op, so the same bytes. */
#ifndef PE_STREAM_H
#define PE_STREAM_H

#include "pe_kernels.h"

static inline int32_t pe_stream_min(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* rows [first, hi) of a buffer holding rows [lo, hi) moved to its front (first > lo). A
 * backend may define PE_STREAM_COPY_WORD(dst, src), a 4-byte copy from and to any address
 * (arm: one LDR and one STR), before including this file: rows of a multiple of 4 bytes then
 * move a word at a time (the source is at least a row, 4 bytes, above the destination, so
 * every word is read before it is overwritten). */
static inline void pe_stream_carry(int8_t *buf, int32_t lo, int32_t first, int32_t hi,
                                   int32_t row_bytes)
{
    const int8_t *src = buf + (first - lo) * row_bytes;
    const int32_t n = (hi - first) * row_bytes;
    int32_t i;
#ifdef PE_STREAM_COPY_WORD
    if (row_bytes % 4 == 0) {
        for (i = 0; i < n; i += 4) {
            PE_STREAM_COPY_WORD(buf + i, src + i);
        }
        return;
    }
#endif
    for (i = 0; i < n; ++i) {
        buf[i] = src[i];            /* forward: the destination is below the source */
    }
}

/* What the schedule knows of one stage: the next row it produces, the first row its buffer
 * holds (rows [lo, next)) and the rows it must have produced by the end of the band. One per
 * stage at params->state_offset in ctx->buf (not on the stack). */
typedef struct {
    int32_t next;
    int32_t lo;
    int32_t target;
} pe_stream_rows;

/* filters / biases: per stage, handed to `fn` (NULL lists: none) */
static inline void pe_stream_run(const pe_context *ctx, const pe_stream_params *params,
                                 const pe_stream_stage *stages, const int8_t *const *filters,
                                 const int32_t *const *biases, const pe_dims *input_dims,
                                 const int8_t *input, const pe_dims *output_dims,
                                 int8_t *output, pe_stream_fn fn, const void *user)
{
    const int32_t n = params->num_stages;
    const int32_t band = params->band_rows;
    const int32_t out_h = output_dims->h;
    const int32_t in_image = input_dims->h * input_dims->w * input_dims->c;
    const int32_t out_row = output_dims->w * output_dims->c;
    int8_t *scratch = ctx != 0 ? (int8_t *)ctx->buf : 0;
    pe_stream_rows *rows;
    pe_context sub;
    pe_stream_call call;
    int32_t b, j, o0;

    if (n < 1 || n > PE_STREAM_MAX_STAGES || band < 1 || scratch == 0) {
        return;                     /* not a record codegen makes */
    }
    rows = (pe_stream_rows *)(void *)(scratch + params->state_offset);
    sub.buf = scratch + params->kernel_scratch_offset;
    sub.size = params->kernel_scratch_bytes;
    call.user = user;
    call.ctx = &sub;
    call.in_dims.n = 1;
    call.out_dims.n = 1;
    for (b = 0; b < input_dims->n; ++b) {
        const int8_t *x = input + b * in_image;
        int8_t *y = output + b * out_h * out_row;
        for (j = 0; j < n; ++j) {
            rows[j].next = 0;
            rows[j].lo = 0;
        }
        for (o0 = 0; o0 < out_h; o0 += band) {
            rows[n - 1].target = pe_stream_min(out_h, o0 + band);
            for (j = n - 1; j > 0; --j) {
                const pe_stream_stage *s = &stages[j];
                pe_stream_rows *prev = &rows[j - 1];
                prev->target = prev->next;
                if (rows[j].target > rows[j].next) {
                    const int32_t need = pe_stream_min(
                        stages[j - 1].output_dims.h, (rows[j].target - 1) * s->params.stride.h
                        - s->params.padding.h + s->window);
                    if (need > prev->target) {
                        prev->target = need;
                    }
                }
            }
            for (j = 0; j < n; ++j) {
                const pe_stream_stage *s = &stages[j];
                pe_stream_rows *r = &rows[j];
                const int32_t row = s->output_dims.w * s->output_dims.c;
                int32_t in_lo;
                if (r->target <= r->next) {
                    continue;
                }
                if (j + 1 < n) {            /* into this stage's row buffer */
                    const pe_stream_stage *reader = &stages[j + 1];
                    int8_t *buf = scratch + s->buffer_offset;
                    int32_t first = rows[j + 1].next * reader->params.stride.h
                                    - reader->params.padding.h;
                    first = pe_stream_min(first < 0 ? 0 : first, r->next);
                    if (first > r->lo) {
                        pe_stream_carry(buf, r->lo, first, r->next, row);
                        r->lo = first;
                    }
                    if (r->target - r->lo > s->buffer_rows) {
                        return;             /* band_plan sized the buffers: cannot happen */
                    }
                    call.output = buf + (r->next - r->lo) * row;
                } else {
                    call.output = y + r->next * row;
                }
                if (j == 0) {               /* from the first row the window reads */
                    in_lo = r->next * s->params.stride.h - s->params.padding.h;
                    in_lo = in_lo < 0 ? 0 : pe_stream_min(in_lo, input_dims->h);
                    call.input = x + in_lo * input_dims->w * input_dims->c;
                    call.in_dims.h = input_dims->h - in_lo;
                    call.in_dims.w = input_dims->w;
                    call.in_dims.c = input_dims->c;
                } else {
                    const pe_stream_stage *p = &stages[j - 1];
                    in_lo = rows[j - 1].lo;
                    call.input = scratch + p->buffer_offset;
                    call.in_dims.h = rows[j - 1].next - in_lo;
                    call.in_dims.w = p->output_dims.w;
                    call.in_dims.c = p->output_dims.c;
                }
                call.index = j;
                call.stage = s;
                call.pad_h = s->params.padding.h + in_lo - r->next * s->params.stride.h;
                call.filter = filters != 0 ? filters[j] : 0;
                call.bias = biases != 0 ? biases[j] : 0;
                call.out_dims.h = r->target - r->next;
                call.out_dims.w = s->output_dims.w;
                call.out_dims.c = s->output_dims.c;
                call.size = 0;
                fn(&call);
                r->next = r->target;
            }
            if (params->residual != 0) {
                call.index = n;
                call.stage = 0;
                call.input = x + o0 * out_row;
                call.output = y + o0 * out_row;
                call.size = (rows[n - 1].target - o0) * out_row;
                fn(&call);
            }
        }
    }
}

#endif /* PE_STREAM_H */
