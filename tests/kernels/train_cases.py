"""Random single-op training graphs for the training-kernel tests: every training op of
docs/training.md in both backward modes, general in shape.

``TRAIN_CASES[op_type](rng, mode) -> (graph, values)``: a graph holding one training op named
"op" (attributes as codegen.train sets them) and one value per op input (``None`` for an
absent ``""`` input; masks as bool arrays, exponents as int32 ``(1,)``), or ``None`` when the
op has no kernel in that mode (FP32_ONLY: adam_update, pool_conv_grad in int8 mode).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from codegen.golden import train_loss as tl
from codegen.golden import train_optim as to
from codegen.ir import Graph, Op, QuantParams, Role, Tensor, conv_out_size, same_padding
from codegen.ir.ops import UPDATE_INPUTS

Rng = np.random.Generator
Case = tuple[Graph, list]
MODES = ("fp32", "int8")


class _Builder:
    """Tensors and input values of one single-op graph."""

    def __init__(self, mode: str):
        self.mode = mode
        self.int8 = mode == "int8"
        self.g = Graph("train_case")
        self.g.metadata["training"] = {"mode": mode}
        self.values: list = []
        self.inputs: list[str] = []

    def tensor(self, name: str, shape, dtype: str, role=Role.ACTIVATION, quant=None,
               data=None) -> str:
        self.g.add_tensor(Tensor(name, tuple(shape), dtype, role, quant, data))
        return name

    def add_input(self, name: str, shape, dtype: str, value, quant=None, role=Role.ACTIVATION,
                  const: bool = False) -> None:
        data = value if const else None
        self.tensor(name, shape, dtype, role, quant, data)
        self.inputs.append(name)
        self.values.append(value)

    def absent(self) -> None:
        self.inputs.append("")
        self.values.append(None)

    def grad_input(self, rng: Rng, name: str, shape) -> None:
        """A gradient input (and its exponent in int8 mode)."""
        if self.int8:
            q = rng.integers(-127, 128, size=shape).astype(np.int8)
            if rng.random() < 0.1:
                q[...] = 0
            elif rng.random() < 0.2:
                q = (q // 16).astype(np.int8)            # few significant bits
            self.add_input(name, shape, "int8", q, role=Role.GRADIENT)
            e = np.array([rng.integers(-24, 3)], np.int32)
            self.add_input(name + "_exp", (1,), "int32", e, role=Role.GRADIENT)
        else:
            v = (rng.standard_normal(size=shape) * 10.0 ** rng.uniform(-4, 1)).astype(np.float32)
            if v.size and rng.random() < 0.3:
                v.reshape(-1)[rng.integers(0, v.size, size=max(1, v.size // 8))] = -0.0
            self.add_input(name, shape, "float32", v, role=Role.GRADIENT)

    def grad_outputs(self, name: str, shape, dtype: str | None = None) -> list[str]:
        dt = dtype or ("int8" if self.int8 else "float32")
        outs = [self.tensor(name, shape, dt, Role.GRADIENT)]
        if self.int8:
            outs.append(self.tensor(name + "_exp", (1,), "int32", Role.GRADIENT))
        return outs

    def op(self, op_type: str, outputs: list[str], attrs: dict) -> Case:
        self.g.add_op(Op(op_type, "op", tuple(self.inputs), tuple(outputs), attrs))
        return self.g, self.values


def _act_q(rng: Rng, scale: float | None = None, zp: int | None = None) -> QuantParams:
    s = float(rng.uniform(0.005, 0.1)) if scale is None else scale
    z = int(rng.integers(-128, 128)) if zp is None else zp
    return QuantParams(np.float32(s), z)


def _int8(rng: Rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _weight_q(rng: Rng, n: int, axis: int, per_channel: bool) -> QuantParams:
    k = n if per_channel else 1
    scale = (10.0 ** rng.uniform(-3.3, -1.3, size=k)).astype(np.float32)
    return QuantParams(scale, np.zeros(k, np.int64), axis if per_channel else None)


def _geometry(rng: Rng, h: int, w: int, kh: int, kw: int, dilation: bool = True):
    stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dil = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if dilation and rng.random() < 0.4 \
        else (1, 1)
    kind = rng.choice(["same", "valid", "explicit"])
    if kind == "valid":
        pad = (0, 0, 0, 0)
    elif kind == "same":
        _, pt, pb = same_padding(h, kh, stride[0], dil[0])
        _, pl, pr = same_padding(w, kw, stride[1], dil[1])
        pad = (pt, pb, pl, pr)
    else:
        eh, ew = (kh - 1) * dil[0], (kw - 1) * dil[1]
        pad = (int(rng.integers(0, eh + 1)), int(rng.integers(0, eh + 1)),
               int(rng.integers(0, ew + 1)), int(rng.integers(0, ew + 1)))
    oh = conv_out_size(h, kh, stride[0], dil[0], pad[0], pad[1])
    ow = conv_out_size(w, kw, stride[1], dil[1], pad[2], pad[3])
    return stride, dil, pad, oh, ow


def _channels(rng: Rng, n: int):
    if rng.random() < 0.5:
        return None
    k = int(rng.integers(1, n + 1))
    return tuple(int(c) for c in np.sort(rng.choice(n, size=k, replace=False)))


# -- masks and losses -------------------------------------------------------------------------------
def _act_mask(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    shape = (1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 20)))
    b.add_input("y", shape, "int8", _int8(rng, shape), _act_q(rng))
    lo = int(rng.integers(-128, 60))
    hi = int(rng.integers(lo + 1, 128)) if rng.random() < 0.7 else 127
    out = b.tensor("mask", shape, "bit")
    return b.op("act_mask", [out], {"lo": lo, "hi": hi, "forward": "f"})


def _mask_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    shape = (1, int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 19)))
    b.grad_input(rng, "dy", shape)
    b.add_input("mask", shape, "bit", rng.random(shape) < rng.uniform(0, 1))
    return b.op("mask_grad", b.grad_outputs("dx", shape), {"mode": mode, "forward": "f"})


def _cross_entropy(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    c = int(rng.choice([2, 3, 10, int(rng.integers(2, 40)), int(rng.integers(40, 1001))]))
    q = _act_q(rng, float(10.0 ** rng.uniform(-2.5, -0.3)))
    logits = _int8(rng, (1, c))
    if rng.random() < 0.3:                                # confident: one large logit
        logits[0, rng.integers(0, c)] = 127
    beta = float(rng.choice([1.0, 1.0, 0.5, 2.0, float(rng.uniform(0.1, 3.0))]))
    b.add_input("logits", (1, c), "int8", logits, q)
    label = int(rng.integers(0, c))
    b.add_input("label", (1,), "int32", np.array([label], np.int32))
    table = tl.exp_table(q.s, beta) if mode == "fp32" else tl.neglog_table()
    b.add_input("table", (256,), "float32", table, role=Role.CONSTANT, const=True)
    outs = [b.tensor("loss", (1,), "float32")] + b.grad_outputs("dlogits", (1, c))
    return b.op("softmax_cross_entropy", outs, {"mode": mode, "beta": beta})


def _mse(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    shape = (1, int(rng.integers(1, 30))) if rng.random() < 0.5 else \
        (1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 4)))
    q = _act_q(rng)
    y = _int8(rng, shape)
    t = y.copy() if rng.random() < 0.1 else _int8(rng, shape)
    b.add_input("y", shape, "int8", y, q)
    b.add_input("target", shape, "int8", t, q)
    outs = [b.tensor("loss", (1,), "float32")] + b.grad_outputs("dy", shape)
    return b.op("mse_loss", outs, {"mode": mode})


# -- layers with weights ----------------------------------------------------------------------------
def _conv_shapes(rng: Rng, depthwise: bool):
    n = int(rng.choice([1, 1, 2]))
    h, w = int(rng.integers(1, 10)), int(rng.integers(1, 10))
    kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    kh, kw = min(kh, h + 2), min(kw, w + 2)
    while True:
        stride, dil, pad, oh, ow = _geometry(rng, h, w, kh, kw)
        if oh > 0 and ow > 0:
            break
    if depthwise:
        c = int(rng.integers(1, 9))
        mult = int(rng.integers(1, 4))
        return n, h, w, c, kh, kw, stride, dil, pad, oh, ow, 1, mult
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    ci = int(rng.integers(1, 6))
    og = int(rng.integers(1, 5))
    if rng.random() < 0.1:                 # wide layers: fewer prescale bits (int8 mode)
        groups, ci, og = 1, int(rng.integers(8, 33)), int(rng.integers(16, 97))
    return n, h, w, ci * groups, kh, kw, stride, dil, pad, oh, ow, groups, og * groups


def _conv_attrs(mode: str, stride, dil, pad) -> dict:
    return {"mode": mode, "forward": "f", "stride": stride, "dilation": dil, "padding": pad,
            "activation": "none"}


def _conv_grad_input(rng: Rng, mode: str, depthwise: bool = False) -> Case:
    b = _Builder(mode)
    n, h, w, c, kh, kw, stride, dil, pad, oh, ow, groups, o = _conv_shapes(rng, depthwise)
    if depthwise:
        mult = o
        o = c * mult
        w_shape = (1, kh, kw, o)
        axis = 3
    else:
        w_shape = (o, kh, kw, c // groups)
        axis = 0
    b.grad_input(rng, "dy", (n, oh, ow, o))
    wq = _weight_q(rng, o, axis, rng.random() < 0.8)
    b.add_input("w", w_shape, "int8", rng.integers(-127, 128, size=w_shape).astype(np.int8),
                wq, Role.WEIGHT, const=True)
    attrs = _conv_attrs(mode, stride, dil, pad)
    if depthwise:
        attrs["depth_multiplier"] = mult
    kind = "depthwise_conv2d" if depthwise else "conv2d"
    return b.op(f"{kind}_grad_input", b.grad_outputs("dx", (n, h, w, c)), attrs)


def _conv_grad_weight(rng: Rng, mode: str, depthwise: bool = False) -> Case:
    b = _Builder(mode)
    n, h, w, c, kh, kw, stride, dil, pad, oh, ow, groups, o = _conv_shapes(rng, depthwise)
    if depthwise:
        mult = o
        o = c * mult
    b.add_input("x", (n, h, w, c), "int8", _int8(rng, (n, h, w, c)), _act_q(rng))
    b.grad_input(rng, "dy", (n, oh, ow, o))
    ch = _channels(rng, o)
    k = o if ch is None else len(ch)
    attrs = _conv_attrs(mode, stride, dil, pad)
    attrs["channels"] = ch
    if depthwise:
        attrs["depth_multiplier"] = mult
        dw_shape = (1, kh, kw, k)
    else:
        dw_shape = (k, kh, kw, c // groups)
    kind = "depthwise_conv2d" if depthwise else "conv2d"
    outs = b.grad_outputs("dw", dw_shape, "int32" if b.int8 else None)
    return b.op(f"{kind}_grad_weight", outs, attrs)


def _fc_grad_input(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    rows = int(rng.choice([1, 1, 2, 3]))
    depth, units = int(rng.integers(1, 40)), int(rng.integers(1, 20))
    if rng.random() < 0.1:                 # many classes: fewer prescale bits (int8 mode)
        units = int(rng.integers(500, 1500))
    x_shape = (rows, depth) if rng.random() < 0.6 or rows > 1 else (1, 1, 1, depth)
    b.grad_input(rng, "dy", (rows, units))
    wq = _weight_q(rng, units, 0, rng.random() < 0.8)
    b.add_input("w", (units, depth), "int8",
                rng.integers(-127, 128, size=(units, depth)).astype(np.int8), wq, Role.WEIGHT,
                const=True)
    return b.op("fully_connected_grad_input", b.grad_outputs("dx", x_shape),
                {"mode": mode, "forward": "f"})


def _fc_grad_weight(rng: Rng, mode: str, wide: bool = False) -> Case:
    """``wide``: inputs over one or more 128-value vectors (the hvx kernel's steps)."""
    b = _Builder(mode)
    rows = int(rng.choice([1, 1, 2, 3]))
    depth, units = int(rng.integers(1, 40)), int(rng.integers(1, 20))
    if wide:
        depth, units = int(rng.choice([100, 128, 130, 260])), int(rng.integers(1, 12))
        rows = int(rng.choice([1, 1, 2]))
    b.add_input("x", (rows, depth), "int8", _int8(rng, (rows, depth)), _act_q(rng))
    b.grad_input(rng, "dy", (rows, units))
    ch = _channels(rng, units)
    k = units if ch is None else len(ch)
    outs = b.grad_outputs("dw", (k, depth), "int32" if b.int8 else None)
    return b.op("fully_connected_grad_weight", outs, {"mode": mode, "forward": "f",
                                                      "channels": ch})


def _bias_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    shape = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(1, 5))))
    b.grad_input(rng, "dy", shape)
    outs = b.grad_outputs("db", (shape[-1],), "int32" if b.int8 else None)
    return b.op("bias_grad", outs, {"mode": mode, "forward": "f"})


# -- pooling ------------------------------------------------------------------------------------------
def _pool_grad(rng: Rng, mode: str, kind: str) -> Case:
    while True:
        b = _Builder(mode)
        n = int(rng.choice([1, 1, 2]))
        h, w, c = int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 6))
        fh, fw = int(rng.integers(1, min(h, 4) + 1)), int(rng.integers(1, min(w, 4) + 1))
        stride, _, pad, oh, ow = _geometry(rng, h, w, fh, fw, dilation=False)
        if oh <= 0 or ow <= 0:
            continue
        if any(o * stride[0] - pad[0] >= h or o * stride[0] - pad[0] + fh <= 0
               for o in range(oh)) or any(o * stride[1] - pad[2] >= w
                                          or o * stride[1] - pad[2] + fw <= 0 for o in range(ow)):
            continue                                   # a window entirely in the padding
        break
    b.grad_input(rng, "dy", (n, oh, ow, c))
    if kind == "max":
        x = _int8(rng, (n, h, w, c))
        if rng.random() < 0.5:                          # many ties
            x = (x // 64).astype(np.int8)
        b.add_input("x", (n, h, w, c), "int8", x, _act_q(rng))
    attrs = {"mode": mode, "forward": "f", "filter": (fh, fw), "stride": stride,
             "padding": pad, "activation": "none"}
    return b.op(f"{kind}_pool2d_grad", b.grad_outputs("dx", (n, h, w, c)), attrs)


# -- broadcasting ---------------------------------------------------------------------------------------
def _bcast_shape(rng: Rng, y_shape) -> tuple[int, ...]:
    """A shape that broadcasts to y_shape with at least one broadcast axis when possible."""
    r = len(y_shape)
    lead = int(rng.integers(0, r))
    s = [1 if rng.random() < 0.5 else d for d in y_shape[lead:]]
    return tuple(s)


def _add_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    y = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(2, 5))))
    x = _bcast_shape(rng, y)
    b.grad_input(rng, "dy", y)
    return b.op("add_grad", b.grad_outputs("dx", x), {"mode": mode, "forward": "f",
                                                      "input": int(rng.integers(0, 2))})


def _mul_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    y = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(2, 5))))
    x = list(_bcast_shape(rng, y))
    lead = len(y) - len(x)
    # the other factor is full wherever x was broadcast (so that together they make y)
    other = [d if (i < lead or x[i - lead] == 1) else (1 if rng.random() < 0.5 else d)
             for i, d in enumerate(y)]
    b.grad_input(rng, "dy", y)
    b.add_input("other", tuple(other), "int8", _int8(rng, tuple(other)), _act_q(rng))
    return b.op("mul_grad", b.grad_outputs("dx", tuple(x)), {"mode": mode, "forward": "f",
                                                              "input": 0})


def _mean_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    x = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(2, 5))))
    k = int(rng.integers(1, len(x) + 1))
    axes = tuple(sorted(int(a) for a in rng.choice(len(x), size=k, replace=False)))
    keep = bool(rng.random() < 0.5)
    dy = tuple(1 if i in axes else d for i, d in enumerate(x)) if keep else \
        tuple(d for i, d in enumerate(x) if i not in axes)
    b.grad_input(rng, "dy", dy)
    return b.op("mean_grad", b.grad_outputs("dx", x), {"mode": mode, "forward": "f",
                                                       "axes": axes, "keep_dims": keep})


# -- data movement --------------------------------------------------------------------------------------
def _pad_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    x = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(1, 5))))
    pads = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in x)
    y = tuple(d + p0 + p1 for d, (p0, p1) in zip(x, pads))
    b.grad_input(rng, "dy", y)
    return b.op("pad_grad", b.grad_outputs("dx", x), {"mode": mode, "forward": "f",
                                                      "pads": pads})


def _concat_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    y = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(1, 5))))
    axis = int(rng.integers(0, len(y)))
    size = int(rng.integers(1, y[axis] + 1))
    begin = int(rng.integers(0, y[axis] - size + 1))
    x = tuple(size if i == axis else d for i, d in enumerate(y))
    b.grad_input(rng, "dy", y)
    return b.op("concat_grad", b.grad_outputs("dx", x), {"mode": mode, "forward": "f",
                                                         "axis": axis, "begin": begin})


def _reshape_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    y = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(1, 5))))
    n = int(np.prod(y))
    x = (1, n) if rng.random() < 0.5 else (n,)
    b.grad_input(rng, "dy", y)
    return b.op("reshape_grad", b.grad_outputs("dx", x), {"mode": mode, "forward": "f"})


def _softmax_grad(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    shape = (int(rng.integers(1, 4)), int(rng.integers(1, 40)))
    beta = float(rng.choice([1.0, 0.5, float(rng.uniform(0.1, 3.0))]))
    b.grad_input(rng, "dy", shape)
    q = _act_q(rng, 1.0 / 256, -128) if b.int8 or rng.random() < 0.5 else _act_q(rng)
    b.add_input("y", shape, "int8", _int8(rng, shape), q)
    return b.op("softmax_grad", b.grad_outputs("dx", shape), {"mode": mode, "forward": "f",
                                                              "beta": beta})


def _grad_add(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    shape = tuple(int(d) for d in rng.integers(1, 7, size=int(rng.integers(1, 5))))
    b.grad_input(rng, "g1", shape)
    b.grad_input(rng, "g2", shape)
    if b.int8 and rng.random() < 0.3:                  # exponents far apart
        b.values[1][0] = b.values[3][0] + int(rng.integers(-40, 41))
    return b.op("grad_add", b.grad_outputs("g", shape), {"mode": mode})


def _pool_conv_grad(rng: Rng, mode: str) -> Case | None:
    """A classifier head's fused backward (fp32 only): a global pool's gradient, a ReLU
    mask of any density, a 1x1 filter per tensor or per channel."""
    if mode == "int8":
        return None
    b = _Builder(mode)
    n, h, w = int(rng.choice([1, 1, 2])), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    o, c = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    b.grad_input(rng, "g", (n, 1, 1, o))
    b.add_input("mask", (n, h, w, o), "bit", rng.random((n, h, w, o)) < rng.uniform(0, 1))
    wq = _weight_q(rng, o, 0, rng.random() < 0.8)
    b.add_input("w", (o, 1, 1, c), "int8", rng.integers(-127, 128, size=(o, 1, 1, c))
                .astype(np.int8), wq, Role.WEIGHT, const=True)
    outs = [b.tensor("dx", (n, h, w, c), "float32", Role.GRADIENT),
            b.tensor("db", (o,), "float32", Role.GRADIENT)]
    return b.op("pool_conv_grad", outs, {"mode": mode, "forward": "f"})


def _merge_channels(rng: Rng, mode: str) -> Case:
    """A partial trainable weight put back together (codegen.partial): conv OHWI or FC
    (O, I), any subset of at least one trained and one frozen row, runs of every length."""
    b = _Builder(mode)
    n = int(rng.integers(2, 40))
    rest = tuple(int(d) for d in rng.integers(1, 5, size=int(rng.choice([1, 3]))))
    k = int(rng.integers(1, n))
    ch = tuple(sorted(int(c) for c in rng.choice(n, size=k, replace=False)))
    w = _int8(rng, (n, *rest))
    mask = np.isin(np.arange(n), ch)
    b.add_input("trained", (k, *rest), "int8", w[mask], role=Role.WEIGHT)
    b.add_input("frozen", (n - k, *rest), "int8", w[~mask], role=Role.CONSTANT, const=True)
    out = b.tensor("merged", (n, *rest), "int8", Role.WEIGHT)
    return b.op("merge_channels", [out], {"channels": ch, "axis": 0})


# -- updates ---------------------------------------------------------------------------------------------
_PARAM_KINDS = (("weight", (5, 3, 3, 4), 0), ("weight", (1, 3, 3, 6), 3), ("weight", (7, 9), 0),
                ("bias", (6,), 0))


def _update(rng: Rng, mode: str, kind: str, kinds=_PARAM_KINDS) -> Case | None:
    """An update of a parameter of one of ``kinds`` ((role, shape, channel axis) each)."""
    if kind == "adam_update" and mode == "int8":
        return None
    b = _Builder(mode)
    role, shape, axis = kinds[int(rng.integers(0, len(kinds)))]
    shape = tuple(int(rng.integers(1, 6)) if i != axis else d for i, d in enumerate(shape)) \
        if rng.random() < 0.5 else shape
    n = shape[axis]
    ch = _channels(rng, n)
    k = n if ch is None else len(ch)
    gshape = tuple(k if i == axis else d for i, d in enumerate(shape))
    is_bias = role == "bias"
    ptype = "int32" if is_bias else "int8"
    if is_bias:
        p = rng.integers(-30000, 30000, size=shape).astype(np.int32)
        if rng.random() < 0.2:
            p[...] = rng.choice([2**31 - 1, -2**31, 2**31 - 5, -2**31 + 3], size=shape)
    else:
        p = rng.integers(-127, 128, size=shape).astype(np.int8)
    momentum = float(rng.choice([0.0, 0.9, float(rng.uniform(0.0, 0.99))])) \
        if kind == "sgd_update" else 0.0
    master = rng.random() < 0.4
    slots: dict[str, tuple] = {"param": (shape, ptype, p, Role.BIAS if is_bias else Role.WEIGHT)}
    lr = float(10.0 ** rng.uniform(-4, -1))
    attrs = {"mode": mode, "lr": lr, "channels": ch, "channel_axis": axis, "accumulate": 1,
             "forward": "f", "kind": role}
    if is_bias and rng.random() < 0.5:         # a forward-safe bias range (bias_limit)
        limit = int(rng.choice([int(rng.integers(20000, 40000)), 2**31 - 1 - 127 * 255 * 9,
                                2**31 - 1]))
        attrs["bias_limit"] = limit
        if rng.random() < 0.3:
            p[...] = rng.choice([limit, -limit, limit - 3], size=shape)
    if b.int8:
        acc = rng.integers(-(1 << 20), 1 << 20, size=gshape).astype(np.int32)
        if rng.random() < 0.2:
            acc = rng.integers(-(2**31), 2**31, size=gshape).astype(np.int32)
        slots["grad"] = (gshape, "int32", acc, Role.GRADIENT)
        scale_m = rng.integers(1 << 30, (1 << 31) - 1, size=k).astype(np.int32)
        shifts = rng.integers(-30, 2, size=k).astype(np.int32)
        slots["qas"] = ((k,), "int32", scale_m, Role.CONSTANT)
        slots["grad_exp"] = ((1,), "int32", np.array([rng.integers(-30, 10)], np.int32),
                             Role.GRADIENT)
        slots["qas_shift"] = ((k,), "int32", shifts, Role.CONSTANT)
        if momentum > 0:
            slots["buf1"] = (gshape, "int32",
                             rng.integers(-(1 << 24), 1 << 24, size=gshape).astype(np.int32),
                             Role.OPTIMIZER_STATE)
        attrs["momentum"] = momentum
        if master:
            f = int(rng.choice([to.MASTER_FRAC_BITS, int(rng.integers(1, 24))]))
            attrs["master_frac_bits"] = f
            if is_bias:
                m0 = rng.integers(-(1 << (f - 1)), (1 << (f - 1)) + 1, size=gshape)
            else:
                m0 = rng.integers(-(127 << f), (127 << f) + 1, size=gshape)
            slots["master"] = (gshape, "int32", m0.astype(np.int32), Role.OPTIMIZER_STATE)
    else:
        g = (rng.standard_normal(size=gshape) * 10.0 ** rng.uniform(-3, 1)).astype(np.float32)
        slots["grad"] = (gshape, "float32", g, Role.GRADIENT)
        qas = (10.0 ** rng.uniform(0, 6, size=k)).astype(np.float32)
        slots["qas"] = ((k,), "float32", qas, Role.CONSTANT)
        if kind == "sgd_update":
            attrs["momentum"] = momentum
            if momentum > 0:
                slots["buf1"] = (gshape, "float32",
                                 rng.standard_normal(size=gshape).astype(np.float32),
                                 Role.OPTIMIZER_STATE)
        else:
            attrs.update(beta1=float(rng.choice([0.9, rng.uniform(0.5, 0.99)])),
                         beta2=float(rng.choice([0.999, rng.uniform(0.9, 0.9999)])),
                         eps=float(rng.choice([1e-8, 1e-6, 1e-3])))
            slots["buf1"] = (gshape, "float32",
                             (rng.standard_normal(size=gshape) * 0.1).astype(np.float32),
                             Role.OPTIMIZER_STATE)
            slots["buf2"] = (gshape, "float32",
                             (rng.random(size=gshape) * 0.1).astype(np.float32),
                             Role.OPTIMIZER_STATE)
            t = int(rng.integers(0, 50))
            slots["pows"] = ((2,), "float32",
                             np.array([np.float32(attrs["beta1"]) ** t,
                                       np.float32(attrs["beta2"]) ** t], np.float32),
                             Role.OPTIMIZER_STATE)
        if master:
            m0 = p[tuple(np.asarray(ch) if ch is not None and i == axis else slice(None)
                         for i in range(len(shape)))].astype(np.float32)
            m0 = m0 + (rng.random(size=gshape) - 0.5).astype(np.float32)
            slots["master"] = (gshape, "float32", m0.astype(np.float32), Role.OPTIMIZER_STATE)
        if rng.random() < 0.3:
            slots["lr"] = ((1,), "float32", np.array([lr * 0.5], np.float32),
                           Role.OPTIMIZER_STATE)
        if rng.random() < 0.3:
            acc_k = int(rng.integers(2, 5))
            attrs["accumulate"] = acc_k
            slots["accum"] = (gshape, "float32",
                              rng.standard_normal(size=gshape).astype(np.float32),
                              Role.OPTIMIZER_STATE)
            slots["step"] = ((1,), "int32", np.array([rng.integers(0, 20)], np.int32),
                             Role.OPTIMIZER_STATE)
    if rng.random() < 0.9:                 # the saturation counter (NULL otherwise)
        count = int(rng.choice([0, int(rng.integers(0, 1000)), 2**31 - 1,
                                2**31 - 1 - int(rng.integers(0, 4))]))
        slots["saturated"] = ((1,), "int32", np.array([count], np.int32),
                              Role.OPTIMIZER_STATE)
    updates = []
    for slot in UPDATE_INPUTS:
        if slot not in slots:
            b.absent()
            continue
        sh, dt, val, role_ = slots[slot]
        name = f"s_{slot}"
        b.add_input(name, sh, dt, val, role=role_)
        if slot in ("param", "buf1", "buf2", "master", "accum", "saturated"):
            updates.append(name)
    attrs["updates"] = tuple(updates)
    return b.op(kind, [], attrs)


def _step_counter(rng: Rng, mode: str) -> Case:
    b = _Builder(mode)
    b.add_input("step", (1,), "int32", np.array([rng.integers(0, 100)], np.int32),
                role=Role.OPTIMIZER_STATE)
    updates = ["step"]
    sched = "constant"
    attrs: dict = {"accumulate": 1}
    if mode == "fp32":
        sched = str(rng.choice(["constant", "step", "warmup", "cosine"]))
        attrs["accumulate"] = int(rng.choice([1, 1, 2, 3]))
        if sched != "constant":
            b.add_input("lr_t", (1,), "float32",
                        np.array([rng.uniform(1e-4, 1e-1)], np.float32),
                        role=Role.OPTIMIZER_STATE)
            updates.append("lr_t")
        else:
            b.absent()
        if rng.random() < 0.5:
            b1, b2 = float(rng.uniform(0.5, 0.99)), float(rng.uniform(0.9, 0.9999))
            b.add_input("pows", (2,), "float32",
                        np.array([rng.uniform(0, 1), rng.uniform(0, 1)], np.float32),
                        role=Role.OPTIMIZER_STATE)
            updates.append("pows")
            attrs.update(beta1=b1, beta2=b2)
    attrs.update(updates=tuple(updates), schedule=sched, lr=float(rng.uniform(1e-4, 1e-1)),
                 gamma=float(rng.uniform(0.1, 0.99)), step_size=int(rng.integers(1, 5)),
                 warmup_steps=int(rng.integers(1, 10)))
    if sched == "cosine":
        total = int(rng.integers(1, 40))
        attrs.update(total_steps=total, warmup_steps=int(rng.integers(0, min(total, 10))),
                     min_lr=float(rng.choice([0.0, attrs["lr"] * rng.uniform(0, 0.5)])))
        # a step in warmup, decay or past total_steps (updates u <= total + 2)
        b.values[0][0] = rng.integers(0, (total + 3) * attrs["accumulate"])
    return b.op("step_counter", [], attrs)


def step_counter_case(step: int, lr_t: float, attrs: dict) -> Case:
    """An fp32 step_counter with an lr_t state (no Adam powers), ``attrs`` as given."""
    b = _Builder("fp32")
    b.add_input("step", (1,), "int32", np.array([step], np.int32), role=Role.OPTIMIZER_STATE)
    b.add_input("lr_t", (1,), "float32", np.array([lr_t], np.float32),
                role=Role.OPTIMIZER_STATE)
    b.absent()
    return b.op("step_counter", [], {"updates": ("step", "lr_t"), **attrs})


TRAIN_CASES: dict[str, Callable[[Rng, str], Case | None]] = {
    "act_mask": _act_mask,
    "mask_grad": _mask_grad,
    "softmax_cross_entropy": _cross_entropy,
    "mse_loss": _mse,
    "conv2d_grad_input": _conv_grad_input,
    "conv2d_grad_weight": _conv_grad_weight,
    "depthwise_conv2d_grad_input": lambda r, m: _conv_grad_input(r, m, True),
    "depthwise_conv2d_grad_weight": lambda r, m: _conv_grad_weight(r, m, True),
    "fully_connected_grad_input": _fc_grad_input,
    "fully_connected_grad_weight": _fc_grad_weight,
    "bias_grad": _bias_grad,
    "avg_pool2d_grad": lambda r, m: _pool_grad(r, m, "avg"),
    "max_pool2d_grad": lambda r, m: _pool_grad(r, m, "max"),
    "add_grad": _add_grad,
    "mul_grad": _mul_grad,
    "mean_grad": _mean_grad,
    "pad_grad": _pad_grad,
    "concat_grad": _concat_grad,
    "reshape_grad": _reshape_grad,
    "softmax_grad": _softmax_grad,
    "grad_add": _grad_add,
    "sgd_update": lambda r, m: _update(r, m, "sgd_update"),
    "adam_update": lambda r, m: _update(r, m, "adam_update"),
    "step_counter": _step_counter,
    "merge_channels": _merge_channels,
    "pool_conv_grad": _pool_conv_grad,
}
# ops with an fp32 kernel only (their builders return None in int8 mode)
FP32_ONLY = frozenset({"adam_update", "pool_conv_grad"})
