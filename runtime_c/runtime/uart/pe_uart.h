/*
 * pe_uart.h - the board's serial peripheral, polled (no interrupts, no DMA buffers to manage
 * for the caller). One driver per build, chosen from the board file's uart.type:
 *
 *   uart/cmsdk_uart.c      Arm CMSDK APB UART (MPS2 / MPS3; QEMU cmsdk-apb-uart)
 *   uart/stm32_usart.c     STM32 USART, F1/F2/F4 layout (QEMU stm32f2xx-usart on netduinoplus2)
 *   uart/stm32_usart_v2.c  STM32 USART, F0/F3/F7/L4/H7 layout (STM32F746; Renode STM32F7_USART)
 *   uart/nrf_uarte.c       nRF52 UARTE with EasyDMA (nRF52840; Renode NRF52840_UART)
 *
 * Configuration from the board file, as -D flags: PE_UART_BASE (required), PE_UART_CLOCK_HZ
 * (the peripheral clock, for the baud divisor), PE_UART_TX_PIN / PE_UART_RX_PIN (nRF pin
 * numbers); PE_UART_BAUD defaults to 115200. On real STM32 boards the peripheral and GPIO
 * clocks and pin functions must be set up first: define PE_UART_CLOCK_ENABLE() to do it.
 *
 * The console can use the same peripheral (console/uart.c); the serial protocol uses it
 * directly.
 */
#ifndef PE_UART_H
#define PE_UART_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PE_UART_BAUD
#define PE_UART_BAUD 115200u
#endif

#define PE_UART_REG(offset) (*(volatile uint32_t *)(uintptr_t)((PE_UART_BASE) + (offset)))

/* Enable transmitter and receiver (idempotent). */
void pe_uart_init(void);

/* Send n bytes, blocking until the last one is handed to the peripheral. */
void pe_uart_write(const uint8_t *data, size_t n);

/* Receive exactly n bytes, blocking. */
void pe_uart_read(uint8_t *data, size_t n);

/* Receive one byte if one is waiting: 1 and *byte set, else 0. */
int pe_uart_try_read(uint8_t *byte);

#ifdef __cplusplus
}
#endif

#endif /* PE_UART_H */
