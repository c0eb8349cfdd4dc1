/*
 * pe_frame.c - COBS + CRC-32 framing (see pe_frame.h and docs/serial-protocol.md).
 */
#include "pe_frame.h"

/* CRC-32 (reflected 0xEDB88320), four bits at a time: a 64-byte table in flash. */
static const uint32_t pe_crc32_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
    0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t pe_crc32_update(uint32_t crc, const uint8_t *data, size_t n)
{
    uint32_t c = ~crc;
    size_t i;
    for (i = 0; i < n; ++i) {
        c ^= data[i];
        c = (c >> 4) ^ pe_crc32_nibble[c & 0x0Fu];
        c = (c >> 4) ^ pe_crc32_nibble[c & 0x0Fu];
    }
    return ~c;
}

/* -- receiving ------------------------------------------------------------------------------ */
void pe_frame_rx_init(pe_frame_rx *rx, uint8_t *buf, size_t cap)
{
    rx->buf = buf;
    rx->cap = cap;
    rx->len = 0;
    rx->crc = 0;
    rx->code = 0;
    rx->left = 0;
    rx->overflow = 0;
    rx->raw = 0;
}

static void pe_frame_rx_restart(pe_frame_rx *rx)
{
    rx->len = 0;
    rx->code = 0;
    rx->left = 0;
    rx->overflow = 0;
}

static void pe_frame_rx_append(pe_frame_rx *rx, uint8_t b)
{
    if (rx->overflow) {
        return;
    }
    if (rx->len >= rx->cap) {
        rx->overflow = 1;
        return;
    }
    rx->buf[rx->len++] = b;
}

static int pe_frame_rx_finish(pe_frame_rx *rx)
{
    size_t n;
    uint32_t want;
    if (rx->overflow) {
        return PE_FRAME_ERR_OVERSIZE;
    }
    if (rx->left != 0u) {
        return PE_FRAME_ERR_COBS;
    }
    if (rx->code == 0u) {
        return PE_FRAME_EMPTY;
    }
    if (rx->len < PE_FRAME_CRC_BYTES) {
        return PE_FRAME_ERR_SHORT;
    }
    n = rx->len - PE_FRAME_CRC_BYTES;
    want = (uint32_t)rx->buf[n] | ((uint32_t)rx->buf[n + 1u] << 8)
           | ((uint32_t)rx->buf[n + 2u] << 16) | ((uint32_t)rx->buf[n + 3u] << 24);
    if (pe_crc32_update(0u, rx->buf, n) != want) {
        return PE_FRAME_ERR_CRC;
    }
    rx->crc = want;
    return PE_FRAME_READY;
}

int pe_frame_rx_push(pe_frame_rx *rx, uint8_t byte)
{
    int result;
    if (byte != PE_FRAME_DELIMITER) {
        if (rx->code == 0u && rx->left == 0u) {
            rx->raw = 0; /* the first byte of a frame */
        }
        rx->raw++;
        if (rx->left > 0u) {
            pe_frame_rx_append(rx, byte);
            rx->left--;
        } else {
            /* a code byte: the previous block (unless full-length) ended with a zero */
            if (rx->code != 0u && rx->code != 0xFFu) {
                pe_frame_rx_append(rx, 0u);
            }
            rx->code = byte;
            rx->left = (uint8_t)(byte - 1u);
        }
        return PE_FRAME_PENDING;
    }
    result = pe_frame_rx_finish(rx);
    if (result == PE_FRAME_READY) {
        rx->len -= PE_FRAME_CRC_BYTES;
        rx->code = 0;
        rx->left = 0;
        rx->overflow = 0;
        return result;
    }
    pe_frame_rx_restart(rx);
    return result;
}

/* -- sending -------------------------------------------------------------------------------- */
typedef struct {
    const uint8_t *head;
    size_t head_n;
    const uint8_t *data;
    size_t n;           /* head_n + data_n: the payload */
    uint8_t crc[PE_FRAME_CRC_BYTES];
} pe_frame_src;

static uint8_t pe_frame_at(const pe_frame_src *s, size_t i)
{
    if (i < s->head_n) {
        return s->head[i];
    }
    return i < s->n ? s->data[i - s->head_n] : s->crc[i - s->n];
}

/* Write bytes [a, b) of head || data || crc (at most three pieces). */
static void pe_frame_write_span(const pe_frame_src *s, size_t a, size_t b,
                                pe_frame_write_fn write, void *ctx)
{
    if (a < s->head_n) {
        const size_t end = b < s->head_n ? b : s->head_n;
        write(ctx, s->head + a, end - a);
        a = end;
    }
    if (a < b && a < s->n) {
        const size_t end = b < s->n ? b : s->n;
        write(ctx, s->data + (a - s->head_n), end - a);
        a = end;
    }
    if (a < b) {
        write(ctx, s->crc + (a - s->n), b - a);
    }
}

void pe_frame_send2(const uint8_t *head, size_t head_n, const uint8_t *data, size_t data_n,
                    pe_frame_write_fn write, void *ctx)
{
    static const uint8_t delimiter = PE_FRAME_DELIMITER;
    pe_frame_src s;
    const uint32_t crc = pe_crc32_update(pe_crc32_update(0u, head, head_n), data, data_n);
    size_t total;
    size_t pos = 0;
    s.head = head;
    s.head_n = head_n;
    s.data = data;
    s.n = head_n + data_n;
    s.crc[0] = (uint8_t)(crc & 0xFFu);
    s.crc[1] = (uint8_t)((crc >> 8) & 0xFFu);
    s.crc[2] = (uint8_t)((crc >> 16) & 0xFFu);
    s.crc[3] = (uint8_t)(crc >> 24);
    total = s.n + PE_FRAME_CRC_BYTES;
    write(ctx, &delimiter, 1u);
    for (;;) {
        size_t run = 0;
        uint8_t code;
        while (pos + run < total && run < 254u && pe_frame_at(&s, pos + run) != 0u) {
            run++;
        }
        code = (uint8_t)(run + 1u);
        write(ctx, &code, 1u);
        pe_frame_write_span(&s, pos, pos + run, write, ctx);
        pos += run;
        if (run == 254u) {
            if (pos == total) {
                break;
            }
            continue;
        }
        if (pos == total) {
            break;
        }
        pos++; /* the zero this block stands for (data ending in a zero: a last code 0x01) */
    }
    write(ctx, &delimiter, 1u);
}

void pe_frame_send(const uint8_t *payload, size_t n, pe_frame_write_fn write, void *ctx)
{
    pe_frame_send2(payload, n, payload, 0u, write, ctx);
}

typedef struct {
    uint8_t *dst;
    size_t cap;
    size_t len;
    int overflow;
} pe_frame_sink;

static void pe_frame_sink_write(void *ctx, const uint8_t *data, size_t n)
{
    pe_frame_sink *k = (pe_frame_sink *)ctx;
    size_t i;
    for (i = 0; i < n; ++i) {
        if (k->len >= k->cap) {
            k->overflow = 1;
            return;
        }
        k->dst[k->len++] = data[i];
    }
}

size_t pe_frame_encode(const uint8_t *payload, size_t n, uint8_t *dst, size_t cap)
{
    pe_frame_sink k;
    k.dst = dst;
    k.cap = cap;
    k.len = 0;
    k.overflow = 0;
    pe_frame_send(payload, n, pe_frame_sink_write, &k);
    return k.overflow ? 0u : k.len;
}
