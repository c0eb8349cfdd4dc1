"""The shared MLPerf Tiny models through the arm backend: ``infer --engine BOARD --backend arm``
on random inputs equals the golden model bit for bit, every op arm has a kernel for runs on it,
and ``--json`` reports instructions per inference; on the host (the same kernels' portable C
paths), the generated project under ASan + UBSan. Every model on the Cortex-M4F; one model
each on the M7, M33 and M55 (tests/backends/test_arm_targets.py covers the kernels on all).

No third-party code: runs in CI where the shared models, arm-none-eabi-gcc and QEMU are.
"""

from __future__ import annotations

import numpy as np
import pytest

from codegen import golden, pipeline
from codegen.backends import arm
from tests.targets.helpers import runnable

from .test_cmsis_nn_models import _graph, infer_equals_golden

CASES = [(m, "mps2-an386") for m in ("kws_ref_model", "kws_ref_model_float32", "vww_96_int8",
                                     "pretrainedResnet_quant", "ad01_int8")] + [
    ("vww_96_int8", "mps2-an500"), ("pretrainedResnet_quant", "mps2-an505"),
    ("kws_ref_model", "mps3-an547")]


@pytest.mark.emulator
@pytest.mark.parametrize(("model", "board"), CASES)
def test_model_on_board_equals_golden(model, board, tmp_path, capsys):
    b = runnable(board)
    graph, doc = infer_equals_golden(model, b, tmp_path, capsys, "arm")
    assert doc["chain"] == ["arm", "ref"] and doc["backend"] == "arm"
    low = pipeline.lower(graph, b, "arm")
    ran = {op.type for op in graph.ops if low.choices[op.name].call.backend == "arm"}
    assert ran == {op.type for op in graph.ops} & set(arm.BUILDERS), ran


@pytest.mark.parametrize("model", ["kws_ref_model", "ad01_int8", "pretrainedResnet_quant"])
def test_host_project_under_sanitizers_equals_golden(model, tmp_path):
    """The generated host project with --backend arm (the kernels' portable C, inlined with
    literal shapes as on the boards), built with ASan + UBSan, equals the golden model."""
    from codegen.toolchain.host import build_project

    graph = _graph(model)
    proj = pipeline.compile_model(graph, out_dir=tmp_path / "p", backend="arm")
    assert "arm" in {o["backend"] for o in proj.manifest["ops"]}
    build = build_project(proj, sanitize=True)
    t = graph.tensors[graph.inputs[0]]
    x = np.random.default_rng(6).integers(-128, 128, (3, *t.shape[1:]), dtype=np.int8)
    assert np.array_equal(pipeline.run_host_infer(build, x), golden.run(graph, x)[0])


KWS_INT8_SPEC = "bias:last6+weight:last2,opt=sgd,lr=0.01,backward=int8"


@pytest.mark.emulator
def test_kws_int8_fine_tune_on_the_m7_equals_golden(tmp_path):
    """The int8 backward of a depthwise-separable model on the Cortex-M7 (pointwise input
    gradients over frozen weights' int16 streams, depthwise input gradients gathered, the FC
    input gradient, bias gradients, plain SGD): the golden model's params_sha256 and losses
    after a few steps."""
    from codegen.fit import fit_model

    b = runnable("mps2-an500")
    graph = _graph("kws_ref_model")
    t = graph.tensors[graph.inputs[0]]
    rng = np.random.default_rng(4)
    train = {"x": rng.integers(-128, 128, (4, *t.shape[1:]), dtype=np.int8),
             "y": rng.integers(0, 12, 4)}
    want = fit_model(graph, KWS_INT8_SPEC, train, None, epochs=1, seed=0, engine="golden")
    run = fit_model(graph, KWS_INT8_SPEC, train, None, epochs=1, seed=0, engine=b.name,
                    keep_dir=tmp_path)
    assert run["steps"] == want["steps"] == 4
    assert run["params_sha256"] == want["params_sha256"]
    assert np.array_equal(np.asarray(run["loss"], np.float32).view(np.uint32),
                          np.asarray(want["loss"], np.float32).view(np.uint32))
    import json
    manifest = json.loads(next(tmp_path.rglob("pockengine.json")).read_text())
    kernels = {o["kernel"] for o in manifest["training"]["ops"]}
    assert {"pe_conv2d_grad_input_s8_arm", "pe_depthwise_conv2d_grad_input_s8_arm",
            "pe_bias_grad_s8_arm", "pe_sgd_update_s8_s32_arm"} <= kernels, kernels
