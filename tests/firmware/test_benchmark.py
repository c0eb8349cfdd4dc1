"""The board benchmark (python -m tests.benchmark_boards) on a small budget: one model on a
Cortex-M and a Hexagon board, every column filled."""

from __future__ import annotations

import pytest

from tests import benchmark_boards
from tests.targets.helpers import runnable

pytestmark = pytest.mark.emulator


def test_benchmark_smoke(capsys):
    """One row per board x backend that has kernels for the board (arm and cmsis-nn: not on
    Hexagon, hvx only there; cmsis-nn skipped with its reason where CMSIS-NN is not checked
    out)."""
    from codegen.backends import get_backend
    from codegen.board import load_board

    runnable("mps2-an386")
    runnable("hexagon-v67")
    assert benchmark_boards.main(["--models", "digits", "--boards", "mps2-an386,hexagon-v67",
                                  "--steps", "1"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines()
            if ln.startswith("digits") and ln.split()[1] != "on"]     # not the notes
    assert [(r[1], r[2]) for r in rows] == [("mps2-an386", "ref"), ("mps2-an386", "arm"),
                                            ("mps2-an386", "cmsis-nn"), ("hexagon-v67", "ref"),
                                            ("hexagon-v67", "hvx")]
    assert rows[0][3] == "fp32" and rows[3][3] == "int8" and rows[4][3] == "int8"
    assert rows[0][15].endswith("M") and rows[3].count("pk") == 6   # phases, inference
    assert float(rows[4][-1]) < float(rows[3][-1])                  # hvx is faster than ref
    assert float(rows[0][16]) > 0                                   # instructions per MAC
    assert float(rows[1][-1]) < float(rows[0][-1])                  # arm is faster than ref
    why = get_backend("cmsis-nn").unavailable(load_board("mps2-an386"))
    if why is None:
        assert float(rows[2][-1]) < float(rows[0][-1])              # CMSIS-NN is faster
    else:
        assert rows[2][4] == "skipped" and why in out
    assert "per training step" in out and "TFLM + CMSIS-NN" in out
