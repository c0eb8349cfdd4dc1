"""Single-op IR graphs for per-op tests (frontend round trips, golden model vs TFLM).

Every builder returns a verified ``Graph`` with one op named ``"op"``, graph input(s) ``"x"``
(``"x0"``, ``"x1"``, ... for several inputs) and output ``"y"``; int8 graphs use the TFLite
conventions (per-channel symmetric int8 weights on the output-channel axis, int32 bias with
scale ``s_in * s_w[c]``, per-tensor asymmetric int8 activations) with quantization chosen so
outputs use most of the int8 range. ``rng`` is a ``numpy.random.Generator``; the same seed gives
the same graph.

Builders (``dtype`` is "int8" or "float32" where offered):
- ``conv2d_graph(rng, in_shape, out_channels, kernel, stride, dilation, padding, activation,
  dtype, bias)`` — ``padding`` is "same", "valid" or explicit (top, bottom, left, right).
- ``depthwise_conv2d_graph(rng, in_shape, depth_multiplier, kernel, stride, dilation, padding,
  activation, dtype, bias)``
- ``fully_connected_graph(rng, in_shape, units, activation, dtype, per_channel, keep_num_dims,
  bias)``
- ``pool2d_graph(rng, kind, in_shape, filter, stride, padding, activation, dtype)`` — kind
  "max" or "avg"; input and output share quantization (TFLite requires it).
- ``binary_graph(rng, kind, shape_a, shape_b, activation, dtype)`` — kind "add" or "mul".
- ``reshape_graph(rng, in_shape, out_shape, dtype)``
- ``softmax_graph(rng, shape, beta, dtype)`` — int8 output is scale 1/256, zero point -128.
- ``mean_graph(rng, in_shape, axes, keep_dims, dtype)``
- ``pad_graph(rng, in_shape, pads, dtype)``
- ``concat_graph(rng, shapes, axis, activation, dtype)`` — all int8 tensors share quantization.
- ``quantize_graph(rng, shape, from_dtype)`` — "float32" -> int8, or "int8" -> int8 requantize.
- ``dequantize_graph(rng, shape)`` — int8 -> float32.
- ``activation_graph(rng, kind, shape, dtype)`` — kind "relu" or "relu6".
- ``single_op_graph(op_type, inputs, output, attrs, constants=())`` — the generic assembler the
  builders use: ``inputs`` are Tensors (graph inputs, or constants if they carry data; ``None``
  for an absent optional input), ``output`` a Tensor.

Helpers:
- ``random_inputs(graph, rng)`` -> list of arrays for ``graph.inputs`` (int8 uniform over the
  full range, float32 standard normal).
- ``tflm_interpreter(model: bytes)`` -> a tflite-micro interpreter (reuse it across runs).
- ``run_tflm(model_or_interpreter, inputs, n_outputs=1)`` -> list of output arrays.
- ``SINGLE_OP_CASES`` — named builder calls covering every op and interesting attribute
  (``{case name: callable(rng) -> Graph}``), shared by the frontend and golden-model tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from codegen.ir import Graph, Op, QuantParams, Role, Tensor, conv_out_size, same_padding, verify

Padding = str | tuple[int, int, int, int]


# -- quantization helpers -------------------------------------------------------------------
def _act_quant(rng: np.random.Generator, scale: float | None = None) -> QuantParams:
    s = float(rng.uniform(0.01, 0.08)) if scale is None else scale
    return QuantParams(np.float32(s), int(rng.integers(-20, 21)))


def _activation(name: str, shape: Sequence[int], dtype: str, quant: QuantParams | None) -> Tensor:
    return Tensor(name, tuple(shape), dtype, Role.ACTIVATION,
                  quant if dtype != "float32" else None)


def _out_scale(s_in: float, s_w: float, taps: int) -> float:
    """An output scale under which a sum of ``taps`` random int8 products rarely saturates."""
    return float(s_in * s_w * np.sqrt(taps) * 74.0 * 74.0 / 48.0)


def _weights(rng: np.random.Generator, name: str, shape: tuple[int, ...], axis: int | None,
             dtype: str) -> Tensor:
    if dtype == "float32":
        return Tensor(name, shape, "float32", Role.WEIGHT,
                      data=rng.normal(0, 0.2, size=shape).astype(np.float32))
    data = rng.integers(-127, 128, size=shape, dtype=np.int8)
    n = 1 if axis is None else shape[axis]
    scale = rng.uniform(0.002, 0.02, size=n).astype(np.float32)
    return Tensor(name, shape, "int8", Role.WEIGHT, QuantParams(scale, np.zeros(n, np.int64), axis),
                  data)


def _bias(rng: np.random.Generator, name: str, n: int, s_in: float | None, w: Tensor,
          dtype: str) -> Tensor:
    if dtype == "float32":
        return Tensor(name, (n,), "float32", Role.BIAS,
                      data=rng.normal(0, 0.5, size=n).astype(np.float32))
    assert w.quant is not None and s_in is not None
    ws = np.broadcast_to(w.quant.scale, (n,)) if w.quant.scale.size == 1 else w.quant.scale
    scale = (np.float64(s_in) * ws.astype(np.float64)).astype(np.float32)
    axis = 0 if w.quant.per_channel else None
    q = QuantParams(scale if axis == 0 else scale[:1], np.zeros(scale.size if axis == 0 else 1,
                                                                np.int64), axis)
    return Tensor(name, (n,), "int32", Role.BIAS, q,
                  rng.integers(-3000, 3001, size=n).astype(np.int32))


def _explicit(padding: Padding, in_hw: tuple[int, int], k: tuple[int, int],
              stride: tuple[int, int], dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        _, pt, pb = same_padding(in_hw[0], k[0], stride[0], dilation[0])
        _, pl, pr = same_padding(in_hw[1], k[1], stride[1], dilation[1])
        return (pt, pb, pl, pr)
    return tuple(int(p) for p in padding)  # type: ignore[return-value]


def _window_out(in_shape: Sequence[int], k: tuple[int, int], stride: tuple[int, int],
                dilation: tuple[int, int], pads: tuple[int, int, int, int]) -> tuple[int, int]:
    return (conv_out_size(in_shape[1], k[0], stride[0], dilation[0], pads[0], pads[1]),
            conv_out_size(in_shape[2], k[1], stride[1], dilation[1], pads[2], pads[3]))


# -- the generic assembler ------------------------------------------------------------------
def single_op_graph(op_type: str, inputs: Sequence[Tensor | None], output: Tensor,
                    attrs: dict[str, Any], name: str = "op") -> Graph:
    """A verified graph holding one op: non-constant inputs become graph inputs."""
    g = Graph(name=f"single_{op_type}")
    for t in inputs:
        if t is not None and t.name not in g.tensors:
            g.add_tensor(t)
    g.add_tensor(output)
    g.inputs = [t.name for t in inputs if t is not None and not t.is_const]
    g.outputs = [output.name]
    g.add_op(Op(op_type, name, tuple("" if t is None else t.name for t in inputs),
                (output.name,), attrs))
    g.metadata["source_format"] = "test"
    return verify(g)


# -- builders -------------------------------------------------------------------------------
def conv2d_graph(rng: np.random.Generator, in_shape: Sequence[int] = (1, 8, 8, 3),
                 out_channels: int = 4, kernel: tuple[int, int] = (3, 3),
                 stride: tuple[int, int] = (1, 1), dilation: tuple[int, int] = (1, 1),
                 padding: Padding = "same", activation: str = "none", dtype: str = "int8",
                 bias: bool = True) -> Graph:
    xq = _act_quant(rng)
    x = _activation("x", in_shape, dtype, xq)
    w = _weights(rng, "w", (out_channels, kernel[0], kernel[1], in_shape[3]), 0, dtype)
    b = _bias(rng, "b", out_channels, xq.s, w, dtype) if bias else None
    pads = _explicit(padding, (in_shape[1], in_shape[2]), kernel, stride, dilation)
    oh, ow = _window_out(in_shape, kernel, stride, dilation, pads)
    taps = kernel[0] * kernel[1] * in_shape[3]
    s_w = float(np.mean(w.quant.scale)) if w.quant is not None else 1.0
    yq = _act_quant(rng, _out_scale(xq.s, s_w, taps))
    y = _activation("y", (in_shape[0], oh, ow, out_channels), dtype, yq)
    return single_op_graph("conv2d", [x, w, b], y, {"stride": tuple(stride),
                           "dilation": tuple(dilation), "padding": pads,
                           "activation": activation})


def depthwise_conv2d_graph(rng: np.random.Generator, in_shape: Sequence[int] = (1, 8, 8, 4),
                           depth_multiplier: int = 1, kernel: tuple[int, int] = (3, 3),
                           stride: tuple[int, int] = (1, 1), dilation: tuple[int, int] = (1, 1),
                           padding: Padding = "same", activation: str = "none",
                           dtype: str = "int8", bias: bool = True) -> Graph:
    xq = _act_quant(rng)
    x = _activation("x", in_shape, dtype, xq)
    oc = in_shape[3] * depth_multiplier
    w = _weights(rng, "w", (1, kernel[0], kernel[1], oc), 3, dtype)
    b = _bias(rng, "b", oc, xq.s, w, dtype) if bias else None
    pads = _explicit(padding, (in_shape[1], in_shape[2]), kernel, stride, dilation)
    oh, ow = _window_out(in_shape, kernel, stride, dilation, pads)
    s_w = float(np.mean(w.quant.scale)) if w.quant is not None else 1.0
    yq = _act_quant(rng, _out_scale(xq.s, s_w, kernel[0] * kernel[1]))
    y = _activation("y", (in_shape[0], oh, ow, oc), dtype, yq)
    return single_op_graph("depthwise_conv2d", [x, w, b], y, {
        "stride": tuple(stride), "dilation": tuple(dilation), "padding": pads,
        "activation": activation, "depth_multiplier": depth_multiplier})


def fully_connected_graph(rng: np.random.Generator, in_shape: Sequence[int] = (1, 16),
                          units: int = 8, activation: str = "none", dtype: str = "int8",
                          per_channel: bool = False, keep_num_dims: bool = False,
                          bias: bool = True) -> Graph:
    xq = _act_quant(rng)
    x = _activation("x", in_shape, dtype, xq)
    n_in = in_shape[-1]
    w = _weights(rng, "w", (units, n_in), 0 if per_channel else None, dtype)
    b = _bias(rng, "b", units, xq.s, w, dtype) if bias else None
    s_w = float(np.mean(w.quant.scale)) if w.quant is not None else 1.0
    yq = _act_quant(rng, _out_scale(xq.s, s_w, n_in))
    rows = int(np.prod(in_shape)) // n_in
    out_shape = tuple(in_shape[:-1]) + (units,) if keep_num_dims else (rows, units)
    y = _activation("y", out_shape, dtype, yq)
    return single_op_graph("fully_connected", [x, w, b], y,
                           {"activation": activation, "keep_num_dims": keep_num_dims})


def pool2d_graph(rng: np.random.Generator, kind: str = "max",
                 in_shape: Sequence[int] = (1, 8, 8, 4), filter: tuple[int, int] = (2, 2),
                 stride: tuple[int, int] = (2, 2), padding: Padding = "valid",
                 activation: str = "none", dtype: str = "int8") -> Graph:
    q = _act_quant(rng)
    x = _activation("x", in_shape, dtype, q)
    pads = _explicit(padding, (in_shape[1], in_shape[2]), filter, stride, (1, 1))
    oh, ow = _window_out(in_shape, filter, stride, (1, 1), pads)
    y = _activation("y", (in_shape[0], oh, ow, in_shape[3]), dtype, q)
    return single_op_graph(f"{kind}_pool2d", [x], y, {"filter": tuple(filter),
                           "stride": tuple(stride), "padding": pads, "activation": activation})


def binary_graph(rng: np.random.Generator, kind: str = "add",
                 shape_a: Sequence[int] = (1, 4, 4, 8), shape_b: Sequence[int] = (1, 4, 4, 8),
                 activation: str = "none", dtype: str = "int8") -> Graph:
    qa, qb = _act_quant(rng), _act_quant(rng)
    out_scale = (qa.s + qb.s) * 1.2 if kind == "add" else qa.s * qb.s * 128 * 0.6
    a = _activation("x0", shape_a, dtype, qa)
    b = _activation("x1", shape_b, dtype, qb)
    out_shape = np.broadcast_shapes(tuple(shape_a), tuple(shape_b))
    y = _activation("y", out_shape, dtype, _act_quant(rng, out_scale))
    return single_op_graph(kind, [a, b], y, {"activation": activation})


def reshape_graph(rng: np.random.Generator, in_shape: Sequence[int] = (1, 2, 2, 8),
                  out_shape: Sequence[int] = (1, 32), dtype: str = "int8") -> Graph:
    q = _act_quant(rng)
    return single_op_graph("reshape", [_activation("x", in_shape, dtype, q)],
                           _activation("y", out_shape, dtype, q), {"shape": tuple(out_shape)})


def softmax_graph(rng: np.random.Generator, shape: Sequence[int] = (1, 10), beta: float = 1.0,
                  dtype: str = "int8") -> Graph:
    x = _activation("x", shape, dtype, _act_quant(rng, 0.03))
    y = _activation("y", shape, dtype, QuantParams(np.float32(1 / 256), -128))
    return single_op_graph("softmax", [x], y, {"beta": float(beta)})


def mean_graph(rng: np.random.Generator, in_shape: Sequence[int] = (1, 4, 4, 8),
               axes: tuple[int, ...] = (1, 2), keep_dims: bool = True,
               dtype: str = "int8") -> Graph:
    x = _activation("x", in_shape, dtype, _act_quant(rng))
    out = tuple(1 if i in axes else d for i, d in enumerate(in_shape)) if keep_dims else \
        tuple(d for i, d in enumerate(in_shape) if i not in axes)
    y = _activation("y", out, dtype, _act_quant(rng))
    return single_op_graph("mean", [x], y, {"axes": tuple(axes), "keep_dims": keep_dims})


def pad_graph(rng: np.random.Generator, in_shape: Sequence[int] = (1, 4, 4, 3),
              pads: tuple[tuple[int, int], ...] = ((0, 0), (1, 2), (2, 1), (0, 0)),
              dtype: str = "int8") -> Graph:
    q = _act_quant(rng)
    out = tuple(d + p0 + p1 for d, (p0, p1) in zip(in_shape, pads))
    return single_op_graph("pad", [_activation("x", in_shape, dtype, q)],
                           _activation("y", out, dtype, q),
                           {"pads": tuple((int(a), int(b)) for a, b in pads)})


def concat_graph(rng: np.random.Generator,
                 shapes: Sequence[Sequence[int]] = ((1, 4, 4, 3), (1, 4, 4, 5)), axis: int = 3,
                 activation: str = "none", dtype: str = "int8") -> Graph:
    q = _act_quant(rng)
    xs = [_activation(f"x{i}", s, dtype, q) for i, s in enumerate(shapes)]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return single_op_graph("concat", xs, _activation("y", out, dtype, q),
                           {"axis": axis, "activation": activation})


def quantize_graph(rng: np.random.Generator, shape: Sequence[int] = (1, 4, 4, 3),
                   from_dtype: str = "float32") -> Graph:
    xq = _act_quant(rng)
    x = _activation("x", shape, from_dtype, xq)
    y = _activation("y", shape, "int8",
                    _act_quant(rng, xq.s * 1.7 if from_dtype == "int8" else 0.02))
    return single_op_graph("quantize", [x], y, {})


def dequantize_graph(rng: np.random.Generator, shape: Sequence[int] = (1, 4, 4, 3)) -> Graph:
    x = _activation("x", shape, "int8", _act_quant(rng))
    return single_op_graph("dequantize", [x], _activation("y", shape, "float32", None), {})


def activation_graph(rng: np.random.Generator, kind: str = "relu",
                     shape: Sequence[int] = (1, 4, 4, 3), dtype: str = "int8") -> Graph:
    xq = _act_quant(rng, 0.05)
    x = _activation("x", shape, dtype, xq)
    y = _activation("y", shape, dtype, _act_quant(rng, 0.03))
    return single_op_graph(kind, [x], y, {})


# -- running --------------------------------------------------------------------------------
def random_inputs(graph: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    """One random array per graph input, in ``graph.inputs`` order."""
    out = []
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.dtype == "float32":
            out.append(rng.standard_normal(t.shape).astype(np.float32))
        else:
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max + 1, size=t.shape, dtype=t.dtype))
    return out


def tflm_interpreter(model: bytes):
    """A tflite-micro interpreter for ``model`` (arena sized generously)."""
    from tflite_micro.python.tflite_micro import runtime

    return runtime.Interpreter.from_bytes(model, arena_size=max(len(model) * 10, 1 << 20))


def run_tflm(model: bytes | Any, inputs: Sequence[np.ndarray], n_outputs: int = 1
             ) -> list[np.ndarray]:
    """Run a .tflite model (bytes, or an interpreter from ``tflm_interpreter`` to reuse) once
    in the tflite-micro interpreter; returns the first ``n_outputs`` outputs."""
    interp = tflm_interpreter(model) if isinstance(model, (bytes, bytearray)) else model
    for i, x in enumerate(inputs):
        interp.set_input(np.ascontiguousarray(x), i)
    interp.invoke()
    return [np.array(interp.get_output(i)) for i in range(n_outputs)]


SINGLE_OP_CASES: dict[str, Callable[[np.random.Generator], Graph]] = {
    "conv_same": conv2d_graph,
    "conv_valid_relu": partial(conv2d_graph, padding="valid", activation="relu"),
    "conv_stride2": partial(conv2d_graph, in_shape=(1, 9, 8, 3), stride=(2, 2)),
    "conv_dilation2": partial(conv2d_graph, in_shape=(1, 10, 10, 2), dilation=(2, 2)),
    "conv_relu6": partial(conv2d_graph, activation="relu6"),
    "conv_relu_n1_to_1": partial(conv2d_graph, activation="relu_n1_to_1"),
    "conv_asym_pad": partial(conv2d_graph, padding=(1, 0, 2, 1)),
    "conv_sym_pad_stride2": partial(conv2d_graph, stride=(2, 2), padding=(1, 1, 1, 1)),
    "conv_no_bias": partial(conv2d_graph, bias=False),
    "conv_float": partial(conv2d_graph, dtype="float32", activation="relu"),
    "depthwise_same_relu6": partial(depthwise_conv2d_graph, activation="relu6"),
    "depthwise_mult2_stride2": partial(depthwise_conv2d_graph, in_shape=(1, 9, 9, 3),
                                       depth_multiplier=2, stride=(2, 2)),
    "depthwise_asym_pad": partial(depthwise_conv2d_graph, padding=(0, 2, 1, 1)),
    "fc_per_tensor": fully_connected_graph,
    "fc_per_channel_relu": partial(fully_connected_graph, per_channel=True, activation="relu"),
    "fc_batch_keep_dims": partial(fully_connected_graph, in_shape=(2, 3, 16),
                                  keep_num_dims=True),
    "fc_float": partial(fully_connected_graph, dtype="float32"),
    "max_pool_valid": partial(pool2d_graph, kind="max"),
    "max_pool_same_relu6": partial(pool2d_graph, kind="max", in_shape=(1, 7, 7, 4),
                                   filter=(3, 3), padding="same", activation="relu6"),
    "max_pool_explicit": partial(pool2d_graph, kind="max", filter=(3, 3),
                                 padding=(1, 1, 1, 1)),
    "avg_pool_same": partial(pool2d_graph, kind="avg", in_shape=(1, 7, 7, 4), filter=(3, 3),
                             padding="same"),
    "add_broadcast": partial(binary_graph, kind="add", shape_b=(1, 1, 1, 8)),
    "add_relu": partial(binary_graph, kind="add", activation="relu"),
    "mul": partial(binary_graph, kind="mul"),
    "mul_relu6_broadcast": partial(binary_graph, kind="mul", shape_b=(1, 1, 1, 8),
                                   activation="relu6"),
    "mul_float": partial(binary_graph, kind="mul", dtype="float32"),
    "reshape": reshape_graph,
    "softmax": softmax_graph,
    "mean_hw_keep": mean_graph,
    "mean_hw_drop": partial(mean_graph, keep_dims=False),
    "pad": pad_graph,
    "pad_float": partial(pad_graph, dtype="float32"),
    "concat_channels": concat_graph,
    "concat_three_axis1": partial(concat_graph, shapes=((1, 2, 4, 3), (1, 3, 4, 3), (1, 1, 4, 3)),
                                  axis=1),
    "quantize": quantize_graph,
    "requantize": partial(quantize_graph, from_dtype="int8"),
    "dequantize": dequantize_graph,
    "relu": partial(activation_graph, kind="relu"),
    "relu6": partial(activation_graph, kind="relu6"),
}
