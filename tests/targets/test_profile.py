"""Instruction counting per phase (QEMU TCG plugin): linear in the work, calls accumulate, the
outermost of nested pairs counts, unbalanced ends are reported, named phases are named."""

from __future__ import annotations

import pytest

from codegen.errors import PockError
from codegen.targets import PHASE_NAMES, PHASE_NUMBERS, cross_compile, run_on_emulator
from codegen.targets.profile import parse_counts

from .helpers import FIRMWARE, runnable


@pytest.mark.emulator
@pytest.mark.parametrize("name", ("mps2-an386", "mps2-an385", "hexagon-v67"))
def test_phase_counts(name, tmp_path):
    board = runnable(name)
    elf = cross_compile(board, [FIRMWARE / "profile_phases.c"], [], tmp_path, ["-Werror"])
    result = run_on_emulator(board, elf, timeout=60)
    assert result.ok and result.stdout.startswith("sum ")
    p = result.phases
    c1, c2, c3 = (p[f"p{n}"].instructions for n in (8, 9, 10))
    # the same loop 1000, 2000, 3000 times: exactly linear
    assert 0 < c1 < c2 < c3 and c3 - c2 == c2 - c1
    per_iteration = (c2 - c1) / 1000
    assert per_iteration == int(per_iteration) and per_iteration >= 1
    # three pairs of the same phase accumulate
    assert p["p11"].calls == 3 and p["p11"].instructions == 3 * c1
    # a phase begun twice counts its outermost pair: two loops of 1000
    assert p["p12"].calls == 1 and abs(p["p12"].instructions - c2) <= 60
    assert "p13" in p and p["p13"].calls == 0 and result.unbalanced_marks == 1
    # a training step's named phases
    for phase in ("step", "forward", "backward", "update"):
        assert p[phase].calls == 1
    inner = p["forward"].instructions + p["backward"].instructions + p["update"].instructions
    assert inner < p["step"].instructions < inner + 200
    assert p["forward"].instructions < p["backward"].instructions
    assert result.instructions > c3


def test_phase_names_match_the_header():
    from codegen.resources import data_dir

    header = (data_dir("runtime_c") / "runtime" / "pe_profile.h").read_text()
    for number, name in PHASE_NAMES.items():
        assert f"PE_PROF_{name.upper()} = {number}," in header
    assert PHASE_NUMBERS["forward"] == 1


def test_plugin_output_parsing():
    counts = parse_counts("pe-insn-count 1\ntotal 100\nphase 1 2 50\nphase 9 1 7\n"
                          "unbalanced 0\n")
    assert counts.total == 100 and counts.phases["forward"].calls == 2
    assert counts.phases["p9"].instructions == 7
    with pytest.raises(PockError):
        parse_counts("")
