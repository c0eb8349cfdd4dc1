"""Board files: every catalogue entry validates; the schema rejects what it must, in one line."""

from __future__ import annotations

import copy

import pytest
import yaml

from codegen.board import (
    board_from_dict,
    boards_dir,
    format_boards,
    format_size,
    list_boards,
    load_board,
    load_board_file,
    parse_size,
)
from codegen.errors import SpecError

ISSUE_BOARDS = {"mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547",
                "netduinoplus2", "stm32f746g-disco", "nrf52840dk", "hexagon-v66", "hexagon-v67",
                "host"}


def test_every_board_file_validates():
    boards = list_boards()
    assert {b.name for b in boards} == ISSUE_BOARDS
    for b in boards:
        assert b.budget["sram"] > 0 and b.budget["flash"] > 0
        if b.arch != "host":
            assert {"flash", "sram"} <= set(b.memory)
            assert b.budget["sram"] <= b.memory["sram"]["size"]
            assert b.budget["flash"] <= b.memory["flash"]["size"]


def test_known_facts_of_the_catalogue():
    an386 = load_board("mps2-an386")
    assert an386.budget == {"sram": 256 * 1024, "flash": 1024 * 1024}
    assert an386.default_backward == "fp32" and an386.console_kind == "semihosting"
    an385 = load_board("mps2-an385")
    assert not an385.has_fpu and an385.default_backward == "int8"
    assert "-mfloat-abi=soft" in an385.cflags
    netduino = load_board("netduinoplus2")
    assert netduino.budget["sram"] == 192 * 1024 and netduino.budget["flash"] == 1024 * 1024
    assert netduino.run["machine"] == "netduinoplus2"
    assert netduino.uart["type"] == "stm32-usart"
    assert load_board("stm32f746g-disco").budget == {"sram": 320 * 1024, "flash": 1024 ** 2}
    assert load_board("nrf52840dk").budget == {"sram": 256 * 1024, "flash": 1024 ** 2}
    for name in ("stm32f746g-disco", "nrf52840dk"):
        b = load_board(name)
        assert b.emulator == "renode" and b.console_kind == "uart"
        assert b.console["base"] == b.uart["base"] and b.console["type"] == b.uart["type"]
    assert load_board("nrf52840dk").uart["type"] == "nrf-uarte"
    an547 = load_board("mps3-an547")
    assert {"mve", "mve_fp"} <= set(an547.features)
    for v in ("66", "67"):
        hexagon = load_board(f"hexagon-v{v}")
        assert hexagon.console_kind == "trap0" and hexagon.emulator == "qemu-hexagon"
        assert f"-mv{v}" in hexagon.cflags and "-mhvx-length=128b" in hexagon.cflags
    assert load_board("host").console_kind == "stdio"
    mps_uarts = {n: load_board(n).uart for n in ("mps2-an385", "mps2-an386", "mps2-an500",
                                                 "mps2-an505", "mps3-an547")}
    assert all(u["type"] == "cmsdk-apb-uart" for u in mps_uarts.values())


def test_format_boards_lists_every_board():
    text = format_boards()
    for name in ISSUE_BOARDS:
        assert name in text
    assert "256 KiB" in text and "qemu mps2-an386" in text and "renode" in text


def test_sizes_need_units():
    assert parse_size("256 KiB", "x") == 262144
    assert parse_size("1.5 KiB", "x") == 1536
    assert format_size(262144) == "256 KiB" and format_size(1000) == "1000 B"
    for bad in (262144, "262144", "12 bytes", "1.3 B", None):
        with pytest.raises(SpecError):
            parse_size(bad, "x")


@pytest.fixture()
def an386() -> dict:
    return yaml.safe_load((boards_dir() / "mps2-an386.yaml").read_text())


def _mutate(d: dict, path: str, value) -> dict:
    d = copy.deepcopy(d)
    keys = path.split(".")
    target = d
    for k in keys[:-1]:
        target = target.setdefault(k, {})
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return d


_DELETE = object()

REJECTED = [
    ("colour", "blue", "unknown key(s) colour"),
    ("memory.sram.speed", "fast", "unknown key(s) speed"),
    ("run.kernel", "x.elf", "unknown key(s) kernel"),
    ("uart.baud", 9600, "unknown key(s) baud"),
    ("budget.sram", 262144, "needs explicit units"),
    ("budget.flash", "1024", "needs explicit units"),
    ("memory.flash.size", 4194304, "needs explicit units"),
    ("stack", 4096, "needs explicit units"),
    ("arch", "riscv", "'riscv' is not one of cortex-m, hexagon, host"),
    ("toolchain", "iar", "is not one of"),
    ("console", "jtag", "'jtag' is not one of"),
    ("features", ["dsp", "neon"], "'neon' is not one of"),
    ("uart.type", "pl011", "'pl011' is not one of"),
    ("run.emulator", "qemu-system-riscv", "is not one of"),
    ("defaults.backward", "fp16", "'fp16' is not one of"),
    ("cpu", _DELETE, "missing required key 'cpu'"),
    ("memory.flash.origin", "0x0", "expected an integer"),
    ("memory.flash.origin", True, "expected an integer"),
    ("cflags", "-mcpu=cortex-m4", "expected a list"),
    ("toolchain", "clang-hexagon", "does not build for arch 'cortex-m'"),
    ("console", "trap0", "is not available on arch 'cortex-m'"),
    ("console", {"kind": "uart"}, "a uart console needs 'base'"),
    ("console", {"kind": "semihosting", "base": 0x40004000}, "belong to a uart console"),
    ("run", {"emulator": "qemu-system-arm"}, "needs 'machine'"),
    ("run", {"emulator": "renode"}, "needs 'platform'"),
    ("run.emulator", "qemu-hexagon", "does not run arch 'cortex-m'"),
    ("budget.sram", "8 MiB", "more than the emulated region"),
    ("memory.sram", _DELETE, "missing region 'sram'"),
    ("memory.extra", {"origin": 0x20100000, "size": "64 KiB"}, "overlap"),
    ("memory.Flash2", {"origin": 0x30000000, "size": "64 KiB"}, "lower-case identifiers"),
    ("memory.top", {"origin": 0xFFFFF000, "size": "1 MiB"}, "outside the 32-bit"),
    ("cflags", ["-mcpu=cortex-m4", "-mthumb"], "feature 'fpu_sp' needs -mfloat-abi"),
]


@pytest.mark.parametrize("path,value,message", REJECTED, ids=[r[0] + ":" + r[2][:20]
                                                              for r in REJECTED])
def test_bad_board_is_rejected_in_one_line(an386, path, value, message):
    with pytest.raises(SpecError) as exc:
        board_from_dict(_mutate(an386, path, value), "mps2-an386.yaml")
    text = str(exc.value)
    assert message in text
    assert "\n" not in text and text.startswith("mps2-an386.yaml")


def test_hard_float_flags_need_the_fpu_feature(an386):
    d = _mutate(an386, "cflags", ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=hard"])
    d["features"] = []
    with pytest.raises(SpecError, match="needs feature 'fpu_sp'"):
        board_from_dict(d, "b.yaml")


def test_uart_console_takes_its_type_from_the_uart_section(an386):
    d = _mutate(an386, "console", {"kind": "uart", "base": 0x40004000})
    b = board_from_dict(d, "b.yaml")
    assert b.console == {"kind": "uart", "base": 0x40004000, "type": "cmsdk-apb-uart"}
    d = _mutate(an386, "console", {"kind": "uart", "base": 0x40005000})
    with pytest.raises(SpecError, match="needs 'type'"):
        board_from_dict(d, "b.yaml")
    d = _mutate(an386, "console", {"kind": "uart", "base": 0x40005000,
                                   "type": "cmsdk-apb-uart"})
    assert board_from_dict(d, "b.yaml").console["base"] == 0x40005000


def test_board_files_on_disk(tmp_path, an386):
    f = tmp_path / "my-board.yaml"
    f.write_text(yaml.safe_dump(an386))
    with pytest.raises(SpecError, match="differs from the file name"):
        load_board(str(f))
    an386["name"] = "my-board"
    f.write_text(yaml.safe_dump(an386))
    assert load_board(str(f)).name == "my-board"
    f.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_board_file(f)
    with pytest.raises(SpecError, match="no such board file"):
        load_board(str(tmp_path / "missing.yaml"))
    with pytest.raises(SpecError, match="unknown board 'mps9'.*mps2-an386"):
        load_board("mps9")
