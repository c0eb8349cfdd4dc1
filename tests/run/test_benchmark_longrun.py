"""Smoke run of the long-run benchmark on a tiny budget (numbers are printed, not asserted)."""

from __future__ import annotations


def test_longrun_benchmark_smoke():
    from tests.benchmark_longrun import format_table, run

    rows = run(["int8-momentum", "int8-adam"], ["golden"], 12, log=lambda s: None)
    done, skipped = rows
    assert done["finite"] and done["steps"] == 12 and done["saturated_updates"] >= 0
    lo, hi = done["exponents"]                     # int8 gradient exponents were tracked
    assert lo <= hi
    assert "Adam needs backward fp32" in skipped["skipped"]
    table = format_table(rows)
    assert "int8-adam: Adam needs backward fp32" in table and "sat. steps" in table
