"""Host C inference equals the golden model, bit for bit, on the shared MLPerf Tiny models
(the float KWS model quantized first): the -O2 build on 200 random inputs, the same project
built with AddressSanitizer + UBSan (-O1, -fno-sanitize-recover) on a few."""

from __future__ import annotations

import numpy as np
import pytest

from codegen import golden
from codegen.frontend import load_model
from codegen.pipeline import build_project, compile_model, run_host_infer
from codegen.quant import quantize
from tests.render.helpers import SHARED_MODELS, model_path, need, random_int8, shared_graph

N_INPUTS = 200
N_SANITIZED = 4             # inputs through the ASan + UBSan build


@pytest.mark.parametrize("name", SHARED_MODELS)
def test_host_inference_bit_exact(tmp_path, name):
    need("make")
    graph = shared_graph(name)
    proj = compile_model(graph, out_dir=tmp_path / "proj")
    res = build_project(proj)
    x = random_int8(graph, N_INPUTS, seed=11)
    y_host = run_host_infer(res, x)
    y_gold = golden.run(graph, x)[0]
    assert y_host.dtype == np.int8
    assert y_host.shape == y_gold.shape
    mismatch = int(np.count_nonzero(y_host != y_gold))
    assert mismatch == 0, f"{name}: {mismatch} of {y_gold.size} output values differ"
    # the same project under the sanitizers (a finding aborts the binary: HostRunError)
    asan = build_project(proj, sanitize=True)
    assert asan.sanitize and asan.binary.parent.name == "build-asan"
    xs = random_int8(graph, N_SANITIZED, seed=12)
    assert np.array_equal(run_host_infer(asan, xs), golden.run(graph, xs)[0]), name
    # the memory plan in the header is the one planned
    header = (proj.dir / "pe_model.h").read_text()
    assert f"#define PE_ARENA_BYTES {proj.manifest['memory']['arena_bytes']}u" in header


def test_float_model_compiled_with_calibration(tmp_path):
    """compile_model quantizes a float model itself (calibration data given)."""
    path = model_path("kws_ref_model_float32.tflite")
    g = load_model(path)
    calib = np.random.default_rng(7).normal(0, 1, size=(100, *g.tensors[g.inputs[0]].shape[1:])
                                            ).astype(np.float32)
    proj = compile_model(path, calib=calib, out_dir=tmp_path / "p")
    assert proj.manifest["model"]["calibration_sha256"]
    q = quantize(g, calib)
    x = random_int8(q, 20, seed=5)
    assert np.array_equal(run_host_infer(proj, x), golden.run(q, x)[0])
    from codegen.errors import PockError

    with pytest.raises(PockError, match="calibration"):
        compile_model(path, out_dir=tmp_path / "q")


def test_other_ops_bit_exact(tmp_path):
    """pad, concat (a pointer list), mean, relu6 and int8 softmax, none of them in the shared
    models' forward graphs in this combination."""
    from codegen.ir import Graph, Op, QuantParams, Role, Tensor, verify

    q = QuantParams(np.float32(0.05), 3)
    g = Graph("misc")
    for name, shape, quant in [("x", (1, 4, 4, 3), q), ("p", (1, 6, 6, 3), q),
                               ("c", (1, 6, 6, 6), q), ("m", (1, 6), q), ("r", (1, 6), q),
                               ("s", (1, 6), QuantParams(np.float32(1 / 256), -128))]:
        g.add_tensor(Tensor(name, shape, "int8", Role.ACTIVATION, quant))
    g.inputs, g.outputs = ["x"], ["s"]
    g.add_op(Op("pad", "pad", ("x",), ("p",), {"pads": ((0, 0), (1, 1), (1, 1), (0, 0))}))
    g.add_op(Op("concat", "cat", ("p", "p"), ("c",), {"axis": 3, "activation": "none"}))
    g.add_op(Op("mean", "mean", ("c",), ("m",), {"axes": (1, 2), "keep_dims": False}))
    g.add_op(Op("relu6", "r6", ("m",), ("r",), {}))
    g.add_op(Op("softmax", "sm", ("r",), ("s",), {"beta": 1.0}))
    verify(g)
    x = random_int8(g, 100, seed=12)
    res = build_project(compile_model(g, out_dir=tmp_path / "misc"))
    assert np.array_equal(run_host_infer(res, x), golden.run(g, x)[0])
