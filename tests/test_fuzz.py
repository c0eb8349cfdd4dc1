"""A short slice of the fuzz campaign (``python -m tests.fuzz --count 10000`` is the long run):
every kind of input, some cases through the console entry point, no failure of any kind."""

from __future__ import annotations

import pytest

from tests.fuzz.cases import KINDS, choose_kind
from tests.fuzz.runner import classify, run_campaign

SEED, COUNT = 9, 50          # this slice draws every kind at least once (checked below)


def test_fuzz_slice():
    assert {choose_kind(SEED, i, KINDS)[0] for i in range(COUNT)} == set(KINDS)
    rep = run_campaign(COUNT, SEED, jobs=2, timeout=120, subprocess_every=10)
    assert rep.total == COUNT
    assert set(rep.counts) == set(KINDS)
    assert rep.subprocess_cases == COUNT // 10
    assert not rep.failures, rep.table() + "\n" + "\n".join(
        f"case {r.index} [{r.kind}] {r.outcome}: {r.detail} ({r.note}) {r.commands}"
        for r in rep.failures)
    assert sum(c["ok"] for c in rep.counts.values()) > 0     # not everything was refused


@pytest.mark.parametrize("status,stderr,warns,outcome", [
    (0, "wrote x\n", [], "ok"),
    (2, "pockengine: error: x.tflite: bad\n", [], "error"),
    (2, "pockengine: error: out of memory\n", [], "memory"),
    (1, "pockengine: internal error: ValueError: x\n", [], "internal"),
    (2, "a.py:3: RuntimeWarning: overflow\n  x = y\npockengine: error: bad\n", [], "noisy"),
    (2, "pockengine: error: bad\n", ["a.py:3: RuntimeWarning: overflow"], "warning"),
    (2, "Traceback (most recent call last):\n  File x\nValueError\n", [], "traceback"),
    (2, "usage: pockengine ...\npockengine: error: argument\n", [], "noisy"),
    (0, "x.py:1: DeprecationWarning: y\n", [], "noisy"),
    (-11, "", [], "crash"),
])
def test_outcomes(status, stderr, warns, outcome):
    assert classify(status, stderr, warns)[0] == outcome
