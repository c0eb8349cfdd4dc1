/*
 * pe_storage_file.c - checkpoints in a file through the C library (host builds and tests).
 * Every write is flushed to the operating system, so killing the process loses nothing that
 * pe_checkpoint_save() reported as saved.
 */
#include <stdio.h>

#include "pe_storage.h"

static int pe_file_read(void *ctx, uint32_t addr, uint8_t *dst, size_t n)
{
    FILE *fp = (FILE *)((pe_stdio_file *)ctx)->file;
    size_t got;
    if (fp == NULL || fseek(fp, (long)addr, SEEK_SET) != 0) {
        return PE_STORAGE_ERR_IO;
    }
    got = fread(dst, 1, n, fp);
    while (got < n) { /* past the end: never written, reads as erased */
        dst[got++] = 0xFFu;
    }
    clearerr(fp);
    return PE_STORAGE_OK;
}

static int pe_file_write(void *ctx, uint32_t addr, const uint8_t *src, size_t n)
{
    FILE *fp = (FILE *)((pe_stdio_file *)ctx)->file;
    if (fp == NULL || fseek(fp, (long)addr, SEEK_SET) != 0) {
        return PE_STORAGE_ERR_IO;
    }
    if (fwrite(src, 1, n, fp) != n || fflush(fp) != 0) {
        return PE_STORAGE_ERR_IO;
    }
    return PE_STORAGE_OK;
}

int pe_storage_file_open(pe_storage *st, pe_stdio_file *f, const char *path,
                         uint32_t slot_bytes)
{
    FILE *fp = fopen(path, "r+b");
    if (fp == NULL) {
        fp = fopen(path, "w+b");
    }
    f->file = fp;
    st->read = pe_file_read;
    st->write = pe_file_write;
    st->erase = NULL;
    st->sync = NULL;
    st->ctx = f;
    st->slot_bytes = slot_bytes;
    return fp != NULL ? PE_STORAGE_OK : PE_STORAGE_ERR_IO;
}

void pe_storage_file_close(pe_stdio_file *f)
{
    if (f->file != NULL) {
        fclose((FILE *)f->file);
        f->file = NULL;
    }
}
