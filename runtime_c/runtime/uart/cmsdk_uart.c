/*
 * uart/cmsdk_uart.c - Arm CMSDK APB UART (MPS2 / MPS3 FPGA images; QEMU cmsdk-apb-uart).
 * DATA 0x00, STATE 0x04 (bit 0 TX full, bit 1 RX full), CTRL 0x08 (bit 0 TX enable, bit 1
 * RX enable), BAUDDIV 0x10 (>= 16).
 */
#include "pe_uart.h"

#ifndef PE_UART_BASE
#error "PE_UART_BASE must be defined (the board file's uart.base)"
#endif
#ifndef PE_UART_CLOCK_HZ
#define PE_UART_CLOCK_HZ 25000000u
#endif

#define CMSDK_DATA PE_UART_REG(0x00)
#define CMSDK_STATE PE_UART_REG(0x04)
#define CMSDK_CTRL PE_UART_REG(0x08)
#define CMSDK_BAUDDIV PE_UART_REG(0x10)

void pe_uart_init(void)
{
    CMSDK_BAUDDIV = PE_UART_CLOCK_HZ / PE_UART_BAUD;
    CMSDK_CTRL = CMSDK_CTRL | 3u; /* TX and RX enable */
}

void pe_uart_write(const uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        while ((CMSDK_STATE & 1u) != 0u) { /* TX buffer full */
        }
        CMSDK_DATA = data[i];
    }
}

int pe_uart_try_read(uint8_t *byte)
{
    if ((CMSDK_STATE & 2u) == 0u) {
        return 0;
    }
    *byte = (uint8_t)(CMSDK_DATA & 0xFFu);
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
