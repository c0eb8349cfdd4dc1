/*
 * pe_proto.c - the protocol server (see pe_proto.h and docs/serial-protocol.md).
 *
 * Every length comes from the frame decoder (bounded by the rx buffer) or the staging
 * counter (bounded by the transfer buffer) and is checked against the command's exact layout
 * before any field is read; responses are built in the tx buffer, whose size bounds every
 * body (max_body), and leave it as one frame or as PART frames sliced from it.
 */
#include "pe_proto.h"

#define PE_NAN_BITS 0x7FC00000u
#define PE_RUN_NONE 0u
#define PE_HDR PE_PROTO_HEADER_BYTES
#define PE_NO_LIMIT 0xFFFFFFFFu
#define PE_XFER_NONE 0u
#define PE_XFER_SNAPSHOT 1u /* GET_PARAMS: the export taken at offset 0 */
#define PE_XFER_FILLING 2u  /* SET_PARAMS: the image being received */
#define PE_XFER_STAGING 3u  /* PUT: a request being received */

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
    p[2] = (uint8_t)((v >> 16) & 0xFFu);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get16(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
           | ((uint32_t)p[3] << 24);
}

static int32_t get_i32(const uint8_t *p)
{
    const uint32_t u = get32(p);
    return u > 0x7FFFFFFFu ? -(int32_t)(0xFFFFFFFFu - u) - 1 : (int32_t)u;
}

static uint32_t float_bits(float f)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    return v.u;
}

static void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        dst[i] = src[i];
    }
}

/* The first largest of n int8 values (numpy's argmax). */
static uint32_t argmax_s8(const int8_t *v, uint32_t n)
{
    uint32_t i;
    uint32_t best = 0;
    for (i = 1; i < n; ++i) {
        if (v[i] > v[best]) {
            best = i;
        }
    }
    return best;
}

/* -- responses ------------------------------------------------------------------------------ */
static uint8_t *body(pe_proto_server *s)
{
    return s->cfg.tx_buf + PE_HDR;
}

/* One frame (head || data), then a second delimiter: a frame whose trailing delimiter is hit
 * by noise still ends at once (as a damaged frame) instead of when the next frame comes. */
static void send_frame(pe_proto_server *s, const uint8_t *head, size_t head_n,
                       const uint8_t *data, size_t data_n)
{
    static const uint8_t delimiter = PE_FRAME_DELIMITER;
    pe_frame_send2(head, head_n, data, data_n, s->cfg.write, s->cfg.write_ctx);
    s->cfg.write(s->cfg.write_ctx, &delimiter, 1u);
}

static void header(uint8_t *h, uint32_t type, uint32_t status, uint32_t seq)
{
    h[0] = (uint8_t)PE_PROTO_VERSION;
    h[1] = (uint8_t)type;
    h[2] = (uint8_t)status;
    put16(h + 3, seq);
}

/* A short answer that does not replace the cached response (NACK, FETCH refusals). */
static void send_short(pe_proto_server *s, uint32_t type, uint32_t status, uint32_t seq)
{
    uint8_t h[PE_HDR];
    header(h, type, status, seq);
    send_frame(s, h, sizeof(h), h, 0u);
}

/* Bytes [offset, ...) of the cached response, as much as the reply limit allows, in a PART
 * frame answering request seq; returns how many. */
static uint32_t send_part(pe_proto_server *s, uint32_t seq, uint32_t offset)
{
    uint8_t h[PE_PROTO_PART_HEADER_BYTES];
    const uint32_t room = s->reply_limit - PE_PROTO_PART_HEADER_BYTES;
    uint32_t n = (uint32_t)s->tx_len - offset;
    if (n > room) {
        n = room;
    }
    header(h, PE_TYPE_PART, 0u, seq);
    put16(h + 5, offset);
    put16(h + 7, (uint32_t)s->tx_len);
    s->stats.parts++;
    send_frame(s, h, sizeof(h), s->cfg.tx_buf + offset, n);
    return n;
}

/* The cached response: one frame if it fits the reply limit, else its first PART. */
static void send_cached(pe_proto_server *s, uint32_t seq)
{
    if (s->tx_len <= s->reply_limit) {
        send_frame(s, s->cfg.tx_buf, s->tx_len, s->cfg.tx_buf, 0u);
    } else {
        (void)send_part(s, seq, 0u);
    }
}

/* Finish the response in tx (body already written), cache it and send it. */
static void respond(pe_proto_server *s, uint32_t cmd, uint32_t status, uint32_t seq,
                    uint32_t body_len)
{
    header(s->cfg.tx_buf, cmd | PE_TYPE_RESPONSE, status, seq);
    s->tx_len = PE_HDR + body_len;
    send_cached(s, seq);
}

static void nack(pe_proto_server *s, uint32_t reason)
{
    s->stats.nacks++;
    send_short(s, PE_TYPE_NACK, reason, 0u);
}

/* -- state ---------------------------------------------------------------------------------- */
static void trace(const pe_proto_server *s, uint32_t event, uint32_t a, uint32_t b)
{
    if (s->cfg.trace != NULL) {
        s->cfg.trace(s->cfg.trace_ctx, event, a, b);
    }
}

static int has_state(const pe_proto_server *s)
{
    return s->cfg.storage != NULL && s->cfg.model->state.bytes > 0u
           && s->cfg.model->state.read != NULL && s->cfg.model->state.write != NULL;
}

static void forget_training(pe_proto_server *s)
{
    s->last_seq = 0;
    s->steps = 0;
    s->run_id = PE_RUN_NONE;
    s->last_loss_bits = PE_NAN_BITS;
    s->restored = 0;
}

/* What a reboot does: initial parameters, then the newest checkpoint if there is one. */
static int restore(pe_proto_server *s)
{
    const pe_proto_model *m = s->cfg.model;
    int rc = m->init != NULL ? m->init() : 0;
    forget_training(s);
    s->ckpt.generation = 0;
    s->ckpt.slot = 0;
    if (rc != 0 || !has_state(s)) {
        trace(s, PE_TRACE_RESTORED, 0u, 0u);
        return rc;
    }
    {
        pe_checkpoint_info info;
        const int r = pe_checkpoint_restore(s->cfg.storage, m->model_hash, &m->state, &info);
        if (r == PE_CKPT_OK) {
            s->ckpt = info;
            s->last_seq = info.last_seq;
            s->steps = info.steps;
            s->run_id = info.run_id;
            s->restored = 1;
        } else if (r == PE_CKPT_ERR_STATE && m->init != NULL) {
            rc = m->init(); /* a partial load: start from the initial parameters */
        }
        if (r != PE_CKPT_OK) {
            /* a later save must not overwrite the newest valid slot, if one is readable */
            pe_checkpoint_info newest;
            if (pe_checkpoint_find(s->cfg.storage, m->model_hash, m->state.bytes, &newest)
                == 1) {
                s->ckpt.generation = newest.generation;
                s->ckpt.slot = newest.slot;
            }
        }
    }
    trace(s, PE_TRACE_RESTORED, s->last_seq, s->restored ? s->ckpt.generation : 0u);
    return rc;
}

static int save_checkpoint(pe_proto_server *s)
{
    const pe_proto_model *m = s->cfg.model;
    pe_checkpoint_info info = s->ckpt;
    int r;
    if (!has_state(s)) {
        return PE_CKPT_ERR_STORAGE;
    }
    info.last_seq = s->last_seq;
    info.steps = s->steps;
    info.run_id = s->run_id;
    r = pe_checkpoint_save(s->cfg.storage, m->model_hash, &m->state, &info);
    if (r == PE_CKPT_OK) {
        s->ckpt = info;
        s->stats.checkpoints++;
        trace(s, PE_TRACE_CHECKPOINT, info.last_seq, info.generation);
    } else {
        /* the target slot may be half written; s->ckpt still names the newest valid one,
         * so the next save targets the same (broken) slot again */
        s->stats.checkpoint_errors++;
    }
    return r;
}

/* -- commands ------------------------------------------------------------------------------- */
static void cmd_info(pe_proto_server *s, uint32_t seq)
{
    const pe_proto_model *m = s->cfg.model;
    uint8_t *b = body(s);
    uint32_t n = 0;
    uint32_t i;
    b[0] = (uint8_t)PE_PROTO_VERSION;
    b[1] = (uint8_t)m->flags;
    put16(b + 2, s->max_body);
    put32(b + 4, m->arena_bytes);
    put32(b + 8, (uint32_t)m->state.bytes);
    put32(b + 12, m->export_bytes);
    put32(b + 16, m->input_bytes);
    put32(b + 20, m->output_bytes);
    put32(b + 24, m->target_bytes);
    put32(b + 28, m->num_classes);
    put32(b + 32, s->last_seq);
    put32(b + 36, s->steps);
    put32(b + 40, s->run_id);
    put32(b + 44, s->ckpt.generation);
    put32(b + 48, s->ckpt.generation != 0u ? s->ckpt.last_seq : 0u);
    put32(b + 52, m->describe != NULL ? m->describe_bytes : 0u);
    put32(b + 56, s->cfg.xfer_buf != NULL ? (uint32_t)s->cfg.xfer_cap : 0u);
    b[60] = (uint8_t)((has_state(s) ? PE_DEVICE_STORAGE : 0u)
                      | (s->restored ? PE_DEVICE_RESTORED : 0u));
    if (m->board != NULL) {
        while (n < PE_PROTO_BOARD_MAX && m->board[n] != '\0') {
            n++;
        }
    }
    b[61] = (uint8_t)n;
    for (i = 0; i < PE_PROTO_HASH_BYTES; ++i) {
        b[62 + i] = m->model_hash != NULL ? m->model_hash[i] : 0u;
    }
    for (i = 0; i < n; ++i) {
        b[62 + PE_PROTO_HASH_BYTES + i] = (uint8_t)m->board[i];
    }
    respond(s, PE_CMD_INFO, PE_ST_OK, seq, 62u + PE_PROTO_HASH_BYTES + n);
}

static int is_mse(const pe_proto_model *m)
{
    return (m->flags & PE_MODEL_MSE) != 0u;
}

static void train_reply(pe_proto_server *s, uint32_t seq, uint32_t status, uint32_t sample,
                        uint32_t loss_bits, int32_t prediction, int32_t rc)
{
    uint8_t *b = body(s);
    put32(b, sample);
    put32(b + 4, s->last_seq + 1u);
    put32(b + 8, loss_bits);
    put32(b + 12, (uint32_t)prediction);
    put32(b + 16, s->steps);
    put32(b + 20, s->ckpt.generation);
    put32(b + 24, (uint32_t)rc);
    put32(b + 28, s->run_id);
    respond(s, PE_CMD_TRAIN, status, seq, 32u);
}

static void cmd_train(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    const pe_proto_model *m = s->cfg.model;
    const uint32_t target = is_mse(m) ? m->target_bytes : 0u;
    uint32_t run;
    uint32_t sample;
    uint32_t flags;
    int32_t label;
    const int8_t *input;
    int32_t prediction = -1;
    float loss = 0.0f;
    int rc;
    if ((m->flags & PE_MODEL_TRAINING) == 0u
        || (is_mse(m) ? m->train_step_target == NULL : m->train_step == NULL)) {
        s->stats.train_rejected++;
        train_reply(s, seq, PE_ST_UNSUPPORTED, 0u, PE_NAN_BITS, -1, 0);
        return;
    }
    if (len != 16u + m->input_bytes + target) {
        s->stats.train_rejected++;
        train_reply(s, seq, PE_ST_BAD_LENGTH, 0u, PE_NAN_BITS, -1, 0);
        return;
    }
    run = get32(req);
    sample = get32(req + 4);
    flags = req[8];
    label = get_i32(req + 12);
    input = (const int8_t *)(const void *)(req + 16);
    if (run == PE_RUN_NONE || sample == 0u
        || (!is_mse(m) && (label < 0 || (uint32_t)label >= m->num_classes))) {
        s->stats.train_rejected++;
        train_reply(s, seq, PE_ST_BAD_ARGUMENT, sample, PE_NAN_BITS, -1, 0);
        return;
    }
    if (s->last_seq > 0u && run != s->run_id) {
        s->stats.train_rejected++;
        train_reply(s, seq, PE_ST_RUN_MISMATCH, sample, PE_NAN_BITS, -1, 0);
        return;
    }
    if (sample <= s->last_seq) {
        s->stats.train_duplicates++;
        train_reply(s, seq, PE_ST_DUPLICATE, sample,
                    sample == s->last_seq ? s->last_loss_bits : PE_NAN_BITS, -1, 0);
        return;
    }
    if (sample != s->last_seq + 1u) {
        s->stats.train_rejected++;
        train_reply(s, seq, PE_ST_SEQ_GAP, sample, PE_NAN_BITS, -1, 0);
        return;
    }
    if ((flags & PE_TRAIN_PREDICT) != 0u && m->infer != NULL
        && m->output_bytes <= s->max_body) {
        /* the output goes through the tx body, which the reply overwrites afterwards */
        int8_t *out = (int8_t *)(void *)body(s);
        if (m->infer(input, out) == 0) {
            prediction = is_mse(m) ? -1 : (int32_t)argmax_s8(out, m->output_bytes);
        }
    }
    if (is_mse(m)) {
        rc = m->train_step_target(input, (const int8_t *)(const void *)(req + 16
                                                                       + m->input_bytes),
                                  &loss);
    } else {
        rc = m->train_step(input, label, &loss);
    }
    if (rc != 0) {
        s->stats.train_rejected++;
        train_reply(s, seq, PE_ST_MODEL_ERROR, sample, PE_NAN_BITS, prediction, rc);
        return;
    }
    if (s->last_seq == 0u) {
        s->run_id = run;
    }
    s->last_seq = sample;
    s->steps++;
    s->last_loss_bits = float_bits(loss);
    s->xfer_mode = PE_XFER_NONE; /* a GET_PARAMS snapshot is stale now */
    s->stats.train_applied++;
    trace(s, PE_TRACE_APPLIED, sample, s->steps);
    if ((flags & PE_TRAIN_CHECKPOINT) != 0u && has_state(s)) {
        (void)save_checkpoint(s);
    }
    train_reply(s, seq, PE_ST_OK, sample, s->last_loss_bits, prediction, 0);
}

static void cmd_infer(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    const pe_proto_model *m = s->cfg.model;
    int rc;
    if (m->infer == NULL || m->output_bytes > s->max_body) {
        respond(s, PE_CMD_INFER, PE_ST_UNSUPPORTED, seq, 0u);
        return;
    }
    if (len != m->input_bytes) {
        respond(s, PE_CMD_INFER, PE_ST_BAD_LENGTH, seq, 0u);
        return;
    }
    rc = m->infer((const int8_t *)(const void *)req, (int8_t *)(void *)body(s));
    if (rc != 0) {
        put32(body(s), (uint32_t)rc);
        respond(s, PE_CMD_INFER, PE_ST_MODEL_ERROR, seq, 4u);
        return;
    }
    respond(s, PE_CMD_INFER, PE_ST_OK, seq, m->output_bytes);
}

static void eval_reply(pe_proto_server *s, uint32_t seq, uint32_t status, uint32_t count)
{
    uint8_t *b = body(s);
    put32(b, s->eval_total);
    put32(b + 4, s->eval_correct);
    put32(b + 8, s->eval_sq_hi);
    put32(b + 12, s->eval_sq_lo);
    b[16] = (uint8_t)count;
    b[17] = 0u;
    put16(b + 18, 0u);
    respond(s, PE_CMD_EVAL, status, seq, 20u + 4u * count);
}

/* EVAL: count records, each (i32 label | input) or (input | int8 target[output]); per sample
 * the response carries the argmax (labels) or the sum of squared int8 errors (targets).
 * Each output is computed in the tx body, behind the per-sample results. */
static void cmd_eval(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    const pe_proto_model *m = s->cfg.model;
    uint32_t flags;
    uint32_t count;
    uint32_t rec;
    uint32_t k;
    int targets;
    uint8_t *b = body(s);
    if (m->infer == NULL || m->output_bytes == 0u) {
        eval_reply(s, seq, PE_ST_UNSUPPORTED, 0u);
        return;
    }
    if (len < 4u) {
        eval_reply(s, seq, PE_ST_BAD_LENGTH, 0u);
        return;
    }
    flags = req[0];
    count = req[1];
    targets = (flags & PE_EVAL_TARGETS) != 0u;
    rec = targets ? m->input_bytes + m->output_bytes : 4u + m->input_bytes;
    /* the outputs are computed in the tx body after the per-sample results */
    if (len != 4u + count * rec || 20u + 4u * count + m->output_bytes > s->max_body) {
        eval_reply(s, seq, PE_ST_BAD_LENGTH, 0u);
        return;
    }
    if ((flags & PE_EVAL_RESET) != 0u) {
        s->eval_total = 0;
        s->eval_correct = 0;
        s->eval_sq_hi = 0;
        s->eval_sq_lo = 0;
    }
    for (k = 0; k < count; ++k) {
        const uint8_t *r = req + 4u + k * rec;
        const int8_t *input = (const int8_t *)(const void *)(targets ? r : r + 4);
        int8_t *out = (int8_t *)(void *)(b + 20u + 4u * count);
        uint32_t result;
        int rc = m->infer(input, out);
        if (rc != 0) {
            put32(b + 20u + 4u * k, (uint32_t)rc);
            eval_reply(s, seq, PE_ST_MODEL_ERROR, k);
            return;
        }
        if (targets) {
            const int8_t *t = (const int8_t *)(const void *)(r + m->input_bytes);
            uint32_t j;
            uint32_t sq = 0;
            uint32_t lo;
            for (j = 0; j < m->output_bytes; ++j) {
                const int32_t d = (int32_t)out[j] - (int32_t)t[j];
                sq += (uint32_t)(d * d);
            }
            result = sq;
            lo = s->eval_sq_lo + sq;
            s->eval_sq_hi += lo < s->eval_sq_lo ? 1u : 0u;
            s->eval_sq_lo = lo;
        } else {
            result = argmax_s8(out, m->output_bytes);
            if ((int32_t)result == get_i32(r)) {
                s->eval_correct++;
            }
        }
        s->eval_total++;
        put32(b + 20u + 4u * k, result);
    }
    eval_reply(s, seq, PE_ST_OK, count);
}

static void cmd_get_params(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    const pe_proto_model *m = s->cfg.model;
    uint8_t *b = body(s);
    uint32_t offset;
    uint32_t want;
    uint32_t n;
    if (m->params_export == NULL || m->export_bytes == 0u || s->cfg.xfer_buf == NULL
        || s->cfg.xfer_cap < m->export_bytes) {
        respond(s, PE_CMD_GET_PARAMS, PE_ST_UNSUPPORTED, seq, 0u);
        return;
    }
    if (len != 6u) {
        respond(s, PE_CMD_GET_PARAMS, PE_ST_BAD_LENGTH, seq, 0u);
        return;
    }
    offset = get32(req);
    want = get16(req + 4);
    if (offset > m->export_bytes) {
        respond(s, PE_CMD_GET_PARAMS, PE_ST_BAD_ARGUMENT, seq, 0u);
        return;
    }
    if (offset == 0u || s->xfer_mode != PE_XFER_SNAPSHOT) {
        s->xfer_mode = PE_XFER_NONE;
        if (m->params_export(s->cfg.xfer_buf, s->cfg.xfer_cap) != m->export_bytes) {
            respond(s, PE_CMD_GET_PARAMS, PE_ST_MODEL_ERROR, seq, 0u);
            return;
        }
        s->xfer_mode = PE_XFER_SNAPSHOT;
        s->params_crc = pe_crc32_update(0u, s->cfg.xfer_buf, m->export_bytes);
    }
    n = m->export_bytes - offset;
    if (n > want) {
        n = want;
    }
    if (n > s->max_body - 12u) {
        n = s->max_body - 12u;
    }
    put32(b, offset);
    put32(b + 4, m->export_bytes);
    put32(b + 8, s->params_crc);
    copy_bytes(b + 12, s->cfg.xfer_buf + offset, n);
    respond(s, PE_CMD_GET_PARAMS, PE_ST_OK, seq, 12u + n);
}

static void set_reply(pe_proto_server *s, uint32_t seq, uint32_t status, uint32_t committed)
{
    uint8_t *b = body(s);
    put32(b, s->xfer_mode == PE_XFER_FILLING || committed ? s->xfer_filled : 0u);
    put32(b + 4, s->cfg.model->export_bytes);
    put32(b + 8, committed ? s->params_crc : 0u);
    b[12] = (uint8_t)committed;
    respond(s, PE_CMD_SET_PARAMS, status, seq, 13u);
}

static void cmd_set_params(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    const pe_proto_model *m = s->cfg.model;
    uint32_t offset;
    uint32_t total;
    uint32_t n;
    int rc;
    if (m->params_import == NULL || m->export_bytes == 0u || s->cfg.xfer_buf == NULL
        || s->cfg.xfer_cap < m->export_bytes) {
        respond(s, PE_CMD_SET_PARAMS, PE_ST_UNSUPPORTED, seq, 0u);
        return;
    }
    if (len < 8u) {
        respond(s, PE_CMD_SET_PARAMS, PE_ST_BAD_LENGTH, seq, 0u);
        return;
    }
    offset = get32(req);
    total = get32(req + 4);
    n = len - 8u;
    if (offset == 0u || s->xfer_mode != PE_XFER_FILLING) {
        s->xfer_mode = PE_XFER_FILLING;
        s->xfer_filled = 0u;
    }
    if (total != m->export_bytes || offset != s->xfer_filled || n > total - offset) {
        set_reply(s, seq, PE_ST_BAD_ARGUMENT, 0u);
        return;
    }
    copy_bytes(s->cfg.xfer_buf + offset, req + 8, n);
    s->xfer_filled = offset + n;
    if (s->xfer_filled < total) {
        set_reply(s, seq, PE_ST_OK, 0u);
        return;
    }
    s->params_crc = pe_crc32_update(0u, s->cfg.xfer_buf, total);
    rc = m->params_import(s->cfg.xfer_buf, total);
    s->xfer_mode = PE_XFER_NONE;
    if (rc != 0) {
        s->xfer_filled = 0u;
        set_reply(s, seq, PE_ST_MODEL_ERROR, 0u);
        return;
    }
    set_reply(s, seq, PE_ST_OK, 1u);
    s->xfer_filled = 0u;
}

static void ckpt_reply(pe_proto_server *s, uint32_t cmd, uint32_t seq, uint32_t status,
                       int32_t rc)
{
    uint8_t *b = body(s);
    put32(b, s->ckpt.generation);
    put32(b + 4, s->last_seq);
    put32(b + 8, s->steps);
    put32(b + 12, (uint32_t)rc);
    b[16] = (uint8_t)s->ckpt.slot;
    b[17] = s->restored;
    respond(s, cmd, status, seq, 18u);
}

static void cmd_checkpoint(pe_proto_server *s, uint32_t seq, uint32_t len)
{
    int r;
    if (!has_state(s)) {
        ckpt_reply(s, PE_CMD_CHECKPOINT, seq, PE_ST_UNSUPPORTED, 0);
        return;
    }
    if (len != 0u) {
        ckpt_reply(s, PE_CMD_CHECKPOINT, seq, PE_ST_BAD_LENGTH, 0);
        return;
    }
    r = save_checkpoint(s);
    ckpt_reply(s, PE_CMD_CHECKPOINT, seq, r == PE_CKPT_OK ? PE_ST_OK : PE_ST_STORAGE_ERROR, r);
}

static void cmd_stats(pe_proto_server *s, uint32_t seq)
{
    const uint32_t v[] = {
        s->stats.frames_ok, s->stats.crc_errors, s->stats.cobs_errors, s->stats.oversize,
        s->stats.short_frames, s->stats.bad_header, s->stats.resent, s->stats.nacks,
        s->stats.train_applied, s->stats.train_duplicates, s->stats.train_rejected,
        s->stats.checkpoints, s->stats.checkpoint_errors, s->last_seq, s->steps,
        s->ckpt.generation, s->last_loss_bits, s->eval_total, s->eval_correct,
        s->stats.staged, s->stats.parts,
    };
    uint32_t i;
    for (i = 0; i < (uint32_t)(sizeof(v) / sizeof(v[0])); ++i) {
        put32(body(s) + 4u * i, v[i]);
    }
    respond(s, PE_CMD_STATS, PE_ST_OK, seq, 4u * i);
}

static void cmd_reset(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    int rc;
    if (len != 1u || req[0] > PE_RESET_FACTORY) {
        ckpt_reply(s, PE_CMD_RESET, seq, len != 1u ? PE_ST_BAD_LENGTH : PE_ST_BAD_ARGUMENT,
                   0);
        return;
    }
    s->xfer_mode = PE_XFER_NONE;
    s->eval_total = 0;
    s->eval_correct = 0;
    s->eval_sq_hi = 0;
    s->eval_sq_lo = 0;
    if (req[0] == PE_RESET_FACTORY) {
        const pe_proto_model *m = s->cfg.model;
        rc = m->init != NULL ? m->init() : 0;
        forget_training(s);
        s->ckpt.generation = 0;
        s->ckpt.slot = 0;
        trace(s, PE_TRACE_RESTORED, 0u, 0u);
        if (rc == 0 && has_state(s) && pe_checkpoint_erase(s->cfg.storage) != PE_CKPT_OK) {
            ckpt_reply(s, PE_CMD_RESET, seq, PE_ST_STORAGE_ERROR, PE_CKPT_ERR_STORAGE);
            return;
        }
    } else {
        rc = restore(s);
    }
    ckpt_reply(s, PE_CMD_RESET, seq, rc == 0 ? PE_ST_OK : PE_ST_MODEL_ERROR, rc);
}

static void cmd_describe(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    const pe_proto_model *m = s->cfg.model;
    const uint32_t total = m->describe != NULL ? m->describe_bytes : 0u;
    uint8_t *b = body(s);
    uint32_t offset;
    uint32_t n;
    if (len != 6u) {
        respond(s, PE_CMD_DESCRIBE, PE_ST_BAD_LENGTH, seq, 0u);
        return;
    }
    offset = get32(req);
    if (offset > total) {
        respond(s, PE_CMD_DESCRIBE, PE_ST_BAD_ARGUMENT, seq, 0u);
        return;
    }
    n = total - offset;
    if (n > get16(req + 4)) {
        n = get16(req + 4);
    }
    if (n > s->max_body - 8u) {
        n = s->max_body - 8u;
    }
    put32(b, offset);
    put32(b + 4, total);
    if (n > 0u) {
        copy_bytes(b + 8, m->describe + offset, n);
    }
    respond(s, PE_CMD_DESCRIBE, PE_ST_OK, seq, 8u + n);
}

/* -- large messages ------------------------------------------------------------------------- */
/* PUT, and EXEC refused for want of the staged request: u32 bytes staged. */
static void put_reply(pe_proto_server *s, uint32_t cmd, uint32_t seq, uint32_t status)
{
    put32(body(s), s->xfer_mode == PE_XFER_STAGING ? s->xfer_filled : 0u);
    respond(s, cmd, status, seq, 4u);
}

/* PUT: u32 offset, bytes of a request (u8 command, body) staged in the transfer buffer.
 * Offset 0 starts a new one; any other offset must continue it (else: sequence gap, with
 * where the device is). */
static void cmd_put(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    uint32_t offset;
    uint32_t n;
    if (s->cfg.xfer_buf == NULL) {
        respond(s, PE_CMD_PUT, PE_ST_UNSUPPORTED, seq, 0u);
        return;
    }
    if (len < 4u) {
        put_reply(s, PE_CMD_PUT, seq, PE_ST_BAD_LENGTH);
        return;
    }
    offset = get32(req);
    n = len - 4u;
    if (offset == 0u) {
        s->xfer_mode = PE_XFER_STAGING;
        s->xfer_filled = 0u;
    }
    if (s->xfer_mode != PE_XFER_STAGING || offset != s->xfer_filled) {
        put_reply(s, PE_CMD_PUT, seq, PE_ST_SEQ_GAP);
        return;
    }
    if (n > s->cfg.xfer_cap - offset) {
        put_reply(s, PE_CMD_PUT, seq, PE_ST_BAD_LENGTH);
        return;
    }
    copy_bytes(s->cfg.xfer_buf + offset, req + 4, n);
    s->xfer_filled = offset + n;
    put_reply(s, PE_CMD_PUT, seq, PE_ST_OK);
}

static void run_command(pe_proto_server *s, uint32_t type, uint32_t seq, const uint8_t *req,
                        uint32_t len);

/* EXEC: u32 length, u32 CRC-32 of the staged request; it runs (TRAIN, INFER and EVAL only)
 * as if it had come in one frame with EXEC's sequence number and reply limit. */
static void cmd_exec(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    uint32_t n;
    uint32_t cmd;
    if (len != 8u) {
        respond(s, PE_CMD_EXEC, PE_ST_BAD_LENGTH, seq, 0u);
        return;
    }
    n = get32(req);
    if (s->xfer_mode != PE_XFER_STAGING || n == 0u || n != s->xfer_filled
        || pe_crc32_update(0u, s->cfg.xfer_buf, n) != get32(req + 4)) {
        s->xfer_mode = PE_XFER_NONE; /* not what the host sent: it stages again */
        put_reply(s, PE_CMD_EXEC, seq, PE_ST_SEQ_GAP);
        return;
    }
    s->xfer_mode = PE_XFER_NONE;
    cmd = s->cfg.xfer_buf[0];
    if (cmd != PE_CMD_TRAIN && cmd != PE_CMD_INFER && cmd != PE_CMD_EVAL) {
        respond(s, PE_CMD_EXEC, PE_ST_BAD_ARGUMENT, seq, 0u);
        return;
    }
    s->stats.staged++;
    run_command(s, cmd, seq, s->cfg.xfer_buf + 1, n - 1u);
}

/* FETCH: u16 seq, u16 offset, u16 mask, u8 rounds: the PARTs of the cached response to
 * request seq at offset + i x (reply limit - PART header) for every bit i set in mask, back
 * to back, all of them `rounds` times over (the host asks for those it still misses, and
 * for a few missing ones on a noisy line more than once). Answered from the cache without
 * replacing it. The host sends each FETCH (its own sequence number) twice in a row on a
 * noisy link: the second copy of one that was served is ignored. */
static void cmd_fetch(pe_proto_server *s, uint32_t seq, const uint8_t *req, uint32_t len)
{
    uint32_t mask;
    uint32_t room;
    uint32_t r;
    if (len != 7u || !s->have_last || get16(req) != s->last_req_seq
        || get16(req + 2) >= s->tx_len || get16(req + 4) == 0u || req[6] == 0u
        || req[6] > 16u) {
        send_short(s, PE_CMD_FETCH | PE_TYPE_RESPONSE, PE_ST_BAD_ARGUMENT, seq);
        return;
    }
    if (s->have_fetch && seq == s->last_fetch_seq) {
        return;
    }
    s->have_fetch = 1u;
    s->last_fetch_seq = (uint16_t)seq;
    mask = get16(req + 4);
    room = s->reply_limit == PE_NO_LIMIT ? (uint32_t)s->tx_len
                                          : s->reply_limit - PE_PROTO_PART_HEADER_BYTES;
    for (r = 0; r < req[6]; ++r) {
        uint32_t offset = get16(req + 2);
        uint32_t i;
        for (i = 0; i < 16u && offset < s->tx_len; ++i, offset += room) {
            if ((mask >> i) & 1u) {
                (void)send_part(s, seq, offset);
            }
        }
    }
}

/* -- dispatch ------------------------------------------------------------------------------- */
/* The commands that run the model or read its state (also as a staged request: EXEC calls
 * this, and it never calls EXEC - no recursion). */
static void run_command(pe_proto_server *s, uint32_t type, uint32_t seq, const uint8_t *req,
                        uint32_t len)
{
    switch (type) {
    case PE_CMD_INFO:
        cmd_info(s, seq);
        break;
    case PE_CMD_TRAIN:
        cmd_train(s, seq, req, len);
        break;
    case PE_CMD_INFER:
        cmd_infer(s, seq, req, len);
        break;
    case PE_CMD_EVAL:
        cmd_eval(s, seq, req, len);
        break;
    case PE_CMD_GET_PARAMS:
        cmd_get_params(s, seq, req, len);
        break;
    case PE_CMD_SET_PARAMS:
        cmd_set_params(s, seq, req, len);
        break;
    case PE_CMD_CHECKPOINT:
        cmd_checkpoint(s, seq, len);
        break;
    case PE_CMD_STATS:
        cmd_stats(s, seq);
        break;
    case PE_CMD_RESET:
        cmd_reset(s, seq, req, len);
        break;
    case PE_CMD_DESCRIBE:
        cmd_describe(s, seq, req, len);
        break;
    default:
        respond(s, type, PE_ST_UNKNOWN_COMMAND, seq, 0u);
        break;
    }
}

/* A request of another protocol version: status "bad version" with this device's version as
 * the body, not cached. Version 1's requests had an 8-byte header (version, type, flags,
 * status, u16 seq, u16 length): they get the answer in that layout, so that an old host can
 * name the mismatch too. */
static void bad_version(pe_proto_server *s, const uint8_t *f, size_t n)
{
    uint8_t r[9];
    if (f[0] == 1u && n >= 8u) {
        r[0] = (uint8_t)PE_PROTO_VERSION;
        r[1] = (uint8_t)(f[1] | PE_TYPE_RESPONSE);
        r[2] = 0u;
        r[3] = (uint8_t)PE_ST_BAD_VERSION;
        r[4] = f[4];
        r[5] = f[5];
        put16(r + 6, 1u);
        r[8] = (uint8_t)PE_PROTO_VERSION;
        send_frame(s, r, 9u, r, 0u);
        return;
    }
    header(r, f[1] | PE_TYPE_RESPONSE, PE_ST_BAD_VERSION, get16(f + 3));
    r[PE_HDR] = (uint8_t)PE_PROTO_VERSION;
    send_frame(s, r, PE_HDR + 1u, r, 0u);
}

static void handle_frame(pe_proto_server *s, const uint8_t *f, size_t n, uint32_t crc)
{
    uint32_t type;
    uint32_t seq;
    if (n < PE_HDR || (f[1] & PE_TYPE_RESPONSE) != 0u) {
        s->stats.bad_header++;
        nack(s, PE_NACK_HEADER);
        return;
    }
    s->stats.frames_ok++;
    if (f[0] != PE_PROTO_VERSION) {
        bad_version(s, f, n);
        return;
    }
    type = f[1];
    seq = get16(f + 3);
    s->reply_limit = f[2] == 0u ? PE_NO_LIMIT : (uint32_t)f[2] * PE_PROTO_REPLY_UNIT;
    if (s->reply_limit < PE_PROTO_MIN_REPLY) {
        s->reply_limit = PE_PROTO_MIN_REPLY;
    }
    if (type == PE_CMD_FETCH) {
        cmd_fetch(s, seq, f + PE_HDR, (uint32_t)(n - PE_HDR));
        return;
    }
    if (s->have_last && seq == s->last_req_seq && crc == s->last_req_crc) {
        s->stats.resent++;
        send_cached(s, seq);
        return;
    }
    s->have_last = 1u;
    s->last_req_seq = (uint16_t)seq;
    s->last_req_crc = crc;
    if (type == PE_CMD_PUT) {
        cmd_put(s, seq, f + PE_HDR, (uint32_t)(n - PE_HDR));
    } else if (type == PE_CMD_EXEC) {
        cmd_exec(s, seq, f + PE_HDR, (uint32_t)(n - PE_HDR));
    } else {
        run_command(s, type, seq, f + PE_HDR, (uint32_t)(n - PE_HDR));
    }
}

void pe_proto_byte(pe_proto_server *s, uint8_t byte)
{
    const int r = pe_frame_rx_push(&s->rx, byte);
    if (r < 0 && s->rx.raw < PE_PROTO_QUIET_BYTES) {
        /* a byte or two of noise between frames (e.g. a hit second delimiter): no request
         * is that short, and a damaged one leaves a longer piece, so no NACK for it */
        s->stats.short_frames++;
        return;
    }
    switch (r) {
    case PE_FRAME_READY:
        handle_frame(s, s->rx.buf, s->rx.len, s->rx.crc);
        break;
    case PE_FRAME_ERR_CRC:
        s->stats.crc_errors++;
        nack(s, PE_NACK_CRC);
        break;
    case PE_FRAME_ERR_COBS:
        s->stats.cobs_errors++;
        nack(s, PE_NACK_COBS);
        break;
    case PE_FRAME_ERR_OVERSIZE:
        s->stats.oversize++;
        nack(s, PE_NACK_OVERSIZE);
        break;
    case PE_FRAME_ERR_SHORT:
        s->stats.short_frames++;
        nack(s, PE_NACK_SHORT);
        break;
    default:
        break;
    }
}

void pe_proto_feed(pe_proto_server *s, const uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        pe_proto_byte(s, data[i]);
    }
}

int pe_proto_init(pe_proto_server *s, const pe_proto_config *cfg)
{
    uint8_t *p = (uint8_t *)(void *)s;
    size_t i;
    size_t body_rx;
    size_t body_tx;
    for (i = 0; i < sizeof(*s); ++i) {
        p[i] = 0u;
    }
    s->cfg = *cfg;
    if (cfg->model == NULL || cfg->write == NULL || cfg->rx_buf == NULL
        || cfg->tx_buf == NULL || cfg->rx_cap < PE_PROTO_RX_BYTES(PE_PROTO_MIN_BODY)
        || cfg->tx_cap < PE_PROTO_TX_BYTES(PE_PROTO_MIN_BODY)) {
        return -1;
    }
    if (cfg->model->export_bytes > 0u && cfg->xfer_buf != NULL
        && cfg->xfer_cap < cfg->model->export_bytes) {
        return -1;
    }
    body_rx = cfg->rx_cap - PE_HDR - PE_FRAME_CRC_BYTES;
    body_tx = cfg->tx_cap - PE_HDR;
    s->max_body = (uint32_t)(body_rx < body_tx ? body_rx : body_tx);
    if (s->max_body > 0xFFFFu - PE_HDR) {
        s->max_body = 0xFFFFu - PE_HDR; /* PART offsets and totals are u16 */
    }
    s->reply_limit = PE_NO_LIMIT;
    pe_frame_rx_init(&s->rx, cfg->rx_buf, cfg->rx_cap);
    s->last_loss_bits = PE_NAN_BITS;
    return restore(s);
}
