"""``pockengine flash --protocol stm32``: the STM32 system-memory bootloader over a UART (ST
application note AN3155).

The chip must be in its bootloader (BOOT0 high, then reset). The link is 8 data bits, even
parity, 1 stop bit. Sequence: 0x7F (the bootloader measures the baud rate and answers ACK
0x79), GET (bootloader version and commands), GET_ID (product id, checked against the chips
below or ``chip_id``), EXTENDED_ERASE (0x44; legacy ERASE 0x43 where only that exists) of the
pages/sectors the image covers, WRITE_MEMORY (0x31) in 256-byte blocks, READ_MEMORY (0x11) to
verify, and GO (0x21) if asked. Every command is its code and the code's complement, answered
by ACK or NACK (0x1F); addresses go MSB first with an XOR checksum.

Errors are one line (``Stm32Error``, a PockError): a NACK names the command and the address,
a timeout says what was awaited, an unexpected chip id names the id and the ones expected.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PockError
from ..targets.elf import PT_LOAD, read_elf
from .transport import LinkError, port_url

ACK, NACK, BUSY, SYNC = 0x79, 0x1F, 0x76, 0x7F
CMD_GET, CMD_GET_VERSION, CMD_GET_ID = 0x00, 0x01, 0x02
CMD_READ, CMD_GO, CMD_WRITE = 0x11, 0x21, 0x31
CMD_ERASE, CMD_EXTENDED_ERASE = 0x43, 0x44
COMMAND_NAMES = {CMD_GET: "GET", CMD_GET_VERSION: "GET_VERSION", CMD_GET_ID: "GET_ID",
                 CMD_READ: "READ_MEMORY", CMD_GO: "GO", CMD_WRITE: "WRITE_MEMORY",
                 CMD_ERASE: "ERASE", CMD_EXTENDED_ERASE: "EXTENDED_ERASE"}
BLOCK = 256
FLASH_BASE = 0x08000000

KiB = 1024


@dataclass(frozen=True)
class Chip:
    pid: int
    name: str
    flash_base: int
    pages: tuple[int, ...]      # erase unit sizes in order (F2/F4/F7 sectors, F1 pages)

    @property
    def flash_size(self) -> int:
        return sum(self.pages)

    def pages_for(self, start: int, end: int) -> list[int]:
        """The erase units that [start, end) touches (absolute addresses)."""
        out, a = [], self.flash_base
        for i, size in enumerate(self.pages):
            if a < end and a + size > start:
                out.append(i)
            a += size
        return out


_F4 = (16 * KiB,) * 4 + (64 * KiB,) + (128 * KiB,) * 7
CHIPS = {c.pid: c for c in (
    Chip(0x410, "STM32F10xxx medium density", FLASH_BASE, (1 * KiB,) * 128),
    Chip(0x414, "STM32F10xxx high density", FLASH_BASE, (2 * KiB,) * 256),
    Chip(0x411, "STM32F2xxxx", FLASH_BASE, _F4),
    Chip(0x413, "STM32F40xxx/41xxx", FLASH_BASE, _F4),
    Chip(0x419, "STM32F42xxx/43xxx", FLASH_BASE, _F4 + _F4),
    Chip(0x431, "STM32F411xx", FLASH_BASE, (16 * KiB,) * 4 + (64 * KiB,) + (128 * KiB,) * 3),
    Chip(0x449, "STM32F74xxx/75xxx", FLASH_BASE,
         (32 * KiB,) * 4 + (128 * KiB,) + (256 * KiB,) * 3),
)}


class Stm32Error(PockError):
    """The bootloader refused (NACK), did not answer, or is not the chip expected."""


def _xor(data: bytes) -> int:
    x = 0
    for b in data:
        x ^= b
    return x


def _addr(address: int) -> bytes:
    a = address.to_bytes(4, "big")
    return a + bytes([_xor(a)])


class Stm32Bootloader:
    """AN3155 commands over a pyserial-like link (8E1)."""

    def __init__(self, link: Any, *, port: str = "port", timeout: float = 1.0):
        self.link, self.port, self.timeout = link, port, float(timeout)
        self.commands: tuple[int, ...] = ()
        self.version = 0

    # -- bytes -------------------------------------------------------------------------------
    def _read(self, n: int, what: str, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        out = bytearray()
        while len(out) < n:
            chunk = self.link.read(n - len(out))
            if chunk:
                out += chunk
            elif time.monotonic() > deadline:
                t = self.timeout if timeout is None else timeout
                raise Stm32Error(f"{self.port}: no answer to {what} within {t:g} s "
                                 f"(got {len(out)} of {n} bytes)")
        return bytes(out)

    def _ack(self, what: str, timeout: float | None = None) -> None:
        while True:
            b = self._read(1, what, timeout)[0]
            if b == ACK:
                return
            if b == NACK:
                raise Stm32Error(f"{self.port}: the bootloader refused {what} (NACK)")
            if b != BUSY:
                raise Stm32Error(f"{self.port}: unexpected byte 0x{b:02x} instead of ACK to "
                                 f"{what}")

    def _command(self, cmd: int, what: str | None = None) -> None:
        name = what or COMMAND_NAMES.get(cmd, f"command 0x{cmd:02x}")
        if self.commands and cmd not in self.commands:
            raise Stm32Error(f"{self.port}: the bootloader does not offer {name} "
                             f"(0x{cmd:02x})")
        self.link.write(bytes([cmd, cmd ^ 0xFF]))
        self._ack(name)

    # -- commands ----------------------------------------------------------------------------
    def sync(self) -> None:
        try:
            self.link.reset_input_buffer()
        except AttributeError:
            pass
        b = None
        for _ in range(2):      # a chip synchronised by an earlier session takes 0x7F as a
            self.link.write(bytes([SYNC]))      # command byte: the second one draws a NACK
            try:
                b = self._read(1, "the sync byte 0x7F")[0]
                break
            except Stm32Error:
                continue
        if b is None:
            raise Stm32Error(f"{self.port}: no answer to the sync byte 0x7F within "
                             f"{self.timeout:g} s (is the chip in its bootloader: BOOT0 high, "
                             "then reset?)")
        if b not in (ACK, NACK):    # NACK: already synchronised by an earlier session
            raise Stm32Error(f"{self.port}: unexpected byte 0x{b:02x} after the sync byte "
                             "(wrong baud rate or not an STM32 bootloader?)")

    def get(self) -> tuple[int, tuple[int, ...]]:
        self._command(CMD_GET)
        n = self._read(1, "GET")[0]
        data = self._read(n + 1, "GET")
        self._ack("GET (end)")
        self.version, self.commands = data[0], tuple(data[1:])
        return self.version, self.commands

    def get_id(self) -> int:
        self._command(CMD_GET_ID)
        n = self._read(1, "GET_ID")[0]
        data = self._read(n + 1, "GET_ID")
        self._ack("GET_ID (end)")
        return int.from_bytes(data[:2], "big")

    def read_memory(self, address: int, n: int) -> bytes:
        if not 1 <= n <= BLOCK:
            raise ValueError(f"READ_MEMORY of {n} bytes (1..{BLOCK})")
        what = f"READ_MEMORY at 0x{address:08x}"
        self._command(CMD_READ, what)
        self.link.write(_addr(address))
        self._ack(what + " (address)")
        self.link.write(bytes([n - 1, (n - 1) ^ 0xFF]))
        self._ack(what + " (length)")
        return self._read(n, what)

    def write_memory(self, address: int, data: bytes) -> None:
        if not 1 <= len(data) <= BLOCK:
            raise ValueError(f"WRITE_MEMORY of {len(data)} bytes (1..{BLOCK})")
        data = data + b"\xff" * (-len(data) % 4)
        what = f"WRITE_MEMORY at 0x{address:08x}"
        self._command(CMD_WRITE, what)
        self.link.write(_addr(address))
        self._ack(what + " (address)")
        block = bytes([len(data) - 1]) + data
        self.link.write(block + bytes([_xor(block)]))
        self._ack(what + " (data)")

    def erase(self, pages: list[int], *, timeout_per_page: float = 5.0) -> None:
        if not pages:
            return
        t = self.timeout + timeout_per_page * len(pages)
        if CMD_EXTENDED_ERASE in self.commands or not self.commands:
            self._command(CMD_EXTENDED_ERASE)
            body = (len(pages) - 1).to_bytes(2, "big") + b"".join(
                p.to_bytes(2, "big") for p in pages)
            what = f"EXTENDED_ERASE of pages {pages[0]}..{pages[-1]}"
        else:
            if len(pages) > 255 or max(pages) > 255:
                raise Stm32Error(f"{self.port}: legacy ERASE cannot name {len(pages)} pages")
            self._command(CMD_ERASE)
            body = bytes([len(pages) - 1, *pages])
            what = f"ERASE of pages {pages[0]}..{pages[-1]}"
        self.link.write(body + bytes([_xor(body)]))
        self._ack(what, timeout=t)

    def go(self, address: int) -> None:
        what = f"GO to 0x{address:08x}"
        self._command(CMD_GO, what)
        self.link.write(_addr(address))
        self._ack(what + " (address)")


# -- images -------------------------------------------------------------------------------------
def load_image(path: str | Path, address: int | None) -> list[tuple[int, bytes]]:
    """(address, bytes) pieces of a firmware image: an ELF's loadable segments (at their
    physical addresses) or a raw binary at ``address`` (default: flash start)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise PockError(f"{p}: cannot read ({e.strerror or e})") from None
    if data[:4] == b"\x7fELF":
        elf = read_elf(p)
        pieces = [(s.paddr, data[s.offset:s.offset + s.filesz]) for s in elf.segments
                  if s.type == PT_LOAD and s.filesz > 0]
        if not pieces:
            raise PockError(f"{p}: ELF without loadable bytes")
        return sorted(pieces)
    if not data:
        raise PockError(f"{p}: empty image")
    return [(FLASH_BASE if address is None else address, data)]


@dataclass(frozen=True)
class FlashResult:
    port: str
    chip: str
    pid: int
    bootloader_version: int
    bytes_written: int
    pages_erased: int
    verified: bool
    started: bool

    def to_json(self) -> dict[str, Any]:
        return {"port": self.port, "chip": self.chip, "pid": f"0x{self.pid:03x}",
                "bootloader_version": f"{self.bootloader_version >> 4}."
                                      f"{self.bootloader_version & 0xF}",
                "bytes_written": self.bytes_written, "pages_erased": self.pages_erased,
                "verified": self.verified, "started": self.started}


def open_stm32_port(port: str, baudrate: int, timeout: float) -> Any:
    """The port at 8E1 (what the bootloader speaks)."""
    import serial  # pyserial, to open the port

    port = port_url(port)
    try:
        return serial.serial_for_url(port, baudrate=baudrate, parity=serial.PARITY_EVEN,
                                     bytesize=8, stopbits=1, timeout=min(timeout, 0.05),
                                     write_timeout=10.0)
    except (serial.SerialException, OSError, ValueError) as e:
        raise LinkError(f"{port}: cannot open ({str(e).splitlines()[0] if str(e) else e})") \
            from None


def flash(port: str | Any, pieces: list[tuple[int, bytes]], *, verify: bool = True,
          go: int | None = None, chip_id: int | None = None, baudrate: int = 115200,
          timeout: float = 1.0,
          progress: Callable[[str, int, int], None] | None = None) -> FlashResult:
    """Write ``pieces`` through the bootloader on ``port`` (a path/URL or an open link);
    ``progress(phase, done, total)`` with phase erase / write / verify."""
    name = port if isinstance(port, str) else getattr(port, "name", "port")
    link = open_stm32_port(port, baudrate, timeout) if isinstance(port, str) else port
    try:
        bl = Stm32Bootloader(link, port=name, timeout=timeout)
        bl.sync()
        version, cmds = bl.get()
        for need in (CMD_GET_ID, CMD_WRITE) + ((CMD_READ,) if verify else ()):
            if need not in cmds:
                raise Stm32Error(f"{name}: the bootloader does not offer "
                                 f"{COMMAND_NAMES[need]} (0x{need:02x})")
        pid = bl.get_id()
        if chip_id is not None and pid != chip_id:
            raise Stm32Error(f"{name}: chip id 0x{pid:03x}, expected 0x{chip_id:03x}")
        chip = CHIPS.get(pid)
        if chip is None:
            known = ", ".join(f"0x{k:03x} {c.name}" for k, c in sorted(CHIPS.items()))
            raise Stm32Error(f"{name}: unknown chip id 0x{pid:03x} (known: {known}; pass "
                             "--chip-id to accept it)" if chip_id is None else
                             f"{name}: chip id 0x{pid:03x} has no flash layout here")
        end_of_flash = chip.flash_base + chip.flash_size
        pages: list[int] = []
        total = 0
        for addr, data in pieces:
            if addr < chip.flash_base or addr + len(data) > end_of_flash:
                raise Stm32Error(f"{name}: image bytes 0x{addr:08x}..0x{addr + len(data):08x} "
                                 f"lie outside the flash of {chip.name} (0x{chip.flash_base:08x}"
                                 f"..0x{end_of_flash:08x})")
            if addr % 4:
                raise Stm32Error(f"{name}: image address 0x{addr:08x} is not 4-byte aligned")
            pages += [p for p in chip.pages_for(addr, addr + len(data)) if p not in pages]
            total += len(data)
        pages.sort()
        if progress:
            progress("erase", 0, len(pages))
        bl.erase(pages)
        if progress:
            progress("erase", len(pages), len(pages))
        done = 0
        for addr, data in pieces:
            for off in range(0, len(data), BLOCK):
                bl.write_memory(addr + off, data[off:off + BLOCK])
                done += min(BLOCK, len(data) - off)
                if progress:
                    progress("write", done, total)
        if verify:
            done = 0
            for addr, data in pieces:
                for off in range(0, len(data), BLOCK):
                    want = data[off:off + BLOCK]
                    got = bl.read_memory(addr + off, len(want))
                    if got != want:
                        k = next(i for i in range(len(want)) if got[i] != want[i])
                        raise Stm32Error(f"{name}: verify failed at 0x{addr + off + k:08x}: "
                                         f"wrote 0x{want[k]:02x}, read back 0x{got[k]:02x}")
                    done += len(want)
                    if progress:
                        progress("verify", done, total)
        if go is not None:
            bl.go(go)
        return FlashResult(name, chip.name, pid, version, total, len(pages), verify,
                           go is not None)
    finally:
        if isinstance(port, str):
            link.close()
