/*
 * uart/nrf_uarte.c - nRF52 UARTE with EasyDMA (UARTE0 at 0x40002000 on the nRF52840; Renode
 * NRF52840_UART with easyDMA). EasyDMA moves data between the peripheral and RAM only, so both
 * directions go through small RAM buffers. Pins: PE_UART_TX_PIN (P0.06) and PE_UART_RX_PIN
 * (P0.08), the nRF52840-DK's virtual COM port.
 *
 * TASKS_STARTRX 0x000, TASKS_STARTTX 0x008, EVENTS_ENDRX 0x110, EVENTS_ENDTX 0x120,
 * ENABLE 0x500 (8 = UARTE), PSEL.TXD 0x50C, PSEL.RXD 0x514, BAUDRATE 0x524,
 * RXD.PTR 0x534, RXD.MAXCNT 0x538, TXD.PTR 0x544, TXD.MAXCNT 0x548.
 * Receiving is one byte per DMA transfer: simple, and nothing is lost between reads.
 */
#include "pe_uart.h"

#ifndef PE_UART_BASE
#error "PE_UART_BASE must be defined (the board file's uart.base)"
#endif
#ifndef PE_UART_TX_PIN
#define PE_UART_TX_PIN 6u
#endif
#ifndef PE_UART_RX_PIN
#define PE_UART_RX_PIN 8u
#endif

#define UARTE_TASKS_STARTRX PE_UART_REG(0x000)
#define UARTE_TASKS_STARTTX PE_UART_REG(0x008)
#define UARTE_EVENTS_ENDRX PE_UART_REG(0x110)
#define UARTE_EVENTS_ENDTX PE_UART_REG(0x120)
#define UARTE_ENABLE PE_UART_REG(0x500)
#define UARTE_PSEL_TXD PE_UART_REG(0x50C)
#define UARTE_PSEL_RXD PE_UART_REG(0x514)
#define UARTE_BAUDRATE PE_UART_REG(0x524)
#define UARTE_RXD_PTR PE_UART_REG(0x534)
#define UARTE_RXD_MAXCNT PE_UART_REG(0x538)
#define UARTE_TXD_PTR PE_UART_REG(0x544)
#define UARTE_TXD_MAXCNT PE_UART_REG(0x548)

#define UARTE_BAUD_115200 0x01D7E000u

static uint8_t tx_buffer[64];
static volatile uint8_t rx_byte;
static int rx_armed;

static void arm_rx(void)
{
    UARTE_EVENTS_ENDRX = 0u;
    UARTE_RXD_PTR = (uint32_t)(uintptr_t)&rx_byte;
    UARTE_RXD_MAXCNT = 1u;
    UARTE_TASKS_STARTRX = 1u;
    rx_armed = 1;
}

void pe_uart_init(void)
{
    if (UARTE_ENABLE == 8u) {
        return; /* already running (console and serial protocol share it) */
    }
    UARTE_PSEL_TXD = PE_UART_TX_PIN;
    UARTE_PSEL_RXD = PE_UART_RX_PIN;
    UARTE_BAUDRATE = UARTE_BAUD_115200;
    UARTE_ENABLE = 8u;
}

void pe_uart_write(const uint8_t *data, size_t n)
{
    while (n > 0u) {
        size_t k = n < sizeof(tx_buffer) ? n : sizeof(tx_buffer);
        size_t i;
        for (i = 0; i < k; i++) {
            tx_buffer[i] = data[i];
        }
        UARTE_EVENTS_ENDTX = 0u;
        UARTE_TXD_PTR = (uint32_t)(uintptr_t)tx_buffer;
        UARTE_TXD_MAXCNT = (uint32_t)k;
        UARTE_TASKS_STARTTX = 1u;
        while (UARTE_EVENTS_ENDTX == 0u) {
        }
        data += k;
        n -= k;
    }
}

int pe_uart_try_read(uint8_t *byte)
{
    if (!rx_armed) {
        arm_rx();
    }
    if (UARTE_EVENTS_ENDRX == 0u) {
        return 0;
    }
    *byte = rx_byte;
    arm_rx();
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
