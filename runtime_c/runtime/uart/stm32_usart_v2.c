/*
 * uart/stm32_usart_v2.c - STM32 USART, F0/F3/F7/L4/H7 register layout (STM32F746: USART1 at
 * 0x40011000 is the F746G-DISCO's ST-LINK virtual COM port; Renode STM32F7_USART).
 * CR1 0x00 (UE bit 0, RE bit 2, TE bit 3), BRR 0x0C, ISR 0x1C (RXNE bit 5, TXE bit 7),
 * RDR 0x24, TDR 0x28.
 */
#include "pe_uart.h"

#ifndef PE_UART_BASE
#error "PE_UART_BASE must be defined (the board file's uart.base)"
#endif
#ifndef PE_UART_CLOCK_HZ
#define PE_UART_CLOCK_HZ 16000000u /* HSI after reset */
#endif

#define USART_CR1 PE_UART_REG(0x00)
#define USART_BRR PE_UART_REG(0x0C)
#define USART_ISR PE_UART_REG(0x1C)
#define USART_RDR PE_UART_REG(0x24)
#define USART_TDR PE_UART_REG(0x28)

void pe_uart_init(void)
{
#ifdef PE_UART_CLOCK_ENABLE
    PE_UART_CLOCK_ENABLE();
#endif
    if ((USART_CR1 & 1u) != 0u) {
        return; /* already running (console and serial protocol share it) */
    }
    USART_BRR = (PE_UART_CLOCK_HZ + PE_UART_BAUD / 2u) / PE_UART_BAUD;
    USART_CR1 = (1u << 3) | (1u << 2) | (1u << 0); /* TE | RE | UE */
}

void pe_uart_write(const uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        while ((USART_ISR & (1u << 7)) == 0u) { /* wait for TXE */
        }
        USART_TDR = data[i];
    }
}

int pe_uart_try_read(uint8_t *byte)
{
    if ((USART_ISR & (1u << 5)) == 0u) {
        return 0;
    }
    *byte = (uint8_t)(USART_RDR & 0xFFu);
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
