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
