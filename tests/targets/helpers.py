"""Shared pieces of the target tests: firmware sources, board lists, skips with reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.board import Board, load_board
from codegen.resources import data_dir
from codegen.targets import emulator_available, toolchain_available

FIRMWARE = Path(__file__).parent / "firmware"

# every board an emulator here can run (Renode is not installable on these machines)
QEMU_ARM_BOARDS = ("mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547",
                   "netduinoplus2")
HEXAGON_BOARDS = ("hexagon-v66", "hexagon-v67")
EMULATED_BOARDS = QEMU_ARM_BOARDS + HEXAGON_BOARDS
RENODE_BOARDS = ("stm32f746g-disco", "nrf52840dk")

KERNELS = data_dir("runtime_c") / "kernels"
CHECKSUM_KERNELS = ("pe_conv2d_s8.c", "pe_depthwise_conv2d_s8.c", "pe_fully_connected_s8.c",
                    "pe_pool2d_s8.c", "pe_softmax_s8.c", "pe_add_s8.c", "pe_conv2d_f32.c",
                    "pe_fully_connected_f32.c", "pe_softmax_f32.c")


def checksum_sources() -> list[Path]:
    return [FIRMWARE / "kernel_checksum.c"] + [KERNELS / "ref" / k for k in CHECKSUM_KERNELS]


def checksum_includes() -> list[Path]:
    return [KERNELS, KERNELS / "ref"]


def buildable(name: str) -> Board:
    """The board, or a skip saying which compiler is missing."""
    board = load_board(name)
    ok, why = toolchain_available(board)
    if not ok:
        pytest.skip(why)
    return board


def runnable(name: str) -> Board:
    """The board, or a skip saying which compiler or emulator is missing."""
    board = buildable(name)
    ok, why = emulator_available(board)
    if not ok:
        pytest.skip(why)
    return board
