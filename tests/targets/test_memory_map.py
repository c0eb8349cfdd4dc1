"""Board memory maps, verified by running code: firmware reads the first and last word of every
region of the board file (and writes, reads back and restores them in RAM regions) on the
board's emulator. An address the emulator does not map faults; a region that is not RAM does
not keep what was written."""

from __future__ import annotations

import pytest

from codegen.board import Board
from codegen.targets import cross_compile, run_on_emulator

from .helpers import FIRMWARE, QEMU_ARM_BOARDS, runnable


def probes_header(probes: list[tuple[str, int, bool]]) -> str:
    rows = ",\n".join(f'    {{"{region}", 0x{addr:08X}u, {int(rw)}}}'
                      for region, addr, rw in probes)
    return ("#include <stdint.h>\n"
            "static const struct { const char *region; uint32_t address; int writable; }"
            f" probes[] = {{\n{rows}\n}};\n")


def region_probes(board: Board) -> list[tuple[str, int, bool]]:
    probes = []
    for name, r in board.memory.items():
        writable = name != "flash"          # flash is ROM on real parts (and on netduinoplus2)
        probes.append((name, r["origin"], writable))
        probes.append((name, r["origin"] + r["size"] - 4, writable))
    return probes


@pytest.mark.emulator
@pytest.mark.parametrize("name", QEMU_ARM_BOARDS)
def test_every_region_is_memory_on_the_emulator(name, tmp_path):
    board = runnable(name)
    probes = region_probes(board)
    (tmp_path / "probes.h").write_text(probes_header(probes))
    elf = cross_compile(board, [FIRMWARE / "memory_probe.c"], [tmp_path], tmp_path,
                        ["-Werror"])
    result = run_on_emulator(board, elf, timeout=30, profile=False)
    assert result.fault is None, f"{name}: {result.fault}"
    assert result.ok, result.stdout
    assert result.stdout.splitlines() == [f"probe {r} 0x{a:08x} ok" for r, a, _ in probes]


@pytest.mark.emulator
def test_unmapped_address_faults_with_its_address(tmp_path):
    """netduinoplus2 under QEMU has no CCM: reading 0x10000000 is a BusFault at that address
    (the board file keeps the CCM out of its memory map for this reason)."""
    board = runnable("netduinoplus2")
    (tmp_path / "probes.h").write_text(probes_header([("ccm", 0x10000000, False)]))
    elf = cross_compile(board, [FIRMWARE / "memory_probe.c"], [tmp_path], tmp_path)
    result = run_on_emulator(board, elf, timeout=30, profile=False)
    assert result.exit_code == 99
    assert result.fault.startswith("busfault") and "bfar=0x10000000" in result.fault
