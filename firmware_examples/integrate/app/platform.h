/*
 * platform.h - what the application needs from its firmware: labelled samples, a little
 * non-volatile storage and a way to send bytes out. platform_host.c implements it on a PC
 * (files); on a board these are your sensor driver, flash driver and UART.
 */
#ifndef APP_PLATFORM_H
#define APP_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* The next labelled sample (input_bytes int8 values and its class): 1, or 0 when there is none. */
int platform_next_sample(int8_t *input, size_t input_bytes, int32_t *label);

/* Non-volatile storage of at least 64 + PE_PARAMS_BYTES bytes (a flash page or two): erase
 * all of it (reads then give 0xFF), program bytes at an offset, read them back. 0: ok. */
int platform_storage_erase(void);
int platform_storage_write(uint32_t offset, const uint8_t *src, uint32_t n);
int platform_storage_read(uint32_t offset, uint8_t *dst, uint32_t n);

/* Bytes to the outside world (a UART, a radio): here, the learned parameters. */
void platform_send(const uint8_t *bytes, size_t n);

#endif /* APP_PLATFORM_H */
