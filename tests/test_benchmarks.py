"""Smoke runs of the benchmark scripts on a tiny budget (numbers are printed, not asserted)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_codegen_benchmark_smoke(tmp_path):
    from tests.benchmark_codegen import run

    lines: list[str] = []
    (row,) = run(["digits"], 5, tmp_path, log=lines.append)
    assert len(lines) == 3
    # the plan is at its lower bound and the pools are those of the training graph
    assert row["arena"] >= row["lower_bound"] > 0
    assert row["params"] > 0 and row["constants"] > 0
    assert row["host_steps_s"] > 0 and row["torch_steps_s"] > 0
