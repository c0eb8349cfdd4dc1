"""golden.run / execute / prepare: batching, keep_all, input checks and error messages."""

from __future__ import annotations

import numpy as np
import pytest

from codegen import golden
from codegen.errors import ModelError, PockError
from codegen.ir import Graph, Op, QuantParams, Role, Tensor, verify
from tests.frontend import single_op as so


def _q(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp)


def small_cnn(dtype: str, seed: int = 0) -> Graph:
    """x (1,6,6,2) -> conv 3x3 relu -> avg pool 6x6 -> reshape -> fc -> softmax."""
    rng = np.random.default_rng(seed)
    i8 = dtype == "int8"
    g = Graph(name=f"small_{dtype}")

    def act(name, shape, q):
        return g.add_tensor(Tensor(name, shape, dtype, Role.ACTIVATION, q if i8 else None))

    act("x", (1, 6, 6, 2), _q(0.05, -3))
    if i8:
        g.add_tensor(Tensor("w1", (4, 3, 3, 2), "int8", Role.WEIGHT,
                            QuantParams(np.full(4, 0.01, np.float32), np.zeros(4, np.int64), 0),
                            rng.integers(-127, 128, (4, 3, 3, 2), dtype=np.int8)))
        g.add_tensor(Tensor("b1", (4,), "int32", Role.BIAS, None,
                            rng.integers(-500, 500, 4).astype(np.int32)))
        g.add_tensor(Tensor("w2", (3, 4), "int8", Role.WEIGHT,
                            QuantParams(np.float32(0.02), 0),
                            rng.integers(-127, 128, (3, 4), dtype=np.int8)))
    else:
        g.add_tensor(Tensor("w1", (4, 3, 3, 2), "float32", Role.WEIGHT,
                            data=rng.normal(0, 0.3, (4, 3, 3, 2)).astype(np.float32)))
        g.add_tensor(Tensor("b1", (4,), "float32", Role.BIAS,
                            data=rng.normal(0, 0.1, 4).astype(np.float32)))
        g.add_tensor(Tensor("w2", (3, 4), "float32", Role.WEIGHT,
                            data=rng.normal(0, 0.5, (3, 4)).astype(np.float32)))
    act("h1", (1, 6, 6, 4), _q(0.04, -128))
    act("h2", (1, 1, 1, 4), _q(0.04, -128))
    act("h3", (1, 4), _q(0.04, -128))
    act("h4", (1, 3), _q(0.1, 5))
    act("y", (1, 3), _q(1 / 256, -128))
    g.ops = [
        Op("conv2d", "conv", ("x", "w1", "b1"), ("h1",), {
            "stride": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1), "activation": "relu"}),
        Op("avg_pool2d", "pool", ("h1",), ("h2",), {
            "filter": (6, 6), "stride": (1, 1), "padding": (0, 0, 0, 0), "activation": "none"}),
        Op("reshape", "flat", ("h2",), ("h3",), {"shape": (1, 4)}),
        Op("fully_connected", "fc", ("h3", "w2", ""), ("h4",), {
            "activation": "none", "keep_num_dims": False}),
        Op("softmax", "prob", ("h4",), ("y",), {"beta": 1.0}),
    ]
    g.inputs, g.outputs = ["x"], ["y"]
    return verify(g)


def _int8_batch(n: int, shape=(6, 6, 2), seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (n,) + shape, dtype=np.int8)


# -- results -----------------------------------------------------------------------------------
def test_run_returns_outputs_with_batch() -> None:
    g = small_cnn("int8")
    out = golden.run(g, _int8_batch(7))
    assert isinstance(out, list) and len(out) == 1
    assert out[0].shape == (7, 3) and out[0].dtype == np.int8


def test_batch_rows_are_independent() -> None:
    for dtype in ("int8", "float32"):
        g = small_cnn(dtype)
        x = _int8_batch(6) if dtype == "int8" else \
            np.random.default_rng(2).standard_normal((6, 6, 6, 2)).astype(np.float32)
        batch = golden.run(g, x)[0]
        for i in range(len(x)):
            assert np.array_equal(batch[i:i + 1], golden.run(g, x[i:i + 1])[0])


def test_execute_outputs_and_keep_all() -> None:
    g = small_cnn("float32")
    x = np.random.default_rng(3).standard_normal((4, 6, 6, 2)).astype(np.float32)
    outs = golden.execute(g, {"x": x})
    assert set(outs) == {"y"}
    everything = golden.execute(g, {"x": x}, keep_all=True)
    assert set(everything) == {"x", "h1", "h2", "h3", "h4", "y"}
    assert np.array_equal(everything["y"], outs["y"])
    assert everything["h1"].shape == (4, 6, 6, 4) and everything["h3"].shape == (4, 4)
    assert all(v.dtype == np.float32 for v in everything.values())
    assert np.all(everything["h1"] >= 0)                          # fused relu
    np.testing.assert_allclose(everything["y"].sum(1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(everything["h2"].reshape(4, 4),
                               everything["h1"].mean(axis=(1, 2)), rtol=1e-6)


def test_chunked_batches_give_the_same_values() -> None:
    g = small_cnn("int8")
    x = _int8_batch(11)
    whole = golden.execute(g, {"x": x}, keep_all=True)
    program = golden.prepare(g)
    program.chunk = 3
    chunked = program.execute({"x": x}, keep_all=True)
    assert set(chunked) == set(whole)
    for name in whole:
        assert np.array_equal(chunked[name], whole[name]), name
    assert np.array_equal(program.run(x)[0], whole["y"])


def test_prepared_program_is_reusable() -> None:
    program = golden.prepare(small_cnn("int8"))
    x = _int8_batch(3)
    assert np.array_equal(program.run(x)[0], program.run(x)[0])
    assert np.array_equal(program.run(x)[0], golden.run(small_cnn("int8"), x)[0])


def test_two_inputs_and_constant_operand() -> None:
    g = so.binary_graph(np.random.default_rng(0), "add")
    a, b = _int8_batch(5, (4, 4, 8), 1), _int8_batch(5, (4, 4, 8), 2)
    both = golden.run(g, a, b)[0]
    assert both.shape == (5, 4, 4, 8)
    # The same add with the second operand a constant (no batch axis) broadcasts over the batch.
    const = g.copy()
    const.tensors["x1"] = const.tensors["x1"].replace(role=Role.CONSTANT, data=b[0:1])
    const.inputs = ["x0"]
    got = golden.run(verify(const), a)[0]
    for i in range(5):
        assert np.array_equal(got[i], golden.run(g, a[i:i + 1], b[0:1])[0][0])


# -- input checks ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, fragment", [
    (np.zeros((2, 6, 6, 2), np.float32), "got float32 [2, 6, 6, 2]"),
    (np.zeros((2, 6, 6, 2), np.int64), "got int64"),
    (np.zeros((2, 6, 5, 2), np.int8), "got int8 [2, 6, 5, 2]"),
    (np.zeros((6, 6, 2), np.int8), "got int8 [6, 6, 2]"),
    (np.zeros((0, 6, 6, 2), np.int8), "got int8 [0, 6, 6, 2]"),
])
def test_bad_input_arrays(bad: np.ndarray, fragment: str) -> None:
    g = small_cnn("int8")
    with pytest.raises(PockError) as e:
        golden.run(g, bad)
    msg = str(e.value)
    assert "\n" not in msg
    assert "input 'x'" in msg and "int8 array of shape [N, 6, 6, 2]" in msg and fragment in msg


def test_wrong_number_of_inputs_and_names() -> None:
    g = small_cnn("int8")
    x = _int8_batch(1)
    with pytest.raises(PockError, match="has 1 input"):
        golden.run(g, x, x)
    with pytest.raises(PockError, match="no value given for model input 'x'"):
        golden.execute(g, {})
    with pytest.raises(PockError, match="unknown model input 'z'"):
        golden.execute(g, {"x": x, "z": x})


def test_inconsistent_batch_between_inputs() -> None:
    g = so.binary_graph(np.random.default_rng(0), "add")
    with pytest.raises(PockError, match="batch 3"):
        golden.run(g, _int8_batch(2, (4, 4, 8)), _int8_batch(3, (4, 4, 8)))


def test_unsupported_op_is_a_model_error() -> None:
    g = small_cnn("int8")
    g.ops[2] = g.ops[2].replace(type="gather")
    with pytest.raises(ModelError, match="op 'flat' \\(gather\\).*no kernel"):
        golden.prepare(g)


def test_int8_concat_needs_equal_quantization() -> None:
    g = so.concat_graph(np.random.default_rng(0))
    g.tensors["x1"] = g.tensors["x1"].replace(quant=_q(0.5, 0))
    with pytest.raises(ModelError, match="equal quantization"):
        golden.prepare(g)


def test_int8_pool_needs_equal_quantization() -> None:
    g = so.pool2d_graph(np.random.default_rng(0), "max")
    g.tensors["y"] = g.tensors["y"].replace(quant=_q(0.5, 0))
    with pytest.raises(ModelError, match="equal input and output quantization"):
        golden.prepare(g)


def test_softmax_output_quantization_is_checked() -> None:
    g = so.softmax_graph(np.random.default_rng(0))
    g.tensors["y"] = g.tensors["y"].replace(quant=_q(1 / 128, -128))
    with pytest.raises(ModelError, match="zero point -128 and scale 1/256"):
        golden.prepare(g)
