/*
 * pe_proto.h - the device side of the pockengine serial protocol (docs/serial-protocol.md),
 * version 2.
 *
 * A request/response server over any byte stream: frames (pe_frame.h) carry a header
 *
 *     request:   0 u8 version (2)  1 u8 command  2 u8 reply limit  3 u16 sequence number
 *     response:  0 u8 version (2)  1 u8 type     2 u8 status       3 u16 sequence number
 *
 * (type: command | 0x80; NACK: 0xFF; PART: 0xFE) and a body (little-endian fields; its length
 * is the frame's). The response to a request is its acknowledgement; a damaged frame is
 * answered with a NACK. A request that repeats the previous one (same sequence number and
 * CRC) is answered from the cached response without running again, and TRAIN carries a sample
 * sequence number that makes it idempotent across restarts: sample k + 1 is applied only after
 * sample k, exactly once.
 *
 * Large messages on a noisy link: the request's reply limit (8-byte units, 0: none) bounds
 * the response frame; a response that does not fit is sent in PART frames (the first as the
 * answer, the rest on FETCH, up to 16 back to back, sliced from the cache). A request that does not fit the host's
 * frames is staged with PUT (pieces at offsets into the transfer buffer) and run by EXEC
 * (its length and CRC-32). So frames can shrink to a few dozen bytes in both directions.
 *
 * The server calls the generated model through a table (pe_proto_model) and saves
 * checkpoints through pe_checkpoint.h. Buffers are the caller's: no malloc. Typical device
 * main (templates/main_serial.c.j2):
 *
 *     static uint8_t rx[PE_PROTO_RX_BYTES(MAX_BODY)], tx[PE_PROTO_TX_BYTES(MAX_BODY)];
 *     pe_proto_init(&server, &config);             (restores the newest checkpoint)
 *     for (;;) { uint8_t b; if (pe_uart_try_read(&b)) pe_proto_byte(&server, b); }
 */
#ifndef PE_PROTO_H
#define PE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "pe_checkpoint.h"
#include "pe_frame.h"
#include "pe_storage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_PROTO_VERSION 2u
#define PE_PROTO_HEADER_BYTES 5u
#define PE_PROTO_PART_HEADER_BYTES 9u   /* response header + u16 offset + u16 total */
#define PE_PROTO_REPLY_UNIT 8u          /* the reply limit counts 8-byte units */
#define PE_PROTO_MIN_REPLY 16u          /* the smallest reply limit (smaller ones: this) */
#define PE_PROTO_MIN_BODY 128u          /* the smallest max body a server accepts */
#define PE_PROTO_HASH_BYTES 32u
#define PE_PROTO_BOARD_MAX 32u
#define PE_PROTO_QUIET_BYTES 3u         /* damaged pieces shorter than this get no NACK */
#define PE_PROTO_RX_BYTES(max_body) (PE_PROTO_HEADER_BYTES + (max_body) + PE_FRAME_CRC_BYTES)
#define PE_PROTO_TX_BYTES(max_body) (PE_PROTO_HEADER_BYTES + (max_body))

/* Commands (header type of a request). */
#define PE_CMD_INFO 0x01u
#define PE_CMD_TRAIN 0x02u
#define PE_CMD_INFER 0x03u
#define PE_CMD_EVAL 0x04u
#define PE_CMD_GET_PARAMS 0x05u
#define PE_CMD_SET_PARAMS 0x06u
#define PE_CMD_CHECKPOINT 0x07u
#define PE_CMD_STATS 0x08u
#define PE_CMD_RESET 0x09u
#define PE_CMD_DESCRIBE 0x0Au
#define PE_CMD_PUT 0x0Bu      /* stage a piece of a large request: u32 offset, bytes */
#define PE_CMD_EXEC 0x0Cu     /* run the staged request: u32 length, u32 CRC-32 */
#define PE_CMD_FETCH 0x0Du    /* pieces of a cached response: u16 seq, offset, mask, u8 n */
#define PE_TYPE_RESPONSE 0x80u
#define PE_TYPE_PART 0xFEu    /* a piece of a response: u16 offset, u16 total, bytes */
#define PE_TYPE_NACK 0xFFu

/* Status (header byte 3 of a response; a NACK's reason). */
#define PE_ST_OK 0u
#define PE_ST_DUPLICATE 1u        /* TRAIN: sample already applied; not applied again */
#define PE_ST_SEQ_GAP 2u          /* TRAIN: a sample is missing before this one */
#define PE_ST_RUN_MISMATCH 3u     /* TRAIN: the device is in the middle of another run */
#define PE_ST_BAD_VERSION 16u
#define PE_ST_UNKNOWN_COMMAND 17u
#define PE_ST_BAD_LENGTH 18u
#define PE_ST_BAD_ARGUMENT 19u
#define PE_ST_UNSUPPORTED 20u
#define PE_ST_MODEL_ERROR 21u
#define PE_ST_STORAGE_ERROR 22u
#define PE_NACK_CRC 32u
#define PE_NACK_COBS 33u
#define PE_NACK_OVERSIZE 34u
#define PE_NACK_SHORT 35u
#define PE_NACK_HEADER 36u        /* good CRC, but shorter than a header or not a request */

/* Request flags. */
#define PE_TRAIN_PREDICT 0x01u    /* TRAIN: report the prediction before the update */
#define PE_TRAIN_CHECKPOINT 0x02u /* TRAIN: save a checkpoint after the update */
#define PE_EVAL_RESET 0x01u       /* EVAL: clear the accumulated totals first */
#define PE_EVAL_TARGETS 0x02u     /* EVAL: records carry int8 targets (MSE), not labels */
#define PE_RESET_RESTORE 0u       /* RESET: what a reboot does (newest checkpoint or initial) */
#define PE_RESET_FACTORY 1u       /* RESET: initial parameters, checkpoints erased, seq 0 */

/* Model flags (INFO). */
#define PE_MODEL_TRAINING 0x01u
#define PE_MODEL_CROSS_ENTROPY 0x02u
#define PE_MODEL_MSE 0x04u
/* Device flags (INFO). */
#define PE_DEVICE_STORAGE 0x01u   /* checkpoints can be saved */
#define PE_DEVICE_RESTORED 0x02u  /* the current state came from a checkpoint */

/* The generated model, as the server calls it (NULL functions: not available). */
typedef struct {
    const uint8_t *model_hash; /* 32 bytes: the compiled model (INFO, checkpoints) */
    const char *board;         /* board name (INFO) */
    uint32_t flags;            /* PE_MODEL_* */
    uint32_t arena_bytes;
    uint32_t input_bytes;
    uint32_t output_bytes;
    uint32_t export_bytes;     /* params_export() size */
    uint32_t target_bytes;     /* MSE training targets */
    uint32_t num_classes;      /* cross-entropy labels */
    int (*init)(void);
    int (*infer)(const int8_t *input, int8_t *output);
    int (*train_step)(const int8_t *input, int32_t label, float *loss);
    int (*train_step_target)(const int8_t *input, const int8_t *target, float *loss);
    size_t (*params_export)(uint8_t *dst, size_t cap);
    int (*params_import)(const uint8_t *src, size_t len);
    pe_state_io state;         /* the whole parameter pool (checkpoints); bytes 0: none */
    const uint8_t *describe;   /* DESCRIBE: what the host needs to pull (JSON), or NULL */
    uint32_t describe_bytes;
} pe_proto_model;

/* Trace events (pe_proto_config.trace): what happened to the parameter state, for audits
 * such as the fault campaign's exactly-once ledger (tests/benchmark_serial.py). */
#define PE_TRACE_APPLIED 1u    /* a sample was applied: a = its seq, b = steps */
#define PE_TRACE_CHECKPOINT 2u /* a checkpoint was saved: a = last seq, b = generation */
#define PE_TRACE_RESTORED 3u   /* the state was (re)started: a = last seq, b = generation
                                * of the checkpoint it came from (0: initial parameters) */
typedef void (*pe_proto_trace_fn)(void *ctx, uint32_t event, uint32_t a, uint32_t b);

typedef struct {
    const pe_proto_model *model;
    const pe_storage *storage;  /* NULL: no checkpoints */
    pe_frame_write_fn write;    /* bytes to the host */
    void *write_ctx;
    uint8_t *rx_buf;            /* PE_PROTO_RX_BYTES(max body) */
    size_t rx_cap;
    uint8_t *tx_buf;            /* PE_PROTO_TX_BYTES(max body) */
    size_t tx_cap;
    uint8_t *xfer_buf;          /* GET/SET_PARAMS image (>= export_bytes) and staged */
    size_t xfer_cap;            /* requests (PUT/EXEC); NULL: neither */
    pe_proto_trace_fn trace;    /* NULL: no trace */
    void *trace_ctx;
} pe_proto_config;

/* Counters (STATS, in this order). */
typedef struct {
    uint32_t frames_ok;
    uint32_t crc_errors;
    uint32_t cobs_errors;
    uint32_t oversize;
    uint32_t short_frames;
    uint32_t bad_header;
    uint32_t resent;             /* duplicate requests answered from the cache */
    uint32_t nacks;
    uint32_t train_applied;
    uint32_t train_duplicates;
    uint32_t train_rejected;     /* gaps, run mismatches, bad arguments, model errors */
    uint32_t checkpoints;
    uint32_t checkpoint_errors;
    uint32_t staged;             /* staged requests run (EXEC) */
    uint32_t parts;              /* PART frames sent */
} pe_proto_stats;

typedef struct {
    pe_proto_config cfg;
    pe_frame_rx rx;
    pe_proto_stats stats;
    uint32_t max_body;
    size_t tx_len;               /* the cached last response (header + body) */
    uint32_t reply_limit;        /* the current request's largest response frame */
    uint32_t last_req_crc;
    uint16_t last_req_seq;
    uint16_t last_fetch_seq;     /* a FETCH sent twice (for the noise) is served once */
    uint8_t have_last;
    uint8_t have_fetch;
    uint8_t restored;
    uint8_t xfer_mode;           /* 0: none, 1: GET snapshot, 2: SET filling, 3: staging */
    uint32_t xfer_filled;        /* SET filling, staging: bytes received */
    uint32_t params_crc;
    uint32_t last_seq;           /* last applied sample sequence number (0: none) */
    uint32_t steps;
    uint32_t run_id;
    uint32_t last_loss_bits;
    uint32_t eval_total;
    uint32_t eval_correct;
    uint32_t eval_sq_hi;
    uint32_t eval_sq_lo;
    pe_checkpoint_info ckpt;     /* the newest checkpoint (generation 0: none) */
} pe_proto_server;

/* Set up the server, initialise the model and restore the newest checkpoint. Returns 0, or
 * -1 if the buffers are too small (max body < PE_PROTO_MIN_BODY, transfer buffer < export),
 * or the model's init error. */
int pe_proto_init(pe_proto_server *s, const pe_proto_config *cfg);

/* Received bytes: frames are decoded and answered as they complete. */
void pe_proto_byte(pe_proto_server *s, uint8_t byte);
void pe_proto_feed(pe_proto_server *s, const uint8_t *data, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* PE_PROTO_H */
