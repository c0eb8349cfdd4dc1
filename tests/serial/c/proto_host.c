/*
 * proto_host.c - the protocol server on the host, for tests: frames on stdin/stdout, the toy
 * model (toy_model.c), checkpoints in a file (pe_storage_file.c).
 *
 *   proto_host [--storage FILE] [--max-body N] [--xfer-bytes N] [--mse] [--no-describe]
 *              [--crash-after-writes N]     exit abruptly (status 3) in the middle of the
 *                                           N-th storage write: a power cut while saving
 *              [--trace FILE]               append the server's trace events to FILE
 *                                           ("@pe:trace applied seq=K n=STEPS", ...)
 *
 * Built with ASan/UBSan by tests/serial/test_device_server.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pe_proto.h"
#include "toy_model.h"

#define MAX_BODY_CAP 4096u

static uint8_t rx_buf[PE_PROTO_RX_BYTES(MAX_BODY_CAP)];
static uint8_t tx_buf[PE_PROTO_TX_BYTES(MAX_BODY_CAP)];
#define XFER_CAP 8192u
static uint8_t xfer_buf[XFER_CAP]; /* GET/SET_PARAMS image and staged requests */
static const uint8_t model_hash[32] = {
    0x70, 0x6f, 0x63, 0x6b, 0x65, 0x6e, 0x67, 0x69, 0x6e, 0x65, 0x2d, 0x74, 0x6f, 0x79, 1, 2,
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
static const char describe[] =
    "{\"model\": {\"name\": \"toy\", \"sha256\": null}, \"training\": {\"loss\": "
    "\"cross_entropy\", \"parameters\": [\"w\", \"b\"]}, \"note\": \"a toy model that only "
    "exists to test the protocol server; this text is long enough to need more than one "
    "DESCRIBE chunk when the frames are small, which is what the test checks\"}";

static void write_all(void *ctx, const uint8_t *data, size_t n)
{
    (void)ctx;
    while (n > 0) {
        const ssize_t k = write(1, data, n);
        if (k <= 0) {
            _exit(0); /* the host went away */
        }
        data += k;
        n -= (size_t)k;
    }
}

static FILE *trace_file;

static void trace_line(void *ctx, uint32_t event, uint32_t a, uint32_t b)
{
    static const char *const names[] = {"?", "applied", "checkpoint", "restored"};
    (void)ctx;
    fprintf(trace_file, "@pe:trace %s seq=%lu n=%lu\n", names[event <= 3u ? event : 0u],
            (unsigned long)a, (unsigned long)b);
    fflush(trace_file);
}

/* storage with a power cut: the N-th write stops half way and the process dies */
static pe_storage file_storage;
static long crash_after = -1;
static long writes;

static int cutting_write(void *ctx, uint32_t addr, const uint8_t *src, size_t n)
{
    (void)ctx;
    if (crash_after >= 0 && ++writes >= crash_after) {
        if (n > 1) {
            (void)file_storage.write(file_storage.ctx, addr, src, n / 2);
        }
        _exit(3);
    }
    return file_storage.write(file_storage.ctx, addr, src, n);
}

static int cutting_read(void *ctx, uint32_t addr, uint8_t *dst, size_t n)
{
    (void)ctx;
    return file_storage.read(file_storage.ctx, addr, dst, n);
}

int main(int argc, char **argv)
{
    static pe_proto_server server;
    pe_proto_model model;
    pe_proto_config cfg;
    pe_stdio_file file;
    pe_storage storage;
    const char *path = NULL;
    unsigned long max_body = 256;
    unsigned long xfer_bytes = 512;
    int mse = 0;
    int with_describe = 1;
    int i;
    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--storage") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--max-body") == 0 && i + 1 < argc) {
            max_body = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--xfer-bytes") == 0 && i + 1 < argc) {
            xfer_bytes = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--mse") == 0) {
            mse = 1;
        } else if (strcmp(argv[i], "--no-describe") == 0) {
            with_describe = 0;
        } else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
            trace_file = fopen(argv[++i], "a");
            if (trace_file == NULL) {
                fprintf(stderr, "proto_host: cannot open %s\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--crash-after-writes") == 0 && i + 1 < argc) {
            crash_after = strtol(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "proto_host: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (max_body > MAX_BODY_CAP) {
        max_body = MAX_BODY_CAP;
    }
    if (xfer_bytes > XFER_CAP) {
        xfer_bytes = XFER_CAP;
    }
    memset(&model, 0, sizeof(model));
    model.model_hash = model_hash;
    model.board = "host-toy";
    model.flags = PE_MODEL_TRAINING | (mse ? PE_MODEL_MSE : PE_MODEL_CROSS_ENTROPY);
    model.arena_bytes = 1234;
    model.input_bytes = TOY_INPUT_BYTES;
    model.output_bytes = TOY_CLASSES;
    model.export_bytes = TOY_EXPORT_BYTES;
    model.target_bytes = mse ? TOY_CLASSES : 0u;
    model.num_classes = mse ? 0u : TOY_CLASSES;
    model.init = toy_init;
    model.infer = toy_infer;
    model.train_step = toy_train_step;
    model.train_step_target = toy_train_step_target;
    model.params_export = toy_params_export;
    model.params_import = toy_params_import;
    model.state.read = toy_state_read;
    model.state.write = toy_state_write;
    model.state.ctx = NULL;
    model.state.bytes = TOY_STATE_BYTES;
    if (with_describe) {
        model.describe = (const uint8_t *)describe;
        model.describe_bytes = (uint32_t)(sizeof(describe) - 1u);
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.model = &model;
    cfg.write = write_all;
    cfg.rx_buf = rx_buf;
    cfg.rx_cap = PE_PROTO_RX_BYTES(max_body);
    cfg.tx_buf = tx_buf;
    cfg.tx_cap = PE_PROTO_TX_BYTES(max_body);
    cfg.xfer_buf = xfer_buf;
    cfg.xfer_cap = xfer_bytes;
    if (trace_file != NULL) {
        cfg.trace = trace_line;
    }
    if (path != NULL) {
        if (pe_storage_file_open(&file_storage, &file, path, 512u) != 0) {
            fprintf(stderr, "proto_host: cannot open %s\n", path);
            return 2;
        }
        storage = file_storage;
        storage.read = cutting_read;
        storage.write = cutting_write;
        cfg.storage = &storage;
    }
    if (pe_proto_init(&server, &cfg) != 0) {
        fprintf(stderr, "proto_host: pe_proto_init failed\n");
        return 2;
    }
    fprintf(stderr, "proto_host: ready (restored=%d seq=%lu gen=%lu)\n", server.restored,
            (unsigned long)server.last_seq, (unsigned long)server.ckpt.generation);
    for (;;) {
        uint8_t buf[512];
        const ssize_t n = read(0, buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        pe_proto_feed(&server, buf, (size_t)n);
    }
    if (path != NULL) {
        pe_storage_file_close(&file);
    }
    return 0;
}
