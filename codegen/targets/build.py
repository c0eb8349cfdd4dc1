"""Cross-compile firmware for a board: the board's flags, the runtime, the linker script.

``cross_compile(board, sources, include_dirs, out_dir, extra_cflags)`` compiles and links in one
compiler call and returns the ELF (host: the executable). Everything it writes goes to
``out_dir``: the rendered linker script, a link map, ``build.log`` with the command and the
compiler's output.

The board's compiler, flags and runtime sources (per toolchain) are the build records of
``codegen.render.board_build`` and the linker script is ``codegen.render.linker``'s, the same
ones a device project's Makefile is rendered from; their names stay importable from here.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..board import Board
from ..errors import PockError
from ..render.board_build import (  # noqa: F401  (re-exported)
    ARCH_RUNTIME,
    COMMON_CFLAGS,
    COMMON_RUNTIME,
    CONSOLE_SOURCES,
    UART_CONSOLE,
    UART_SOURCES,
    RuntimeParts,
    board_cflags,
    board_ldflags,
    board_libs,
    compiler,
    resolve_console,
    runtime_parts,
    runtime_root,
)
from ..render.linker import render_linker_script

WARNINGS = ("-Wall", "-Wextra")


class BuildError(PockError):
    """The compiler or linker failed; the message names the board and the first error."""


def toolchain_available(board: Board) -> tuple[bool, str]:
    """(True, '') or (False, why): the compiler (and linker) the board needs is installed."""
    cc = compiler(board)
    if shutil.which(cc) is None:
        return False, f"{cc} is not on PATH (needed for board {board.name})"
    if board.toolchain == "clang-hexagon" and shutil.which("ld.lld") is None:
        return False, f"ld.lld is not on PATH (needed for board {board.name})"
    return True, ""


def cross_compile(board: Board, sources: Sequence[str | Path],
                  include_dirs: Sequence[str | Path] = (), out_dir: str | Path = "build",
                  extra_cflags: Sequence[str] = (), *, name: str = "firmware",
                  stack_size: int | None = None, console: str | None = None,
                  defines: Sequence[str] = (), runtime: bool = True, uart: bool = False,
                  warnings: Sequence[str] = WARNINGS) -> Path:
    """Compile and link ``sources`` for ``board``; returns the ELF (or host executable).

    ``runtime`` adds the startup code, console, profiling markers and C-library subset of
    runtime_c/ (turn it off to link a program that brings its own). ``stack_size`` overrides
    the board's stack reservation; ``console`` overrides the board's console (see
    ``resolve_console``); ``uart`` links the board's UART driver (``pe_uart.h``) for the serial
    protocol; ``defines`` are NAME[=VALUE] macros.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ok, why = toolchain_available(board)
    if not ok:
        raise BuildError(why)
    elf = out / (name if board.arch == "host" else f"{name}.elf")
    parts = (runtime_parts(board, console, uart=uart) if runtime
             else RuntimeParts((), (), (), {}))

    script = map_file = None
    if board.arch != "host":
        script = out / f"{name}.ld"
        script.write_text(render_linker_script(board, stack_size))
        map_file = out / f"{name}.map"

    cmd = [compiler(board), *board_cflags(board), *warnings]
    cmd += [f"-I{d}" for d in (*include_dirs, *parts.include_dirs)]
    cmd += [f"-D{d}" for d in (*parts.defines, *defines)]
    cmd += list(extra_cflags)
    cmd += [str(s) for s in (*sources, *parts.sources)]
    cmd += board_ldflags(board, script, map_file)
    cmd += ["-o", str(elf)] + board_libs(board)

    log = out / "build.log"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                              check=False)
    except OSError as e:
        raise BuildError(f"board {board.name}: cannot run {cmd[0]} ({e.strerror or e})") from None
    log.write_text("$ " + shlex.join(cmd) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise BuildError(f"board {board.name}: build failed: {first_error(proc.stderr)} "
                         f"(full log: {log})")
    return elf


def first_error(text: str) -> str:
    """The most useful line of a compiler's error output."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if (re.search(r"\b(fatal )?error:", ln) or "undefined reference" in ln
                or "overflowed" in ln or "will not fit" in ln):
            return ln
    return lines[0] if lines else "no output"
