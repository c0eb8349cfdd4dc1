/*
 * pe_checkpoint.h - training state that survives power cuts: A/B slots with a CRC and a
 * generation counter on a pe_storage (docs/serial-protocol.md, "Checkpoints").
 *
 * A slot is a 64-byte header followed by the model's state (trainable parameters, optimizer
 * state, master weights, step counters: the whole parameter pool, byte for byte):
 *
 *     0  u32 magic "PECK"        4  u16 format (1)       6  u16 header bytes (64)
 *     8  u32 generation         12  u32 last applied sample sequence number
 *    16  u32 training steps     20  u32 run id          24  u32 state bytes
 *    28  u8[32] model hash      60  u32 CRC-32 of bytes 0..59 and the state
 *
 * Saving writes the slot that does not hold the newest checkpoint: its header is invalidated
 * first, then the state is written, then the header (generation = newest + 1), then it is
 * read back and checked. A cut at any point leaves the previous checkpoint intact. Restoring
 * takes the valid slot (magic, format, sizes, model hash, CRC) with the highest generation.
 * No malloc: the state moves through a 64-byte stack buffer.
 */
#ifndef PE_CHECKPOINT_H
#define PE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "pe_storage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_CKPT_MAGIC 0x4B434550u /* "PECK" little-endian */
#define PE_CKPT_FORMAT 1u
#define PE_CKPT_HEADER_BYTES 64u
#define PE_CKPT_HASH_BYTES 32u
#define PE_CKPT_SLOTS 2u

#define PE_CKPT_OK 0
#define PE_CKPT_NONE 1             /* pe_checkpoint_restore: no valid slot (fresh start) */
#define PE_CKPT_ERR_STORAGE (-10)  /* the storage failed */
#define PE_CKPT_ERR_SIZE (-11)     /* the state does not fit a slot */
#define PE_CKPT_ERR_VERIFY (-12)   /* the slot read back differs from what was written */
#define PE_CKPT_ERR_STATE (-13)    /* the model refused the state */

/* The model's persistent state, accessed in pieces (no copy of it in RAM). */
typedef struct {
    size_t (*read)(void *ctx, size_t offset, uint8_t *dst, size_t n);      /* returns n */
    int (*write)(void *ctx, size_t offset, const uint8_t *src, size_t n);  /* 0: ok */
    void *ctx;
    size_t bytes;
} pe_state_io;

typedef struct {
    uint32_t generation; /* 0: no checkpoint */
    uint32_t last_seq;   /* the last sample sequence number the state includes */
    uint32_t steps;      /* training steps the state includes */
    uint32_t run_id;     /* the training run (the host's data, order and epochs) */
    uint32_t slot;       /* 0: A, 1: B */
} pe_checkpoint_info;

/* The newest valid slot: 1 and *newest filled, 0 if there is none, < 0 on a storage error. */
int pe_checkpoint_find(const pe_storage *st, const uint8_t *model_hash, size_t state_bytes,
                       pe_checkpoint_info *newest);

/* Load the newest valid checkpoint into the state: PE_CKPT_OK (and *info), PE_CKPT_NONE
 * (state untouched), or an error. A slot whose content changes between check and load is
 * skipped for the other one; if both fail after the state was written, PE_CKPT_ERR_STATE. */
int pe_checkpoint_restore(const pe_storage *st, const uint8_t *model_hash,
                          const pe_state_io *state, pe_checkpoint_info *info);

/* Save the state. ``info`` holds last_seq, steps, run_id; generation/slot describe the newest
 * checkpoint on entry (generation 0: none) and the one written on return. */
int pe_checkpoint_save(const pe_storage *st, const uint8_t *model_hash,
                       const pe_state_io *state, pe_checkpoint_info *info);

/* Invalidate both slots (factory reset). */
int pe_checkpoint_erase(const pe_storage *st);

#ifdef __cplusplus
}
#endif

#endif /* PE_CHECKPOINT_H */
