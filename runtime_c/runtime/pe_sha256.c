/*
 * pe_sha256.c - SHA-256 (FIPS 180-4), see pe_sha256.h. Checked against hashlib by
 * tests/firmware (the device's params_sha256 equals the host's hash of the same bytes).
 */
#include "pe_sha256.h"

static const uint32_t pe_sha256_k[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u,
};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32u - n));
}

static void pe_sha256_block(pe_sha256_ctx *c, const uint8_t *b)
{
    uint32_t w[64];
    uint32_t s[8];
    unsigned i;
    for (i = 0; i < 16u; i++) {
        w[i] = ((uint32_t)b[4u * i] << 24) | ((uint32_t)b[4u * i + 1u] << 16)
               | ((uint32_t)b[4u * i + 2u] << 8) | (uint32_t)b[4u * i + 3u];
    }
    for (i = 16; i < 64u; i++) {
        const uint32_t s0 = rotr(w[i - 15u], 7) ^ rotr(w[i - 15u], 18) ^ (w[i - 15u] >> 3);
        const uint32_t s1 = rotr(w[i - 2u], 17) ^ rotr(w[i - 2u], 19) ^ (w[i - 2u] >> 10);
        w[i] = w[i - 16u] + s0 + w[i - 7u] + s1;
    }
    for (i = 0; i < 8u; i++) {
        s[i] = c->state[i];
    }
    for (i = 0; i < 64u; i++) {
        const uint32_t e1 = rotr(s[4], 6) ^ rotr(s[4], 11) ^ rotr(s[4], 25);
        const uint32_t ch = (s[4] & s[5]) ^ (~s[4] & s[6]);
        const uint32_t t1 = s[7] + e1 + ch + pe_sha256_k[i] + w[i];
        const uint32_t e0 = rotr(s[0], 2) ^ rotr(s[0], 13) ^ rotr(s[0], 22);
        const uint32_t maj = (s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]);
        const uint32_t t2 = e0 + maj;
        s[7] = s[6];
        s[6] = s[5];
        s[5] = s[4];
        s[4] = s[3] + t1;
        s[3] = s[2];
        s[2] = s[1];
        s[1] = s[0];
        s[0] = t1 + t2;
    }
    for (i = 0; i < 8u; i++) {
        c->state[i] += s[i];
    }
}

void pe_sha256_init(pe_sha256_ctx *c)
{
    static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    unsigned i;
    for (i = 0; i < 8u; i++) {
        c->state[i] = h0[i];
    }
    c->bits_hi = 0;
    c->bits_lo = 0;
    c->used = 0;
}

void pe_sha256_update(pe_sha256_ctx *c, const uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        c->block[c->used++] = data[i];
        c->bits_lo += 8u;
        if (c->bits_lo < 8u) {
            c->bits_hi++;
        }
        if (c->used == 64u) {
            pe_sha256_block(c, c->block);
            c->used = 0;
        }
    }
}

void pe_sha256_final(pe_sha256_ctx *c, uint8_t digest[PE_SHA256_BYTES])
{
    const uint32_t hi = c->bits_hi;
    const uint32_t lo = c->bits_lo;
    unsigned i;
    c->block[c->used++] = 0x80u;
    if (c->used > 56u) {
        while (c->used < 64u) {
            c->block[c->used++] = 0;
        }
        pe_sha256_block(c, c->block);
        c->used = 0;
    }
    while (c->used < 56u) {
        c->block[c->used++] = 0;
    }
    for (i = 0; i < 4u; i++) {
        c->block[56u + i] = (uint8_t)(hi >> (24u - 8u * i));
        c->block[60u + i] = (uint8_t)(lo >> (24u - 8u * i));
    }
    pe_sha256_block(c, c->block);
    for (i = 0; i < 32u; i++) {
        digest[i] = (uint8_t)(c->state[i / 4u] >> (24u - 8u * (i % 4u)));
    }
}
