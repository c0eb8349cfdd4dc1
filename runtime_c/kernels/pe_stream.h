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
 *      stage's kernel over its input rows (the chain's input, or the previous buffer) with
 *      the top padding shifted so that the kernel sees the rows where they are; rows outside
 *      what it is given are exactly the padding rows, which the kernels skip as always;
 *   3. with a residual, the band's rows are added to the input's in place.
 * Every row is computed once (the rows a window needs again are carried over).
 *
 * The stage kernels are the caller's (pe_stream_stage_fn, pe_stream_add_fn, with the caller's
 * `user` data): the ref kernels in ref/pe_stream_chain_s8.c, the arm bodies in
 * arm/pe_stream_chain_s8_arm.c, so a band computes exactly what the whole op would. */
#ifndef PE_STREAM_H
#define PE_STREAM_H

#include "pe_kernels.h"

/* Produce output_dims->h rows of stage `index` from input_dims->h rows of its input at
 * `input`, the stage's top padding being `pad_h` (negative: the window starts below the
 * first row given). */
typedef void (*pe_stream_stage_fn)(const void *user, const pe_context *ctx, int32_t index,
                                   const pe_stream_stage *stage, int32_t pad_h,
                                   const pe_dims *input_dims, const int8_t *input,
                                   const int8_t *filter, const int32_t *bias,
                                   const pe_dims *output_dims, int8_t *output);
/* chain[i] = add(chain[i], skip[i]) (in the order params->residual says), i < size */
typedef void (*pe_stream_add_fn)(const void *user, const pe_stream_params *params,
                                 int32_t size, const int8_t *skip, int8_t *chain);

static inline int32_t pe_stream_min(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* rows [first, hi) of a buffer holding rows [lo, hi) moved to its front (first > lo) */
static inline void pe_stream_carry(int8_t *buf, int32_t lo, int32_t first, int32_t hi,
                                   int32_t row_bytes)
{
    const int8_t *src = buf + (first - lo) * row_bytes;
    const int32_t n = (hi - first) * row_bytes;
    int32_t i;
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

static inline void pe_stream_run(const pe_context *ctx, const pe_stream_params *params,
                                 const pe_stream_stage *stages, const int8_t *const *filters,
                                 const int32_t *const *biases, const pe_dims *input_dims,
                                 const int8_t *input, const pe_dims *output_dims,
                                 int8_t *output, pe_stream_stage_fn stage_fn,
                                 pe_stream_add_fn add_fn, const void *user)
{
    const int32_t n = params->num_stages;
    const int32_t band = params->band_rows;
    const int32_t out_h = output_dims->h;
    const int32_t in_image = input_dims->h * input_dims->w * input_dims->c;
    const int32_t out_row = output_dims->w * output_dims->c;
    int8_t *scratch = ctx != 0 ? (int8_t *)ctx->buf : 0;
    pe_stream_rows *rows;
    int32_t b, j, o0;

    if (n < 1 || n > PE_STREAM_MAX_STAGES || band < 1 || scratch == 0) {
        return;                     /* not a record codegen makes */
    }
    rows = (pe_stream_rows *)(void *)(scratch + params->state_offset);
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
                pe_dims in_dims;
                pe_dims out_dims;
                const int8_t *in;
                int32_t in_lo;
                int8_t *out;
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
                    out = buf + (r->next - r->lo) * row;
                } else {
                    out = y + r->next * row;
                }
                if (j == 0) {               /* from the first row the window reads */
                    in_lo = r->next * s->params.stride.h - s->params.padding.h;
                    in_lo = in_lo < 0 ? 0 : pe_stream_min(in_lo, input_dims->h);
                    in = x + in_lo * input_dims->w * input_dims->c;
                    in_dims.h = input_dims->h - in_lo;
                    in_dims.w = input_dims->w;
                    in_dims.c = input_dims->c;
                } else {
                    const pe_stream_stage *p = &stages[j - 1];
                    in = scratch + p->buffer_offset;
                    in_lo = rows[j - 1].lo;
                    in_dims.h = rows[j - 1].next - in_lo;
                    in_dims.w = p->output_dims.w;
                    in_dims.c = p->output_dims.c;
                }
                in_dims.n = 1;
                out_dims.n = 1;
                out_dims.h = r->target - r->next;
                out_dims.w = s->output_dims.w;
                out_dims.c = s->output_dims.c;
                stage_fn(user, ctx, j, s,
                         s->params.padding.h + in_lo - r->next * s->params.stride.h, &in_dims,
                         in, filters[j], biases[j], &out_dims, out);
                r->next = r->target;
            }
            if (params->residual != 0) {
                add_fn(user, params, (rows[n - 1].target - o0) * out_row, x + o0 * out_row,
                       y + o0 * out_row);
            }
        }
    }
}

#endif /* PE_STREAM_H */
