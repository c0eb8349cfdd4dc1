"""Training with the arm backend's forward kernels: the digits fine-tune gives the golden
model's losses (float32 bits), params_sha256 and accuracy after training with ``--backend arm``
and ``auto`` on the Cortex-M4F and M7 and with ``--backend arm`` on the host. The forward ops of
the training step read the trained weights as they are; the inference that measures accuracy
after training must not read a copy packed before it (the inference graph knows which
tensors training changes).

No third-party code: runs in CI where arm-none-eabi-gcc and QEMU are.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen.fit import fit_model
from tests.firmware.helpers import EPOCHS, SEED, SPEC, digits_data, digits_graph
from tests.targets.helpers import runnable

from .test_cmsis_nn_training import _same_run, gold  # noqa: F401  (the module fixture)


def test_host_with_arm_equals_golden(gold, tmp_path):  # noqa: F811
    train, evals = digits_data()
    run = fit_model(digits_graph(), SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                    engine="host", backend="arm", keep_dir=tmp_path)
    _same_run(run, gold)
    from codegen import pipeline

    low = pipeline.lower(digits_graph(), None, "arm")
    assert "arm" in {c.backend for c in low.calls.values()}


@pytest.mark.emulator
@pytest.mark.parametrize(("board", "backend"), [("mps2-an386", "arm"), ("mps2-an386", "auto"),
                                                ("mps2-an500", "arm")])
def test_board_fine_tune_equals_golden(board, backend, gold, tmp_path):  # noqa: F811
    b = runnable(board)
    train, evals = digits_data()
    run = fit_model(digits_graph(), SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                    engine=b.name, backend=backend, keep_dir=tmp_path)
    _same_run(run, gold)
    manifest = json.loads((next(tmp_path.rglob("pockengine.json"))).read_text())
    forward = {o["backend"] for o in manifest["training"]["ops"] if o["phase"] == "forward"
               and o["kernel"].startswith(("pe_arm_conv", "pe_arm_dw", "pe_conv", "pe_dep"))}
    assert "arm" in forward
    trained = {o["backend"] for o in manifest["ops"]}
    assert "arm" in trained


INT8_SPEC = "bias:all+weight:last2,opt=sgd,lr=0.01,backward=int8"


@pytest.mark.emulator
def test_int8_backward_fine_tune_on_the_m7_equals_golden(tmp_path):
    """The int8 backward with plain SGD (the arm int8 updates: SMMULR steps, one loop per
    trained channel, a flat loop over biases) on the Cortex-M7: the golden model's losses,
    params_sha256 and accuracy."""
    b = runnable("mps2-an500")
    train, evals = digits_data()
    want = fit_model(digits_graph(), INT8_SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                     engine="golden")
    run = fit_model(digits_graph(), INT8_SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                    engine=b.name, backend="auto", keep_dir=tmp_path)
    _same_run(run, want)
    manifest = json.loads((next(tmp_path.rglob("pockengine.json"))).read_text())
    assert manifest["training"]["backward"] == "int8"
    kernels = {o["kernel"] for o in manifest["training"]["ops"]}
    assert {"pe_sgd_update_s8_s8_arm", "pe_sgd_update_s8_s32_arm"} <= kernels, kernels


@pytest.mark.emulator
@pytest.mark.parametrize("backward", ["fp32", "int8"])
def test_mcunet_race_step_on_the_m7_equals_golden(backward, tmp_path):
    """The MCUNet race (tests.benchmark_race: TinyEngine's 49kb sparse update, the stem chain
    streamed in row bands, 3x3 / 5x5 / 7x7 depthwise rows in assembly, partial weights) on the
    Cortex-M7, one SGD step with each backward mode: the golden model's params_sha256 and
    loss bits."""
    from tests.mcunet import mcunet_graph, mcunet_spec_49kb, table_missing_reason

    if table_missing_reason() is not None:
        pytest.skip(table_missing_reason())
    b = runnable("mps2-an500")
    graph = mcunet_graph(seed=0)
    spec = mcunet_spec_49kb().replace("backward=fp32", f"backward={backward}")
    rng = np.random.default_rng(7)
    # one sample: the int8 image (1.9 MiB of code and constants) leaves room for one
    train = {"x": rng.integers(-128, 128, (1, 128, 128, 3), dtype=np.int8),
             "y": np.array([3])}
    want = fit_model(graph, spec, train, None, epochs=1, seed=0, engine="golden")
    run = fit_model(graph, spec, train, None, epochs=1, seed=0, engine=b.name,
                    keep_dir=tmp_path)
    assert run["steps"] == 1
    _same_run(run, want)
