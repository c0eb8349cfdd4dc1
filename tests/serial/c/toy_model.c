/* toy_model.c - see toy_model.h. */
#include "toy_model.h"

#include <string.h>

typedef struct {
    int32_t w[TOY_CLASSES][TOY_INPUT_BYTES];
    int32_t b[TOY_CLASSES];
    int32_t m[TOY_CLASSES];
    uint32_t step;
} toy_state;

static toy_state st;
static int ready;

static int8_t sat8(int32_t v)
{
    return (int8_t)(v > 127 ? 127 : (v < -128 ? -128 : v));
}

int toy_init(void)
{
    unsigned c, i;
    for (c = 0; c < TOY_CLASSES; ++c) {
        for (i = 0; i < TOY_INPUT_BYTES; ++i) {
            st.w[c][i] = (int32_t)((c * 7u + i * 3u) % 11u) - 5;
        }
        st.b[c] = (int32_t)c;
        st.m[c] = 0;
    }
    st.step = 0;
    ready = 1;
    return 0;
}

int toy_infer(const int8_t *input, int8_t *output)
{
    unsigned c, i;
    if (!ready) {
        return -1;
    }
    for (c = 0; c < TOY_CLASSES; ++c) {
        int32_t acc = st.b[c] * 16;
        for (i = 0; i < TOY_INPUT_BYTES; ++i) {
            acc += st.w[c][i] * (int32_t)input[i];
        }
        output[c] = sat8(acc / 64);
    }
    return 0;
}

static void update(const int8_t *input, const int8_t *want, float *loss)
{
    int8_t out[TOY_CLASSES];
    unsigned c, i;
    int32_t err_sum = 0;
    toy_infer(input, out);
    for (c = 0; c < TOY_CLASSES; ++c) {
        const int32_t err = (int32_t)want[c] - (int32_t)out[c];
        err_sum += err < 0 ? -err : err;
        st.m[c] = (st.m[c] * 3) / 4 + err;
        for (i = 0; i < TOY_INPUT_BYTES; ++i) {
            st.w[c][i] += (st.m[c] * (int32_t)input[i]) / 4096;
        }
        st.b[c] += st.m[c] / 32 + (int32_t)(st.step & 1u);
    }
    st.step++;
    if (loss != NULL) {
        *loss = (float)err_sum / 256.0f;
    }
}

int toy_train_step(const int8_t *input, int32_t label, float *loss)
{
    int8_t want[TOY_CLASSES];
    unsigned c;
    if (!ready) {
        return -1;
    }
    if (input == NULL) {
        return -2;
    }
    if (label < 0 || label >= (int32_t)TOY_CLASSES) {
        return -4;
    }
    for (c = 0; c < TOY_CLASSES; ++c) {
        want[c] = (int32_t)c == label ? 100 : -100;
    }
    update(input, want, loss);
    return 0;
}

int toy_train_step_target(const int8_t *input, const int8_t *target, float *loss)
{
    if (!ready) {
        return -1;
    }
    if (input == NULL || target == NULL) {
        return -2;
    }
    update(input, target, loss);
    return 0;
}

static void put32(uint8_t *p, int32_t v)
{
    const uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

size_t toy_params_export(uint8_t *dst, size_t cap)
{
    unsigned c, i;
    if (dst == NULL || cap < TOY_EXPORT_BYTES) {
        return 0;
    }
    for (c = 0; c < TOY_CLASSES; ++c) {
        for (i = 0; i < TOY_INPUT_BYTES; ++i) {
            put32(dst, st.w[c][i]);
            dst += 4;
        }
    }
    for (c = 0; c < TOY_CLASSES; ++c) {
        put32(dst, st.b[c]);
        dst += 4;
    }
    return TOY_EXPORT_BYTES;
}

int toy_params_import(const uint8_t *src, size_t len)
{
    unsigned c, i;
    if (len != TOY_EXPORT_BYTES) {
        return -5;
    }
    for (c = 0; c < TOY_CLASSES; ++c) {
        for (i = 0; i < TOY_INPUT_BYTES; ++i) {
            st.w[c][i] = (int32_t)((uint32_t)src[0] | ((uint32_t)src[1] << 8)
                                   | ((uint32_t)src[2] << 16) | ((uint32_t)src[3] << 24));
            src += 4;
        }
    }
    for (c = 0; c < TOY_CLASSES; ++c) {
        st.b[c] = (int32_t)((uint32_t)src[0] | ((uint32_t)src[1] << 8)
                            | ((uint32_t)src[2] << 16) | ((uint32_t)src[3] << 24));
        src += 4;
    }
    return 0;
}

size_t toy_state_read(void *ctx, size_t offset, uint8_t *dst, size_t n)
{
    (void)ctx;
    if (offset > sizeof(st) || n > sizeof(st) - offset) {
        return 0;
    }
    memcpy(dst, (const uint8_t *)&st + offset, n);
    return n;
}

int toy_state_write(void *ctx, size_t offset, const uint8_t *src, size_t n)
{
    (void)ctx;
    if (offset > sizeof(st) || n > sizeof(st) - offset) {
        return -1;
    }
    memcpy((uint8_t *)&st + offset, src, n);
    return 0;
}
