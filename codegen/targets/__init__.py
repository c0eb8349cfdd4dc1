"""Board targets: cross-compiling firmware, sizing it, running it on emulators, counting
instructions per phase.

    elf = cross_compile(board, sources, include_dirs, out_dir, extra_cflags)
    size_report(elf)                 -> flash / SRAM / stack bytes
    run_on_emulator(board, elf, 60)  -> RunResult(stdout, exit_code, instructions, phases, ...)

The C side lives in runtime_c/startup (vector table, reset, Hexagon _start and compiler
helpers) and runtime_c/runtime (console, exit protocol, stack painting, phase markers, the QEMU
instruction-count plugin); linker scripts and Renode scripts are Jinja2 templates in
templates/startup rendered from the board file.
"""

from ..render.linker import render_linker_script
from .build import (
    BuildError,
    board_cflags,
    compiler,
    cross_compile,
    resolve_console,
    runtime_parts,
    toolchain_available,
)
from .elf import read_elf
from .emulator import EmulatorUnavailable, RunResult, emulator_available, run_on_emulator
from .profile import PHASE_NAMES, PHASE_NUMBERS, PhaseCount, build_plugin
from .renode import write_renode_scripts
from .size import SizeReport, size_report

__all__ = [
    "PHASE_NAMES", "PHASE_NUMBERS", "BuildError", "EmulatorUnavailable", "PhaseCount",
    "RunResult", "SizeReport", "board_cflags", "build_plugin", "compiler", "cross_compile",
    "emulator_available", "read_elf", "render_linker_script", "resolve_console",
    "run_on_emulator", "runtime_parts", "size_report", "toolchain_available",
    "write_renode_scripts",
]
