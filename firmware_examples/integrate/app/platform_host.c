/*
 * platform_host.c - platform.h on a PC, to run the application before it goes on a board:
 *   APP_SAMPLES  file of samples: per sample PE_INPUT_BYTES int8 values, then its int32
 *                label (little-endian) (make_samples.py writes them); default samples.bin
 *   APP_STORAGE  file standing in for the flash (default storage.bin)
 *   APP_SEND     file receiving what platform_send() sends (default params.bin)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"

static const char *setting(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : fallback;
}

int platform_next_sample(int8_t *input, size_t input_bytes, int32_t *label)
{
    static FILE *f;
    uint8_t le[4];
    if (f == NULL) {
        f = fopen(setting("APP_SAMPLES", "samples.bin"), "rb");
        if (f == NULL) {
            return 0;
        }
    }
    if (fread(input, 1, input_bytes, f) != input_bytes || fread(le, 1, 4, f) != 4) {
        return 0;
    }
    *label = (int32_t)((uint32_t)le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16
                       | (uint32_t)le[3] << 24);
    return 1;
}

#define STORAGE_BYTES (64u * 1024u)

static FILE *storage(const char *mode)
{
    return fopen(setting("APP_STORAGE", "storage.bin"), mode);
}

int platform_storage_erase(void)
{
    static uint8_t erased[STORAGE_BYTES];
    FILE *f = storage("wb");
    int ok;
    if (f == NULL) {
        return -1;
    }
    memset(erased, 0xFF, sizeof erased);
    ok = fwrite(erased, 1, sizeof erased, f) == sizeof erased;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int platform_storage_write(uint32_t offset, const uint8_t *src, uint32_t n)
{
    FILE *f;
    int ok;
    if (offset > STORAGE_BYTES || n > STORAGE_BYTES - offset || (f = storage("r+b")) == NULL) {
        return -1;
    }
    ok = fseek(f, (long)offset, SEEK_SET) == 0 && fwrite(src, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int platform_storage_read(uint32_t offset, uint8_t *dst, uint32_t n)
{
    FILE *f = storage("rb");
    int ok;
    if (f == NULL) {
        return -1;   /* nothing stored yet */
    }
    ok = fseek(f, (long)offset, SEEK_SET) == 0 && fread(dst, 1, n, f) == n;
    fclose(f);
    return ok ? 0 : -1;
}

void platform_send(const uint8_t *bytes, size_t n)
{
    static FILE *f;
    if (f == NULL) {
        f = fopen(setting("APP_SEND", "params.bin"), "wb");
    }
    if (f != NULL) {
        fwrite(bytes, 1, n, f);
        fflush(f);
    }
}
