"""Random backward cases for the native backend's fp32 training kernels: the arm backend's
(tests/backends/arm_train_cases.py: pointwise and k x k convolutions, FC layers, depthwise
input gradients, pooling, masks) and the general ones of tests/kernels/train_cases.py, plus
layers wide enough for several vectors and tiles of positions and trained channels (channel
counts that are and are not multiples of 16 and 8; input gradients over frozen filters, whose
dequantised weights are compile-time constants, and over trained ones), masks and sums long
enough for the vector loops, and gradients holding -0.0 (and infinities and NaN for the
element-wise kernels and the updates): their sums must keep the golden model's bits too.
``iter_cases(op_type, n, seed)`` yields (graph, inputs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from codegen.backends import native
from codegen.golden.train_optim import param_limits
from codegen.ir import Graph, Role
from tests.backends import arm_train_cases
from tests.kernels import train_cases as tc

Rng = np.random.Generator
OPS = tuple(sorted(native.GRAD_BUILDERS))


ELEMENTWISE = ("mask_grad", "grad_add", "bias_grad", "sgd_update")


def _specials(rng: Rng, inputs: list, graph: Graph) -> list:
    """Some float32 gradient inputs with -0.0 in a few places, and, for the element-wise
    kernels (and the updates: a NaN step leaves a weight at 0, an infinite one saturates it),
    +-inf and NaN too (the golden model multiplies a convolution's padding taps by
    0 where the C kernels skip them: the same sums for finite gradients, not for infinite
    ones)."""
    pool = np.array([-0.0, np.inf, -np.inf, np.nan] if graph.ops[0].type in ELEMENTWISE
                    else [-0.0], np.float32)
    out = list(inputs)
    for i, name in enumerate(graph.ops[0].inputs):
        t = graph.tensors.get(name) if name else None
        if t is None or t.dtype != "float32" or t.role != Role.GRADIENT or rng.random() < 0.5:
            continue
        v = np.array(out[i], np.float32, copy=True)
        if v.size:
            flat = v.reshape(-1)
            at = rng.integers(0, v.size, size=max(1, v.size // 50))
            flat[at] = rng.choice(pool, size=at.size)
        out[i] = v
    return out


def _conv_wide(rng: Rng, weight: bool) -> tc.Case:
    b = tc._Builder("fp32")
    n = int(rng.choice([1, 2]))
    h, w = int(rng.integers(2, 9)), int(rng.integers(2, 12))
    c, o = int(rng.choice([8, 16, 17, 24, 32, 40, 64, 70])), int(rng.choice([8, 16, 33, 64]))
    k = (1, 1) if rng.random() < 0.4 else (int(rng.choice([1, 3])), int(rng.choice([3, 5])))
    while True:
        stride, dil, pad, oh, ow = tc._geometry(rng, h, w, k[0], k[1])
        if oh > 0 and ow > 0:
            break
    if weight:
        b.add_input("x", (n, h, w, c), "int8", tc._int8(rng, (n, h, w, c)), tc._act_q(rng))
        b.grad_input(rng, "dy", (n, oh, ow, o))
        ch = tc._channels(rng, o)
        kk = o if ch is None else len(ch)
        attrs = tc._conv_attrs("fp32", stride, dil, pad)
        attrs["channels"] = ch
        return b.op("conv2d_grad_weight", b.grad_outputs("dw", (kk, k[0], k[1], c)), attrs)
    b.grad_input(rng, "dy", (n, oh, ow, o))
    wq = tc._weight_q(rng, o, 0, rng.random() < 0.8)
    b.add_input("w", (o, k[0], k[1], c), "int8",
                rng.integers(-127, 128, (o, k[0], k[1], c)).astype(np.int8), wq, Role.WEIGHT,
                const=rng.random() < 0.5)            # frozen (w_r a constant) or trained
    return b.op("conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)),
                tc._conv_attrs("fp32", stride, dil, pad))


def _fc_wide(rng: Rng, weight: bool) -> tc.Case:
    b = tc._Builder("fp32")
    rows, depth = int(rng.choice([1, 2, 4, 5])), int(rng.choice([64, 100, 250, 640]))
    units = int(rng.choice([10, 16, 64, 128, 200]))
    if weight:
        b.add_input("x", (rows, depth), "int8", tc._int8(rng, (rows, depth)), tc._act_q(rng))
        b.grad_input(rng, "dy", (rows, units))
        ch = tc._channels(rng, units)
        k = units if ch is None else len(ch)
        return b.op("fully_connected_grad_weight", b.grad_outputs("dw", (k, depth)),
                    {"mode": "fp32", "forward": "f", "channels": ch})
    b.grad_input(rng, "dy", (rows, units))
    wq = tc._weight_q(rng, units, 0, rng.random() < 0.8)
    b.add_input("w", (units, depth), "int8",
                rng.integers(-127, 128, (units, depth)).astype(np.int8), wq, Role.WEIGHT,
                const=rng.random() < 0.5)
    return b.op("fully_connected_grad_input", b.grad_outputs("dx", (rows, depth)),
                {"mode": "fp32", "forward": "f"})


def _dw_wide(rng: Rng) -> tc.Case:
    b = tc._Builder("fp32")
    n, h, w = 1, int(rng.integers(2, 9)), int(rng.integers(2, 15))
    c = int(rng.choice([16, 32, 48, 64, 80, 96]))
    kh, kw = (3, 3) if rng.random() < 0.7 else (5, 5)
    stride = (int(rng.integers(1, 3)),) * 2
    pad = (kh // 2, kh // 2, kw // 2, kw // 2)
    oh = (h + 2 * (kh // 2) - kh) // stride[0] + 1
    ow = (w + 2 * (kw // 2) - kw) // stride[1] + 1
    b.grad_input(rng, "dy", (n, oh, ow, c))
    wq = tc._weight_q(rng, c, 3, rng.random() < 0.8)
    b.add_input("w", (1, kh, kw, c), "int8",
                rng.integers(-127, 128, (1, kh, kw, c)).astype(np.int8), wq, Role.WEIGHT,
                const=rng.random() < 0.5)
    attrs = tc._conv_attrs("fp32", stride, (1, 1), pad)
    attrs["depth_multiplier"] = 1
    return b.op("depthwise_conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)), attrs)


def _dw_narrow(rng: Rng) -> tc.Case:
    """Depthwise input gradients whose dy rows are 1 or 2 wide under a dilated kernel (stride
    1): four input columns can share no taps at both ends while one between has one."""
    while True:
        in_w, k, d = int(rng.integers(4, 8)), 3, int(rng.integers(2, 5))
        left, right = int(rng.integers(0, 2 * d)), int(rng.integers(0, 2 * d))
        ow = in_w + left + right - d * (k - 1)
        if 1 <= ow <= 2:
            break
    b = tc._Builder("fp32")
    h, c = int(rng.integers(1, 4)), int(rng.choice([8, 16, 20]))
    b.grad_input(rng, "dy", (1, h, ow, c))
    wq = tc._weight_q(rng, c, 3, True)
    b.add_input("w", (1, 1, k, c), "int8", rng.integers(-127, 128, (1, 1, k, c)).astype(np.int8),
                wq, Role.WEIGHT, const=rng.random() < 0.5)
    attrs = tc._conv_attrs("fp32", (1, 1), (1, d), (0, 0, left, right))
    attrs["depth_multiplier"] = 1
    return b.op("depthwise_conv2d_grad_input", b.grad_outputs("dx", (1, h, in_w, c)), attrs)


def _long(kind: str) -> Callable[[Rng], tc.Case]:
    """Elementwise ops over sizes around multiples of 64 (the vector loops and their tails)."""
    def build(rng: Rng) -> tc.Case:
        size = int(rng.choice([63, 64, 65, 128, 200, 1000]))
        b = tc._Builder("fp32")
        if kind == "act_mask":
            b.add_input("y", (1, size), "int8", tc._int8(rng, (1, size)), tc._act_q(rng))
            lo, hi = (-128, 127) if rng.random() < 0.4 else sorted(
                int(v) for v in rng.integers(-128, 128, 2))
            return b.op("act_mask", [b.tensor("mask", (1, size), "bit")],
                        {"lo": lo, "hi": hi, "forward": "f"})
        if kind == "bias_grad":
            rows, c = int(rng.integers(1, 40)), int(rng.choice([8, 16, 33, 64, 100]))
            b.grad_input(rng, "dy", (1, rows, 1, c))
            return b.op("bias_grad", b.grad_outputs("db", (c,)),
                        {"mode": "fp32", "forward": "f"})
        if kind == "grad_add":
            b.grad_input(rng, "g1", (1, size))
            b.grad_input(rng, "g2", (1, size))
            return b.op("grad_add", b.grad_outputs("g", (1, size)), {"mode": "fp32"})
        b.grad_input(rng, "dy", (1, size))
        bits = rng.random(size) < 0.6
        b.add_input("mask", (1, size), "bit", bits, role=Role.ACTIVATION)
        return b.op("mask_grad", b.grad_outputs("dx", (1, size)),
                    {"mode": "fp32", "forward": "f"})
    return build


def _sgd_wide(rng: Rng) -> tc.Case:
    """fp32 SGD on int8 weights of many values a channel (the vector loop), every variant:
    momentum, master copies, accumulation; learning rates that saturate some weights, and
    weights at -128."""
    while True:
        graph, inputs = tc.TRAIN_CASES["sgd_update"](rng, "fp32")
        param = graph.tensors[graph.ops[0].inputs[0]]
        if param.dtype == "int8" and int(np.prod(param.shape[1:])) >= 16:
            if rng.random() < 0.3:                 # -128 (saturates to -127, counted)
                inputs = list(inputs)
                w = np.array(inputs[0], np.int8, copy=True)
                w.reshape(-1)[rng.integers(0, w.size, size=max(1, w.size // 40))] = -128
                inputs[0] = w
            return graph, inputs


def _sgd_biases(rng: Rng) -> tc.Case:
    """fp32 SGD on int32 biases of many channels (the vector loop of plain SGD over every
    channel, and its tail), with and without master copies, near the bias limits."""
    while True:
        n = int(rng.choice([16, 17, 33, 64, 100]))
        case = tc._update(rng, "fp32", "sgd_update", kinds=(("bias", (n,), 0),))
        assert case is not None
        op = case[0].ops[0]
        slots = dict(zip(tc.UPDATE_INPUTS, op.inputs))
        plain = op.attrs["channels"] is None and op.attrs["accumulate"] == 1 and \
            not slots["buf1"]
        if plain or rng.random() < 0.2:
            return _bias_edges(rng, case)


def _bias_edges(rng: Rng, case: tc.Case) -> tc.Case:
    """Steps of about +-1 (round to +-1) on some biases set to the bounds (lo, hi and one
    inside them), and NaN / infinite gradients on some others."""
    graph, inputs = case
    op = graph.ops[0]
    if op.attrs["channels"] is not None:
        return case
    at = {n: i for i, n in enumerate(tc.UPDATE_INPUTS)}
    lo, hi = param_limits("int32", op.attrs.get("bias_limit"))
    param = np.array(inputs[at["param"]], np.int32, copy=True)
    grad = np.array(inputs[at["grad"]], np.float32, copy=True)
    qas = np.asarray(inputs[at["qas"]], np.float32)
    lr = float(op.attrs["lr"]) if not op.inputs[at["lr"]] else float(inputs[at["lr"]][0])
    n = param.size
    edge = rng.random(n) < 0.3
    param[edge] = rng.choice([lo, hi, lo + 1, hi - 1], size=int(edge.sum()))
    sign = rng.choice([-1.0, 1.0], size=n)
    grad[edge] = (sign[edge] / (lr * qas[edge].astype(np.float64))).astype(np.float32)
    odd = ~edge & (rng.random(n) < 0.1)
    grad[odd] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), size=int(odd.sum()))
    out = list(inputs)
    out[at["param"]], out[at["grad"]] = param, grad
    if op.inputs[at["master"]]:
        out[at["master"]] = param.astype(np.float32)
    return graph, out


def _general(op_type: str) -> Callable[[Rng], tc.Case]:
    return lambda rng: tc.TRAIN_CASES[op_type](rng, "fp32")


def _arm(op_type: str) -> Callable[[Rng], tc.Case]:
    return arm_train_cases.FAMILIES[op_type]


FAMILIES: dict[str, list[tuple[float, Callable[[Rng], tc.Case]]]] = {
    "conv2d_grad_input": [(0.3, _arm("conv2d_grad_input")), (0.2, _general("conv2d_grad_input")),
                          (0.5, lambda rng: _conv_wide(rng, False))],
    "conv2d_grad_weight": [(0.3, _arm("conv2d_grad_weight")),
                           (0.2, _general("conv2d_grad_weight")),
                           (0.5, lambda rng: _conv_wide(rng, True))],
    "fully_connected_grad_input": [(0.5, _arm("fully_connected_grad_input")),
                                   (0.5, lambda rng: _fc_wide(rng, False))],
    "fully_connected_grad_weight": [(0.5, _arm("fully_connected_grad_weight")),
                                    (0.5, lambda rng: _fc_wide(rng, True))],
    "depthwise_conv2d_grad_input": [(0.35, _arm("depthwise_conv2d_grad_input")),
                                    (0.2, _general("depthwise_conv2d_grad_input")),
                                    (0.35, _dw_wide), (0.1, _dw_narrow)],
    "avg_pool2d_grad": [(0.6, _arm("avg_pool2d_grad")), (0.4, _general("avg_pool2d_grad"))],
    "act_mask": [(0.5, _arm("act_mask")), (0.5, _long("act_mask"))],
    "mask_grad": [(0.5, _general("mask_grad")), (0.5, _long("mask_grad"))],
    "bias_grad": [(0.5, _general("bias_grad")), (0.5, _long("bias_grad"))],
    "grad_add": [(0.5, _general("grad_add")), (0.5, _long("grad_add"))],
    "sgd_update": [(0.25, _arm("sgd_update")), (0.3, _sgd_wide), (0.3, _sgd_biases),
                   (0.15, _general("sgd_update"))],
}


def iter_cases(op_type: str, n: int, seed: int = 0) -> Iterator[tuple[Graph, list]]:
    rng = np.random.default_rng(seed + 13 * sum(map(ord, op_type)))
    fams = FAMILIES[op_type]
    weights = np.array([w for w, _ in fams])
    for _ in range(n):
        graph, inputs = fams[int(rng.choice(len(fams), p=weights / weights.sum()))][1](rng)
        yield graph, _specials(rng, inputs, graph)
