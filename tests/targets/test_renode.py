"""Renode boards: the generated .resc / .robot scripts agree with the board file and the ELF
(load address = the image's vector table = flash origin; the console UART's Renode name and
base address; the firmware really drives that base). Running them needs ``renode`` on PATH."""

from __future__ import annotations

import re
import shutil
import struct

import pytest

from codegen.board import load_board
from codegen.errors import PockError
from codegen.targets import (
    EmulatorUnavailable,
    cross_compile,
    read_elf,
    run_on_emulator,
    write_renode_scripts,
)

from .helpers import RENODE_BOARDS, buildable

HELLO = '#include "pe_runtime.h"\nint main(void)\n{\n    pe_puts("hello\\n");\n    return 0;\n}\n'


@pytest.fixture(params=RENODE_BOARDS)
def built(request, tmp_path):
    board = buildable(request.param)
    src = tmp_path / "hello.c"
    src.write_text(HELLO)
    return board, cross_compile(board, [src], [], tmp_path / "build", ["-Werror"])


def test_scripts_are_consistent_with_board_and_elf(built, tmp_path):
    board, elf = built
    resc, robot = write_renode_scripts(board, elf, tmp_path / "scripts", timeout=30)
    image = read_elf(elf)
    vectors = image.symbols["pe_vectors"].value
    flash = board.memory["flash"]["origin"]
    base = board.console["base"]
    assert vectors == flash
    # the firmware's UART driver uses the board's console base (a literal in its code)
    text = image.section(".text")
    blob = elf.read_bytes()[text.offset:text.offset + text.size]
    assert struct.pack("<I", base) in blob

    for script in (resc, robot):
        body = script.read_text()
        assert f"# load address 0x{flash:08X}" in body
        assert f"VectorTableOffset 0x{flash:08X}" in body
        assert (f"# console {board.uart['renode_name']} at 0x{base:08X} "
                f"({board.console['type']})") in body
        assert f"@{board.run['platform']}" in body
        assert str(elf.resolve()) in body
        assert f"boards/{board.name}.yaml" in body
    resc_text = resc.read_text()
    assert re.search(r"^sysbus LoadELF \$elf$", resc_text, re.MULTILINE)
    assert f"{board.uart['renode_name']} CreateFileBackend @" in resc_text
    assert resc_text.rstrip().endswith("start")
    robot_text = robot.read_text()
    assert "Create Terminal Tester    ${UART}    timeout=30" in robot_text
    assert f"${{UART}}           {board.uart['renode_name']}" in robot_text
    assert "Wait For Line On Uart     @pe:exit 0" in robot_text


def test_uart_server_port_goes_into_the_resc(built, tmp_path):
    board, elf = built
    resc, _ = write_renode_scripts(board, elf, tmp_path / "s", uart="tcp:127.0.0.1:4567")
    text = resc.read_text()
    assert "emulation CreateServerSocketTerminal 4567" in text
    assert f"connector Connect {board.uart['renode_name']} pe_uart" in text
    with pytest.raises(PockError, match="tcp:PORT"):
        write_renode_scripts(board, elf, tmp_path / "s", uart="/dev/ttyUSB0")


def test_non_renode_board_has_no_scripts(tmp_path):
    board = load_board("mps2-an386")
    with pytest.raises(PockError, match="does not run on Renode"):
        write_renode_scripts(board, tmp_path / "x.elf", tmp_path)


@pytest.mark.skipif(shutil.which("renode") is not None, reason="renode is installed here")
def test_without_renode_the_run_says_why(built):
    board, elf = built
    with pytest.raises(EmulatorUnavailable) as exc:
        run_on_emulator(board, elf, timeout=10)
    text = str(exc.value)
    assert "renode is not on PATH" in text and ".resc" in text and "\n" not in text


@pytest.mark.emulator
@pytest.mark.skipif(shutil.which("renode") is None,
                    reason="renode is not on PATH (not obtainable on these machines)")
def test_firmware_runs_on_renode(built):
    board, elf = built
    result = run_on_emulator(board, elf, timeout=120)
    assert result.ok and result.stdout == "hello\n"
