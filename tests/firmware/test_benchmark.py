"""The board benchmark (python -m tests.benchmark_boards) on a small budget: one model on a
Cortex-M and a Hexagon board, every column filled."""

from __future__ import annotations

import pytest

from tests import benchmark_boards
from tests.targets.helpers import runnable

pytestmark = pytest.mark.emulator


def test_benchmark_smoke(capsys):
    runnable("mps2-an386")
    runnable("hexagon-v67")
    assert benchmark_boards.main(["--models", "digits", "--boards", "mps2-an386,hexagon-v67",
                                  "--steps", "1"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("digits")]
    assert [r[1] for r in rows] == ["mps2-an386", "hexagon-v67"]
    assert rows[0][2] == "fp32" and rows[1][2] == "int8"
    assert rows[0][-1].endswith("M") and rows[1][-1] == "pk"       # inference column
    assert "per training step" in out
