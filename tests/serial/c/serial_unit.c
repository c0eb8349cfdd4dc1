/*
 * serial_unit.c - unit tests of the device-side framing and checkpoints, run on the host with
 * ASan/UBSan by tests/serial/test_device_units.py:
 *
 *   serial_unit selftest [SEED]   COBS round trips (every length 0..600, zeros anywhere),
 *                                 the decoder fed random bytes, truncated, oversized and
 *                                 bit-flipped frames (never past its buffer, every error
 *                                 reported), and checkpoints cut at every storage write
 *                                 (restore always yields the old or the new state, whole)
 *   serial_unit encode            hex payload lines on stdin -> hex frames on stdout
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe_checkpoint.h"
#include "pe_frame.h"

static unsigned long long rng_state = 88172645463325252ull;
static unsigned rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state >> 11);
}

static int failures;
#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            failures++;                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                            \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
        }                                                                                     \
    } while (0)

/* -- framing --------------------------------------------------------------------------------- */
static int decode_all(const uint8_t *enc, size_t n, uint8_t *buf, size_t cap, size_t *len)
{
    pe_frame_rx rx;
    size_t i;
    int last = PE_FRAME_PENDING;
    int ready = 0;
    pe_frame_rx_init(&rx, buf, cap);
    for (i = 0; i < n; ++i) {
        last = pe_frame_rx_push(&rx, enc[i]);
        if (last == PE_FRAME_READY) {
            ready++;
            *len = rx.len;
        } else if (last < 0) {
            return last;
        }
    }
    return ready == 1 ? PE_FRAME_READY : last;
}

static void test_round_trips(void)
{
    static uint8_t payload[700], enc[PE_FRAME_ENCODED_MAX(700)], dec[710];
    size_t n;
    for (n = 0; n <= 600; ++n) {
        int variant;
        for (variant = 0; variant < 4; ++variant) {
            size_t i, len = 0, m;
            int r;
            for (i = 0; i < n; ++i) {
                const unsigned v = rnd();
                payload[i] = variant == 0 ? (uint8_t)(v | 1u)       /* no zeros */
                             : variant == 1 ? 0u                      /* all zeros */
                             : variant == 2 ? (uint8_t)(v % 3u == 0 ? 0u : v)
                                            : (uint8_t)v;
            }
            m = pe_frame_encode(payload, n, enc, sizeof(enc));
            CHECK(m > 0 && m <= PE_FRAME_ENCODED_MAX(n), "encode length %zu for %zu", m, n);
            CHECK(enc[0] == 0 && enc[m - 1] == 0, "delimiters");
            for (i = 1; i + 1 < m; ++i) {
                CHECK(enc[i] != 0, "zero inside frame (n=%zu)", n);
            }
            r = decode_all(enc, m, dec, sizeof(dec), &len);
            CHECK(r == PE_FRAME_READY && len == n && memcmp(dec, payload, n) == 0,
                  "round trip n=%zu variant %d r=%d len=%zu", n, variant, r, len);
            /* a buffer one byte too small for payload + CRC: oversize, never an overrun */
            if (n > 0) {
                uint8_t *tight = (uint8_t *)malloc(n + 3u);
                r = decode_all(enc, m, tight, n + 3u, &len);
                CHECK(r == PE_FRAME_ERR_OVERSIZE, "tight buffer n=%zu r=%d", n, r);
                free(tight);
            }
            /* encode into a buffer that is too small: 0, no overrun */
            if (m > 1) {
                uint8_t *small = (uint8_t *)malloc(m - 1u);
                CHECK(pe_frame_encode(payload, n, small, m - 1u) == 0, "small encode");
                free(small);
            }
        }
    }
}

static void test_damage(void)
{
    static uint8_t payload[300], enc[PE_FRAME_ENCODED_MAX(300)], dec[400];
    int trial;
    for (trial = 0; trial < 20000; ++trial) {
        const size_t n = rnd() % 300u;
        size_t i, m, len = 0;
        int r;
        for (i = 0; i < n; ++i) {
            payload[i] = (uint8_t)rnd();
        }
        m = pe_frame_encode(payload, n, enc, sizeof(enc));
        switch (trial % 3) {
        case 0: { /* flip one bit inside the frame: never accepted */
            const size_t at = 1u + rnd() % (m - 2u);
            enc[at] ^= (uint8_t)(1u << (rnd() % 8u));
            r = decode_all(enc, m, dec, sizeof(dec), &len);
            CHECK(r != PE_FRAME_READY || (len == n && memcmp(dec, payload, n) == 0),
                  "bit flip accepted as different data");
            CHECK(r != PE_FRAME_READY, "bit flip accepted (trial %d)", trial);
            break;
        }
        case 1: { /* cut short: the rest is missing, the delimiter comes early */
            const size_t keep = 1u + rnd() % (m - 2u);
            enc[keep] = 0;
            r = decode_all(enc, keep + 1u, dec, sizeof(dec), &len);
            CHECK(r != PE_FRAME_READY, "truncated frame accepted");
            break;
        }
        default: { /* random bytes, then a good frame: the good one still decodes */
            static uint8_t noise[600];
            pe_frame_rx rx;
            size_t k = rnd() % sizeof(noise);
            int got = 0;
            for (i = 0; i < k; ++i) {
                noise[i] = (uint8_t)rnd();
            }
            pe_frame_rx_init(&rx, dec, sizeof(dec));
            for (i = 0; i < k; ++i) {
                (void)pe_frame_rx_push(&rx, noise[i]);
                CHECK(rx.len <= rx.cap, "decoder length beyond buffer");
            }
            for (i = 0; i < m; ++i) {
                if (pe_frame_rx_push(&rx, enc[i]) == PE_FRAME_READY) {
                    got = rx.len == n && memcmp(dec, payload, n) == 0;
                }
            }
            CHECK(got, "good frame after noise lost");
            break;
        }
        }
    }
}

/* -- checkpoints over RAM storage with power cuts --------------------------------------------- */
#define STATE_BYTES 300u
#define SLOT_BYTES 512u
static uint8_t region_bytes[2 * SLOT_BYTES];
static uint8_t state[STATE_BYTES];
static long cut_after = -1; /* storage writes left before the power cut */
static int cut;
static pe_ram_region ram;
static pe_storage ram_st;

static int cut_write(void *ctx, uint32_t addr, const uint8_t *src, size_t n)
{
    (void)ctx;
    if (cut) {
        return PE_STORAGE_ERR_IO;
    }
    if (cut_after >= 0 && cut_after-- == 0) {
        const size_t part = n / 2u;
        cut = 1;
        (void)ram_st.write(ram_st.ctx, addr, src, part); /* half of it made it */
        return PE_STORAGE_ERR_IO;
    }
    return ram_st.write(ram_st.ctx, addr, src, n);
}

static int cut_read(void *ctx, uint32_t addr, uint8_t *dst, size_t n)
{
    (void)ctx;
    return ram_st.read(ram_st.ctx, addr, dst, n);
}

static size_t st_read(void *ctx, size_t off, uint8_t *dst, size_t n)
{
    (void)ctx;
    memcpy(dst, state + off, n);
    return n;
}

static int st_write(void *ctx, size_t off, const uint8_t *src, size_t n)
{
    (void)ctx;
    memcpy(state + off, src, n);
    return 0;
}

static void fill_state(unsigned tag)
{
    size_t i;
    for (i = 0; i < STATE_BYTES; ++i) {
        state[i] = (uint8_t)(tag * 31u + i * 7u);
    }
}

static int state_is(unsigned tag)
{
    size_t i;
    for (i = 0; i < STATE_BYTES; ++i) {
        if (state[i] != (uint8_t)(tag * 31u + i * 7u)) {
            return 0;
        }
    }
    return 1;
}

static void test_checkpoints(void)
{
    static const uint8_t hash[32] = {1, 2, 3};
    static const uint8_t other[32] = {9};
    pe_storage st;
    pe_state_io io;
    pe_checkpoint_info info;
    long k;
    int r;
    io.read = st_read;
    io.write = st_write;
    io.ctx = NULL;
    io.bytes = STATE_BYTES;
    memset(region_bytes, 0xFF, sizeof(region_bytes));
    pe_storage_ram_open(&ram_st, &ram, region_bytes, sizeof(region_bytes));
    st = ram_st;
    st.read = cut_read;
    st.write = cut_write;

    r = pe_checkpoint_restore(&st, hash, &io, &info);
    CHECK(r == PE_CKPT_NONE, "blank storage restores nothing (%d)", r);

    /* saves 1..3, then a cut at every write of save 4: restore gives 3 or 4, whole */
    memset(&info, 0, sizeof(info));
    for (k = 1; k <= 3; ++k) {
        fill_state((unsigned)k);
        info.last_seq = (uint32_t)(10 * k);
        info.steps = (uint32_t)k;
        info.run_id = 77u;
        r = pe_checkpoint_save(&st, hash, &io, &info);
        CHECK(r == PE_CKPT_OK && info.generation == (uint32_t)k, "save %ld", k);
    }
    for (k = 0; k < 12; ++k) {
        pe_checkpoint_info saved = info;
        pe_checkpoint_info got;
        uint8_t snapshot[sizeof(region_bytes)];
        memcpy(snapshot, region_bytes, sizeof(region_bytes));
        cut = 0;
        cut_after = k;
        fill_state(4);
        saved.last_seq = 40;
        saved.steps = 4;
        r = pe_checkpoint_save(&st, hash, &io, &saved);
        cut_after = -1;
        cut = 0;
        fill_state(99); /* the power cut lost RAM */
        r = pe_checkpoint_restore(&st, hash, &io, &got);
        CHECK(r == PE_CKPT_OK, "restore after cut at write %ld: %d", k, r);
        CHECK((got.generation == 3 && got.last_seq == 30 && state_is(3))
                  || (got.generation == 4 && got.last_seq == 40 && state_is(4)),
              "cut at write %ld restored generation %u seq %u", k, got.generation,
              got.last_seq);
        memcpy(region_bytes, snapshot, sizeof(region_bytes));
    }
    /* every single-byte corruption of the newest slot: the older one is restored */
    for (k = 0; k < (long)(64u + STATE_BYTES); ++k) {
        pe_checkpoint_info got;
        const uint32_t newest = info.slot * SLOT_BYTES;
        region_bytes[newest + (uint32_t)k] ^= 0x5Au;
        fill_state(99);
        r = pe_checkpoint_restore(&st, hash, &io, &got);
        CHECK(r == PE_CKPT_OK && got.generation == 2 && state_is(2),
              "corrupt byte %ld: r=%d generation %u", k, r, got.generation);
        region_bytes[newest + (uint32_t)k] ^= 0x5Au;
    }
    /* another model's checkpoints are ignored; erase forgets everything */
    r = pe_checkpoint_restore(&st, other, &io, &info);
    CHECK(r == PE_CKPT_NONE, "other model's checkpoint restored (%d)", r);
    CHECK(pe_checkpoint_erase(&st) == PE_CKPT_OK, "erase");
    r = pe_checkpoint_restore(&st, hash, &io, &info);
    CHECK(r == PE_CKPT_NONE, "erased checkpoint restored (%d)", r);
    /* a slot too small for the state is an error, not an overrun */
    st.slot_bytes = 100u;
    CHECK(pe_checkpoint_save(&st, hash, &io, &info) == PE_CKPT_ERR_SIZE, "size check");
}

/* -- encode mode ---------------------------------------------------------------------------- */
static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int encode_lines(void)
{
    static char line[4200];
    static uint8_t payload[2100], enc[PE_FRAME_ENCODED_MAX(2100)];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        size_t n = 0, i, m;
        while (line[2 * n] != '\0' && line[2 * n] != '\n' && n < sizeof(payload)) {
            const int hi = hexval(line[2 * n]), lo = hexval(line[2 * n + 1]);
            if (hi < 0 || lo < 0) {
                return 2;
            }
            payload[n++] = (uint8_t)(hi * 16 + lo);
        }
        m = pe_frame_encode(payload, n, enc, sizeof(enc));
        for (i = 0; i < m; ++i) {
            printf("%02x", enc[i]);
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "encode") == 0) {
        return encode_lines();
    }
    if (argc >= 3) {
        rng_state ^= strtoull(argv[2], NULL, 10) * 2654435761ull;
    }
    test_round_trips();
    test_damage();
    test_checkpoints();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
