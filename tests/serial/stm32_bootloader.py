"""An STM32 system-memory bootloader (AN3155, UART) emulated behind a pseudo-terminal.

Debian's ``stm32flash`` (the real client) and ``pockengine flash`` both drive it: that keeps it
honest. It answers 0x7F, GET, GET_VERSION, GET_ID, READ_MEMORY, WRITE_MEMORY, EXTENDED_ERASE
(pages or mass erase) and GO like an STM32F40x (product id 0x413, 1 MiB of flash in F4
sectors). Flash behaves like NOR flash: erasing sets bytes to 0xFF, programming can only clear
bits (``flash &= data``), so a client that forgets to erase fails its own verify.

Fault modes for error tests: ``nack=CMD`` (that command is refused), ``silent=True`` (nothing is
ever answered), ``silent_after=N`` (the N-th command and everything after it go unanswered),
``pid=...`` (another chip id).
"""

from __future__ import annotations

import os
import pty
import select
import threading
import tty
from typing import Self

ACK, NACK, SYNC = 0x79, 0x1F, 0x7F
CMD_GET, CMD_GVR, CMD_GID, CMD_RM, CMD_GO, CMD_WM, CMD_EE = (0x00, 0x01, 0x02, 0x11, 0x21,
                                                              0x31, 0x44)
COMMANDS = (CMD_GET, CMD_GVR, CMD_GID, CMD_RM, CMD_GO, CMD_WM, CMD_EE)
FLASH_BASE = 0x08000000
F4_SECTORS = (16384,) * 4 + (65536,) + (131072,) * 7
SRAM = (0x20000000, 0x20020000)


class _Stop(Exception):
    pass


class BootloaderEmulator:
    def __init__(self, *, pid: int = 0x413, version: int = 0x31,
                 sectors: tuple[int, ...] = F4_SECTORS, nack: int | None = None,
                 silent: bool = False, silent_after: int | None = None):
        self.pid, self.version, self.sectors = pid, version, sectors
        self.nack, self.silent, self.silent_after = nack, silent, silent_after
        self.commands = 0
        self.flash = bytearray(b"\xff" * sum(sectors))
        self.ram = bytearray(SRAM[1] - SRAM[0])
        self.log: list[str] = []
        self.go_address: int | None = None
        self.erased: list[int] = []
        self._stop = threading.Event()
        self.master, self.slave = pty.openpty()
        tty.setraw(self.slave)          # no echo, no line editing on the client's side
        self.path = os.ttyname(self.slave)
        self._thread = threading.Thread(target=self._run, name="stm32-bootloader", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> BootloaderEmulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- bytes -------------------------------------------------------------------------------
    def _byte(self) -> int:
        while True:
            if self._stop.is_set():
                raise _Stop
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                try:
                    data = os.read(self.master, 1)
                except OSError:         # no client has the terminal open right now
                    continue
                if data:
                    return data[0]

    def _bytes(self, n: int) -> bytes:
        return bytes(self._byte() for _ in range(n))

    def _send(self, data: bytes | list[int]) -> None:
        os.write(self.master, bytes(data))

    def _address(self) -> int | None:
        a = self._bytes(5)
        if a[0] ^ a[1] ^ a[2] ^ a[3] != a[4]:
            return None
        return int.from_bytes(a[:4], "big")

    def _region(self, address: int, n: int) -> tuple[bytearray, int] | None:
        if FLASH_BASE <= address and address + n <= FLASH_BASE + len(self.flash):
            return self.flash, address - FLASH_BASE
        if SRAM[0] <= address and address + n <= SRAM[1]:
            return self.ram, address - SRAM[0]
        return None

    # -- the bootloader ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._serve()
        except _Stop:
            pass

    def _serve(self) -> None:
        synced = False
        while True:
            b = self._byte()
            if self.silent:
                continue
            if not synced:
                if b == SYNC:
                    synced = True
                    self._send([ACK])
                    self.log.append("sync")
                continue
            comp = self._byte()
            self.commands += 1
            if self.silent_after is not None and self.commands >= self.silent_after:
                self.silent = True
                continue
            if comp != b ^ 0xFF or b not in COMMANDS:
                self._send([NACK])
                self.log.append(f"bad command 0x{b:02x}")
                continue
            if b == self.nack:
                self._send([NACK])
                self.log.append(f"nack 0x{b:02x}")
                continue
            self._send([ACK])
            self.log.append(f"cmd 0x{b:02x}")
            if b == CMD_GET:
                self._send([len(COMMANDS), self.version, *COMMANDS, ACK])
            elif b == CMD_GVR:
                self._send([self.version, 0, 0, ACK])
            elif b == CMD_GID:
                self._send([1, self.pid >> 8, self.pid & 0xFF, ACK])
            elif b == CMD_RM:
                self._read_memory()
            elif b == CMD_WM:
                self._write_memory()
            elif b == CMD_EE:
                self._extended_erase()
            elif b == CMD_GO:
                a = self._address()
                if a is None:
                    self._send([NACK])
                    continue
                self.go_address = a     # before the ACK: the client may look right after it
                self._send([ACK])
                synced = False          # the application runs; a reset brings us back

    def _read_memory(self) -> None:
        a = self._address()
        if a is None:
            self._send([NACK])
            return
        self._send([ACK])
        n, comp = self._bytes(2)
        where = self._region(a, n + 1)
        if comp != n ^ 0xFF or where is None:
            self._send([NACK])
            return
        mem, off = where
        self._send([ACK])
        self._send(mem[off:off + n + 1])

    def _write_memory(self) -> None:
        a = self._address()
        if a is None or a % 4:
            self._send([NACK])
            return
        self._send([ACK])
        n = self._byte()
        data = self._bytes(n + 1)
        cs = self._byte()
        x = n
        for v in data:
            x ^= v
        where = self._region(a, n + 1)
        if x != cs or where is None:
            self._send([NACK])
            return
        mem, off = where
        if mem is self.flash:
            for i, v in enumerate(data):
                mem[off + i] &= v       # NOR flash: programming only clears bits
        else:
            mem[off:off + n + 1] = data
        self._send([ACK])

    def _extended_erase(self) -> None:
        hi, lo = self._bytes(2)
        n = (hi << 8) | lo
        if n >= 0xFFF0:                 # 0xFFFF mass, 0xFFFE bank 1, 0xFFFD bank 2
            cs = self._byte()
            if cs != hi ^ lo:
                self._send([NACK])
                return
            self.flash[:] = b"\xff" * len(self.flash)
            self.erased.append(-1)
            self._send([ACK])
            return
        raw = self._bytes(2 * (n + 1))
        cs = self._byte()
        x = hi ^ lo
        for v in raw:
            x ^= v
        pages = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]
        if x != cs or any(p >= len(self.sectors) for p in pages):
            self._send([NACK])
            return
        for p in pages:
            start = sum(self.sectors[:p])
            self.flash[start:start + self.sectors[p]] = b"\xff" * self.sectors[p]
            self.erased.append(p)
        self._send([ACK])
