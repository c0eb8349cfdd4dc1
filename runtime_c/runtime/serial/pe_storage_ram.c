/*
 * pe_storage_ram.c - checkpoints in a RAM buffer: retained RAM or battery-backed SRAM on
 * parts that have it (place the buffer in a section the startup code does not clear), and
 * tests. Plain RAM does not survive a power cut.
 */
#include "pe_storage.h"

static int pe_ram_read(void *ctx, uint32_t addr, uint8_t *dst, size_t n)
{
    const pe_ram_region *r = (const pe_ram_region *)ctx;
    size_t i;
    if ((size_t)addr > r->size || n > r->size - (size_t)addr) {
        return PE_STORAGE_ERR_RANGE;
    }
    for (i = 0; i < n; ++i) {
        dst[i] = r->bytes[addr + i];
    }
    return PE_STORAGE_OK;
}

static int pe_ram_write(void *ctx, uint32_t addr, const uint8_t *src, size_t n)
{
    pe_ram_region *r = (pe_ram_region *)ctx;
    size_t i;
    if ((size_t)addr > r->size || n > r->size - (size_t)addr) {
        return PE_STORAGE_ERR_RANGE;
    }
    for (i = 0; i < n; ++i) {
        r->bytes[addr + i] = src[i];
    }
    return PE_STORAGE_OK;
}

int pe_storage_ram_open(pe_storage *st, pe_ram_region *region, uint8_t *bytes, size_t size)
{
    region->bytes = bytes;
    region->size = size;
    st->read = pe_ram_read;
    st->write = pe_ram_write;
    st->erase = NULL;
    st->sync = NULL;
    st->ctx = region;
    st->slot_bytes = (uint32_t)(size / 2u);
    return PE_STORAGE_OK;
}
