"""Serial framing: ``0x00 | COBS(payload || CRC-32(payload) little-endian) | 0x00``.

The same encoding as ``runtime_c/runtime/serial/pe_frame.c`` (docs/serial-protocol.md): COBS
removes every zero byte from the frame so that 0x00 always delimits frames and resynchronises a
receiver after noise; CRC-32 is zlib's. ``FrameDecoder`` splits a byte stream into frames and
reports damaged ones instead of raising, like the device's decoder. Senders of protocol
version 2 follow every frame with a second delimiter (``TAIL``): a frame whose trailing
delimiter is hit by noise then still ends at once, as a damaged frame.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

DELIMITER = 0
CRC_BYTES = 4
TAIL = b"\x00"


def wire_bytes(payload: int) -> int:
    """Bytes a frame of ``payload`` bytes occupies on the line (delimiters and TAIL included)."""
    return payload + CRC_BYTES + (payload + CRC_BYTES) // 254 + 1 + 3


def crc32(data: bytes, crc: int = 0) -> int:
    """zlib's CRC-32 (what the firmware's ``pe_crc32_update`` computes)."""
    return zlib.crc32(data, crc) & 0xFFFFFFFF


def cobs_encode(data: bytes) -> bytes:
    """COBS without the trailing delimiter (a block of 254 data bytes has no implied zero)."""
    out = bytearray()
    pos, n = 0, len(data)
    while True:
        end = pos
        while end < n and end - pos < 254 and data[end] != 0:
            end += 1
        run = end - pos
        out.append(run + 1)
        out += data[pos:end]
        pos = end
        if run == 254:
            if pos == n:
                break
            continue
        if pos == n:
            break
        pos += 1                    # the zero this block stands for
    return bytes(out)


class FrameError(ValueError):
    """A damaged frame: ``kind`` is cobs, crc, short or oversize; ``raw`` its bytes on the
    line (between delimiters)."""

    def __init__(self, kind: str, message: str, raw: int = 0):
        super().__init__(message)
        self.kind = kind
        self.raw = raw


def cobs_decode(data: bytes) -> bytes:
    """Inverse of :func:`cobs_encode` (no delimiters in ``data``); FrameError if malformed."""
    out = bytearray()
    code = left = 0
    for b in data:
        if b == 0:
            raise FrameError("cobs", "zero byte inside a COBS frame")
        if left:
            out.append(b)
            left -= 1
            continue
        if code not in (0, 0xFF):
            out.append(0)
        code, left = b, b - 1
    if left:
        raise FrameError("cobs", f"COBS block cut short ({left} bytes missing)")
    return bytes(out)


def encode_frame(payload: bytes) -> bytes:
    """A frame on the wire, with a leading and a trailing delimiter."""
    body = payload + crc32(payload).to_bytes(CRC_BYTES, "little")
    return b"\x00" + cobs_encode(body) + b"\x00"


def decode_frame(encoded: bytes) -> bytes:
    """The payload of one frame's COBS bytes (between delimiters); FrameError if damaged."""
    raw = cobs_decode(encoded)
    if len(raw) < CRC_BYTES:
        raise FrameError("short", f"frame of {len(raw)} bytes has no CRC")
    payload, crc = raw[:-CRC_BYTES], int.from_bytes(raw[-CRC_BYTES:], "little")
    if crc32(payload) != crc:
        raise FrameError("crc", f"CRC mismatch (got 0x{crc:08x}, computed "
                                f"0x{crc32(payload):08x})")
    return payload


@dataclass(frozen=True)
class Frame:
    """A frame with a good CRC: its payload and CRC (which identifies its content)."""

    payload: bytes
    crc: int


class FrameDecoder:
    """Incremental decoder: ``feed(bytes)`` returns the frames (``Frame``) and errors
    (``FrameError``) completed by these bytes, in order. Frames longer than ``max_bytes``
    are dropped (reported as oversize) without being buffered."""

    def __init__(self, max_bytes: int = 1 << 17):
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._overflow = False
        self._raw = 0

    def feed(self, data: bytes) -> list[Frame | FrameError]:
        events: list[Frame | FrameError] = []
        start = 0
        while True:
            end = data.find(b"\x00", start)
            chunk = data[start:] if end < 0 else data[start:end]
            self._raw += len(chunk)
            if not self._overflow:
                if len(self._buf) + len(chunk) > self.max_bytes:
                    self._overflow = True
                    self._buf.clear()
                else:
                    self._buf += chunk
            if end < 0:
                return events
            start = end + 1
            if self._overflow:
                events.append(FrameError("oversize", f"frame longer than {self.max_bytes} "
                                                     "bytes", self._raw))
            elif self._buf:
                try:
                    payload = decode_frame(bytes(self._buf))
                    events.append(Frame(payload, crc32(payload)))
                except FrameError as e:
                    e.raw = self._raw
                    events.append(e)
            self._buf.clear()
            self._overflow = False
            self._raw = 0

    def reset(self) -> None:
        self._buf.clear()
        self._overflow = False
        self._raw = 0
