/*
 * uart_echo.c - the serial path the protocol will use: through the board's UART (pe_uart.h),
 * while the console stays on semihosting. Announces itself, reads 16 bytes, sends them back
 * with bit 5 flipped (letters change case), and reports the byte sum on the console.
 */
#include <stdint.h>

#include "pe_runtime.h"
#include "pe_uart.h"

int main(void)
{
    uint8_t buf[16];
    uint32_t sum = 0;
    unsigned i;
    pe_uart_init();
    pe_uart_write((const uint8_t *)"ready\n", 6);
    pe_uart_read(buf, sizeof(buf));
    for (i = 0; i < sizeof(buf); i++) {
        sum += buf[i];
        buf[i] = (uint8_t)(buf[i] ^ 0x20u);
    }
    pe_uart_write(buf, sizeof(buf));
    pe_printf("echoed %lu\n", (unsigned long)sum);
    return 0;
}
