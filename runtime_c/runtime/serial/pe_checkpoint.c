/*
 * pe_checkpoint.c - A/B checkpoint slots with CRC and generation (see pe_checkpoint.h).
 */
#include "pe_checkpoint.h"

#include "pe_frame.h" /* pe_crc32_update */

#define PE_CKPT_CHUNK 64u
#define PE_CKPT_CRC_AT 60u

static void pe_ckpt_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
    p[2] = (uint8_t)((v >> 16) & 0xFFu);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t pe_ckpt_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
           | ((uint32_t)p[3] << 24);
}

static uint32_t pe_ckpt_slot_addr(const pe_storage *st, uint32_t slot)
{
    return slot * st->slot_bytes;
}

static int pe_ckpt_fits(const pe_storage *st, size_t state_bytes)
{
    return st->slot_bytes >= PE_CKPT_HEADER_BYTES
           && state_bytes <= (size_t)(st->slot_bytes - PE_CKPT_HEADER_BYTES);
}

static int pe_ckpt_hash_equal(const uint8_t *a, const uint8_t *hash)
{
    uint32_t i;
    for (i = 0; i < PE_CKPT_HASH_BYTES; ++i) {
        if (a[i] != (hash != NULL ? hash[i] : 0u)) {
            return 0;
        }
    }
    return 1;
}

/* 1: slot valid (*info filled), 0: invalid, < 0: storage error. */
static int pe_ckpt_check(const pe_storage *st, uint32_t slot, const uint8_t *model_hash,
                         size_t state_bytes, pe_checkpoint_info *info)
{
    uint8_t h[PE_CKPT_HEADER_BYTES];
    uint8_t chunk[PE_CKPT_CHUNK];
    const uint32_t base = pe_ckpt_slot_addr(st, slot);
    uint32_t crc;
    size_t off;
    if (st->read(st->ctx, base, h, sizeof(h)) != 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    if (pe_ckpt_get32(h) != PE_CKPT_MAGIC
        || ((uint32_t)h[4] | ((uint32_t)h[5] << 8)) != PE_CKPT_FORMAT
        || ((uint32_t)h[6] | ((uint32_t)h[7] << 8)) != PE_CKPT_HEADER_BYTES
        || pe_ckpt_get32(h + 24) != (uint32_t)state_bytes
        || !pe_ckpt_hash_equal(h + 28, model_hash) || pe_ckpt_get32(h + 8) == 0u) {
        return 0;
    }
    crc = pe_crc32_update(0u, h, PE_CKPT_CRC_AT);
    for (off = 0; off < state_bytes; off += PE_CKPT_CHUNK) {
        const size_t n = state_bytes - off < PE_CKPT_CHUNK ? state_bytes - off : PE_CKPT_CHUNK;
        if (st->read(st->ctx, base + PE_CKPT_HEADER_BYTES + (uint32_t)off, chunk, n) != 0) {
            return PE_CKPT_ERR_STORAGE;
        }
        crc = pe_crc32_update(crc, chunk, n);
    }
    if (crc != pe_ckpt_get32(h + PE_CKPT_CRC_AT)) {
        return 0;
    }
    info->generation = pe_ckpt_get32(h + 8);
    info->last_seq = pe_ckpt_get32(h + 12);
    info->steps = pe_ckpt_get32(h + 16);
    info->run_id = pe_ckpt_get32(h + 20);
    info->slot = slot;
    return 1;
}

int pe_checkpoint_find(const pe_storage *st, const uint8_t *model_hash, size_t state_bytes,
                       pe_checkpoint_info *newest)
{
    pe_checkpoint_info a;
    pe_checkpoint_info b;
    int va;
    int vb;
    if (!pe_ckpt_fits(st, state_bytes)) {
        return PE_CKPT_ERR_SIZE;
    }
    va = pe_ckpt_check(st, 0u, model_hash, state_bytes, &a);
    vb = pe_ckpt_check(st, 1u, model_hash, state_bytes, &b);
    if (va < 0 && vb < 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    if (va == 1 && (vb != 1 || a.generation >= b.generation)) {
        *newest = a;
        return 1;
    }
    if (vb == 1) {
        *newest = b;
        return 1;
    }
    return 0;
}

/* Stream slot ``slot`` into the state; 1: loaded and its CRC matched, 0: it did not. */
static int pe_ckpt_load(const pe_storage *st, uint32_t slot, const pe_state_io *state)
{
    uint8_t h[PE_CKPT_HEADER_BYTES];
    uint8_t chunk[PE_CKPT_CHUNK];
    const uint32_t base = pe_ckpt_slot_addr(st, slot);
    uint32_t crc;
    size_t off;
    if (st->read(st->ctx, base, h, sizeof(h)) != 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    crc = pe_crc32_update(0u, h, PE_CKPT_CRC_AT);
    for (off = 0; off < state->bytes; off += PE_CKPT_CHUNK) {
        const size_t n = state->bytes - off < PE_CKPT_CHUNK ? state->bytes - off
                                                            : PE_CKPT_CHUNK;
        if (st->read(st->ctx, base + PE_CKPT_HEADER_BYTES + (uint32_t)off, chunk, n) != 0) {
            return PE_CKPT_ERR_STORAGE;
        }
        crc = pe_crc32_update(crc, chunk, n);
        if (state->write(state->ctx, off, chunk, n) != 0) {
            return PE_CKPT_ERR_STATE;
        }
    }
    return crc == pe_ckpt_get32(h + PE_CKPT_CRC_AT) ? 1 : 0;
}

int pe_checkpoint_restore(const pe_storage *st, const uint8_t *model_hash,
                          const pe_state_io *state, pe_checkpoint_info *info)
{
    pe_checkpoint_info cand[PE_CKPT_SLOTS];
    int valid[PE_CKPT_SLOTS];
    uint32_t order[PE_CKPT_SLOTS] = {0u, 1u};
    uint32_t k;
    int touched = 0;
    if (!pe_ckpt_fits(st, state->bytes)) {
        return PE_CKPT_ERR_SIZE;
    }
    for (k = 0; k < PE_CKPT_SLOTS; ++k) {
        valid[k] = pe_ckpt_check(st, k, model_hash, state->bytes, &cand[k]);
    }
    if (valid[0] == 1 && valid[1] == 1 && cand[1].generation > cand[0].generation) {
        order[0] = 1u;
        order[1] = 0u;
    }
    for (k = 0; k < PE_CKPT_SLOTS; ++k) {
        const uint32_t s = order[k];
        int r;
        if (valid[s] != 1) {
            continue;
        }
        r = pe_ckpt_load(st, s, state);
        touched = 1;
        if (r == 1) {
            *info = cand[s];
            return PE_CKPT_OK;
        }
        if (r == PE_CKPT_ERR_STATE) {
            return r;
        }
    }
    if (touched) {
        return PE_CKPT_ERR_STATE; /* the state holds a partial load: the caller re-inits */
    }
    return (valid[0] < 0 && valid[1] < 0) ? PE_CKPT_ERR_STORAGE : PE_CKPT_NONE;
}

int pe_checkpoint_save(const pe_storage *st, const uint8_t *model_hash,
                       const pe_state_io *state, pe_checkpoint_info *info)
{
    static const uint8_t invalid[4] = {0u, 0u, 0u, 0u};
    uint8_t h[PE_CKPT_HEADER_BYTES];
    uint8_t chunk[PE_CKPT_CHUNK];
    pe_checkpoint_info check;
    const uint32_t slot = info->generation == 0u ? 0u : 1u - (info->slot & 1u);
    const uint32_t base = pe_ckpt_slot_addr(st, slot);
    const uint32_t generation = info->generation + 1u;
    uint32_t crc;
    size_t off;
    uint32_t i;
    if (!pe_ckpt_fits(st, state->bytes)) {
        return PE_CKPT_ERR_SIZE;
    }
    if (st->erase != NULL) {
        if (st->erase(st->ctx, base, st->slot_bytes) != 0) {
            return PE_CKPT_ERR_STORAGE;
        }
    } else if (st->write(st->ctx, base, invalid, sizeof(invalid)) != 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    for (i = 0; i < PE_CKPT_HEADER_BYTES; ++i) {
        h[i] = 0u;
    }
    pe_ckpt_put32(h, PE_CKPT_MAGIC);
    h[4] = (uint8_t)PE_CKPT_FORMAT;
    h[6] = (uint8_t)PE_CKPT_HEADER_BYTES;
    pe_ckpt_put32(h + 8, generation);
    pe_ckpt_put32(h + 12, info->last_seq);
    pe_ckpt_put32(h + 16, info->steps);
    pe_ckpt_put32(h + 20, info->run_id);
    pe_ckpt_put32(h + 24, (uint32_t)state->bytes);
    for (i = 0; i < PE_CKPT_HASH_BYTES; ++i) {
        h[28 + i] = model_hash != NULL ? model_hash[i] : 0u;
    }
    crc = pe_crc32_update(0u, h, PE_CKPT_CRC_AT);
    for (off = 0; off < state->bytes; off += PE_CKPT_CHUNK) {
        const size_t n = state->bytes - off < PE_CKPT_CHUNK ? state->bytes - off
                                                            : PE_CKPT_CHUNK;
        if (state->read(state->ctx, off, chunk, n) != n) {
            return PE_CKPT_ERR_STATE;
        }
        crc = pe_crc32_update(crc, chunk, n);
        if (st->write(st->ctx, base + PE_CKPT_HEADER_BYTES + (uint32_t)off, chunk, n) != 0) {
            return PE_CKPT_ERR_STORAGE;
        }
    }
    pe_ckpt_put32(h + PE_CKPT_CRC_AT, crc);
    if (st->write(st->ctx, base, h, sizeof(h)) != 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    if (st->sync != NULL && st->sync(st->ctx) != 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    if (pe_ckpt_check(st, slot, model_hash, state->bytes, &check) != 1
        || check.generation != generation) {
        return PE_CKPT_ERR_VERIFY;
    }
    info->generation = generation;
    info->slot = slot;
    return PE_CKPT_OK;
}

int pe_checkpoint_erase(const pe_storage *st)
{
    static const uint8_t invalid[4] = {0u, 0u, 0u, 0u};
    uint32_t k;
    for (k = 0; k < PE_CKPT_SLOTS; ++k) {
        const uint32_t base = pe_ckpt_slot_addr(st, k);
        int r = st->erase != NULL ? st->erase(st->ctx, base, st->slot_bytes)
                                  : st->write(st->ctx, base, invalid, sizeof(invalid));
        if (r != 0) {
            return PE_CKPT_ERR_STORAGE;
        }
    }
    if (st->sync != NULL && st->sync(st->ctx) != 0) {
        return PE_CKPT_ERR_STORAGE;
    }
    return PE_CKPT_OK;
}
