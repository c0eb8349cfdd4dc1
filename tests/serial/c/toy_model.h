/*
 * toy_model.h - a tiny deterministic "model" with the generated model's API shape, for testing
 * the protocol server on the host: 16 int8 inputs, 4 classes, int32 weights and biases (the
 * exported parameters) plus a momentum-like accumulator and a step counter that only the
 * checkpoint sees. Every update depends on the previous state (clamping, the counter), so a
 * sample applied twice or out of order changes the final parameters.
 */
#ifndef TOY_MODEL_H
#define TOY_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define TOY_INPUT_BYTES 16u
#define TOY_CLASSES 4u
#define TOY_EXPORT_BYTES ((TOY_CLASSES * TOY_INPUT_BYTES + TOY_CLASSES) * 4u)
#define TOY_STATE_BYTES (TOY_EXPORT_BYTES + TOY_CLASSES * 4u + 4u)

int toy_init(void);
int toy_infer(const int8_t *input, int8_t *output);
int toy_train_step(const int8_t *input, int32_t label, float *loss);
int toy_train_step_target(const int8_t *input, const int8_t *target, float *loss);
size_t toy_params_export(uint8_t *dst, size_t cap);
int toy_params_import(const uint8_t *src, size_t len);
size_t toy_state_read(void *ctx, size_t offset, uint8_t *dst, size_t n);
int toy_state_write(void *ctx, size_t offset, const uint8_t *src, size_t n);

#endif
