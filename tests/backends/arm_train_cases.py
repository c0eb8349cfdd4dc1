"""Random backward cases for the arm backend's training kernels (fp32; int8 for the pointwise
input and weight gradients, the depthwise input gradient and the activation masks): the general cases of
tests/kernels/train_cases.py (most of which arm declines to ref) plus cases aimed at what it
takes: pointwise convs and FC layers wide enough for several blocks of eight input channels and
of 64 output channels, with and without channel subsets, many positions (blocks of four) and
remainders; depthwise input gradients with every stride and padding; non-overlapping average
pooling (global pooling included). ``iter_cases(op_type, n)`` yields (graph, inputs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from codegen.backends.params import MUTABLE
from codegen.ir import Graph, Role, same_padding
from tests.kernels import train_cases as tc

Rng = np.random.Generator


def _pointwise_grad_input(rng: Rng, mode: str = "fp32") -> tc.Case:
    """fp32, or int8 (arm: an even number of input channels; odd ones go to ref): positions
    odd and even in number, output channels not a multiple of eight."""
    b = tc._Builder(mode)
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 7)), int(rng.integers(1, 7))
    c, o = int(rng.integers(1, 40)), int(rng.integers(1, 150))
    if mode == "int8" and rng.random() < 0.85:
        c += c % 2
    b.grad_input(rng, "dy", (n, h, w, o))
    wq = tc._weight_q(rng, o, 0, rng.random() < 0.8)
    b.add_input("w", (o, 1, 1, c), "int8", rng.integers(-127, 128, (o, 1, 1, c)).astype(np.int8),
                wq, Role.WEIGHT, const=True)
    graph, inputs = b.op("conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)),
                         tc._conv_attrs(mode, (1, 1), (1, 1), (0, 0, 0, 0)))
    if mode == "int8" and rng.random() < 0.4:                # weights training changes
        graph.metadata[MUTABLE] = ["w"]
    return graph, inputs


def _pointwise_grad_input_edges(rng: Rng) -> tc.Case:
    """int8 pointwise input gradients whose rescale meets its edges: weight scales a power of
    two (every multiplier exactly 1/2, so the sums are known), and either
    - weights 3 * identity over dy = 2 (mod 4) values: results of +-k.5, rounding ties of both
      signs (RDBPOT rounds them away from zero), or
    - weights all one, five output channels, a position whose dy sums to -511 and one to +511
      (the largest): +-127.75, which rounds to +-128 and clamps to +-127."""
    b = tc._Builder("int8")
    n, h, w = 1, int(rng.integers(1, 4)), int(rng.integers(2, 6))
    ties = rng.random() < 0.5
    c = 2 * int(rng.integers(1, 6))
    o = 8 if ties else 5
    if ties:
        dy = (4 * rng.integers(-31, 32, (n, h, w, o)) + 2).astype(np.int8)
        dy.reshape(-1)[0] = -127
        wv = np.zeros((o, 1, 1, c), np.int8)
        for k in range(min(o, c)):
            wv[k, 0, 0, k] = 3
    else:
        dy = rng.integers(-20, 21, (n, h, w, o)).astype(np.int8)
        dy.reshape(-1, o)[0] = [-127, -127, -127, -127, -3]
        dy.reshape(-1, o)[-1] = [127, 127, 127, 127, 3]
        wv = np.ones((o, 1, 1, c), np.int8)
    b.add_input("dy", dy.shape, "int8", dy, role=Role.GRADIENT)
    b.add_input("dy_exp", (1,), "int32", np.array([-9], np.int32), role=Role.GRADIENT)
    wq = tc.QuantParams(np.full(o, 2.0 ** -8, np.float32), np.zeros(o, np.int64), 0)
    b.add_input("w", wv.shape, "int8", wv, wq, Role.WEIGHT, const=True)
    return b.op("conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)),
                tc._conv_attrs("int8", (1, 1), (1, 1), (0, 0, 0, 0)))


def _conv_grad_input(rng: Rng) -> tc.Case:
    """Pointwise (the fast paths, fp32 and int8; int8 rescale edges) or k x k with strides,
    padding and dilation, one group."""
    if rng.random() < 0.2:
        return _pointwise_grad_input_edges(rng)
    if rng.random() < 0.3:
        return _pointwise_grad_input(rng, "int8")
    if rng.random() < 0.5:
        return _pointwise_grad_input(rng)
    b = tc._Builder("fp32")
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 8)), int(rng.integers(1, 8))
    c, o = int(rng.integers(1, 20)), int(rng.integers(1, 90))
    kh, kw = min(int(rng.integers(1, 4)), h + 2), min(int(rng.integers(1, 4)), w + 2)
    while True:
        stride, dil, pad, oh, ow = tc._geometry(rng, h, w, kh, kw)
        if oh > 0 and ow > 0:
            break
    b.grad_input(rng, "dy", (n, oh, ow, o))
    wq = tc._weight_q(rng, o, 0, rng.random() < 0.8)
    b.add_input("w", (o, kh, kw, c), "int8",
                rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), wq, Role.WEIGHT,
                const=True)
    return b.op("conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)),
                tc._conv_attrs("fp32", stride, dil, pad))


def _pointwise_grad_weight(rng: Rng, mode: str = "fp32") -> tc.Case:
    b = tc._Builder(mode)
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 7)), int(rng.integers(1, 7))
    c, o = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    b.add_input("x", (n, h, w, c), "int8", tc._int8(rng, (n, h, w, c)), tc._act_q(rng))
    b.grad_input(rng, "dy", (n, h, w, o))
    ch = tc._channels(rng, o)
    k = o if ch is None else len(ch)
    attrs = tc._conv_attrs(mode, (1, 1), (1, 1), (0, 0, 0, 0))
    attrs["channels"] = ch
    return b.op("conv2d_grad_weight",
                b.grad_outputs("dw", (k, 1, 1, c), "int32" if b.int8 else None), attrs)


def _grad_weight(rng: Rng) -> tc.Case:
    """Pointwise weight gradients, fp32 or int8 (channel subsets or all)."""
    return _pointwise_grad_weight(rng, "int8" if rng.random() < 0.35 else "fp32")


def _fc_grad_input(rng: Rng) -> tc.Case:
    """fp32, or int8 (arm: an even depth; odd ones go to ref) with frozen or trained
    weights."""
    mode = "int8" if rng.random() < 0.4 else "fp32"
    b = tc._Builder(mode)
    rows, depth, units = int(rng.choice([1, 2, 5])), int(rng.integers(1, 50)), \
        int(rng.integers(1, 140))
    if mode == "int8" and rng.random() < 0.85:
        depth += depth % 2
    b.grad_input(rng, "dy", (rows, units))
    wq = tc._weight_q(rng, units, 0, rng.random() < 0.8)
    b.add_input("w", (units, depth), "int8",
                rng.integers(-127, 128, (units, depth)).astype(np.int8), wq, Role.WEIGHT,
                const=True)
    graph, inputs = b.op("fully_connected_grad_input", b.grad_outputs("dx", (rows, depth)),
                         {"mode": mode, "forward": "f"})
    if mode == "int8" and rng.random() < 0.4:                # weights training changes
        graph.metadata[MUTABLE] = ["w"]
    return graph, inputs


def _fc_grad_weight(rng: Rng) -> tc.Case:
    b = tc._Builder("fp32")
    rows, depth, units = int(rng.choice([1, 3, 4, 9])), int(rng.integers(1, 50)), \
        int(rng.integers(1, 20))
    b.add_input("x", (rows, depth), "int8", tc._int8(rng, (rows, depth)), tc._act_q(rng))
    b.grad_input(rng, "dy", (rows, units))
    ch = tc._channels(rng, units)
    k = units if ch is None else len(ch)
    return b.op("fully_connected_grad_weight", b.grad_outputs("dw", (k, depth)),
                {"mode": "fp32", "forward": "f", "channels": ch})


def _dw_grad_input(rng: Rng) -> tc.Case:
    """fp32 or int8 (a third), every stride and padding."""
    mode = "int8" if rng.random() < 0.35 else "fp32"
    b = tc._Builder(mode)
    n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    c = int(rng.choice([1, 3, 8, 9, 16, 21]))
    kh, kw = int(rng.choice([1, 3, 3, 5, 7])), int(rng.choice([1, 3, 3, 5]))
    kh, kw = min(kh, h + 2), min(kw, w + 2)
    while True:
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        if rng.random() < 0.6:
            _, pt, pb = same_padding(h, kh, stride[0], 1)
            _, pl, pr = same_padding(w, kw, stride[1], 1)
            pad = (pt, pb, pl, pr)
        else:
            pad = (int(rng.integers(0, kh)), int(rng.integers(0, kh)), int(rng.integers(0, kw)),
                   int(rng.integers(0, kw)))
        oh = (h + pad[0] + pad[1] - kh) // stride[0] + 1
        ow = (w + pad[2] + pad[3] - kw) // stride[1] + 1
        if oh > 0 and ow > 0:
            break
    b.grad_input(rng, "dy", (n, oh, ow, c))
    wq = tc._weight_q(rng, c, 3, rng.random() < 0.8)
    b.add_input("w", (1, kh, kw, c), "int8",
                rng.integers(-127, 128, (1, kh, kw, c)).astype(np.int8), wq, Role.WEIGHT,
                const=True)
    attrs = tc._conv_attrs(mode, stride, (1, 1), pad)
    attrs["depth_multiplier"] = 1
    return b.op("depthwise_conv2d_grad_input", b.grad_outputs("dx", (n, h, w, c)), attrs)


def _avg_pool_grad(rng: Rng) -> tc.Case:
    """fp32 or int8 (a third), global pooling among them."""
    mode = "int8" if rng.random() < 0.35 else "fp32"
    b = tc._Builder(mode)
    n, h, w, c = int(rng.choice([1, 2])), int(rng.integers(1, 9)), int(rng.integers(1, 9)), \
        int(rng.integers(1, 12))
    if rng.random() < 0.3:
        fh, fw, stride, pad = h, w, (h, w), (0, 0, 0, 0)            # global pooling
    else:
        fh, fw = int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1))
        stride = (fh + int(rng.integers(0, 2)), fw + int(rng.integers(0, 2)))
        pad = (0, int(rng.integers(0, fh)), 0, int(rng.integers(0, fw)))
    oh = (h + pad[0] + pad[1] - fh) // stride[0] + 1
    ow = (w + pad[2] + pad[3] - fw) // stride[1] + 1
    b.grad_input(rng, "dy", (n, oh, ow, c))
    attrs = {"mode": mode, "forward": "f", "filter": (fh, fw), "stride": stride,
             "padding": pad, "activation": "none"}
    return b.op("avg_pool2d_grad", b.grad_outputs("dx", (n, h, w, c)), attrs)


def _act_mask(rng: Rng) -> tc.Case:
    """Masks of sizes around multiples of eight (the eight-value steps and the tail), bounds
    anywhere in the int8 range, the whole-range clamp half of the time."""
    b = tc._Builder("fp32")
    shape = (1, int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.choice([7, 8, 16, 21])))
    b.add_input("y", shape, "int8", tc._int8(rng, shape), tc._act_q(rng))
    lo, hi = (-128, 127) if rng.random() < 0.5 else sorted(
        int(v) for v in rng.integers(-128, 128, 2))
    return b.op("act_mask", [b.tensor("mask", shape, "bit")],
                {"lo": lo, "hi": hi, "forward": "f"})


def _sgd_update(rng: Rng) -> tc.Case:
    """SGD: fp32 on int8 weights, or the int8 mode on int8 weights and int32 biases (every
    shift, gradients of any size); mostly the plain case (no momentum, master copy or
    accumulation: the arm loop), the others too (ref behind the same kernel)."""
    plain = rng.random() < 0.7
    mode = "int8" if rng.random() < 0.5 else "fp32"
    while True:
        graph, inputs = tc.TRAIN_CASES["sgd_update"](rng, mode)
        op = graph.ops[0]
        slots = set(op.attrs.get("slots", ())) | set(op.inputs)
        param = graph.tensors[op.inputs[0]]
        if mode == "fp32" and param.dtype != "int8":
            continue
        extra = any("buf1" in n or "master" in n for n in slots if n)
        if extra != plain:
            return graph, inputs


def _bias_grad(rng: Rng) -> tc.Case:
    """int8 bias gradients (the arm loop; fp32 goes to ref): channel counts around multiples of
    four, up to 700 rows (the int16 lanes' chunks of 256), a fifth of them at the extremes
    -128 and 127 (a chunk's sum at the lanes' bounds)."""
    b = tc._Builder("int8")
    rows, c = int(rng.choice([1, 3, 255, 256, 257, 700])), int(rng.integers(1, 22))
    b.grad_input(rng, "dy", (rows, c))
    if rng.random() < 0.2:
        b.values[-2][...] = np.int8(rng.choice([-128, 127]))
    return b.op("bias_grad", b.grad_outputs("db", (c,), "int32"), {"mode": "int8", "forward": "f"})


def _grad_add(rng: Rng) -> tc.Case:
    """int8 gradient sums (the arm loops; fp32 goes to ref): exponents 0 to 18 apart (16 is
    the arm form's last, 17 and 18 go to ref), sizes up to 3,000 values, all-zero inputs in a
    tenth of the cases (grad_input)."""
    b = tc._Builder("int8")
    shape = (1, int(rng.integers(1, 30)), int(rng.integers(1, 100)))
    b.grad_input(rng, "g1", shape)
    b.grad_input(rng, "g2", shape)
    b.values[1][0] = b.values[3][0] + int(rng.choice([0, 1, 5, 15, 16, 17, 18]) *
                                          rng.choice([-1, 1]))
    return b.op("grad_add", b.grad_outputs("g", shape), {"mode": "int8"})


def _mask_grad(rng: Rng) -> tc.Case:
    """Masked gradients of both modes, sizes around multiples of eight."""
    return tc.TRAIN_CASES["mask_grad"](rng, "int8" if rng.random() < 0.5 else "fp32")


def _merge_channels(rng: Rng) -> tc.Case:
    """Partial weights whose rows are a multiple of 4 bytes (the word copies), any runs, of
    at most 512 bytes (the target images hold every case)."""
    while True:
        graph, inputs = tc.TRAIN_CASES["merge_channels"](rng, "fp32")
        out = graph.tensors[graph.ops[0].outputs[0]]
        if int(np.prod(out.shape[1:])) % 4 == 0 and out.nbytes <= 512:
            return graph, inputs


def _pool_conv_grad(rng: Rng) -> tc.Case:
    """The fused head backward: output channels around the 64-channel blocks of the w_r
    buffer, input channels around eight, one or two samples of 1 to 4 x 4 positions."""
    b = tc._Builder("fp32")
    n, h, w = int(rng.choice([1, 1, 2])), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    o = int(rng.choice([1, 5, 63, 64, 65, 130]))
    c = int(rng.choice([1, 7, 8, 9, 16, 24, 56]))
    b.grad_input(rng, "g", (n, 1, 1, o))
    b.add_input("mask", (n, h, w, o), "bit", rng.random((n, h, w, o)) < rng.uniform(0, 1))
    wq = tc._weight_q(rng, o, 0, rng.random() < 0.8)
    b.add_input("w", (o, 1, 1, c), "int8", rng.integers(-127, 128, (o, 1, 1, c))
                .astype(np.int8), wq, Role.WEIGHT, const=True)
    outs = [b.tensor("dx", (n, h, w, c), "float32", Role.GRADIENT),
            b.tensor("db", (o,), "float32", Role.GRADIENT)]
    return b.op("pool_conv_grad", outs, {"mode": "fp32", "forward": "f"})


FAMILIES: dict[str, Callable[[Rng], tc.Case]] = {
    "sgd_update": _sgd_update,
    "mask_grad": _mask_grad,
    "act_mask": _act_mask,
    "bias_grad": _bias_grad,
    "grad_add": _grad_add,
    "conv2d_grad_input": _conv_grad_input,
    "conv2d_grad_weight": _grad_weight,
    "fully_connected_grad_input": _fc_grad_input,
    "fully_connected_grad_weight": _fc_grad_weight,
    "depthwise_conv2d_grad_input": _dw_grad_input,
    "avg_pool2d_grad": _avg_pool_grad,
    "merge_channels": _merge_channels,
    "pool_conv_grad": _pool_conv_grad,
}
OPS = tuple(FAMILIES)


def iter_cases(op_type: str, n: int, seed: int = 0) -> Iterator[tuple[Graph, list]]:
    """``n`` fp32 cases: two thirds aimed at the arm kernel, a third general."""
    rng = np.random.default_rng(seed + 11 * sum(map(ord, op_type)))
    for i in range(n):
        if i % 3 == 2:
            yield tc.TRAIN_CASES[op_type](rng, "fp32")
        else:
            yield FAMILIES[op_type](rng)
