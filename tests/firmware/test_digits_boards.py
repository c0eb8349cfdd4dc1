"""On every QEMU board and both Hexagon boards, the digits fine-tune firmware trains in place
and reports per-step losses (float32 bits) and a final params_sha256 identical to
``fit --engine host`` and ``--engine golden``, with the board's default backward mode (int8
on the Cortex-M3 and Hexagon, fp32 elsewhere; fp32 built with -ffp-contract=off); accuracy
before/after agrees too, and every step reports instructions per phase."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.board import load_board
from codegen.fit import fit_model
from tests.targets.helpers import EMULATED_BOARDS, runnable

from .helpers import EPOCHS, SEED, SPEC, digits_data, digits_graph

pytestmark = pytest.mark.emulator


@pytest.fixture(scope="module")
def references():
    """golden and host results per backward mode, computed once."""
    cache: dict[str, dict[str, dict]] = {}

    def get(mode: str) -> dict[str, dict]:
        if mode not in cache:
            train, evals = digits_data()
            cache[mode] = {engine: fit_model(digits_graph(), f"{SPEC},backward={mode}", train,
                                             evals, epochs=EPOCHS, seed=SEED, engine=engine)
                           for engine in ("golden", "host")}
        return cache[mode]

    return get


def _bits(losses) -> np.ndarray:
    return np.asarray(losses, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("name", EMULATED_BOARDS)
def test_board_training_equals_host_and_golden(name, references, tmp_path):
    board = runnable(name)
    mode = board.default_backward
    assert mode == ("int8" if name in ("mps2-an385", "hexagon-v66", "hexagon-v67") else "fp32")
    train, evals = digits_data()
    dev = fit_model(digits_graph(), SPEC, train, evals, epochs=EPOCHS, seed=SEED, engine=name,
                    keep_dir=tmp_path / name)
    ref = references(mode)
    gold, host = ref["golden"], ref["host"]
    assert dev["backward"] == mode and dev["board"] == name
    assert dev["steps"] == gold["steps"] == EPOCHS * len(train["x"])
    bad = np.flatnonzero(_bits(dev["loss"]) != _bits(gold["loss"]))
    assert bad.size == 0, (f"{name}: {bad.size} of {dev['steps']} losses differ from golden, "
                           f"first at step {bad[0]}")
    assert np.array_equal(_bits(host["loss"]), _bits(gold["loss"]))
    assert dev["params_sha256"] == host["params_sha256"] == gold["params_sha256"]
    assert dev["saturated_per_step"] == host["saturated_per_step"] == gold["saturated_per_step"]
    assert dev["accuracy_before"] == gold["accuracy_before"]
    assert dev["accuracy_after"] == gold["accuracy_after"]

    ins = dev["instructions"]
    assert ins["unit"] == ("packets" if load_board(name).arch == "hexagon" else "instructions")
    for phase in ("forward", "loss", "backward", "update"):
        assert ins[phase] > 0, phase
    inner = ins["forward"] + ins["loss"] + ins["backward"] + ins["update"]
    assert inner <= ins["step"] < inner * 1.05
    assert ins["infer"] > 0 and ins["calls"]["step"] == dev["steps"]
    mem = dev["memory"]
    assert mem["fits"] and 0 < mem["stack_used_bytes"] <= mem["stack_bytes"]


AGGRESSIVE = "bias:all+weight:last2,opt=sgd,lr=0.5,momentum=0.9"


@pytest.mark.parametrize("name", ["mps2-an386", "mps2-an385"])
def test_board_counts_saturated_updates_as_golden(name, tmp_path):
    """At an aggressive lr the firmware's per-step saturation counts (fp32 on the M4F, int8
    on the M3) equal the golden model's, and are not all zero."""
    board = runnable(name)
    train, _ = digits_data()
    spec = f"{AGGRESSIVE},backward={board.default_backward}"
    dev = fit_model(digits_graph(), spec, train, None, epochs=EPOCHS, seed=SEED, engine=name,
                    keep_dir=tmp_path / name)
    gold = fit_model(digits_graph(), spec, train, None, epochs=EPOCHS, seed=SEED,
                     engine="golden")
    assert gold["saturated_updates"] > 0
    assert dev["saturated_per_step"] == gold["saturated_per_step"]
    assert dev["saturated_updates"] == gold["saturated_updates"]
    assert dev["params_sha256"] == gold["params_sha256"]
    assert np.array_equal(_bits(dev["loss"]), _bits(gold["loss"]))
