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
    assert row["fwd_macs"] > 0 and row["bwd_macs"] > 0


def test_race_benchmark_smoke():
    """MCUNet's training firmware on mps2-an500 (ref kernels: no cost measuring), one step."""
    from tests.benchmark_race import format_table, run
    from tests.mcunet import table_missing_reason

    why = table_missing_reason()
    if why is not None:
        pytest.skip(why)
    lines: list[str] = []
    te, pe = run("mps2-an500", ["ref"], 1, log=lines.append)
    if "skipped" in pe:
        pytest.skip(pe["skipped"])
    assert pe["fits"] and len(lines) == 1
    assert pe["step"] > pe["forward"] > 0 and pe["backward"] > 0 and pe["infer"] > 0
    assert pe["macs"] == te["macs"]          # the graphs' MACs are the table's
    assert "TinyEngine" in format_table([te, pe])


def test_fleet_benchmark_smoke():
    """2 host-engine clients, 1 round of 1 local epoch on 60 digits; the centralized run too."""
    pytest.importorskip("flwr")
    from tests.benchmark_fleet import format_table, run

    lines: list[str] = []
    (row,) = run([1], [0.01], ["dirichlet:0.5"], clients=2, rounds=1, samples=60,
                 log=lines.append)
    assert len(lines) == 1 and sum(row["samples"]) == 60 and row["updates"] == 2
    assert 0 <= row["accuracy"] <= 1 and 0 <= row["accuracy_centralized"] <= 1
    assert row["bytes_down"] == 2 * row["trained_bytes"] and row["bytes_up"] > 0
    assert "centralized" in format_table([row])


def test_fleet_benchmark_means_over_seeds():
    """Two seeds: a row each (their own split and centralized run), and their mean."""
    pytest.importorskip("flwr")
    from tests.benchmark_fleet import format_means, parse_seeds, run, seed_means

    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    rows = run([1], [0.01], ["dirichlet:0.5"], clients=2, rounds=1, samples=40, seed=[0, 1])
    assert [r["seed"] for r in rows] == [0, 1]
    assert rows[0]["samples"] != rows[1]["samples"]              # the split follows the seed
    (m,) = seed_means(rows)
    assert m["seeds"] == 2 and m["gap"] == pytest.approx((rows[0]["gap"] + rows[1]["gap"]) / 2)
    assert m["gap_min"] <= m["gap"] <= m["gap_max"] and "gap sd" in format_means([m])


@pytest.mark.emulator
def test_memory_benchmark_smoke(tmp_path):
    """The digits row: both stacks linked, the measured one smaller, the SRAM difference the
    stacks' difference."""
    from tests.benchmark_memory import format_table, measure
    from tests.targets.helpers import runnable

    runnable("mps2-an386")
    r = measure("digits", tmp_path)
    assert r["stack_measured"] < r["stack_auto"] < r["stack_default"]
    assert r["sram_default"] - r["sram_auto"] == r["stack_default"] - r["stack_auto"]
    assert r["arena"] >= r["lower_bound"] > 0 and r["params"] > 0
    assert "stack auto" in format_table([r])


@pytest.mark.emulator
def test_hvx_benchmark_smoke():
    """python -m tests.benchmark_hvx on the digits CNN: both backends, every phase, the
    per-kind table with the ratio, the targets section."""
    from tests.benchmark_hvx import format_table, run
    from tests.targets.helpers import runnable

    runnable("hexagon-v67")
    rows = run(["digits"], "hexagon-v67", 1)
    assert [r["backend"] for r in rows] == ["hvx", "ref"]
    hvx, ref = rows
    assert all(hvx[p] > 0 for p in ("forward", "backward", "update", "step", "infer"))
    assert hvx["step"] < ref["step"] and hvx["chain"] == ["hvx", "ref"]
    kinds = {(k["phase"], k["kind"]) for k in hvx["kinds"]}
    assert ("forward", "3x3 conv") in kinds and ("backward", "3x3 conv: input gradient") in kinds
    text = format_table(rows)
    assert "ref / hvx" in text and "targets (issue 12)" in text
