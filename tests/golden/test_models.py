"""The MLPerf Tiny models: golden output == tflite-micro output, bit for bit (int8)."""

from __future__ import annotations

import numpy as np
import pytest

from codegen import golden
from codegen.frontend import load_model, write_tflite

from .tflm import Tflm, model_path

N_INPUTS = 200

INT8_MODELS = ["kws_ref_model.tflite", "pretrainedResnet_quant.tflite", "vww_96_int8.tflite",
               "ad01_int8.tflite"]


def _random_batch(graph, n: int, seed: int) -> np.ndarray:
    t = graph.tensors[graph.inputs[0]]
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=(n,) + t.shape[1:], dtype=np.int8)


@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_model_matches_tflm(name: str) -> None:
    path = model_path(name)
    graph = load_model(path)
    x = _random_batch(graph, N_INPUTS, seed=0)
    got = golden.run(graph, x)[0]
    tflm = Tflm(path.read_bytes())
    want = np.concatenate(tflm.run_samples([[x[i:i + 1]] for i in range(N_INPUTS)]))
    assert got.dtype == np.int8 and got.shape == want.shape
    mismatches = int(np.count_nonzero(got != want))
    assert mismatches == 0, f"{name}: {mismatches} of {got.size} output values differ"
    assert np.array_equal(got, want)
    assert len(np.unique(got)) > 2          # the comparison is not between saturated outputs


@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_model_intermediates_match_tflm(name: str) -> None:
    """Every op's output tensor, for a few inputs (TFLM keeps them all on request)."""
    tflite = pytest.importorskip("tflite")
    path = model_path(name)
    data = path.read_bytes()
    graph = load_model(path)
    sub = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    index = {sub.Tensors(i).Name().decode(): i for i in range(sub.TensorsLength())}
    x = _random_batch(graph, 4, seed=7)
    values = golden.execute(graph, {graph.inputs[0]: x}, keep_all=True)
    tflm = Tflm(data, preserve_all=True)
    checked = 0
    for i in range(len(x)):
        tflm.invoke([x[i:i + 1]])
        for op in graph.ops:
            name_out = op.outputs[0]
            if name_out not in index:
                continue
            want = tflm.tensor(index[name_out]).reshape(-1)
            assert np.array_equal(values[name_out][i].reshape(-1), want), \
                f"{name}: op {op.name!r} ({op.type}) differs for sample {i}"
            checked += 1
    assert checked >= len(x) * len(graph.ops) // 2


def test_float_kws_model_close_to_tflm() -> None:
    """The float KWS model (hybrid in the file; the reader dequantizes its weights) written
    back as a pure float32 .tflite runs in TFLM; golden float32 agrees closely."""
    graph = load_model(model_path("kws_ref_model_float32.tflite"))
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((40,) + graph.tensors[graph.inputs[0]].shape[1:]) * 8).astype(
        np.float32)
    got = golden.run(graph, x)[0]
    tflm = Tflm(write_tflite(graph))
    want = np.concatenate(tflm.run_samples([[x[i:i + 1]] for i in range(len(x))]))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert np.array_equal(got.argmax(1), want.argmax(1))


def test_float_kws_keep_all_for_calibration() -> None:
    graph = load_model(model_path("kws_ref_model_float32.tflite"))
    x = np.random.default_rng(3).standard_normal((5,) + graph.tensors[graph.inputs[0]].shape[1:])
    values = golden.execute(graph, {graph.inputs[0]: x.astype(np.float32)}, keep_all=True)
    produced = {op.outputs[0] for op in graph.ops}
    assert produced <= values.keys() and graph.inputs[0] in values
    for name in produced:
        assert values[name].shape[0] == 5 and values[name].dtype == np.float32
        assert np.all(np.isfinite(values[name]))
