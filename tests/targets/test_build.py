"""Building for boards: linker scripts from the memory map, the runtime under strict warnings on
every toolchain, one-line build errors, outputs only in the build directory."""

from __future__ import annotations

import re
import subprocess

import pytest

from codegen.board import list_boards, load_board
from codegen.errors import PockError, SpecError
from codegen.resources import data_dir
from codegen.targets import (
    BuildError,
    board_cflags,
    build_plugin,
    compiler,
    cross_compile,
    read_elf,
    render_linker_script,
    resolve_console,
    runtime_parts,
    size_report,
)
from codegen.targets.build import UART_SOURCES

from .helpers import buildable

STRICT = ("-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla", "-Wconversion", "-Wshadow",
          "-Wstrict-prototypes", "-Wmissing-prototypes")
DEVICE_BOARDS = [b.name for b in list_boards() if b.arch != "host"]


@pytest.mark.parametrize("name", DEVICE_BOARDS)
def test_linker_script_follows_the_memory_map(name):
    board = load_board(name)
    script = render_linker_script(board)
    memory = {label: (int(origin, 16), int(length)) for label, origin, length in re.findall(
        r"^\s+(\w+) \(\w+\) : ORIGIN = (0x[0-9A-F]+), LENGTH = (\d+)$", script, re.MULTILINE)}
    assert memory == {n.upper(): (r["origin"], r["size"]) for n, r in board.memory.items()}
    assert f"__pe_stack_size = {board.stack};" in script
    assert f"boards/{name}.yaml" in script and "do not edit" in script
    entry = "pe_reset_handler" if board.arch == "cortex-m" else "_start"
    assert f"ENTRY({entry})" in script
    if board.arch == "cortex-m":
        assert "KEEP(*(.isr_vector))" in script and "> SRAM AT > FLASH" in script
    assert render_linker_script(board, stack_size=4096).count("__pe_stack_size = 4096;") == 1
    with pytest.raises(SpecError):
        render_linker_script(board, stack_size=1001)


def test_host_has_no_linker_script():
    with pytest.raises(SpecError):
        render_linker_script(load_board("host"))


@pytest.mark.parametrize("name", ("mps2-an385", "mps2-an386", "mps2-an505", "mps3-an547",
                                  "netduinoplus2", "stm32f746g-disco", "nrf52840dk",
                                  "hexagon-v66", "hexagon-v67", "host"))
def test_runtime_compiles_with_strict_warnings(name):
    board = buildable(name)
    variants = [(None, False)]
    if board.uart:
        variants += [("uart", False), (None, True)]
    for console, uart in variants:
        parts = runtime_parts(board, console, uart=uart)
        for src in parts.sources:
            cmd = [compiler(board), *board_cflags(board), *STRICT,
                   *[f"-I{d}" for d in parts.include_dirs],
                   *[f"-D{d}" for d in parts.defines], "-c", str(src), "-o", "/dev/null"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            assert proc.returncode == 0, f"{src.name}: {proc.stderr}"


def test_every_uart_driver_compiles():
    board = buildable("stm32f746g-disco")
    root = data_dir("runtime_c")
    for source in UART_SOURCES.values():
        cmd = [compiler(board), *board_cflags(board), *STRICT, f"-I{root / 'runtime' / 'uart'}",
               "-DPE_UART_BASE=0x40011000u", "-c", str(root / source), "-o", "/dev/null"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{source}: {proc.stderr}"


def test_runtime_parts_follow_the_board():
    an386 = load_board("mps2-an386")
    names = [p.name for p in runtime_parts(an386).sources]
    assert "pe_startup_cortex_m.c" in names and "semihosting.c" in names
    uart = runtime_parts(an386, "uart")
    assert {"cmsdk_uart.c", "uart.c"} <= {p.name for p in uart.sources}
    assert "PE_UART_BASE=0x40004000u" in uart.defines
    assert "PE_UART_EXIT_SEMIHOSTING=1" in uart.defines
    serial = runtime_parts(an386, uart=True)
    assert {"semihosting.c", "cmsdk_uart.c"} <= {p.name for p in serial.sources}
    assert "uart.c" not in {p.name for p in serial.sources}
    assert "PE_UART_CLOCK_HZ=25000000u" in serial.defines
    disco = runtime_parts(load_board("stm32f746g-disco"))
    assert "stm32_usart_v2.c" in [p.name for p in disco.sources]
    assert "PE_UART_BASE=0x40011000u" in disco.defines
    assert not any("SEMIHOSTING" in d for d in disco.defines)
    hexagon = runtime_parts(load_board("hexagon-v67"))
    assert {"pe_crt0_hexagon.S", "pe_builtins_hexagon.c", "hexagon_trap0.c"} <= {
        p.name for p in hexagon.sources}
    with pytest.raises(PockError, match="not available"):
        resolve_console(load_board("hexagon-v67"), "semihosting")
    with pytest.raises(PockError, match="no uart section"):
        resolve_console(load_board("hexagon-v67"), "uart")


def test_build_error_is_one_line(tmp_path):
    board = buildable("mps2-an386")
    src = tmp_path / "broken.c"
    src.write_text("int main(void) { return missing_symbol; }\n")
    with pytest.raises(BuildError) as exc:
        cross_compile(board, [src], [], tmp_path / "out")
    text = str(exc.value)
    assert "\n" not in text and "mps2-an386" in text and "missing_symbol" in text
    assert (tmp_path / "out" / "build.log").is_file()


def test_image_too_big_for_the_memory_map_fails_to_link(tmp_path):
    board = buildable("netduinoplus2")
    src = tmp_path / "big.c"
    src.write_text("static volatile char big[200 * 1024];\n"
                   "int main(void) { big[0] = 1; return big[1]; }\n")
    with pytest.raises(BuildError, match="overflow|will not fit"):
        cross_compile(board, [src], [], tmp_path / "out")


def test_outputs_stay_in_the_build_directory(tmp_path):
    board = buildable("mps2-an386")
    src = tmp_path / "src" / "main.c"
    src.parent.mkdir()
    src.write_text("int main(void) { return 0; }\n")
    out = tmp_path / "out"
    elf = cross_compile(board, [src], [], out)
    assert sorted(p.name for p in out.iterdir()) == ["build.log", "firmware.elf",
                                                     "firmware.ld", "firmware.map"]
    assert sorted(p.name for p in src.parent.iterdir()) == ["main.c"]
    image = read_elf(elf)
    assert image.symbols["pe_vectors"].value == board.memory["flash"]["origin"]
    assert image.entry & ~1 == image.symbols["pe_reset_handler"].value & ~1
    report = size_report(elf)
    assert report.stack_bytes == board.stack and report.flash_bytes < 4096


def test_plugin_builds_cleanly(tmp_path):
    buildable("host")
    src = data_dir("runtime_c") / "runtime" / "qemu" / "pe_insn_count.c"
    proc = subprocess.run(["cc", "-shared", "-fPIC", "-std=c99", "-Wall", "-Wextra",
                           "-Werror", "-pedantic", str(src), "-o", str(tmp_path / "p.so")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    so = build_plugin(tmp_path)
    assert so.is_file() and build_plugin(tmp_path) == so       # built once, then reused
