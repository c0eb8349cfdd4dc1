"""A small firmware (portable kernels on fixed data, checksums, runtime-helper arithmetic)
builds and runs on every emulated board with the host build's exact output; instruction counts
are reported per phase and identical across two runs; the painted stack gives a plausible use."""

from __future__ import annotations

import socket
import subprocess
import threading

import pytest

from codegen.board import load_board
from codegen.targets import cross_compile, run_on_emulator, size_report

from .helpers import (
    EMULATED_BOARDS,
    FIRMWARE,
    buildable,
    checksum_includes,
    checksum_sources,
    runnable,
)

KERNEL_PHASES = [f"p{n}" for n in range(8, 17)]     # PE_PROF_USER + 0..8: one per kernel


@pytest.fixture(scope="module")
def host_output(tmp_path_factory) -> str:
    board = buildable("host")
    out = tmp_path_factory.mktemp("host")
    exe = cross_compile(board, checksum_sources(), checksum_includes(), out, ["-Werror"])
    result = run_on_emulator(board, exe, timeout=60)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == [
        "conv2d_s8", "depthwise_conv2d_s8", "fully_connected_s8", "avg_pool2d_s8",
        "softmax_s8", "add_s8", "conv2d_f32", "fully_connected_f32", "softmax_f32",
        "integer_division", "float_division"]
    return result.stdout


@pytest.mark.emulator
@pytest.mark.parametrize("name", EMULATED_BOARDS)
def test_checksums_match_host_and_counts_are_deterministic(name, tmp_path, host_output):
    board = runnable(name)
    elf = cross_compile(board, checksum_sources(), checksum_includes(), tmp_path, ["-Werror"])
    first = run_on_emulator(board, elf, timeout=60)
    assert first.ok, (first.exit_code, first.fault, first.stderr)
    assert first.stdout == host_output

    # instruction counts: total and per phase, identical on a second run
    second = run_on_emulator(board, elf, timeout=60)
    assert second.stdout == host_output
    assert first.instructions == second.instructions and first.instructions > 100_000
    assert first.phases == second.phases
    assert set(first.phases) == {"forward", *KERNEL_PHASES, "p17"}
    for phase in ("forward", *KERNEL_PHASES, "p17"):
        assert first.phases[phase].calls == 1 and first.phases[phase].instructions > 0
    inner = sum(first.phases[p].instructions for p in KERNEL_PHASES)
    assert inner < first.phases["forward"].instructions < first.instructions
    assert first.unbalanced_marks == 0

    # the painted stack: used, but far from the whole reservation
    assert 128 <= first.stack_bytes < board.stack // 2
    assert first.stack_bytes == second.stack_bytes

    sizes = size_report(elf)
    assert sizes.stack_bytes == board.stack
    assert 4096 < sizes.flash_bytes < board.flash_budget
    assert sizes.sram_bytes < board.sram_budget


@pytest.mark.emulator
@pytest.mark.parametrize("name", ("mps2-an386", "mps2-an505", "mps3-an547", "netduinoplus2"))
def test_uart_console_under_qemu(name, tmp_path):
    """The board's UART driver (CMSDK UART, STM32 USART), printing through QEMU's serial
    port; the Secure-alias UART bases of the TrustZone boards included."""
    board = runnable(name)
    source = tmp_path / "hello.c"
    source.write_text(HELLO)
    elf = cross_compile(board, [source], [], tmp_path, ["-Werror"], console="uart")
    result = run_on_emulator(board, elf, timeout=30, console="uart")
    assert result.ok, (result.exit_code, result.fault, result.stderr)
    assert result.stdout == "hello from the uart: 42 -7 0x0000002a|ab  |\n"
    assert result.stack_bytes is not None and result.stack_bytes > 0


HELLO = r"""#include "pe_runtime.h"
int main(void)
{
    pe_printf("hello from the %s: %d %d 0x%08x|%-4s|\n", "uart", 42, -7, 42u, "ab");
    return 0;
}
"""


@pytest.mark.emulator
@pytest.mark.parametrize("name", ("mps2-an386", "mps2-an385", "hexagon-v67"))
def test_stack_painting_measures_a_known_frame(name, tmp_path):
    board = runnable(name)
    elf = cross_compile(board, [FIRMWARE / "stack_use.c"], [], tmp_path, ["-Werror"])
    result = run_on_emulator(board, elf, timeout=30, profile=False)
    assert result.ok
    expected_sum = sum((3 + i) & 0xFF for i in range(0, 3000, 7))
    assert result.stdout == f"sum {expected_sum} stack {board.stack}\n"
    assert 3000 <= result.stack_bytes <= 3000 + 1024


@pytest.mark.emulator
def test_stack_overflow_faults_on_armv8m(tmp_path):
    """MSPLIM (set by the reset handler) turns a stack overflow into a fault report."""
    board = runnable("mps2-an505")
    elf = cross_compile(board, [FIRMWARE / "stack_use.c"], [], tmp_path, ["-Werror"],
                        defines=["PE_OVERFLOW"])
    result = run_on_emulator(board, elf, timeout=30, profile=False)
    assert result.exit_code == 99 and not result.timed_out
    assert result.fault is not None and result.fault.startswith("usagefault")
    assert "cfsr=0x00100000" in result.fault      # UFSR.STKOF: caught before any write
    assert result.stack_bytes < board.stack


@pytest.mark.emulator
def test_size_report_agrees_with_binutils(tmp_path):
    board = buildable("mps2-an386")
    elf = cross_compile(board, checksum_sources(), checksum_includes(), tmp_path)
    out = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True,
                         text=True, check=True).stdout
    sections = {}
    for line in out.splitlines():
        f = line.split()
        if (len(f) == 3 and f[1].isdigit() and f[2].isdigit() and int(f[1]) != 0
                and f[0] not in (".comment", ".ARM.attributes")
                and not f[0].startswith(".debug")):
            sections[f[0]] = int(f[1])
    sizes = size_report(elf)
    assert sizes.stack_bytes == sections[".stack"] == board.stack
    assert sizes.data_bytes == sections.get(".data", 0)
    assert sizes.bss_bytes == sections[".bss"]
    assert sizes.text_bytes == sum(v for k, v in sections.items()
                                   if k not in (".data", ".bss", ".stack"))
    assert sizes.flash_bytes == sizes.text_bytes + sizes.data_bytes
    assert sizes.as_dict()["sram_total_bytes"] == sizes.sram_bytes + board.stack


def test_board_list_of_the_tests_is_the_catalogue():
    for name in EMULATED_BOARDS:
        assert load_board(name).emulator in ("qemu-system-arm", "qemu-hexagon")


@pytest.mark.emulator
@pytest.mark.parametrize("name", ("mps2-an386", "mps2-an505", "netduinoplus2"))
def test_uart_round_trip_over_tcp(name, tmp_path):
    """Bytes in and out of the board's UART through QEMU's serial port connected to a TCP
    socket (as ``pockengine sim --uart tcp:HOST:PORT`` will), the console on semihosting."""
    board = runnable(name)
    elf = cross_compile(board, [FIRMWARE / "uart_echo.c"], [], tmp_path, ["-Werror"],
                        uart=True)
    payload = b"Pockengine-UART!"
    received: dict[str, bytes] = {}
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(30)
        port = server.getsockname()[1]

        def serve():
            conn, _ = server.accept()
            with conn:
                conn.settimeout(30)
                data = b""
                while not data.endswith(b"ready\n"):
                    data += conn.recv(64)
                conn.sendall(payload)
                echo = b""
                while len(echo) < len(payload):
                    echo += conn.recv(64)
                received["echo"] = echo

        thread = threading.Thread(target=serve)
        thread.start()
        result = run_on_emulator(board, elf, timeout=30, uart=f"tcp:127.0.0.1:{port}",
                                 profile=False)
        thread.join(timeout=30)
    assert result.ok, (result.exit_code, result.fault, result.stderr)
    assert received["echo"] == bytes(b ^ 0x20 for b in payload)
    assert result.stdout == f"echoed {sum(payload)}\n"
