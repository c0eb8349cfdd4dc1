"""Board toolchains: ``make`` with the board's cross compiler on a generated device project,
then the image's flash and SRAM use checked against the board's budget.

The project's Makefile (templates/Makefile_board.j2) carries the compiler, flags, defines,
runtime sources and linker script that ``codegen.targets`` uses, so a user's ``make`` in the
project and ``pockengine build`` produce the same image. Sizes come from the ELF's sections
(``codegen.targets.size_report``): flash = code + constants (weights, the embedded data) +
the .data load image; SRAM = .data + .bss (arena, parameter pool, harness buffers) + the
stack the linker script reserves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..board import Board, format_size
from ..errors import PockError
from ..render.names import make_assignment
from ..render.output import Project
from ..targets import compiler, size_report, toolchain_available, write_renode_scripts
from ..targets.build import first_error
from .make import BuildError, find_make, fresh_build_dir, run_make

BUILD_DIRS = {False: "build", True: "build-ops"}
SRAM_HINT = ("hint: train fewer or smaller layers (e.g. --train bias:last4 or "
             "weight:last2@0.25) or pick a board with more SRAM (pockengine boards)")
FLASH_HINT = ("hint: embed fewer samples (--data/--eval) or pick a board with more flash "
              "(pockengine boards)")


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


@dataclass(frozen=True)
class FirmwareBuild:
    """A built firmware image and its memory use."""

    project: Project
    board: Board
    elf: Path
    cc: str
    sizes: dict[str, int]
    profile_ops: bool = False
    log: str = field(default="", repr=False)

    @property
    def binary(self) -> Path:           # the name BuildResult uses
        return self.elf

    @property
    def fits(self) -> bool:
        return (self.sizes["sram_bytes"] <= self.board.sram_budget
                and self.sizes["flash_bytes"] <= self.board.flash_budget)

    def to_json(self) -> dict[str, Any]:
        mem = self.project.manifest.get("memory", {})
        data = self.project.manifest.get("device", {}).get("data", {})
        return {
            "project": str(self.project.dir), "board": self.board.name, "binary": str(self.elf),
            "cc": self.cc, "profile_ops": self.profile_ops, **self.sizes,
            "arena_bytes": mem.get("arena_bytes"), "params_bytes": mem.get("params_bytes"),
            "constant_bytes": mem.get("constant_bytes"),
            "data_flash_bytes": data.get("flash_bytes", 0),
            "budget": {"sram_bytes": self.board.sram_budget,
                       "flash_bytes": self.board.flash_budget},
            "fits": self.fits,
        }

    def check_budget(self) -> None:
        """PockError (one line: needed vs budget, what it is made of, a hint) if the image
        does not fit the board."""
        s, b = self.sizes, self.board
        mem = self.project.manifest.get("memory", {})
        if s["sram_bytes"] > b.sram_budget:
            raise PockError(
                f"{self.elf.name}: needs {_kib(s['sram_bytes'])} SRAM (.data+.bss "
                f"{_kib(s['sram_static_bytes'])}, of which arena {_kib(mem.get('arena_bytes', 0))}"
                f" + parameters {_kib(mem.get('params_bytes', 0))}; stack "
                f"{_kib(s['stack_bytes'])}), board {b.name} has {format_size(b.sram_budget)}; "
                + SRAM_HINT)
        if s["flash_bytes"] > b.flash_budget:
            data = self.project.manifest.get("device", {}).get("data", {})
            raise PockError(
                f"{self.elf.name}: needs {_kib(s['flash_bytes'])} flash (code and constants "
                f"{_kib(s['flash_bytes'] - data.get('flash_bytes', 0))} + embedded data "
                f"{_kib(data.get('flash_bytes', 0))}), board {b.name} has "
                f"{format_size(b.flash_budget)}; " + FLASH_HINT)


def build_firmware(project: Project, *, profile_ops: bool = False, check: bool = True
                   ) -> FirmwareBuild:
    """``make`` the project for its board (``profile_ops``: with per-op markers, in
    ``build-ops``); ``check``: raise if the image does not fit the board's budget."""
    board = project.board_record()
    ok, why = toolchain_available(board)
    if not ok:
        raise BuildError(f"{project.dir}: cannot build for {board.name}: {why}")
    make = find_make("to build the firmware")
    cc = compiler(board)
    build_dir = BUILD_DIRS[profile_ops]
    out = project.dir / build_dir
    fresh_build_dir(out, f"{cc}\nboard={board.name}\n")
    args = [make_assignment("CC", cc), make_assignment("BUILD", build_dir)]
    if profile_ops:
        args.append("PROFILE_OPS=1")
    status, log, _ = run_make(make, project.dir, args, log_dir=out)
    if status != 0:
        _overflow(project, board, log)
        raise BuildError(f"{project.dir}: build for {board.name} with {cc} failed: "
                         f"{first_error(log)} (log: {out / 'build.log'})", log)
    elf = out / Path(project.manifest["binary"]).name
    rep = size_report(elf)
    sizes = {"flash_bytes": rep.flash_bytes, "sram_bytes": rep.sram_total_bytes,
             "sram_static_bytes": rep.sram_bytes, "stack_bytes": rep.stack_bytes,
             "text_bytes": rep.text_bytes, "data_bytes": rep.data_bytes,
             "bss_bytes": rep.bss_bytes, "elf_bytes": elf.stat().st_size}
    fw = FirmwareBuild(project, board, elf, cc, sizes, profile_ops, log)
    if board.emulator == "renode":          # the scripts that run it, next to the ELF
        write_renode_scripts(board, elf, out)
    if check:
        fw.check_budget()
    return fw


_OVERFLOW = re.compile(r"region [`'\"]?(\w+)['\"]? overflowed by (\d+) bytes")


def _overflow(project: Project, board: Board, log: str) -> None:
    """A link that overflowed an emulated region: the budget error, with numbers."""
    m = _OVERFLOW.search(log)
    if not m:
        return
    region, extra = m.group(1).lower(), int(m.group(2))
    if region not in board.memory:
        return
    need = board.memory[region]["size"] + extra
    name = f"{project.prefix}_firmware.elf"
    if region == "flash":
        raise PockError(f"{name}: needs {_kib(need)} flash (the link overflowed the "
                        f"{format_size(board.memory['flash']['size'])} region by {extra} B), "
                        f"board {board.name} has {format_size(board.flash_budget)}; "
                        + FLASH_HINT)
    raise PockError(f"{name}: needs {_kib(need)} SRAM (the link overflowed the "
                    f"{format_size(board.memory[region]['size'])} {region} region by {extra} B), "
                    f"board {board.name} has {format_size(board.sram_budget)}; " + SRAM_HINT)
