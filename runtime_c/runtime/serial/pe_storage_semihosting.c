/*
 * pe_storage_semihosting.c - checkpoints in a host file through Arm semihosting.
 *
 * Under QEMU (-semihosting-config enable=on,target=native) SYS_OPEN/SYS_SEEK/SYS_WRITE/
 * SYS_READ are host open/lseek/write/read calls on a real file: what was written survives
 * killing the emulator (kill -9 included; writes are not buffered in the emulator), so a
 * restarted firmware finds its checkpoints. QEMU's mps2 machines have no flash device that
 * persists (their "flash" is RAM), hence this backend; see docs/serial-protocol.md.
 *
 * On hardware semihosting needs an attached debugger (BKPT 0xAB otherwise faults): use
 * pe_storage_flash.c there.
 */
#include "pe_storage.h"

#define PE_SYS_OPEN 0x01
#define PE_SYS_CLOSE 0x02
#define PE_SYS_WRITE 0x05
#define PE_SYS_READ 0x06
#define PE_SYS_SEEK 0x0A
#define PE_SYS_FLEN 0x0C
#define PE_OPEN_RW_BINARY 3     /* fopen "r+b": an existing file */
#define PE_OPEN_CREATE_BINARY 7 /* fopen "w+b": create it */

#if defined(__arm__) || defined(__thumb__)
static int pe_semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
#else
/* Not an Arm core: no semihosting (keeps the file compilable, e.g. for host warning checks). */
static int pe_semihost(int op, void *arg)
{
    (void)op;
    (void)arg;
    return -1;
}
#endif

static size_t pe_strlen(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

static int pe_semihost_seek(pe_semihost_file *f, uint32_t pos)
{
    uintptr_t args[2];
    args[0] = (uintptr_t)f->handle;
    args[1] = (uintptr_t)pos;
    return pe_semihost(PE_SYS_SEEK, args) == 0 ? 0 : PE_STORAGE_ERR_IO;
}

static int pe_semihost_read(void *ctx, uint32_t addr, uint8_t *dst, size_t n)
{
    pe_semihost_file *f = (pe_semihost_file *)ctx;
    uintptr_t args[3];
    size_t got = 0;
    int left;
    if (f->handle < 0) {
        return PE_STORAGE_ERR_IO;
    }
    if (addr < f->size) {
        if (pe_semihost_seek(f, addr) != 0) {
            return PE_STORAGE_ERR_IO;
        }
        args[0] = (uintptr_t)f->handle;
        args[1] = (uintptr_t)dst;
        args[2] = (uintptr_t)n;
        left = pe_semihost(PE_SYS_READ, args);
        if (left < 0 || (size_t)left > n) {
            return PE_STORAGE_ERR_IO;
        }
        got = n - (size_t)left;
    }
    while (got < n) { /* past the end of the file: never written, reads as erased */
        dst[got++] = 0xFFu;
    }
    return PE_STORAGE_OK;
}

static int pe_semihost_write(void *ctx, uint32_t addr, const uint8_t *src, size_t n)
{
    pe_semihost_file *f = (pe_semihost_file *)ctx;
    uintptr_t args[3];
    if (f->handle < 0 || pe_semihost_seek(f, addr) != 0) {
        return PE_STORAGE_ERR_IO;
    }
    args[0] = (uintptr_t)f->handle;
    args[1] = (uintptr_t)src;
    args[2] = (uintptr_t)n;
    if (pe_semihost(PE_SYS_WRITE, args) != 0) {
        return PE_STORAGE_ERR_IO;
    }
    if (addr + n > f->size) {
        f->size = (uint32_t)(addr + n);
    }
    return PE_STORAGE_OK;
}

int pe_storage_semihosting_open(pe_storage *st, pe_semihost_file *f, const char *path,
                                uint32_t slot_bytes)
{
    uintptr_t args[3];
    int h;
    int len;
    args[0] = (uintptr_t)path;
    args[1] = (uintptr_t)PE_OPEN_RW_BINARY;
    args[2] = (uintptr_t)pe_strlen(path);
    h = pe_semihost(PE_SYS_OPEN, args);
    if (h < 0) {
        args[1] = (uintptr_t)PE_OPEN_CREATE_BINARY;
        h = pe_semihost(PE_SYS_OPEN, args);
    }
    f->handle = h;
    f->size = 0;
    st->read = pe_semihost_read;
    st->write = pe_semihost_write;
    st->erase = NULL;
    st->sync = NULL;
    st->ctx = f;
    st->slot_bytes = slot_bytes;
    if (h < 0) {
        return PE_STORAGE_ERR_IO;
    }
    args[0] = (uintptr_t)h;
    len = pe_semihost(PE_SYS_FLEN, args);
    f->size = len > 0 ? (uint32_t)len : 0u;
    return PE_STORAGE_OK;
}
