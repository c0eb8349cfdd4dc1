"""Structure-aware mutations of TFLite flatbuffers.

``sites(data)`` walks a (valid) model with a small copy of the schema and lists every place a
mutation can aim at: scalars (with their width), tensor shape elements, tensor/buffer/opcode
indices, vector lengths, offsets, whole tables. ``mutate(data, rng)`` applies one to four
mutations: interesting values (0, -1, 2**31-1, 2**32-1, NaN...), shapes 0 / 2**31-1 / negative,
bad buffer and tensor indices, vectors that claim more elements than the file holds, offsets
that point elsewhere, duplicated tensors and operators (two vector entries, one table), zeroed
tables and vtables — and plain byte damage (flips, truncation, garbage).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

# table -> {slot: kind}; kinds: scalar formats ("b", "B", "i", "I", "Q", "f"), "str",
# "bytes", "vec:<fmt>" (scalar vector), "tab:<T>", "vtab:<T>" (vector of tables), "opts"
SCHEMA: dict[str, dict[int, str]] = {
    "Model": {0: "I", 1: "vtab:OperatorCode", 2: "vtab:SubGraph", 3: "str", 4: "vtab:Buffer",
              5: "vec:i", 6: "vtab:Metadata"},
    "Metadata": {0: "str", 1: "I"},
    "OperatorCode": {0: "b", 1: "str", 2: "i", 3: "i"},
    "SubGraph": {0: "vtab:Tensor", 1: "vec:i", 2: "vec:i", 3: "vtab:Operator", 4: "str"},
    "Tensor": {0: "vec:i", 1: "b", 2: "I", 3: "str", 4: "tab:Quantization", 5: "B"},
    "Buffer": {0: "bytes", 1: "Q", 2: "Q"},
    "Quantization": {0: "vec:f", 1: "vec:f", 2: "vec:f", 3: "vec:q", 4: "B", 6: "i"},
    "Operator": {0: "I", 1: "vec:i", 2: "vec:i", 3: "B", 4: "opts"},
    "Options": {i: "i" for i in range(8)},          # every options field as int32 (or less)
}
_SIZES = {"b": 1, "B": 1, "i": 4, "I": 4, "Q": 8, "f": 4, "q": 8}
INTERESTING = {
    1: [0, 1, 0x7F, 0x80, 0xFF, 2, 0x40],
    4: [0, 1, 2, 3, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFF, 0x10000, 0xFFFFFFFE, 16, 255],
    8: [0, 1, 2**63 - 1, 2**64 - 1, 2**32, 2**31],
}
FLOATS = [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e-45, 3.4e38, 1e-30]
SHAPES = [0, 1, -1, 2**31 - 1, -2**31, 65536, 3, 2**28 + 1, 46341]


@dataclass
class Sites:
    scalars: list[tuple[int, str, str]] = field(default_factory=list)   # (pos, fmt, what)
    shapes: list[int] = field(default_factory=list)                     # int32 positions
    indices: list[tuple[int, str]] = field(default_factory=list)        # (pos, fmt)
    lengths: list[tuple[int, int]] = field(default_factory=list)        # (pos, n)
    offsets: list[int] = field(default_factory=list)                    # uoffset positions
    tables: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # pos, size, vt
    entries: dict[str, list[int]] = field(default_factory=dict)   # vector entry positions
    floats: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _u32(d: bytes, p: int) -> int:
    return struct.unpack_from("<I", d, p)[0]


def sites(data: bytes) -> Sites:
    s = Sites()
    seen: set[int] = set()

    def table(pos: int, kind: str) -> None:
        if pos in seen or not 0 <= pos < len(data) - 4:
            return
        seen.add(pos)
        vt = pos - struct.unpack_from("<i", data, pos)[0]
        vt_size, t_size = struct.unpack_from("<HH", data, vt)
        s.tables.setdefault(kind, []).append((pos, t_size, vt))
        for slot, fkind in SCHEMA[kind].items():
            entry = 4 + 2 * slot
            if entry + 2 > vt_size:
                continue
            off = struct.unpack_from("<H", data, vt + entry)[0]
            if off == 0:
                continue
            p = pos + off
            if fkind in _SIZES:
                s.scalars.append((p, fkind, f"{kind}.{slot}"))
                if kind == "Tensor" and slot == 2 or kind == "Operator" and slot == 0:
                    s.indices.append((p, "I"))
                continue
            s.offsets.append(p)
            target = p + _u32(data, p)
            if fkind == "opts":
                table(target, "Options")
                continue
            if fkind.startswith("tab:"):
                table(target, fkind[4:])
                continue
            n = _u32(data, target)
            s.lengths.append((target, n))
            if fkind.startswith("vec:"):
                fmt = fkind[4:]
                for k in range(n):
                    q = target + 4 + k * _SIZES[fmt]
                    if kind == "Tensor" and slot == 0:
                        s.shapes.append(q)
                    elif fmt == "i":
                        s.indices.append((q, "i"))
                    elif fmt == "f":
                        s.floats.append(q)
                    else:
                        s.scalars.append((q, fmt, f"{kind}.{slot}[{k}]"))
            elif fkind.startswith("vtab:"):
                sub = fkind[5:]
                s.counts[sub] = s.counts.get(sub, 0) + n
                for k in range(n):
                    q = target + 4 + 4 * k
                    s.entries.setdefault(sub, []).append(q)
                    s.offsets.append(q)
                    table(q + _u32(data, q), sub)

    table(_u32(data, 0), "Model")
    return s


def _put(b: bytearray, pos: int, fmt: str, value: int) -> None:
    size = _SIZES[fmt]
    if pos < 0 or pos + size > len(b):
        return
    v = int(value) & ((1 << (8 * size)) - 1)
    b[pos:pos + size] = v.to_bytes(size, "little")


def _one(b: bytearray, s: Sites, rng: np.random.Generator) -> str:
    pick = lambda seq: seq[int(rng.integers(len(seq)))]
    n_tensors = max(1, s.counts.get("Tensor", 1))
    kinds = ["scalar", "shape", "index", "length", "offset", "dup", "zero", "float", "bytes"]
    kind = pick(kinds)
    if kind == "scalar" and s.scalars:
        pos, fmt, what = pick(s.scalars)
        _put(b, pos, fmt, pick(INTERESTING[_SIZES[fmt] if fmt != "f" else 4]
                               + [int(rng.integers(0, 256))]))
        return f"scalar {what}"
    if kind == "shape" and s.shapes:
        pos = pick(s.shapes)
        old = struct.unpack_from("<i", b, pos)[0]
        _put(b, pos, "i", pick(SHAPES + [old + 1, old * 2, old - 1]))
        return "shape"
    if kind == "index" and s.indices:
        pos, fmt = pick(s.indices)
        _put(b, pos, fmt, pick([-1, -2, 0, n_tensors, n_tensors + 1, 2**31 - 1,
                                int(rng.integers(0, n_tensors)), s.counts.get("Buffer", 1)]))
        return "index"
    if kind == "length" and s.lengths:
        pos, n = pick(s.lengths)
        _put(b, pos, "I", pick([0, n - 1, n + 1, 2**31 - 1, 2**32 - 1, n * 2, 1]))
        return "length"
    if kind == "offset" and s.offsets:
        pos = pick(s.offsets)
        old = _u32(b, pos)
        _put(b, pos, "I", pick([0, old + 4, old - 4, old + 1, 2**32 - 4, 2**31, 4]))
        return "offset"
    if kind == "dup":
        what = pick(["Tensor", "Operator", "Buffer", "SubGraph", "OperatorCode"])
        entries = s.entries.get(what, [])
        if len(entries) >= 2:
            src, dst = pick(entries), pick(entries)
            target = src + _u32(b, src)
            _put(b, dst, "I", target - dst)     # two entries, one table
            return f"duplicate {what}"
    if kind == "zero":
        what = pick(["Tensor", "Operator", "Buffer", "Quantization", "Options"])
        tabs = s.tables.get(what, [])
        if tabs:
            pos, size, vt = pick(tabs)
            if rng.random() < 0.5:
                b[pos + 4:pos + max(4, size)] = bytes(max(0, size - 4))
                return f"zeroed {what}"
            b[vt + 4:vt + 8] = bytes(4)
            return f"zeroed {what} vtable fields"
    if kind == "float" and s.floats:
        pos = pick(s.floats)
        struct.pack_into("<f", b, pos, pick(FLOATS))
        return "float"
    # plain byte damage
    choice = int(rng.integers(4))
    if choice == 0 and len(b) > 8:
        del b[int(rng.integers(8, len(b))):]
        return "truncate"
    if choice == 1:
        for _ in range(int(rng.integers(1, 8))):
            b[int(rng.integers(len(b)))] ^= 1 << int(rng.integers(8))
        return "flip"
    if choice == 2:
        p = int(rng.integers(len(b)))
        n = int(rng.integers(1, 64))
        b[p:p + n] = rng.integers(0, 256, size=min(n, len(b) - p), dtype=np.uint8).tobytes()
        return "garbage"
    b.extend(rng.integers(0, 256, size=int(rng.integers(1, 256)), dtype=np.uint8).tobytes())
    return "append"


def mutate(data: bytes, rng: np.random.Generator, site_cache: Sites | None = None
           ) -> tuple[bytes, list[str]]:
    """1..4 mutations of ``data``; returns the bytes and what was done."""
    s = site_cache if site_cache is not None else sites(data)
    b = bytearray(data)
    done = []
    for _ in range(int(rng.integers(1, 5))):
        try:
            done.append(_one(b, s, rng))
        except (struct.error, IndexError, ValueError):   # a site an earlier cut removed
            done.append("skipped")
    return bytes(b), done
