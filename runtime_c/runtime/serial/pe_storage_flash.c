/*
 * pe_storage_flash.c - checkpoints in memory-mapped flash pages (real parts).
 *
 * Reads are plain loads from the mapped region; erasing and programming are the part's flash
 * driver, handed in as hooks (pe_flash_region): this file knows no flash controller. A slot
 * is erased (whole pages) before it is programmed; pe_checkpoint.c writes the slot's header
 * last, so a power cut while saving leaves that slot invalid and the other one intact.
 *
 * The program hook gets the header (64 bytes at a slot's start) and the state in pieces of at
 * most 64 bytes at 64-byte aligned offsets, the last piece possibly shorter: parts with a
 * programming quantum (STM32F7 with ECC: 32 bytes, L4: 8) pad it with 0xFF.
 *
 * Example (STM32F4 with the HAL, two 16 KiB sectors for the slots):
 *     static int erase(uint32_t a, size_t n) { ... HAL_FLASHEx_Erase ... }
 *     static int program(uint32_t a, const uint8_t *s, size_t n) { ... HAL_FLASH_Program ... }
 *     static pe_flash_region region = {0x08008000u, 16384u, erase, program};
 *     pe_storage_flash_open(&storage, &region, 16384u);
 */
#include "pe_storage.h"

static int pe_flash_read(void *ctx, uint32_t addr, uint8_t *dst, size_t n)
{
    const pe_flash_region *r = (const pe_flash_region *)ctx;
    const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)(r->base + addr);
    size_t i;
    for (i = 0; i < n; ++i) {
        dst[i] = src[i];
    }
    return PE_STORAGE_OK;
}

static int pe_flash_write(void *ctx, uint32_t addr, const uint8_t *src, size_t n)
{
    const pe_flash_region *r = (const pe_flash_region *)ctx;
    if (r->program == NULL) {
        return PE_STORAGE_ERR_UNSUPPORTED;
    }
    return r->program(r->base + addr, src, n) == 0 ? PE_STORAGE_OK : PE_STORAGE_ERR_IO;
}

static int pe_flash_erase(void *ctx, uint32_t addr, size_t n)
{
    const pe_flash_region *r = (const pe_flash_region *)ctx;
    if (r->erase == NULL) {
        return PE_STORAGE_ERR_UNSUPPORTED;
    }
    return r->erase(r->base + addr, n) == 0 ? PE_STORAGE_OK : PE_STORAGE_ERR_IO;
}

int pe_storage_flash_open(pe_storage *st, pe_flash_region *region, uint32_t slot_bytes)
{
    const uint32_t page = region->page_bytes != 0u ? region->page_bytes : 1u;
    st->read = pe_flash_read;
    st->write = pe_flash_write;
    st->erase = pe_flash_erase;
    st->sync = NULL;
    st->ctx = region;
    st->slot_bytes = (slot_bytes + page - 1u) / page * page;
    return region->erase != NULL && region->program != NULL ? PE_STORAGE_OK
                                                            : PE_STORAGE_ERR_UNSUPPORTED;
}
