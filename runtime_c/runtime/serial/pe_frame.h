/*
 * pe_frame.h - serial framing of the pockengine protocol (docs/serial-protocol.md):
 *
 *     0x00 | COBS( payload || CRC-32(payload), little-endian ) | 0x00
 *
 * COBS (Consistent Overhead Byte Stuffing) removes every 0x00 from the frame, so 0x00 is a
 * delimiter that always resynchronises the receiver; CRC-32 is the IEEE 802.3 / zlib CRC
 * (reflected, polynomial 0xEDB88320, initial and final value 0xFFFFFFFF).
 *
 * The receiver decodes byte by byte into a caller-provided buffer (no malloc): a frame that
 * does not fit is dropped up to its delimiter and reported as oversize, never written past
 * the buffer. The sender encodes on the fly through a write callback (no transmit buffer).
 */
#ifndef PE_FRAME_H
#define PE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PE_FRAME_DELIMITER 0x00u
#define PE_FRAME_CRC_BYTES 4u
/* COBS adds one byte per 254 bytes (rounded up) plus the code byte; plus two delimiters. */
#define PE_FRAME_ENCODED_MAX(payload) ((payload) + PE_FRAME_CRC_BYTES \
    + ((payload) + PE_FRAME_CRC_BYTES) / 254u + 1u + 2u)

/* Results of pe_frame_rx_push(). */
#define PE_FRAME_PENDING 0         /* byte consumed, frame not complete */
#define PE_FRAME_READY 1           /* a frame with a good CRC: rx->buf[0 .. rx->len) */
#define PE_FRAME_EMPTY 2           /* a lone delimiter (idle line, resynchronisation) */
#define PE_FRAME_ERR_COBS (-1)     /* a code byte pointed past the delimiter */
#define PE_FRAME_ERR_OVERSIZE (-2) /* more bytes than the buffer holds; dropped */
#define PE_FRAME_ERR_SHORT (-3)    /* fewer bytes than a CRC */
#define PE_FRAME_ERR_CRC (-4)      /* CRC mismatch */

/* zlib-compatible CRC-32: pe_crc32_update(0, data, n) == zlib.crc32(data); chains like zlib's. */
uint32_t pe_crc32_update(uint32_t crc, const uint8_t *data, size_t n);

typedef struct {
    uint8_t *buf;       /* decoded bytes (payload and CRC) */
    size_t cap;         /* capacity of buf */
    size_t len;         /* READY: payload bytes (CRC excluded); else bytes decoded so far */
    uint32_t crc;       /* READY: the frame's CRC (identifies the frame's content) */
    uint8_t code;       /* current COBS block code (0: none yet) */
    uint8_t left;       /* data bytes left in the current block */
    uint8_t overflow;   /* the frame has outgrown buf: drop it at the delimiter */
    size_t raw;         /* bytes received since the last delimiter (errors: the frame's) */
} pe_frame_rx;

/* A receiver decoding into buf[0 .. cap). */
void pe_frame_rx_init(pe_frame_rx *rx, uint8_t *buf, size_t cap);

/* Feed one received byte; see the PE_FRAME_* results. After READY, EMPTY or an error the
 * receiver starts over with the next byte; a READY frame stays in buf until then. */
int pe_frame_rx_push(pe_frame_rx *rx, uint8_t byte);

typedef void (*pe_frame_write_fn)(void *ctx, const uint8_t *data, size_t n);

/* Send one frame: a leading delimiter, COBS(payload || CRC), the trailing delimiter. */
void pe_frame_send(const uint8_t *payload, size_t n, pe_frame_write_fn write, void *ctx);

/* The same for a payload in two pieces, head || data (one frame, one CRC over both). */
void pe_frame_send2(const uint8_t *head, size_t head_n, const uint8_t *data, size_t data_n,
                    pe_frame_write_fn write, void *ctx);

/* Encode into dst (at most cap bytes) instead; returns the encoded length with both
 * delimiters, or 0 if cap is too small. */
size_t pe_frame_encode(const uint8_t *payload, size_t n, uint8_t *dst, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* PE_FRAME_H */
