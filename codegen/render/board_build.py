"""The build records of a board: its compiler, flags and runtime sources.

What a board build compiles and links with, in one place for both consumers: a device project's
Makefile (``device.board_files`` copies the runtime into the project) and
``codegen.targets.cross_compile``, so that ``make`` in a project and ``pockengine build`` give
the same image (issue #16: render holds them, targets imports them).

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
from dataclasses import dataclass
from pathlib import Path

from ..board import Board
from ..errors import PockError
from ..resources import data_dir

COMMON_CFLAGS = ("-std=c99", "-O2", "-ffp-contract=off", "-ffunction-sections",
                 "-fdata-sections")

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
