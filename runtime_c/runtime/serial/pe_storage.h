/*
 * pe_storage.h - where checkpoints live: a small byte-addressed storage interface and its
 * backends (one or more per build, chosen by the firmware's main):
 *
 *   pe_storage_semihosting.c  a host file through Arm semihosting (QEMU: survives killing and
 *                             restarting the emulator; on hardware only with a debugger)
 *   pe_storage_flash.c        memory-mapped flash pages with part-specific erase/program
 *                             hooks (real parts: the hooks are the user's, see below)
 *   pe_storage_ram.c          a RAM buffer (retained RAM / battery-backed SRAM; tests)
 *   pe_storage_file.c         a file through the C library (host builds and tests)
 *
 * Addresses are offsets from the start of the checkpoint region; pe_checkpoint.c puts slot A
 * at 0 and slot B at slot_bytes. Every function returns 0 on success, < 0 on failure.
 */
#ifndef PE_STORAGE_H
#define PE_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PE_STORAGE_OK 0
#define PE_STORAGE_ERR_IO (-1)          /* the medium failed (or is not there) */
#define PE_STORAGE_ERR_RANGE (-2)       /* outside the region */
#define PE_STORAGE_ERR_UNSUPPORTED (-3) /* no backend hook for this part */

typedef struct pe_storage {
    int (*read)(void *ctx, uint32_t addr, uint8_t *dst, size_t n);
    int (*write)(void *ctx, uint32_t addr, const uint8_t *src, size_t n);
    int (*erase)(void *ctx, uint32_t addr, size_t n); /* NULL: writes need no erase */
    int (*sync)(void *ctx);                           /* NULL: writes are durable at once */
    void *ctx;
    uint32_t slot_bytes; /* bytes per checkpoint slot (a multiple of the erase page) */
} pe_storage;

/* -- semihosting file (pe_storage_semihosting.c) ------------------------------------------ */
typedef struct {
    int handle; /* semihosting file handle, -1: not open */
    uint32_t size;
} pe_semihost_file;

/* Open (or create) the host file ``path`` (relative paths: the emulator's working directory)
 * as a region of two slots of slot_bytes. */
int pe_storage_semihosting_open(pe_storage *st, pe_semihost_file *f, const char *path,
                                uint32_t slot_bytes);

/* -- memory-mapped flash (pe_storage_flash.c) ---------------------------------------------- */
typedef int (*pe_flash_erase_fn)(uint32_t address, size_t n);   /* whole pages */
typedef int (*pe_flash_program_fn)(uint32_t address, const uint8_t *src, size_t n);

typedef struct {
    uint32_t base;        /* absolute address of the region (page aligned) */
    uint32_t page_bytes;  /* erase page */
    pe_flash_erase_fn erase;
    pe_flash_program_fn program;
} pe_flash_region;

/* Two slots of slot_bytes (rounded up to whole pages) from region->base. erase/program are
 * the part's flash driver (e.g. STM32 HAL_FLASHEx_Erase / HAL_FLASH_Program); NULL hooks make
 * saving fail with PE_STORAGE_ERR_UNSUPPORTED while restoring still works. */
int pe_storage_flash_open(pe_storage *st, pe_flash_region *region, uint32_t slot_bytes);

/* -- RAM (pe_storage_ram.c) ----------------------------------------------------------------- */
typedef struct {
    uint8_t *bytes;
    size_t size;
} pe_ram_region;

int pe_storage_ram_open(pe_storage *st, pe_ram_region *region, uint8_t *bytes, size_t size);

/* -- C library file (pe_storage_file.c; hosted builds only) -------------------------------- */
typedef struct {
    void *file; /* FILE * */
} pe_stdio_file;

int pe_storage_file_open(pe_storage *st, pe_stdio_file *f, const char *path,
                         uint32_t slot_bytes);
void pe_storage_file_close(pe_stdio_file *f);

#ifdef __cplusplus
}
#endif

#endif /* PE_STORAGE_H */
