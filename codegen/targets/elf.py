"""A minimal ELF reader (32/64-bit, little-endian): sections, segments and symbols.

Enough for size reports, the instruction-count plugin's addresses and the consistency checks of
generated scripts; no dependency on binutils or pyelftools.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import PockError

SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_NOBITS = 8
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
PT_LOAD = 1

EM_ARM = 40
EM_HEXAGON = 164
EM_X86_64 = 62
EM_AARCH64 = 183


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int

    @property
    def alloc(self) -> bool:
        return bool(self.flags & SHF_ALLOC)

    @property
    def writable(self) -> bool:
        return bool(self.flags & SHF_WRITE)

    @property
    def nobits(self) -> bool:
        return self.type == SHT_NOBITS


@dataclass(frozen=True)
class Segment:
    type: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    flags: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    type: int          # STT_*: 1 object, 2 function


@dataclass(frozen=True)
class ElfFile:
    path: Path
    bits: int
    machine: int
    entry: int
    sections: tuple[Section, ...]
    segments: tuple[Segment, ...]
    symbols: dict[str, Symbol]

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


def read_elf(path: str | Path) -> ElfFile:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PockError(f"{path}: cannot read ({e.strerror or e})") from None
    if data[:4] != b"\x7fELF":
        raise PockError(f"{path}: not an ELF file")
    if data[5] != 1:
        raise PockError(f"{path}: big-endian ELF files are not supported")
    bits = {1: 32, 2: 64}.get(data[4])
    if bits is None:
        raise PockError(f"{path}: unknown ELF class {data[4]}")
    try:
        return _parse(path, data, bits)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise PockError(f"{path}: truncated or corrupt ELF file ({e})") from None


def _parse(path: Path, data: bytes, bits: int) -> ElfFile:
    if bits == 32:
        (_, machine, _, entry, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
         shstrndx) = struct.unpack_from("<HHIIIIIHHHHHH", data, 16)
    else:
        (_, machine, _, entry, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
         shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)

    raw_sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        if bits == 32:
            name, typ, flags, addr, offset, size, link, _, _, entsize = struct.unpack_from(
                "<IIIIIIIIII", data, off)
        else:
            name, typ, flags, addr, offset, size, link, _, _, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", data, off)
        raw_sections.append((name, typ, flags, addr, offset, size, link, entsize))

    def cstr(table_offset: int, index: int) -> str:
        start = table_offset + index
        end = data.index(b"\0", start)
        return data[start:end].decode("utf-8")

    shstr_offset = raw_sections[shstrndx][4] if shnum else 0
    sections = tuple(Section(cstr(shstr_offset, r[0]), r[1], r[2], r[3], r[4], r[5])
                     for r in raw_sections)

    segments = []
    for i in range(phnum):
        off = phoff + i * phentsize
        if bits == 32:
            typ, offset, vaddr, paddr, filesz, memsz, flags, _ = struct.unpack_from(
                "<IIIIIIII", data, off)
        else:
            typ, flags, offset, vaddr, paddr, filesz, memsz, _ = struct.unpack_from(
                "<IIQQQQQQ", data, off)
        segments.append(Segment(typ, offset, vaddr, paddr, filesz, memsz, flags))

    symbols: dict[str, Symbol] = {}
    for r in raw_sections:
        if r[1] != SHT_SYMTAB:
            continue
        strtab_offset = raw_sections[r[6]][4]
        entsize = r[7] or (16 if bits == 32 else 24)
        for k in range(r[5] // entsize):
            off = r[4] + k * entsize
            if bits == 32:
                name, value, size, info, _, _ = struct.unpack_from("<IIIBBH", data, off)
            else:
                name, info, _, _, value, size = struct.unpack_from("<IBBHQQ", data, off)
            if name == 0:
                continue
            sym_name = cstr(strtab_offset, name)
            # prefer a sized definition when a name occurs more than once
            if sym_name not in symbols or (size and not symbols[sym_name].size):
                symbols[sym_name] = Symbol(sym_name, value, size, info & 0xF)
    return ElfFile(path, bits, machine, entry, sections, tuple(segments), symbols)
