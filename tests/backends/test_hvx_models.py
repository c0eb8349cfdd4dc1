"""Whole models through the hvx backend under qemu-hexagon (v66 and v67):

- the shared MLPerf Tiny models: ``infer --engine BOARD`` (the board's default chain, hvx then
  ref) on random inputs equals the golden model bit for bit, every op hvx has a kernel for
  runs on it, and the packets per inference are reported;
- fine-tunes (the board's default int8 backward): the digits transfer fine-tune and a KWS
  fine-tune of ``bias:last3+weight:last2`` give the golden model's losses (float32 bits),
  params_sha256, saturation count and accuracy, with the forward, backward and update ops on
  hvx where it has kernels — and the same with ``--backend ref``.

No third-party code: runs in CI where clang (Hexagon target) and qemu-hexagon are.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import pipeline
from codegen.backends import hvx
from codegen.fit import fit_model
from tests.firmware.helpers import EPOCHS, SEED, digits_data, digits_graph
from tests.targets.helpers import runnable

from .test_cmsis_nn_models import SHARED, _graph, infer_equals_golden

pytestmark = pytest.mark.emulator

INFER = [(m, "hexagon-v67") for m in ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant",
                                      "ad01_int8")] + [("kws_ref_model", "hexagon-v66")]
DIGITS_SPEC = "bias:all+weight:last2,opt=sgd,lr=0.01,momentum=0.9"
KWS_SPEC = "bias:last3+weight:last2,opt=sgd,lr=0.02,momentum=0.9,master_weights=int32"


@pytest.mark.parametrize(("model", "board"), INFER)
def test_model_on_dsp_equals_golden(model, board, tmp_path, capsys):
    b = runnable(board)
    graph, doc = infer_equals_golden(model, b, tmp_path, capsys)
    assert doc["chain"] == ["hvx", "ref"]
    low = pipeline.lower(graph, b)
    ran = {op.type for op in graph.ops if low.choices[op.name].call.backend == "hvx"}
    assert ran == {op.type for op in graph.ops} & set(hvx.FORWARD_BUILDERS), ran


def _same_run(run, gold) -> None:
    bits = lambda v: np.asarray(v, np.float32).view(np.uint32)
    assert run["steps"] == gold["steps"] > 0
    assert np.array_equal(bits(run["loss"]), bits(gold["loss"]))
    assert run["params_sha256"] == gold["params_sha256"]
    assert run["saturated_updates"] == gold["saturated_updates"]
    assert run["accuracy_after"] == gold["accuracy_after"]


def _hvx_ops(keep) -> dict[str, set[str]]:
    manifest = json.loads(next(keep.rglob("pockengine.json")).read_text())
    by_phase: dict[str, set[str]] = {}
    for o in manifest["training"]["ops"]:
        if o["backend"] == "hvx":
            by_phase.setdefault(o["phase"], set()).add(o["kernel"])
    return by_phase


@pytest.fixture(scope="module")
def digits_gold():
    train, evals = digits_data()
    return fit_model(digits_graph(), DIGITS_SPEC + ",backward=int8", train, evals,
                     epochs=EPOCHS, seed=SEED, engine="golden")


@pytest.mark.parametrize(("board", "backend"), [("hexagon-v67", "auto"), ("hexagon-v66", "auto"),
                                                ("hexagon-v67", "ref")])
def test_digits_fine_tune_on_dsp_equals_golden(board, backend, digits_gold, tmp_path):
    b = runnable(board)
    train, evals = digits_data()
    run = fit_model(digits_graph(), DIGITS_SPEC, train, evals, epochs=EPOCHS, seed=SEED,
                    engine=b.name, backend=backend, keep_dir=tmp_path)
    assert run["backward"] == "int8"                       # the board's default mode
    _same_run(run, digits_gold)
    ops = _hvx_ops(tmp_path)
    if backend == "ref":
        assert not ops
    else:
        assert {"pe_conv2d_s8_hvx", "pe_depthwise_conv2d_s8_hvx"} <= ops["forward"]
        assert {"pe_conv2d_grad_input_s8_hvx", "pe_depthwise_conv2d_grad_input_s8_hvx",
                "pe_conv2d_grad_weight_s8_hvx"} <= ops["backward"]
        assert "pe_sgd_update_s8_s8_hvx" in ops["update"]


def test_kws_fine_tune_on_dsp_equals_golden(tmp_path):
    b = runnable("hexagon-v67")
    if not (SHARED / "kws_ref_model.tflite").is_file():
        pytest.skip(f"kws_ref_model.tflite not in {SHARED}")
    graph = _graph("kws_ref_model")
    rng = np.random.default_rng(2)
    shape = graph.tensors[graph.inputs[0]].shape[1:]
    data = {"x": rng.integers(-128, 128, (6, *shape)).astype(np.int8),
            "y": rng.integers(0, 12, 6)}
    evals = {"x": data["x"][:2], "y": data["y"][:2]}
    gold = fit_model(graph, KWS_SPEC + ",backward=int8", data, evals, epochs=1, seed=1,
                     engine="golden")
    run = fit_model(graph, KWS_SPEC, data, evals, epochs=1, seed=1, engine=b.name,
                    keep_dir=tmp_path)
    _same_run(run, gold)
    ops = _hvx_ops(tmp_path)
    assert {"pe_conv2d_grad_input_s8_hvx", "pe_conv2d_grad_weight_s8_hvx",
            "pe_avg_pool2d_grad_s8_hvx"} <= ops["backward"]
