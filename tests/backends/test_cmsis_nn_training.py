"""Training with CMSIS-NN forward kernels: the digits fine-tune gives the golden model's losses
(float32 bits) and params_sha256 with ``--backend cmsis-nn``, ``ref`` and ``auto`` on
mps2-an386 (where auto is arm, cmsis-nn, ref: the forward ops of the training step run arm or
CMSIS-NN, whichever measures cheaper, the backward ones arm's fp32 kernels where it has them
and ref elsewhere), and with ``--backend cmsis-nn`` on the host (CMSIS-NN's C paths).

Needs the CMSIS-NN checkout (skips with the backend's reason), arm-none-eabi-gcc and QEMU.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen.fit import fit_model
from tests.firmware.helpers import EPOCHS, SEED, SPEC, digits_data, digits_graph
from tests.targets.helpers import runnable

from .cmsis_helpers import checkout


@pytest.fixture(scope="module")
def gold() -> dict:
    train, evals = digits_data()
    return fit_model(digits_graph(), SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                     engine="golden")


def _same_run(run: dict, gold: dict) -> None:
    bits = lambda v: np.asarray(v, np.float32).view(np.uint32)
    assert run["steps"] == gold["steps"] > 0
    assert np.array_equal(bits(run["loss"]), bits(gold["loss"]))
    assert run["params_sha256"] == gold["params_sha256"]
    assert run["accuracy_after"] == gold["accuracy_after"]


def test_host_with_cmsis_nn_equals_golden(gold, tmp_path):
    checkout()
    train, evals = digits_data()
    run = fit_model(digits_graph(), SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                    engine="host", backend="cmsis-nn", keep_dir=tmp_path)
    _same_run(run, gold)


@pytest.mark.emulator
@pytest.mark.parametrize("backend", ["cmsis-nn", "ref", "auto"])
def test_board_fine_tune_is_the_same_with_every_backend(backend, gold, tmp_path):
    board = runnable("mps2-an386")
    checkout(board)
    train, evals = digits_data()
    run = fit_model(digits_graph(), SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                    engine=board.name, backend=backend, keep_dir=tmp_path)
    _same_run(run, gold)
    manifest = json.loads((next(tmp_path.rglob("pockengine.json"))).read_text())
    forward = {o["backend"] for o in manifest["training"]["ops"] if o["phase"] == "forward"
               and o["kernel"].startswith(("pe_conv", "pe_dep", "pe_arm_conv", "pe_arm_dw"))}
    assert forward == {"ref"} if backend == "ref" else \
        {"cmsis-nn"} if backend == "cmsis-nn" else forward and forward <= {"arm", "cmsis-nn"}
    backward = {o["backend"] for o in manifest["training"]["ops"] if o["phase"] == "backward"}
    assert backward == {"ref"} if backend != "auto" else backward == {"arm", "ref"}
    assert manifest["chain"] == {"ref": ["ref"], "cmsis-nn": ["cmsis-nn", "ref"],
                                 "auto": ["arm", "cmsis-nn", "ref"]}[backend]
