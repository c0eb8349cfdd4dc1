"""Random single-op IR graphs for the kernel tests: every forward op, general in shape.

``CASES[op](rng) -> (graph, batch)``: a verified graph holding one op named "op", built with
tests/frontend/single_op.py's assembler and TFLite's quantization conventions (per-channel
symmetric int8 weights, int32 biases, per-tensor asymmetric activations with random zero
points), and the batch to run it with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from codegen.golden.kernels.common import batched
from codegen.ir import (
    ACTIVATIONS,
    Graph,
    Op,
    QuantParams,
    Role,
    Tensor,
    conv_out_size,
    same_padding,
    verify,
)
from tests.frontend.single_op import single_op_graph

Rng = np.random.Generator
Case = tuple[Graph, int]


def _act_q(rng: Rng, scale: float | None = None) -> QuantParams:
    s = float(rng.uniform(0.005, 0.1)) if scale is None else scale
    return QuantParams(np.float32(s), int(rng.integers(-128, 128)))


def _act(name: str, shape, dtype: str, q: QuantParams | None) -> Tensor:
    return Tensor(name, tuple(shape), dtype, Role.ACTIVATION, q if dtype != "float32" else None)


def _weights(rng: Rng, shape: tuple[int, ...], axis: int, dtype: str,
             per_channel: bool = True) -> Tensor:
    if dtype == "float32":
        return Tensor("w", shape, "float32", Role.WEIGHT,
                      data=rng.normal(0, 0.3, size=shape).astype(np.float32))
    data = rng.integers(-127, 128, size=shape, dtype=np.int8)
    n = shape[axis] if per_channel else 1
    # Scales spread over two decades so multipliers and shifts vary per channel.
    scale = (10.0 ** rng.uniform(-3.3, -1.3, size=n)).astype(np.float32)
    return Tensor("w", shape, "int8", Role.WEIGHT,
                  QuantParams(scale, np.zeros(n, np.int64), axis if per_channel else None), data)


def _bias(rng: Rng, n: int, s_in: float, w: Tensor, dtype: str) -> Tensor:
    if dtype == "float32":
        return Tensor("b", (n,), "float32", Role.BIAS,
                      data=rng.normal(0, 0.5, size=n).astype(np.float32))
    assert w.quant is not None
    ws = np.broadcast_to(w.quant.scale, (n,))
    scale = (np.float64(s_in) * ws.astype(np.float64)).astype(np.float32)
    per = w.quant.scale.size > 1
    q = QuantParams(scale if per else scale[:1], np.zeros(n if per else 1, np.int64),
                    0 if per else None)
    return Tensor("b", (n,), "int32", Role.BIAS, q,
                  rng.integers(-20000, 20001, size=n).astype(np.int32))


def _out_q(rng: Rng, s_in: float, w: Tensor, taps: int) -> QuantParams:
    """Output quantization that keeps most outputs unsaturated; sometimes a tiny scale so
    that multipliers exceed one (positive shifts) and outputs saturate."""
    s_w = float(np.mean(w.quant.scale)) if w.quant is not None else 1.0
    s = s_in * s_w * np.sqrt(taps) * 74.0 * 74.0 / 48.0 * float(10.0 ** rng.uniform(-0.5, 0.5))
    if rng.random() < 0.1:
        s = s_in * s_w * float(rng.uniform(0.05, 0.9))
    return _act_q(rng, s)


def _padding(rng: Rng, in_hw, k, stride, dilation) -> tuple[int, int, int, int]:
    kind = rng.choice(["same", "valid", "explicit"])
    if kind == "valid":
        return (0, 0, 0, 0)
    if kind == "same":
        _, pt, pb = same_padding(in_hw[0], k[0], stride[0], dilation[0])
        _, pl, pr = same_padding(in_hw[1], k[1], stride[1], dilation[1])
        return (pt, pb, pl, pr)
    eff = [(k[i] - 1) * dilation[i] for i in range(2)]
    return tuple(int(rng.integers(0, eff[i // 2] + 1)) for i in range(4))  # type: ignore


def _window(rng: Rng, in_shape, k, stride, dilation):
    """Padding and output (oh, ow) for a window op, or None if no output fits."""
    pads = _padding(rng, in_shape[1:3], k, stride, dilation)
    oh = conv_out_size(in_shape[1], k[0], stride[0], dilation[0], pads[0], pads[1])
    ow = conv_out_size(in_shape[2], k[1], stride[1], dilation[1], pads[2], pads[3])
    if oh < 1 or ow < 1:
        return None
    return pads, oh, ow


def _dtype(rng: Rng) -> str:
    return "float32" if rng.random() < 0.25 else "int8"


def _pair(rng: Rng, lo: int, hi: int) -> tuple[int, int]:
    return int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))


def conv2d_case(rng: Rng) -> Case:
    while True:
        dtype = _dtype(rng)
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        ci = int(rng.integers(1, 6))
        cin = ci * groups
        o = groups * int(rng.integers(1, 5))
        in_shape = (1, int(rng.integers(1, 10)), int(rng.integers(1, 10)), cin)
        k = _pair(rng, 1, 4)
        stride, dilation = _pair(rng, 1, 3), _pair(rng, 1, 2)
        win = _window(rng, in_shape, k, stride, dilation)
        if win is not None:
            break
    return conv2d_graph(rng, dtype, in_shape, o, k, ci, stride, dilation, win[0])


def conv2d_graph(rng: Rng, dtype: str, in_shape, o: int, k, ci: int, stride, dilation, pads
                 ) -> Case:
    """A conv2d case of these shapes (ci: input channels per group) with random quantization,
    bias, activation and batch."""
    oh = conv_out_size(in_shape[1], k[0], stride[0], dilation[0], pads[0], pads[1])
    ow = conv_out_size(in_shape[2], k[1], stride[1], dilation[1], pads[2], pads[3])
    xq = _act_q(rng)
    x = _act("x", in_shape, dtype, xq)
    w = _weights(rng, (o, k[0], k[1], ci), 0, dtype, per_channel=rng.random() < 0.8)
    b = _bias(rng, o, xq.s, w, dtype) if rng.random() < 0.85 else None
    y = _act("y", (1, oh, ow, o), dtype, _out_q(rng, xq.s, w, k[0] * k[1] * ci))
    g = single_op_graph("conv2d", [x, w, b], y, {
        "stride": tuple(stride), "dilation": tuple(dilation), "padding": tuple(pads),
        "activation": str(rng.choice(ACTIVATIONS))})
    return g, int(rng.integers(1, 3))


def depthwise_conv2d_case(rng: Rng) -> Case:
    while True:
        dtype = _dtype(rng)
        mult = int(rng.integers(1, 4))
        in_shape = (1, int(rng.integers(1, 10)), int(rng.integers(1, 10)),
                    int(rng.integers(1, 8)))
        k = _pair(rng, 1, 4)
        stride, dilation = _pair(rng, 1, 3), _pair(rng, 1, 2)
        win = _window(rng, in_shape, k, stride, dilation)
        if win is not None:
            break
    return depthwise_conv2d_graph(rng, dtype, in_shape, mult, k, stride, dilation, win[0])


def depthwise_conv2d_graph(rng: Rng, dtype: str, in_shape, mult: int, k, stride, dilation,
                           pads) -> Case:
    """A depthwise_conv2d case of these shapes with random quantization, bias, activation and
    batch."""
    oh = conv_out_size(in_shape[1], k[0], stride[0], dilation[0], pads[0], pads[1])
    ow = conv_out_size(in_shape[2], k[1], stride[1], dilation[1], pads[2], pads[3])
    o = in_shape[3] * mult
    xq = _act_q(rng)
    x = _act("x", in_shape, dtype, xq)
    w = _weights(rng, (1, k[0], k[1], o), 3, dtype, per_channel=rng.random() < 0.8)
    b = _bias(rng, o, xq.s, w, dtype) if rng.random() < 0.85 else None
    y = _act("y", (1, oh, ow, o), dtype, _out_q(rng, xq.s, w, k[0] * k[1]))
    g = single_op_graph("depthwise_conv2d", [x, w, b], y, {
        "stride": tuple(stride), "dilation": tuple(dilation), "padding": tuple(pads),
        "activation": str(rng.choice(ACTIVATIONS)), "depth_multiplier": mult})
    return g, int(rng.integers(1, 3))


def fully_connected_case(rng: Rng) -> Case:
    dtype = _dtype(rng)
    depth, units = int(rng.integers(1, 48)), int(rng.integers(1, 20))
    lead = [(1,), (1, int(rng.integers(2, 4))), (1, 2, int(rng.integers(1, 3)))][
        int(rng.integers(0, 3))]
    in_shape = lead + (depth,)
    keep = bool(rng.random() < 0.5)
    xq = _act_q(rng)
    x = _act("x", in_shape, dtype, xq)
    w = _weights(rng, (units, depth), 0, dtype, per_channel=rng.random() < 0.5)
    b = _bias(rng, units, xq.s, w, dtype) if rng.random() < 0.85 else None
    rows = int(np.prod(in_shape)) // depth
    out_shape = lead + (units,) if keep else (rows, units)
    y = _act("y", out_shape, dtype, _out_q(rng, xq.s, w, depth))
    g = single_op_graph("fully_connected", [x, w, b], y, {
        "activation": str(rng.choice(ACTIVATIONS)), "keep_num_dims": keep})
    return g, (int(rng.integers(1, 4)) if keep or rows == 1 else 1)


def _pool_case(kind: str) -> Callable[[Rng], Case]:
    def build(rng: Rng) -> Case:
        while True:
            dtype = _dtype(rng)
            in_shape = (1, int(rng.integers(1, 10)), int(rng.integers(1, 10)),
                        int(rng.integers(1, 7)))
            f, stride = _pair(rng, 1, 4), _pair(rng, 1, 3)
            win = _window(rng, in_shape, f, stride, (1, 1))
            if win is not None:
                break
        pads, oh, ow = win
        q = _act_q(rng)
        x = _act("x", in_shape, dtype, q)
        y = _act("y", (1, oh, ow, in_shape[3]), dtype, q)
        g = single_op_graph(f"{kind}_pool2d", [x], y, {
            "filter": f, "stride": stride, "padding": pads,
            "activation": str(rng.choice(ACTIVATIONS))})
        return g, int(rng.integers(1, 3))
    return build


def _broadcast_shapes(rng: Rng) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """Shapes of a binary op's inputs and whether the second is a constant."""
    pattern = rng.choice(["same", "channel", "channel_1d", "scalar", "random4d", "rank5",
                          "rows"])
    full = (1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 9)))
    if pattern == "same":
        return full, full, False
    if pattern == "channel":
        return full, (1, 1, 1, full[3]), bool(rng.random() < 0.5)
    if pattern == "channel_1d":
        return full, (full[3],), True
    if pattern == "scalar":
        return full, (1,), True
    if pattern == "rows":
        return full, (1, full[1], 1, 1), False
    if pattern == "rank5":
        a = (1, 2, int(rng.integers(1, 4)), 3, int(rng.integers(1, 5)))
        b = (1, 2, 1, 3, a[4])
        return (a, b, False) if rng.random() < 0.5 else (b, a, False)
    a = tuple(d if rng.random() < 0.6 else 1 for d in full)
    b = tuple(d if rng.random() < 0.6 else 1 for d in full)
    if rng.random() < 0.5:
        a, b = b, a
    return a, b, bool(rng.random() < 0.3)


def _binary_case(kind: str) -> Callable[[Rng], Case]:
    def build(rng: Rng) -> Case:
        dtype = _dtype(rng)
        sa, sb, b_const = _broadcast_shapes(rng)
        qa, qb = _act_q(rng), _act_q(rng)
        if rng.random() < 0.2:                  # equal input scales (a common TFLite case)
            qb = QuantParams(qa.scale, qb.zp)
        out_scale = ((qa.s + qb.s) * float(rng.uniform(0.4, 1.5)) if kind == "add"
                     else qa.s * qb.s * 128 * float(rng.uniform(0.2, 1.0)))
        a = _act("x0", sa, dtype, qa)
        if b_const:
            data = (rng.integers(-128, 128, size=sb).astype(np.int8) if dtype == "int8"
                    else rng.standard_normal(sb).astype(np.float32))
            b = Tensor("c1", sb, dtype, Role.CONSTANT, qb if dtype == "int8" else None, data)
        else:
            b = _act("x1", sb, dtype, qb)
        out = np.broadcast_shapes(sa, sb)
        y = _act("y", out, dtype, _act_q(rng, out_scale))
        g = single_op_graph(kind, [a, b], y, {"activation": str(rng.choice(ACTIVATIONS))})
        batchable = all(len(t.shape) == len(out) or t.is_const for t in (a, b))
        return g, int(rng.integers(1, 3)) if batchable else 1
    return build


def softmax_case(rng: Rng) -> Case:
    dtype = "float32" if rng.random() < 0.25 else "int8"
    n = int(rng.choice([1, 2, 3, 10, 12, int(rng.integers(1, 300))]))
    shape = (1, n) if rng.random() < 0.6 else (1, int(rng.integers(1, 4)), 2, n)
    x = _act("x", shape, dtype, _act_q(rng, float(10 ** rng.uniform(-2.5, -0.5))))
    out_dtype = dtype
    yq = QuantParams(np.float32(1 / 256), -128)
    if dtype == "int8" and rng.random() < 0.3:
        out_dtype, yq = "int16", QuantParams(np.float32(1 / 65536), -32768)
    y = _act("y", shape, out_dtype, yq)
    beta = float(rng.choice([1.0, float(rng.uniform(0.3, 3.0))]))
    return single_op_graph("softmax", [x], y, {"beta": beta}), int(rng.integers(1, 3))


def mean_case(rng: Rng) -> Case:
    dtype = _dtype(rng)
    rank = int(rng.choice([4, 4, 4, 3, 5]))
    shape = (1,) + tuple(int(rng.integers(1, 6)) for _ in range(rank - 1))
    axes = tuple(a for a in range(1, rank) if rng.random() < 0.5) or (1,)
    if rank == 5:                                # keep it collapsible to 4-D
        axes = (1, 2) if rng.random() < 0.5 else (3, 4)
    keep = bool(rng.random() < 0.5)
    out = (tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep
           else tuple(d for i, d in enumerate(shape) if i not in axes))
    x = _act("x", shape, dtype, _act_q(rng))
    y = _act("y", out, dtype, _act_q(rng))
    g = single_op_graph("mean", [x], y, {"axes": axes, "keep_dims": keep})
    return g, int(rng.integers(1, 3))


def pad_case(rng: Rng) -> Case:
    dtype = _dtype(rng)
    rank = int(rng.choice([4, 4, 2, 3, 5]))
    shape = (1,) + tuple(int(rng.integers(1, 5)) for _ in range(rank - 1))
    pads = [(0, 0)] + [(int(rng.integers(0, 3)), int(rng.integers(0, 3)))
                       for _ in range(rank - 1)]
    if rank == 5:
        pads[4] = (0, 0)                         # collapsible
    q = _act_q(rng)
    out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    g = single_op_graph("pad", [_act("x", shape, dtype, q)], _act("y", out, dtype, q),
                        {"pads": tuple(pads)})
    return g, int(rng.integers(1, 3))


def concat_case(rng: Rng) -> Case:
    dtype = _dtype(rng)
    rank = int(rng.choice([2, 3, 4, 4]))
    base = [1] + [int(rng.integers(1, 5)) for _ in range(rank - 1)]
    axis = int(rng.integers(1, rank))
    shapes = []
    for _ in range(int(rng.integers(1, 5))):
        s = list(base)
        s[axis] = int(rng.integers(1, 5))
        shapes.append(tuple(s))
    q = _act_q(rng)
    xs = [_act(f"x{i}", s, dtype, q) for i, s in enumerate(shapes)]
    out = list(base)
    out[axis] = sum(s[axis] for s in shapes)
    g = single_op_graph("concat", xs, _act("y", out, dtype, q),
                        {"axis": axis, "activation": str(rng.choice(ACTIVATIONS))})
    return g, int(rng.integers(1, 3))


def _shape(rng: Rng) -> tuple[int, ...]:
    return (1,) + tuple(int(rng.integers(1, 7)) for _ in range(int(rng.integers(1, 4))))


def quantize_case(rng: Rng) -> Case:
    shape = _shape(rng)
    src = "float32" if rng.random() < 0.5 else "int8"
    xq = _act_q(rng)
    x = _act("x", shape, src, xq)
    y = _act("y", shape, "int8", _act_q(rng, xq.s * float(10 ** rng.uniform(-1, 1))))
    return single_op_graph("quantize", [x], y, {}), int(rng.integers(1, 3))


def dequantize_case(rng: Rng) -> Case:
    shape = _shape(rng)
    x = _act("x", shape, "int8", _act_q(rng))
    return (single_op_graph("dequantize", [x], _act("y", shape, "float32", None), {}),
            int(rng.integers(1, 3)))


def _activation_case(kind: str) -> Callable[[Rng], Case]:
    def build(rng: Rng) -> Case:
        shape = _shape(rng)
        dtype = _dtype(rng)
        xq = _act_q(rng, float(rng.uniform(0.01, 0.1)))
        x = _act("x", shape, dtype, xq)
        y = _act("y", shape, dtype, xq if kind == "relu6" else _act_q(rng))
        return single_op_graph(kind, [x], y, {}), int(rng.integers(1, 3))
    return build


def reshape_case(rng: Rng) -> Case:
    dtype = _dtype(rng)
    shape = _shape(rng)
    q = _act_q(rng)
    out = (1, int(np.prod(shape)))
    return (single_op_graph("reshape", [_act("x", shape, dtype, q)],
                            _act("y", out, dtype, q), {"shape": out}),
            int(rng.integers(1, 3)))


def chain_graph(rng: Rng, residual: bool | None = None, arm: bool = False
                ) -> tuple[Graph, list[str], str | None]:
    """A random int8 chain of 1-4 conv2d / depthwise_conv2d ops (kernel heights 1-7, strides
    1-2, dilation 1-2, any padding and activation; with a residual add of the chain's input:
    stride 1, SAME padding, the input's channels at the end) as a plain graph, with the names
    of its stages and of the add (or None) — what the stream pass fuses. ``arm``: what the
    arm kernels take (depth multiplier 1, no dilation)."""
    residual = bool(rng.random() < 0.35) if residual is None else residual
    while True:
        g = Graph(name="chain")
        h, w, c = int(rng.integers(1, 14)), int(rng.integers(1, 9)), int(rng.integers(1, 7))
        xq = _act_q(rng)
        cur = g.add_tensor(_act("x", (1, h, w, c), "int8", xq))
        names: list[str] = []
        n = int(rng.integers(1 if residual else 2, 5))
        for j in range(n):
            last = j == n - 1
            dw = bool(rng.random() < 0.45) and not (residual and last and cur.shape[3] != c)
            k = (int(rng.choice([1, 1, 2, 3, 3, 5, 7])), int(rng.choice([1, 2, 3, 5])))
            stride = (1, 1) if residual else _pair(rng, 1, 2)
            dil = (1, 1) if rng.random() < 0.8 or arm else _pair(rng, 1, 2)
            hw = cur.shape[1:3]
            if residual:
                pads = tuple(int(v) for v in (*same_padding(hw[0], k[0], 1, dil[0])[1:],
                                              *same_padding(hw[1], k[1], 1, dil[1])[1:]))
            else:
                pads = _padding(rng, hw, k, stride, dil)
            oh = conv_out_size(hw[0], k[0], stride[0], dil[0], pads[0], pads[1])
            ow = conv_out_size(hw[1], k[1], stride[1], dil[1], pads[2], pads[3])
            if oh < 1 or ow < 1:
                break
            ci = cur.shape[3]
            if dw:
                mult = 1 if (residual and last) or arm else int(rng.integers(1, 3))
                o = ci * mult
                wt = _weights(rng, (1, *k, o), 3, "int8", per_channel=rng.random() < 0.8)
            else:
                o = c if residual and last else int(rng.integers(1, 9))
                wt = _weights(rng, (o, *k, ci), 0, "int8", per_channel=rng.random() < 0.8)
            wt = g.add_tensor(wt.replace(name=f"w{j}"))
            b = g.add_tensor(_bias(rng, o, cur.quant.s, wt, "int8").replace(name=f"b{j}"))
            taps = k[0] * k[1] * (1 if dw else ci)
            y = g.add_tensor(_act(f"t{j}", (1, oh, ow, o), "int8",
                                  _out_q(rng, cur.quant.s, wt, taps)))
            attrs = {"stride": stride, "dilation": dil, "padding": pads,
                     "activation": str(rng.choice(ACTIVATIONS))}
            if dw:
                attrs["depth_multiplier"] = mult
            g.add_op(Op("depthwise_conv2d" if dw else "conv2d", f"s{j}",
                        (cur.name, wt.name, b.name), (y.name,), attrs))
            names.append(f"s{j}")
            cur = y
        else:
            add = None
            if residual:
                add = "add"
                z = g.add_tensor(_act("y", cur.shape, "int8",
                                      _act_q(rng, (xq.s + cur.quant.s) * float(
                                          rng.uniform(0.4, 1.5)))))
                pair = (cur.name, "x") if rng.random() < 0.5 else ("x", cur.name)
                g.add_op(Op("add", add, pair, (z.name,),
                            {"activation": str(rng.choice(ACTIVATIONS))}))
                cur = z
            g.inputs, g.outputs = ["x"], [cur.name]
            return verify(g), names, add


def stream_chain_case(rng: Rng, arm: bool = False) -> Case:
    """A random chain (``chain_graph``) fused into one stream_chain op with a random band
    height."""
    from codegen.stream import fuse

    g, names, add = chain_graph(rng, arm=arm)
    height = g.tensors[g.outputs[0]].shape[1]
    band = int(rng.choice([1, 1, 2, 3, height, int(rng.integers(1, height + 1))]))
    return verify(fuse(g, names, add, band_rows=min(band, height))), int(rng.integers(1, 3))


CASES: dict[str, Callable[[Rng], Case]] = {
    "conv2d": conv2d_case,
    "depthwise_conv2d": depthwise_conv2d_case,
    "fully_connected": fully_connected_case,
    "avg_pool2d": _pool_case("avg"),
    "max_pool2d": _pool_case("max"),
    "add": _binary_case("add"),
    "mul": _binary_case("mul"),
    "reshape": reshape_case,
    "softmax": softmax_case,
    "mean": mean_case,
    "pad": pad_case,
    "concat": concat_case,
    "quantize": quantize_case,
    "dequantize": dequantize_case,
    "relu": _activation_case("relu"),
    "relu6": _activation_case("relu6"),
    "stream_chain": stream_chain_case,
}

# Float outputs that accumulate (sum orders differ from the golden model's float64 BLAS):
# compared to a tolerance; every other output, int8 and float32, must match bit for bit.
ACCUMULATING_FLOAT_OPS = ("conv2d", "depthwise_conv2d", "fully_connected", "avg_pool2d",
                          "mean", "softmax")


def random_feeds(graph: Graph, batch: int, rng: Rng) -> dict[str, np.ndarray]:
    """Random values for the graph inputs, batch on axis 0 (int8 over the full range)."""
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        shape = batched(t.shape, batch)
        if t.dtype == "float32":
            v = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.uniform(0.2, 4))
            feeds[name] = v
        else:
            info = np.iinfo(t.dtype)
            feeds[name] = rng.integers(info.min, info.max + 1, size=shape, dtype=t.dtype)
    return feeds


def mismatches(op_type: str, got: np.ndarray, want: np.ndarray) -> int:
    """Number of output values that differ: bit for bit, except accumulating float ops
    (relative 1e-4 of the output's range, absolute 1e-5)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return max(got.size, want.size, 1)
    if got.dtype == np.float32 and op_type in ACCUMULATING_FLOAT_OPS:
        tol = 1e-5 + 1e-4 * float(np.max(np.abs(want), initial=0.0))
        return int(np.count_nonzero(~(np.abs(got - want) <= tol)))
    return int(np.count_nonzero(got.view(f"u{got.itemsize}") != want.view(f"u{want.itemsize}")))


def iter_cases(op_type: str, n: int, seed: int | None = None
               ) -> Iterator[tuple[Graph, dict[str, np.ndarray]]]:
    """``n`` random cases of one op: (graph, feeds with the batch on axis 0)."""
    rng = np.random.default_rng(sum(map(ord, op_type)) if seed is None else seed)
    for _ in range(n):
        graph, batch = CASES[op_type](rng)
        yield graph, random_feeds(graph, batch, rng)


def check_case(lib, graph: Graph, feeds: dict[str, np.ndarray]) -> tuple[int, int]:
    """(mismatching values, compared values) of one single-op case: C kernel vs golden."""
    from codegen import golden

    want = golden.run(graph, *[feeds[name] for name in graph.inputs])[0]
    got = lib.run_graph(graph, feeds)[0]
    return mismatches(graph.ops[0].type, got, want), want.size
