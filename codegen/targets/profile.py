"""Deterministic instruction counting under QEMU: the TCG plugin and what it reports.

The plugin (runtime_c/runtime/qemu/pe_insn_count.c) is built once per output directory with the
host C compiler. It counts every executed guest instruction (qemu-hexagon: packets) and, per
phase, the instructions between the firmware's ``pe_prof_begin(phase)`` and
``pe_prof_end(phase)`` markers, which it finds through two ELF symbols: the function
``pe_prof_mark`` (its code range) and the array ``pe_prof_marks`` it stores to. Same ELF, same
counts: nothing depends on host timing.

Why a plugin and not ``-icount`` + SysTick: SysTick under QEMU counts the virtual clock in steps
of the board's clock period (40 ns = 40 instructions with ``-icount shift=0`` on MPS2), DWT
CYCCNT is not modelled, and qemu-hexagon user mode has no timer at all; the plugin is exact on
every board.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import PockError
from ..resources import data_dir
from .elf import EM_ARM, ElfFile

# phase numbers of runtime_c/runtime/pe_profile.h
PHASE_NAMES = {0: "step", 1: "forward", 2: "loss", 3: "backward", 4: "update", 5: "infer",
               6: "init", 7: "eval"}
PHASE_NUMBERS = {v: k for k, v in PHASE_NAMES.items()}


def phase_name(number: int) -> str:
    return PHASE_NAMES.get(number, f"p{number}")


@dataclass(frozen=True)
class PhaseCount:
    calls: int            # completed begin/end pairs
    instructions: int     # executed inside them (packets on Hexagon)


@dataclass(frozen=True)
class InsnCounts:
    total: int
    phases: dict[str, PhaseCount]
    unbalanced: int


def plugin_source() -> Path:
    return data_dir("runtime_c") / "runtime" / "qemu" / "pe_insn_count.c"


def build_plugin(out_dir: str | Path) -> Path:
    """Build (or reuse) the plugin shared object in ``out_dir``."""
    src = plugin_source()
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    out = Path(out_dir)
    so = out / f"pe_insn_count-{digest}.so"
    if so.is_file():
        return so
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise PockError(f"cannot build the instruction-count plugin: {cc} is not on PATH")
    out.mkdir(parents=True, exist_ok=True)
    tmp = so.with_suffix(f".{os.getpid()}.tmp")
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-std=c99", "-Wall", "-Wextra",
                           "-fvisibility=hidden", str(src), "-o", str(tmp)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise PockError("cannot build the instruction-count plugin: "
                        + (proc.stderr.strip().splitlines() or ["unknown error"])[0])
    tmp.replace(so)
    return so


def plugin_args(elf: ElfFile, out_file: Path) -> list[str]:
    """The plugin's arguments for this image (phase markers only if the image has them)."""
    args = [f"out={out_file}"]
    mark = elf.symbols.get("pe_prof_mark")
    marks = elf.symbols.get("pe_prof_marks")
    if mark and marks and mark.size and marks.size:
        lo = mark.value & ~1 if elf.machine == EM_ARM else mark.value   # Thumb bit
        args += [f"mark_lo={lo:#x}", f"mark_hi={lo + mark.size:#x}",
                 f"marks={marks.value:#x}", f"nslots={marks.size // 4}"]
    return args


def parse_counts(text: str) -> InsnCounts:
    lines = text.split("\n")
    if not lines or lines[0].strip() != "pe-insn-count 1":
        raise PockError("instruction-count plugin output is missing or unreadable")
    total = 0
    unbalanced = 0
    phases: dict[str, PhaseCount] = {}
    for line in lines[1:]:
        f = line.split()
        if not f:
            continue
        if f[0] == "total":
            total = int(f[1])
        elif f[0] == "phase":
            phases[phase_name(int(f[1]))] = PhaseCount(int(f[2]), int(f[3]))
        elif f[0] == "unbalanced":
            unbalanced = int(f[1])
    return InsnCounts(total, phases, unbalanced)
