"""Random int8-backward cases for the hvx backend's training kernels: the general int8 cases of
tests/kernels/train_cases.py (k x k convolutions with strides, padding and dilation, FC
layers, bias gradients, pooling) plus cases aimed at the hvx kernels' paths: pointwise and FC
input gradients over several 32-lane blocks of input channels, odd output channel counts (the
int16 pairs' padding), many output channels (a smaller prescale shift), weights marked as
trained (packed at run time); weight gradients over many positions (blocks of four) with
channel subsets, FC weight gradients of one and several rows over several 128-value steps; non-overlapping average pooling, global pooling of wide tensors among them.

``iter_cases(op_type, n, seed)`` yields (graph, inputs) of int8 cases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from codegen.backends.params import MUTABLE
from codegen.ir import Graph, Role
from tests.kernels import train_cases as tc

Rng = np.random.Generator


def _maybe_trained(rng: Rng, case: tc.Case, p: float = 0.4) -> tc.Case:
    graph, inputs = case
    if rng.random() < p:
        graph.metadata[MUTABLE] = ["w"]
    return graph, inputs


def _pointwise_grad_input(rng: Rng) -> tc.Case:
    b = tc._Builder("int8")
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 7)), int(rng.integers(1, 7))
    c = int(rng.choice([1, 7, 31, 32, 33, 64, 80]))
    o = int(rng.choice([1, 5, 12, 64, 65, 150]))
    b.grad_input(rng, "dy", (n, h, w, o))
    wq = tc._weight_q(rng, o, 0, rng.random() < 0.8)
    b.add_input("w", (o, 1, 1, c), "int8", rng.integers(-127, 128, (o, 1, 1, c)).astype(np.int8),
                wq, Role.WEIGHT, const=True)
    return _maybe_trained(rng, b.op("conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)),
                                    tc._conv_attrs("int8", (1, 1), (1, 1), (0, 0, 0, 0))))


def _conv_grad_input(rng: Rng) -> tc.Case:
    if rng.random() < 0.5:
        return _pointwise_grad_input(rng)
    return _maybe_trained(rng, tc.TRAIN_CASES["conv2d_grad_input"](rng, "int8"), 0.3)


def _fc_grad_input(rng: Rng) -> tc.Case:
    if rng.random() < 0.4:
        return _maybe_trained(rng, tc.TRAIN_CASES["fully_connected_grad_input"](rng, "int8"))
    b = tc._Builder("int8")
    rows, depth = int(rng.choice([1, 2, 5])), int(rng.choice([1, 16, 33, 64, 130]))
    units = int(rng.choice([2, 10, 12, 63, 140]))
    b.grad_input(rng, "dy", (rows, units))
    wq = tc._weight_q(rng, units, 0, rng.random() < 0.8)
    b.add_input("w", (units, depth), "int8",
                rng.integers(-127, 128, (units, depth)).astype(np.int8), wq, Role.WEIGHT,
                const=True)
    return _maybe_trained(rng, b.op("fully_connected_grad_input",
                                    b.grad_outputs("dx", (rows, depth)),
                                    {"mode": "int8", "forward": "f"}))


def _pointwise_grad_weight(rng: Rng) -> tc.Case:
    b = tc._Builder("int8")
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    c, o = int(rng.choice([1, 5, 32, 33, 64, 70])), int(rng.choice([1, 3, 12, 64]))
    b.add_input("x", (n, h, w, c), "int8", tc._int8(rng, (n, h, w, c)), tc._act_q(rng))
    b.grad_input(rng, "dy", (n, h, w, o))
    ch = tc._channels(rng, o)
    k = o if ch is None else len(ch)
    attrs = tc._conv_attrs("int8", (1, 1), (1, 1), (0, 0, 0, 0))
    attrs["channels"] = ch
    return b.op("conv2d_grad_weight", b.grad_outputs("dw", (k, 1, 1, c), "int32"), attrs)


def _conv_grad_weight(rng: Rng) -> tc.Case:
    if rng.random() < 0.5:
        return _pointwise_grad_weight(rng)
    return tc.TRAIN_CASES["conv2d_grad_weight"](rng, "int8")


def _bias_grad(rng: Rng) -> tc.Case:
    if rng.random() < 0.5:
        return tc.TRAIN_CASES["bias_grad"](rng, "int8")
    b = tc._Builder("int8")
    shape = (1, int(rng.integers(1, 30)), int(rng.integers(1, 6)),
             int(rng.choice([1, 12, 64, 130, 200])))
    b.grad_input(rng, "dy", shape)
    return b.op("bias_grad", b.grad_outputs("db", (shape[-1],), "int32"),
                {"mode": "int8", "forward": "f"})


def _avg_pool_grad(rng: Rng) -> tc.Case:
    """Non-overlapping windows (the hvx kernel; overlapping ones go to ref), global pooling of
    up to 130 channels among them."""
    b = tc._Builder("int8")
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 26)), int(rng.integers(1, 9))
    c = int(rng.choice([1, 5, 64, 130]))
    if rng.random() < 0.4:
        fh, fw, stride, pad = h, w, (h, w), (0, 0, 0, 0)
    else:
        fh, fw = int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1))
        stride = (fh + int(rng.integers(0, 2)), fw + int(rng.integers(0, 2)))
        pad = (0, int(rng.integers(0, fh)), 0, int(rng.integers(0, fw)))
    oh = (h + pad[0] + pad[1] - fh) // stride[0] + 1
    ow = (w + pad[2] + pad[3] - fw) // stride[1] + 1
    b.grad_input(rng, "dy", (n, oh, ow, c))
    attrs = {"mode": "int8", "forward": "f", "filter": (fh, fw), "stride": stride,
             "padding": pad, "activation": "none"}
    return b.op("avg_pool2d_grad", b.grad_outputs("dx", (n, h, w, c)), attrs)


def _act_mask(rng: Rng) -> tc.Case:
    """Sizes around multiples of 8 and of 128 (the bytes and the steps), any bounds."""
    b = tc._Builder("int8")
    shape = (1, int(rng.integers(1, 9)), int(rng.integers(1, 9)),
             int(rng.choice([1, 7, 8, 16, 64, 130])))
    b.add_input("y", shape, "int8", tc._int8(rng, shape), tc._act_q(rng))
    lo, hi = (-128, 127) if rng.random() < 0.3 else sorted(
        int(v) for v in rng.integers(-128, 128, 2))
    return b.op("act_mask", [b.tensor("mask", shape, "bit")],
                {"lo": lo, "hi": hi, "forward": "f"})


def _mask_grad(rng: Rng) -> tc.Case:
    while True:
        case = tc.TRAIN_CASES["mask_grad"](rng, "int8")
        if rng.random() < 0.5:
            return case
        b = tc._Builder("int8")                       # longer: several 128-value steps
        shape = (1, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.choice([64, 130])))
        b.grad_input(rng, "dy", shape)
        b.add_input("mask", shape, "bit", rng.random(shape) < rng.uniform(0, 1))
        return b.op("mask_grad", b.grad_outputs("dx", shape), {"mode": "int8", "forward": "f"})


def _sgd_update(rng: Rng) -> tc.Case:
    """int8-mode SGD on the general generator's int8 weights with channels of 16 entries or
    more (hvx's; biases and depthwise weights stay ref): with and without momentum and
    master, channel subsets, extreme gradients; a fifth any update (declined ones too)."""
    while True:
        case = tc.TRAIN_CASES["sgd_update"](rng, "int8")
        if case is None:
            continue
        graph, _ = case
        op = graph.ops[0]
        param = graph.tensors[op.inputs[0]]
        axis = int(op.attrs["channel_axis"])
        if rng.random() < 0.2 or int(np.prod(param.shape[axis + 1:], dtype=np.int64)) >= 16:
            return case


def _dw_grad_input(rng: Rng) -> tc.Case:
    """Depth multiplier 1 (the hvx kernel): channels around blocks of 64, every stride,
    padding and dilation; or the general generator's (other multipliers go to ref)."""
    if rng.random() < 0.3:
        return tc.TRAIN_CASES["depthwise_conv2d_grad_input"](rng, "int8")
    b = tc._Builder("int8")
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 10)), int(rng.integers(1, 10))
    c = int(rng.choice([1, 3, 16, 63, 64, 65, 130]))
    kh, kw = min(int(rng.choice([1, 3, 5])), h + 2), min(int(rng.choice([1, 3, 5])), w + 2)
    while True:
        stride, dil, pad, oh, ow = tc._geometry(rng, h, w, kh, kw)
        if oh > 0 and ow > 0:
            break
    b.grad_input(rng, "dy", (n, oh, ow, c))
    wq = tc._weight_q(rng, c, 3, rng.random() < 0.8)
    b.add_input("w", (1, kh, kw, c), "int8",
                rng.integers(-127, 128, (1, kh, kw, c)).astype(np.int8), wq, Role.WEIGHT,
                const=True)
    attrs = tc._conv_attrs("int8", stride, dil, pad)
    attrs["depth_multiplier"] = 1
    return b.op("depthwise_conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)), attrs)


def _dw_grad_weight(rng: Rng) -> tc.Case:
    """Depth multiplier 1: channels around blocks of 64, channel subsets, every geometry; or
    the general generator's."""
    if rng.random() < 0.3:
        return tc.TRAIN_CASES["depthwise_conv2d_grad_weight"](rng, "int8")
    b = tc._Builder("int8")
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    c = int(rng.choice([1, 5, 63, 64, 65, 130]))
    kh, kw = min(int(rng.choice([1, 3, 5])), h + 2), min(int(rng.choice([1, 3, 5])), w + 2)
    while True:
        stride, dil, pad, oh, ow = tc._geometry(rng, h, w, kh, kw)
        if oh > 0 and ow > 0:
            break
    b.add_input("x", (n, h, w, c), "int8", tc._int8(rng, (n, h, w, c)), tc._act_q(rng))
    b.grad_input(rng, "dy", (n, oh, ow, c))
    ch = tc._channels(rng, c)
    attrs = tc._conv_attrs("int8", stride, dil, pad)
    attrs["channels"] = ch
    attrs["depth_multiplier"] = 1
    k = c if ch is None else len(ch)
    return b.op("depthwise_conv2d_grad_weight",
                b.grad_outputs("dw", (1, kh, kw, k), "int32"), attrs)


FAMILIES: dict[str, Callable[[Rng], tc.Case]] = {
    "conv2d_grad_input": _conv_grad_input,
    "fully_connected_grad_input": _fc_grad_input,
    "depthwise_conv2d_grad_input": _dw_grad_input,
    "depthwise_conv2d_grad_weight": _dw_grad_weight,
    "conv2d_grad_weight": _conv_grad_weight,
    "fully_connected_grad_weight": lambda rng: tc._fc_grad_weight(
        rng, "int8", wide=rng.random() < 0.3),
    "bias_grad": _bias_grad,
    "avg_pool2d_grad": _avg_pool_grad,
    "act_mask": _act_mask,
    "mask_grad": _mask_grad,
    "sgd_update": _sgd_update,
}
OPS = tuple(FAMILIES)


def iter_cases(op_type: str, n: int, seed: int = 0) -> Iterator[tuple[Graph, list]]:
    rng = np.random.default_rng(seed + 13 * sum(map(ord, op_type)))
    for _ in range(n):
        yield FAMILIES[op_type](rng)
