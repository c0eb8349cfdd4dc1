"""The board files' memory maps against QEMU's own view (``info mtree -f``, the CPU's address
space): every region of a QEMU board must be fully backed by RAM, ROM or a TrustZone memory
protection controller in front of RAM. (tests/targets/test_memory_map.py then reads and writes
every region from firmware running on the board.)"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from codegen.board import load_board

QEMU_ARM_BOARDS = ("mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547",
                   "netduinoplus2")
_ENTRY = re.compile(r"^\s*([0-9a-f]+)-([0-9a-f]+) \(prio -?\d+, ([a-z/]+)\): (\S+)")
_MEMORY_NAMES = ("tz-mpc-upstream",)      # an MPC in front of a RAM (mps2-tz boards)


def cpu_address_space(machine: str) -> list[tuple[int, int, str, str]]:
    proc = subprocess.run(
        ["qemu-system-arm", "-M", machine, "-S", "-display", "none", "-monitor", "stdio",
         "-serial", "null"], input="info mtree -f\nquit\n", capture_output=True, text=True,
        timeout=30, check=False)
    entries = []
    in_cpu_view = False
    for line in proc.stdout.splitlines():
        if line.startswith("FlatView"):
            in_cpu_view = False
        elif 'AS "cpu-memory-0"' in line:
            in_cpu_view = True
        elif in_cpu_view:
            m = _ENTRY.match(line)
            if m:
                entries.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3),
                                m.group(4)))
    assert entries, f"no CPU address space in QEMU's answer for {machine}"
    return entries


def uncovered(entries, lo: int, hi: int) -> list[tuple[int, int]]:
    """Sub-ranges of [lo, hi) not backed by memory."""
    backed = sorted((s, e + 1) for s, e, kind, name in entries
                    if kind in ("ram", "rom") or name in _MEMORY_NAMES)
    gaps, at = [], lo
    for s, e in backed:
        if e <= at or s >= hi:
            continue
        if s > at:
            gaps.append((at, s))
        at = max(at, e)
    if at < hi:
        gaps.append((at, hi))
    return gaps


@pytest.mark.emulator
@pytest.mark.parametrize("name", QEMU_ARM_BOARDS)
def test_board_regions_are_memory_in_qemu(name):
    if shutil.which("qemu-system-arm") is None:
        pytest.skip("qemu-system-arm is not on PATH")
    board = load_board(name)
    entries = cpu_address_space(board.run["machine"])
    for region, r in board.memory.items():
        gaps = uncovered(entries, r["origin"], r["origin"] + r["size"])
        assert not gaps, (f"{name}: memory.{region} has unmapped ranges "
                          f"{[(hex(a), hex(b)) for a, b in gaps]}")


@pytest.mark.emulator
def test_netduino_has_no_ccm_in_qemu():
    """QEMU 7.2 models the STM32F405's SRAM as 192 KiB at 0x20000000 and no CCM (notes)."""
    if shutil.which("qemu-system-arm") is None:
        pytest.skip("qemu-system-arm is not on PATH")
    entries = cpu_address_space("netduinoplus2")
    assert uncovered(entries, 0x10000000, 0x10010000) == [(0x10000000, 0x10010000)]
    assert not uncovered(entries, 0x20000000, 0x20030000)
    assert uncovered(entries, 0x20030000, 0x20030004)
