"""Cross-compile firmware for a board: the board's flags, the runtime, the linker script.

``cross_compile(board, sources, include_dirs, out_dir, extra_cflags)`` compiles and links in one
compiler call and returns the ELF (host: the executable). Everything it writes goes to
``out_dir``: the rendered linker script, a link map, ``build.log`` with the command and the
compiler's output.

Toolchains (``board.toolchain``):
  arm-none-eabi-gcc  -O2, no C library (-nostdlib + libgcc for soft-float and 64-bit helpers),
                     our startup, console and memcpy/memset (runtime_c/runtime/pe_libc.c)
  clang-hexagon      clang --target=hexagon -O2 -G0 -ffreestanding -nostdlib -nostdlibinc with
                     ld.lld, our _start and compiler helpers (runtime_c/startup/hexagon)
  host-cc            $CC (default cc), the system C library
Every build uses -ffp-contract=off (host, QEMU and the golden model agree on float results),
-ffunction-sections -fdata-sections and --gc-sections.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..board import Board
from ..errors import PockError
from ..resources import data_dir
from .linker import render_linker_script

COMMON_CFLAGS = ("-std=c99", "-O2", "-ffp-contract=off", "-ffunction-sections",
                 "-fdata-sections")
WARNINGS = ("-Wall", "-Wextra")

CONSOLE_SOURCES = {
    "semihosting": "runtime/console/semihosting.c",
    "trap0": "runtime/console/hexagon_trap0.c",
    "stdio": "runtime/console/host_stdio.c",
}
UART_SOURCES = {
    "cmsdk-apb-uart": "runtime/uart/cmsdk_uart.c",
    "stm32-usart": "runtime/uart/stm32_usart.c",
    "stm32-usart-v2": "runtime/uart/stm32_usart_v2.c",
    "nrf-uarte": "runtime/uart/nrf_uarte.c",
}
UART_CONSOLE = "runtime/console/uart.c"
COMMON_RUNTIME = ("runtime/pe_runtime.c", "runtime/pe_profile.c")
ARCH_RUNTIME = {
    "cortex-m": ("startup/cortex_m/pe_startup_cortex_m.c", "runtime/pe_libc.c"),
    "hexagon": ("startup/hexagon/pe_crt0_hexagon.S", "startup/hexagon/pe_start_hexagon.c",
                "startup/hexagon/pe_builtins_hexagon.c", "runtime/pe_libc.c"),
    "host": (),
}


class BuildError(PockError):
    """The compiler or linker failed; the message names the board and the first error."""


@dataclass(frozen=True)
class RuntimeParts:
    """What the board runtime adds to a build."""
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    defines: tuple[str, ...]
    console: dict


def runtime_root() -> Path:
    return data_dir("runtime_c")


def resolve_console(board: Board, console: str | None = None) -> dict:
    """The console a build uses: the board's, or ``console`` ('uart' = the board's uart
    peripheral, 'semihosting', ...) to override it (e.g. testing UART drivers under QEMU)."""
    if console is None or console == board.console_kind:
        return dict(board.console)
    if console == "uart":
        if board.uart is None:
            raise PockError(f"board {board.name!r} has no uart section for a uart console")
        return {"kind": "uart", "base": board.uart["base"], "type": board.uart["type"]}
    if console == "semihosting" and board.arch == "cortex-m":
        return {"kind": "semihosting"}
    raise PockError(f"console {console!r} is not available on board {board.name!r}")


def runtime_parts(board: Board, console: str | None = None, *, uart: bool = False
                  ) -> RuntimeParts:
    """Startup, console and runtime files of a build. ``uart``: also link the board's UART
    driver (uart/pe_uart.h) for the serial protocol, whatever the console is."""
    root = runtime_root()
    con = resolve_console(board, console)
    rel = list(ARCH_RUNTIME[board.arch]) + list(COMMON_RUNTIME)
    defines: list[str] = []
    driver = None
    if con["kind"] == "uart":
        driver = {"type": con["type"], "base": con["base"]}
        rel.append(UART_CONSOLE)
        if board.emulator == "qemu-system-arm":
            defines.append("PE_UART_EXIT_SEMIHOSTING=1")  # QEMU: exit status via semihosting
    else:
        rel.append(CONSOLE_SOURCES[con["kind"]])
        if uart:
            if board.uart is None:
                raise PockError(f"board {board.name!r} has no uart section")
            driver = {"type": board.uart["type"], "base": board.uart["base"]}
    if driver is not None:
        rel.append(UART_SOURCES[driver["type"]])
        defines.append(f"PE_UART_BASE=0x{driver['base']:08X}u")
        info = board.uart if board.uart and board.uart["base"] == driver["base"] else {}
        for key, macro in (("clock_hz", "PE_UART_CLOCK_HZ"), ("tx_pin", "PE_UART_TX_PIN"),
                           ("rx_pin", "PE_UART_RX_PIN")):
            if key in info:
                defines.append(f"{macro}={info[key]}u")
    includes = [root / "runtime", root / "runtime" / "uart"]
    if board.arch == "hexagon":
        includes.append(root / "runtime" / "freestanding")
    return RuntimeParts(tuple(root / r for r in rel), tuple(includes), tuple(defines), con)


def compiler(board: Board) -> str:
    if board.toolchain == "arm-none-eabi-gcc":
        return "arm-none-eabi-gcc"
    if board.toolchain == "clang-hexagon":
        return os.environ.get("POCKENGINE_HEXAGON_CLANG", "clang")
    return os.environ.get("CC", "cc")


def toolchain_available(board: Board) -> tuple[bool, str]:
    """(True, '') or (False, why): the compiler (and linker) the board needs is installed."""
    cc = compiler(board)
    if shutil.which(cc) is None:
        return False, f"{cc} is not on PATH (needed for board {board.name})"
    if board.toolchain == "clang-hexagon" and shutil.which("ld.lld") is None:
        return False, f"ld.lld is not on PATH (needed for board {board.name})"
    return True, ""


def board_cflags(board: Board) -> list[str]:
    """Compile flags of a board build (before include dirs and defines)."""
    flags = list(board.cflags) + list(COMMON_CFLAGS)
    if board.toolchain == "clang-hexagon":
        flags += ["-G0", "-ffreestanding", "-nostdlibinc"]
    return flags


def board_ldflags(board: Board, script: Path | None, map_file: Path | None) -> list[str]:
    """Link flags of a board build; ``map_file`` None: no link map (a Makefile adds its own
    ``-Wl,-Map=$(BUILD)/...``)."""
    flags = ["-Wl,--gc-sections"]
    if board.toolchain == "arm-none-eabi-gcc":
        flags += ["-nostdlib", f"-T{script}", "-Wl,--no-warn-rwx-segments"]
    elif board.toolchain == "clang-hexagon":
        flags += ["-nostdlib", "-fuse-ld=lld", "-static", f"-Wl,-T,{script}"]
    if map_file is not None and board.arch != "host":
        flags.append(f"-Wl,-Map={map_file}")
    return flags + list(board.ldflags)


def board_libs(board: Board) -> list[str]:
    return ["-lgcc"] if board.toolchain == "arm-none-eabi-gcc" else []


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
