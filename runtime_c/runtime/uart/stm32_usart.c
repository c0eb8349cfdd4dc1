/*
 * uart/stm32_usart.c - STM32 USART, F1/F2/F4 register layout (QEMU stm32f2xx-usart on
 * netduinoplus2). SR 0x00 (bit 7 TXE, bit 5 RXNE), DR 0x04, BRR 0x08, CR1 0x0C (UE bit 13,
 * TE bit 3, RE bit 2).
 */
#include "pe_uart.h"

#ifndef PE_UART_BASE
#error "PE_UART_BASE must be defined (the board file's uart.base)"
#endif
#ifndef PE_UART_CLOCK_HZ
#define PE_UART_CLOCK_HZ 16000000u /* HSI after reset */
#endif

#define USART_SR PE_UART_REG(0x00)
#define USART_DR PE_UART_REG(0x04)
#define USART_BRR PE_UART_REG(0x08)
#define USART_CR1 PE_UART_REG(0x0C)

void pe_uart_init(void)
{
#ifdef PE_UART_CLOCK_ENABLE
    PE_UART_CLOCK_ENABLE();
#endif
    USART_BRR = (PE_UART_CLOCK_HZ + PE_UART_BAUD / 2u) / PE_UART_BAUD;
    USART_CR1 = (1u << 13) | (1u << 3) | (1u << 2); /* UE | TE | RE */
}

void pe_uart_write(const uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        while ((USART_SR & (1u << 7)) == 0u) { /* wait for TXE */
        }
        USART_DR = data[i];
    }
}

int pe_uart_try_read(uint8_t *byte)
{
    if ((USART_SR & (1u << 5)) == 0u) {
        return 0;
    }
    *byte = (uint8_t)(USART_DR & 0xFFu);
    return 1;
}

void pe_uart_read(uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        while (!pe_uart_try_read(&data[i])) {
        }
    }
}
