"""Flash and SRAM use of a linked image, from its ELF section headers.

Allocated sections are classified by their flags: read-only ones (vectors, code, constants,
unwind tables) take flash; initialised writable ones (.data) take SRAM *and* flash (their load
image); NOBITS ones (.bss, explicit-placement regions) take SRAM only. The stack is the
``.stack`` section our linker scripts reserve, reported on its own (``stack_bytes``), so that
``sram_bytes`` is data + bss as in ``arm-none-eabi-size`` and ``sram_total_bytes`` adds the
stack. The measured stack high-water mark comes from running the firmware
(``RunResult.stack_bytes``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from .elf import read_elf

_IGNORED = (".comment", ".ARM.attributes", ".note.GNU-stack")


@dataclass(frozen=True)
class SizeReport:
    flash_bytes: int          # text + rodata + .data load image
    sram_bytes: int           # data + bss (without the reserved stack)
    stack_bytes: int          # stack reserved by the linker script (0 when none)
    text_bytes: int           # read-only allocated sections
    data_bytes: int
    bss_bytes: int

    @property
    def sram_total_bytes(self) -> int:
        return self.sram_bytes + self.stack_bytes

    def as_dict(self) -> dict[str, int]:
        d = asdict(self)
        d["sram_total_bytes"] = self.sram_total_bytes
        return d


def size_report(elf: str | Path) -> SizeReport:
    image = read_elf(elf)
    text = data = bss = stack = 0
    for s in image.sections:
        if not s.alloc or s.size == 0 or s.name in _IGNORED:
            continue
        if s.name == ".stack":
            stack += s.size
        elif s.nobits:
            bss += s.size
        elif s.writable:
            data += s.size
        else:
            text += s.size
    return SizeReport(flash_bytes=text + data, sram_bytes=data + bss, stack_bytes=stack,
                      text_bytes=text, data_bytes=data, bss_bytes=bss)
