/*
 * pe_sha256.h - SHA-256 (FIPS 180-4) for firmware: hashes the exported parameters on the
 * device, so a run reports the same params_sha256 as the host and the golden model without
 * sending the parameters back. Freestanding C99, no tables in RAM, no malloc.
 *
 *     pe_sha256_ctx c;
 *     pe_sha256_init(&c);
 *     pe_sha256_update(&c, bytes, n);          (any number of times)
 *     pe_sha256_final(&c, digest);             (32 bytes)
 */
#ifndef PE_SHA256_H
#define PE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PE_SHA256_BYTES 32u

typedef struct {
    uint32_t state[8];
    uint32_t bits_hi;     /* message length in bits, high and low words */
    uint32_t bits_lo;
    uint8_t block[64];
    uint32_t used;        /* bytes in block */
} pe_sha256_ctx;

void pe_sha256_init(pe_sha256_ctx *c);
void pe_sha256_update(pe_sha256_ctx *c, const uint8_t *data, size_t n);
void pe_sha256_final(pe_sha256_ctx *c, uint8_t digest[PE_SHA256_BYTES]);

#ifdef __cplusplus
}
#endif

#endif /* PE_SHA256_H */
