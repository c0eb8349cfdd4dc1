"""A bounds-checked, read-only view of a FlatBuffer, for files we do not trust.

The generated ``tflite`` readers follow offsets without checking them (a negative offset wraps
around to the end of the buffer, a huge vector length makes a loop run for hours). This view
checks every offset, vtable and vector against the buffer size before use, so a corrupt file
fails with a ``FlatBufferError`` naming the structure and byte offset. Vector lengths are
bounded by the file size, so no read allocates more than the file holds.
"""

from __future__ import annotations

import struct

import numpy as np

_U8 = struct.Struct("<B")
_I8 = struct.Struct("<b")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")

_SCALAR_FORMATS = {"u8": _U8, "i8": _I8, "bool": _U8, "u16": _U16, "i32": _I32, "u32": _U32,
                   "u64": _U64, "f32": _F32}


class FlatBufferError(Exception):
    """The buffer is not a well-formed FlatBuffer (message says where)."""


class FlatBuffer:
    """The whole buffer: checked scalar reads at absolute positions."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        self.size = len(self.data)

    def need(self, pos: int, n: int, what: str) -> None:
        if pos < 0 or n < 0 or pos + n > self.size:
            raise FlatBufferError(f"{what} at byte {pos} (+{n}) lies outside the "
                                  f"{self.size}-byte file")

    def read(self, fmt: struct.Struct, pos: int, what: str):
        self.need(pos, fmt.size, what)
        return fmt.unpack_from(self.data, pos)[0]

    def root(self, what: str) -> Table:
        return Table(self, self.read(_U32, 0, f"{what} root offset"), what)


class Table:
    """One FlatBuffer table, its vtable checked on construction."""

    __slots__ = ("fb", "pos", "table_size", "vt", "vt_size", "what")

    def __init__(self, fb: FlatBuffer, pos: int, what: str):
        self.fb, self.pos, self.what = fb, pos, what
        vt = pos - fb.read(_I32, pos, what)
        vt_size = fb.read(_U16, vt, f"{what} vtable")
        table_size = fb.read(_U16, vt + 2, f"{what} vtable")
        if vt_size < 4 or vt_size % 2:
            raise FlatBufferError(f"{what} at byte {pos}: corrupt vtable (size {vt_size})")
        fb.need(vt, vt_size, f"{what} vtable")
        fb.need(pos, max(table_size, 4), what)
        self.vt, self.vt_size, self.table_size = vt, vt_size, table_size

    def _field(self, slot: int, size: int) -> int | None:
        entry = 4 + 2 * slot
        if entry + 2 > self.vt_size:
            return None
        off = _U16.unpack_from(self.fb.data, self.vt + entry)[0]
        if off == 0:
            return None
        if off + size > self.table_size:
            raise FlatBufferError(f"{self.what} at byte {self.pos}: field {slot} at offset {off} "
                                  f"lies outside the {self.table_size}-byte table")
        return self.pos + off

    def has(self, slot: int) -> bool:
        return self._field(slot, 1) is not None

    def scalar(self, slot: int, kind: str, default):
        fmt = _SCALAR_FORMATS[kind]
        p = self._field(slot, fmt.size)
        if p is None:
            return default
        value = fmt.unpack_from(self.fb.data, p)[0]
        return bool(value) if kind == "bool" else value

    def _target(self, slot: int, what: str) -> int | None:
        p = self._field(slot, 4)
        if p is None:
            return None
        return p + _U32.unpack_from(self.fb.data, p)[0]

    def table(self, slot: int, what: str) -> Table | None:
        t = self._target(slot, what)
        return None if t is None else Table(self.fb, t, what)

    def _vector(self, slot: int, elem_size: int, what: str) -> tuple[int, int] | None:
        t = self._target(slot, what)
        if t is None:
            return None
        n = self.fb.read(_U32, t, f"{what} length")
        self.fb.need(t + 4, n * elem_size, f"{what} ({n} elements)")
        return t + 4, n

    def array(self, slot: int, dtype: str, what: str) -> np.ndarray | None:
        """A vector of scalars (``dtype`` a little-endian numpy code such as '<i4') as a copy."""
        dt = np.dtype(dtype)
        v = self._vector(slot, dt.itemsize, what)
        if v is None:
            return None
        start, n = v
        return np.frombuffer(self.fb.data, dtype=dt, count=n, offset=start).copy()

    def raw(self, slot: int, what: str) -> memoryview | None:
        """A vector of bytes, without copying."""
        v = self._vector(slot, 1, what)
        if v is None:
            return None
        start, n = v
        return memoryview(self.fb.data)[start:start + n]

    def string(self, slot: int, what: str) -> str | None:
        b = self.raw(slot, what)
        return None if b is None else bytes(b).decode("utf-8", errors="replace")

    def tables(self, slot: int, what: str) -> TableVector:
        v = self._vector(slot, 4, what)
        return TableVector(self.fb, v if v is not None else (0, 0), what)


class TableVector:
    """A vector of tables; elements are checked when read."""

    def __init__(self, fb: FlatBuffer, span: tuple[int, int], what: str):
        self.fb, (self.start, self.n), self.what = fb, span, what

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Table:
        if not 0 <= i < self.n:
            raise IndexError(i)
        p = self.start + 4 * i
        return Table(self.fb, p + _U32.unpack_from(self.fb.data, p)[0], f"{self.what}[{i}]")
