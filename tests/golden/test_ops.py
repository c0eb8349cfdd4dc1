"""Per-op golden kernels vs the tflite-micro interpreter on single-op graphs.

int8 outputs must be identical; float32 outputs agree to float32 rounding. The graphs come
from tests/frontend/single_op.py (SINGLE_OP_CASES, shared with the frontend tests) plus the
edge cases below; they are written with the TFLite writer and run in TFLM one sample at a
time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from codegen import golden
from codegen.frontend import write_tflite
from codegen.ir import Graph, QuantParams, Role, Tensor
from tests.frontend import single_op as so

from .tflm import Tflm

N_SAMPLES = 40
Inputs = Callable[[Graph, np.random.Generator], list[np.ndarray]]


def _act(name: str, shape: Sequence[int], dtype: str, scale: float | None = None,
         zp: int = 0) -> Tensor:
    q = None if scale is None else QuantParams(np.float32(scale), zp)
    return Tensor(name, tuple(shape), dtype, Role.ACTIVATION, q)


def _with_output_quant(graph: Graph, scale: float, zp: int) -> Graph:
    g = graph.copy()
    y = g.tensors["y"]
    g.tensors["y"] = y.replace(quant=QuantParams(np.float32(scale), zp))
    return g


def _per_tensor_weights(graph: Graph) -> Graph:
    """The same graph with one weight scale (and a matching per-tensor bias scale)."""
    g = graph.copy()
    w = g.tensors["w"]
    s_w = np.float32(w.quant.scale.mean())
    g.tensors["w"] = w.replace(quant=QuantParams(s_w, 0))
    if "b" in g.tensors:
        s_in = np.float32(g.tensors["x"].quant.s)
        g.tensors["b"] = g.tensors["b"].replace(quant=QuantParams(np.float32(s_in * s_w), 0))
    return g


def _softmax(scale: float, beta: float, shape=(1, 7), out_dtype: str = "int8"):
    def build(rng: np.random.Generator) -> Graph:
        x = _act("x", shape, "int8", scale, int(rng.integers(-20, 20)))
        y = (_act("y", shape, "int8", 1 / 256, -128) if out_dtype == "int8"
             else _act("y", shape, "int16", 1 / 65536, -32768))
        return so.single_op_graph("softmax", [x], y, {"beta": beta})
    return build


def _unary(op_type: str, shape, in_dtype: str, in_q, out_dtype: str, out_q):
    def build(rng: np.random.Generator) -> Graph:
        x = _act("x", shape, in_dtype, *in_q) if in_q else _act("x", shape, in_dtype)
        y = _act("y", shape, out_dtype, *out_q) if out_q else _act("y", shape, out_dtype)
        return so.single_op_graph(op_type, [x], y, {})
    return build


def _mean(in_shape, axes, keep_dims, s_in, s_out, zp_in=3, zp_out=-7):
    def build(rng: np.random.Generator) -> Graph:
        out = tuple(1 if i in axes else d for i, d in enumerate(in_shape)) if keep_dims else \
            tuple(d for i, d in enumerate(in_shape) if i not in axes)
        return so.single_op_graph("mean", [_act("x", in_shape, "int8", s_in, zp_in)],
                                  _act("y", out, "int8", s_out, zp_out),
                                  {"axes": tuple(axes), "keep_dims": keep_dims})
    return build


def _quantize_ties(graph: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    # Multiples of scale/2: exact ties for the rounding; also far outside the int8 range.
    k = rng.integers(-700, 700, size=graph.tensors["x"].shape)
    return [(k * 0.125).astype(np.float32)]


def _normal_wide(graph: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    return [(rng.standard_normal(graph.tensors[n].shape) * 4).astype(np.float32)
            for n in graph.inputs]


EXTRA_CASES: dict[str, tuple[Callable[[np.random.Generator], Graph], Inputs | None]] = {
    # softmax: input scales spanning the diff_min cut-off and saturation; beta != 1; int16 out
    **{f"softmax_s{s}_beta{b}": (_softmax(s, b), None)
       for s in (0.004, 0.05, 0.4, 2.0) for b in (1.0, 0.3)},
    "softmax_3d_rows": (_softmax(0.08, 1.0, shape=(1, 3, 33)), None),
    "softmax_int16_out": (_softmax(0.06, 1.0, shape=(1, 12), out_dtype="int16"), None),
    "softmax_float": (lambda r: so.softmax_graph(r, (1, 3, 9), beta=0.7, dtype="float32"),
                      _normal_wide),
    # quantize / requantize
    "quantize_ties": (_unary("quantize", (1, 64), "float32", None, "int8", (0.25, 3)),
                      _quantize_ties),
    "requantize_up": (_unary("quantize", (1, 4, 4, 3), "int8", (0.01, 5), "int8", (0.002, -9)),
                      None),
    "requantize_down": (_unary("quantize", (1, 4, 4, 3), "int8", (0.02, 5), "int8", (0.3, 2)),
                        None),
    "dequantize_offset": (_unary("dequantize", (1, 40), "int8", (0.37, -17), "float32", None),
                          None),
    # standalone activations
    "relu_scale_up": (_unary("relu", (1, 4, 4, 3), "int8", (0.05, 10), "int8", (0.01, -100)),
                      None),
    "relu_scale_down": (_unary("relu", (1, 4, 4, 3), "int8", (0.01, -20), "int8", (0.05, 4)),
                        None),
    "relu6_clamped": (_unary("relu6", (1, 4, 4, 3), "int8", (0.01, 7), "int8", (0.01, 7)), None),
    "relu6_float": (lambda r: so.activation_graph(r, "relu6", dtype="float32"), _normal_wide),
    "relu_float": (lambda r: so.activation_graph(r, "relu", dtype="float32"), None),
    # mean: other axes, large counts, multiplier > 1 (left shift), equal quantization
    "mean_channels": (_mean((1, 3, 4, 8), (3,), True, 0.05, 0.02), None),
    "mean_hwc_drop": (_mean((1, 3, 4, 8), (1, 2, 3), False, 0.05, 0.01), None),
    "mean_width": (_mean((1, 3, 5, 8), (2,), False, 0.02, 0.02, 0, 0), None),
    "mean_576_taps": (_mean((1, 24, 24, 4), (1, 2), True, 0.04, 0.004), None),
    "mean_float": (lambda r: so.mean_graph(r, (1, 5, 6, 4), (1, 2), True, dtype="float32"),
                   None),
    "mean_hw_same_quant": (_mean((1, 6, 5, 4), (1, 2), True, 0.03, 0.03, -5, -5), None),
    # convolutions
    "conv_per_tensor_weights": (lambda r: _per_tensor_weights(so.conv2d_graph(r)), None),
    "depthwise_per_tensor_weights": (
        lambda r: _per_tensor_weights(so.depthwise_conv2d_graph(r, stride=(2, 2))), None),
    "conv_1x1_stride2": (lambda r: so.conv2d_graph(r, (1, 7, 7, 5), 6, (1, 1), (2, 2),
                                                   padding="valid"), None),
    "conv_1x5_same": (lambda r: so.conv2d_graph(r, (1, 6, 9, 3), 5, (1, 5)), None),
    "conv_wide_k576": (lambda r: so.conv2d_graph(r, (1, 6, 6, 64), 8), None),
    "conv_relu6_float32_tie": (lambda r: _with_output_quant(
        so.conv2d_graph(r, (1, 6, 6, 8), 4, activation="relu6"), 0.3636363744735718, -128),
        None),
    "conv_stride2_dilation2": (lambda r: so.conv2d_graph(r, (1, 11, 11, 3), 4, (3, 3), (2, 2),
                                                         (2, 2)), None),
    "conv_float_stride2": (lambda r: so.conv2d_graph(r, (1, 9, 9, 3), 4, stride=(2, 2),
                                                     dtype="float32"), None),
    "depthwise_mult3_dilation2": (lambda r: so.depthwise_conv2d_graph(
        r, (1, 9, 9, 2), 3, dilation=(2, 2), padding="valid"), None),
    "depthwise_5x5_stride2_relu": (lambda r: so.depthwise_conv2d_graph(
        r, (1, 10, 10, 4), 1, (5, 5), (2, 2), activation="relu"), None),
    "depthwise_float_mult2": (lambda r: so.depthwise_conv2d_graph(
        r, (1, 6, 6, 3), 2, dtype="float32"), None),
    "fc_wide_k1024": (lambda r: so.fully_connected_graph(r, (1, 1024), 10), None),
    "fc_keep_dims_4d": (lambda r: so.fully_connected_graph(r, (1, 2, 3, 16), 8,
                                                           keep_num_dims=True), None),
    "fc_no_bias_relu6": (lambda r: so.fully_connected_graph(r, (1, 32), 12, "relu6",
                                                            bias=False), None),
    # pooling
    "avg_pool_valid_relu": (lambda r: so.pool2d_graph(r, "avg", (1, 8, 7, 3), (2, 3), (2, 1),
                                                      activation="relu"), None),
    "avg_pool_global": (lambda r: so.pool2d_graph(r, "avg", (1, 5, 5, 6), (5, 5), (1, 1)),
                        None),
    "avg_pool_float_same": (lambda r: so.pool2d_graph(r, "avg", (1, 7, 7, 4), (3, 3), (2, 2),
                                                      "same", dtype="float32"), None),
    "max_pool_float_same": (lambda r: so.pool2d_graph(r, "max", (1, 7, 7, 4), (3, 3), (2, 2),
                                                      "same", dtype="float32"), None),
    # elementwise
    "add_far_scales": (lambda r: _with_output_quant(so.binary_graph(r, "add"), 0.05, 11), None),
    "add_float_relu6": (lambda r: so.binary_graph(r, "add", activation="relu6",
                                                  dtype="float32"), _normal_wide),
    "add_broadcast_rows": (lambda r: so.binary_graph(r, "add", (1, 4, 4, 8), (1, 4, 1, 8),
                                                     activation="relu_n1_to_1"), None),
    "mul_broadcast_scalar": (lambda r: so.binary_graph(r, "mul", (1, 3, 4, 5), (1, 1, 1, 1)),
                             None),
    "mul_relu": (lambda r: so.binary_graph(r, "mul", activation="relu"), None),
    # data movement
    "concat_width_float": (lambda r: so.concat_graph(r, ((1, 2, 3, 2), (1, 2, 1, 2)), axis=2,
                                                     dtype="float32"), None),
    "pad_channels": (lambda r: so.pad_graph(r, (1, 3, 3, 2), ((0, 0), (0, 0), (0, 0), (1, 3))),
                     None),
}


def _compare(graph: Graph, inputs: Inputs | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    make = inputs or (lambda g, r: so.random_inputs(g, r))
    samples = [make(graph, rng) for _ in range(N_SAMPLES)]
    want = Tflm(write_tflite(graph)).run_samples(samples)
    if all(graph.tensors[n].shape[:1] == (1,) for n in graph.inputs):
        # Golden runs the whole set as one batch.
        batch = [np.concatenate(col) for col in zip(*samples)]
        out = golden.run(graph, *batch)[0]
        got = list(out.reshape((N_SAMPLES, -1) + out.shape[1:])) if out.ndim else [out]
    else:
        got = [golden.run(graph, *s)[0] for s in samples]
    for i, (g, w) in enumerate(zip(got, want)):
        g = g.reshape(w.shape)
        assert g.dtype == w.dtype, f"dtype {g.dtype} != TFLM {w.dtype}"
        if w.dtype == np.float32:
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6,
                                       err_msg=f"sample {i}")
        else:
            bad = int(np.count_nonzero(g != w))
            assert bad == 0, f"sample {i}: {bad} of {w.size} values differ from TFLM"


@pytest.mark.parametrize("case", sorted(so.SINGLE_OP_CASES))
def test_single_op_case_matches_tflm(case: str) -> None:
    graph = so.SINGLE_OP_CASES[case](np.random.default_rng(0))
    _compare(graph, _normal_wide if case.endswith("float") else None, seed=1)


@pytest.mark.parametrize("case", sorted(EXTRA_CASES))
def test_edge_case_matches_tflm(case: str) -> None:
    build, inputs = EXTRA_CASES[case]
    graph = build(np.random.default_rng(3))
    _compare(graph, inputs, seed=4)


def test_fc_per_tensor_multiplier_uses_double_product() -> None:
    """ad01_int8's last layer: s_in * s_w taken in float32 would give multiplier 1462485078,
    in double 1462485049; the accumulator -88337 (bias sweep around it) tells them apart.
    The tflite-micro interpreter follows the double product (see kernels/conv.py)."""
    s_in, s_w = np.float32(0.024790890514850616), np.float32(0.0195566825568676)
    s_out, units = np.float32(0.36449846625328064), 512
    x = _act("x", (1, 1), "int8", float(s_in), 0)
    w = Tensor("w", (units, 1), "int8", Role.WEIGHT, QuantParams(s_w, 0),
               np.ones((units, 1), np.int8))
    b = Tensor("b", (units,), "int32", Role.BIAS, QuantParams(np.float32(s_in * s_w), 0),
               (np.arange(units) - units // 2 - 88337).astype(np.int32))
    y = _act("y", (1, units), "int8", float(s_out), 96)
    g = so.single_op_graph("fully_connected", [x, w, b], y,
                           {"activation": "none", "keep_num_dims": False})
    zero = np.zeros((1, 1), np.int8)
    want = Tflm(write_tflite(g)).invoke([zero])
    assert np.array_equal(golden.run(g, zero)[0], want)
