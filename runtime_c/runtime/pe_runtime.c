/*
 * pe_runtime.c - console formatting and the exit protocol, on top of pe_console_write.
 * Freestanding: uses only <stdarg.h>, <stddef.h>, <stdint.h>.
 */
#include <stdarg.h>

#include "pe_runtime.h"

void pe_puts(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    pe_console_write(s, n);
}

/* Digits of v in base (10 or 16), most significant first, into buf (>= 20 bytes). */
static size_t format_unsigned(char *buf, unsigned long v, unsigned base, int upper)
{
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char tmp[24];
    size_t n = 0;
    size_t i;
    do {
        tmp[n++] = digits[v % base];
        v /= base;
    } while (v != 0u);
    for (i = 0; i < n; i++) {
        buf[i] = tmp[n - 1u - i];
    }
    return n;
}

static void emit_padded(const char *body, size_t n, int negative, size_t width, int zero,
                        int left)
{
    size_t len = n + (negative ? 1u : 0u);
    char pad = zero && !left ? '0' : ' ';
    if (left) {
        if (negative) {
            pe_console_write("-", 1);
        }
        pe_console_write(body, n);
        while (len < width) {
            pe_console_write(&pad, 1);
            len++;
        }
        return;
    }
    if (negative && zero) {
        pe_console_write("-", 1);
    }
    while (len < width) {
        pe_console_write(&pad, 1);
        len++;
    }
    if (negative && !zero) {
        pe_console_write("-", 1);
    }
    pe_console_write(body, n);
}

void pe_printf(const char *fmt, ...)
{
    va_list ap;
    const char *run = fmt;
    va_start(ap, fmt);
    while (*fmt != '\0') {
        int zero = 0;
        int left = 0;
        int is_long = 0;
        size_t width = 0;
        char buf[24];
        size_t n;
        if (*fmt != '%') {
            fmt++;
            continue;
        }
        pe_console_write(run, (size_t)(fmt - run));
        fmt++;
        while (*fmt == '0' || *fmt == '-') {
            if (*fmt == '0') {
                zero = 1;
            } else {
                left = 1;
            }
            fmt++;
        }
        while (*fmt >= '0' && *fmt <= '9') {
            width = width * 10u + (size_t)(*fmt - '0');
            fmt++;
        }
        if (*fmt == 'l') {
            is_long = 1;
            fmt++;
        }
        switch (*fmt) {
        case 'd':
        case 'i': {
            long v = is_long ? va_arg(ap, long) : (long)va_arg(ap, int);
            /* magnitude without overflowing on LONG_MIN */
            unsigned long mag = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
            n = format_unsigned(buf, mag, 10u, 0);
            emit_padded(buf, n, v < 0, width, zero, left);
            break;
        }
        case 'u':
        case 'x':
        case 'X': {
            unsigned long v = is_long ? va_arg(ap, unsigned long)
                                      : (unsigned long)va_arg(ap, unsigned int);
            n = format_unsigned(buf, v, *fmt == 'u' ? 10u : 16u, *fmt == 'X');
            emit_padded(buf, n, 0, width, zero, left);
            break;
        }
        case 'p': {
            unsigned long v = (unsigned long)(uintptr_t)va_arg(ap, void *);
            n = format_unsigned(buf, v, 16u, 0);
            pe_console_write("0x", 2);
            emit_padded(buf, n, 0, width, 1, 0);
            break;
        }
        case 'c': {
            char c = (char)va_arg(ap, int);
            emit_padded(&c, 1, 0, width, 0, left);
            break;
        }
        case 's': {
            const char *s = va_arg(ap, const char *);
            size_t len = 0;
            if (s == NULL) {
                s = "(null)";
            }
            while (s[len] != '\0') {
                len++;
            }
            emit_padded(s, len, 0, width, 0, left);
            break;
        }
        case '%':
            pe_console_write("%", 1);
            break;
        default: /* unknown conversion: print it verbatim */
            pe_console_write("%", 1);
            if (*fmt == '\0') {
                run = fmt;
                continue;
            }
            pe_console_write(fmt, 1);
            break;
        }
        fmt++;
        run = fmt;
    }
    pe_console_write(run, (size_t)(fmt - run));
    va_end(ap);
}

void pe_exit(int status)
{
    pe_printf("@pe:exit %d stack=%lu\n", status, (unsigned long)pe_stack_used());
    pe_platform_exit(status);
}
