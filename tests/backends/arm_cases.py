"""Random single-op cases for the arm backend: the int8 cases of tests/backends/cmsis_cases.py
plus cases aimed at each path of the arm kernels (pointwise and k x k convolutions with channel
counts that are and are not multiples of four, odd pixel and channel counts, 3x3 depthwise with
stride 1 and 2, larger depthwise windows, FC quads and remainders, ADD with and without the
one-rounding output stage, dead channels of scale 0).

``iter_cases(op_type, n, seed)`` yields (graph, feeds, batch) like cmsis_cases.iter_cases;
``path(graph, batch)`` names the kernel path the case takes, so the tests can check that every
path was reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from codegen.backends import NullArg, Target, arm
from codegen.backends.params import MUTABLE
from codegen.ir import Graph
from tests.backends import cmsis_cases
from tests.kernels.cases import (
    Case,
    Rng,
    _pair,
    conv2d_graph,
    depthwise_conv2d_graph,
    stream_chain_case,
)

# the forward ops (training ops: arm_train_cases)
OPS = (*arm.OUT_OF_LINE, "stream_chain")


def conv_pointwise(rng: Rng) -> Case:
    cin = int(rng.choice([4, 8, 12, 16, 3, 5]))
    shape = (1, int(rng.integers(1, 8)), int(rng.integers(1, 8)), cin)
    return conv2d_graph(rng, "int8", shape, int(rng.integers(1, 12)), (1, 1), cin, (1, 1),
                        (1, 1), (0, 0, 0, 0))


def conv_kxk(rng: Rng) -> Case:
    while True:
        cin = int(rng.choice([1, 2, 3, 4, 8]))
        k = _pair(rng, 1, 5)
        stride = _pair(rng, 1, 2)
        shape = (1, int(rng.integers(2, 9)), int(rng.integers(2, 9)), cin)
        pads = cmsis_cases._pads(rng, shape[1:3], k, stride)
        if pads is not None:
            return conv2d_graph(rng, "int8", shape, int(rng.integers(1, 9)), k, cin, stride,
                                (1, 1), pads)


def dw_window(rng: Rng) -> Case:
    """3x3 with stride 1 or 2 (the two-output paths), and 5x5 / 7x7 / odd windows."""
    k = (3, 3) if rng.random() < 0.6 else (int(rng.choice([1, 3, 5, 7])),
                                           int(rng.choice([1, 2, 3, 5, 7])))
    return cmsis_cases._dw(rng, 1, k, int(rng.integers(1, 13)))


def fc_wide(rng: Rng) -> Case:
    graph, batch = cmsis_cases.case("fully_connected", rng)
    return graph, batch


def conv_stream(rng: Rng) -> Case:
    """Convolutions the int16 weight stream takes when their weights are frozen (even output
    channels, the whole int8 range as clamp): pointwise and k x k, channel counts that are and
    are not multiples of four (k not a multiple of eight: a padding group), odd pixel counts;
    the fast form, the relu form (output zero point -128) and, with the bias marked as changed
    at run time (a training graph's), the general form."""
    cin = int(rng.choice([3, 4, 8, 12, 16, 24, 32]))
    k = (1, 1) if rng.random() < 0.6 else (3, 3)
    shape = (1, int(rng.integers(1, 8)), int(rng.integers(1, 8)), cin)
    pads = (0, 0, 0, 0) if k == (1, 1) else (1, 1, 1, 1)
    graph, batch = conv2d_graph(rng, "int8", shape, 2 * int(rng.integers(1, 9)), k, cin,
                                (1, 1), (1, 1), pads)
    graph = _full_range(rng, graph)
    op = graph.ops[0]
    if len(op.inputs) > 2 and op.inputs[2] and rng.random() < 0.5:
        # changed at run time: the bias (general form) or weights and bias (rows form)
        graph.metadata[MUTABLE] = op.inputs[1:3] if rng.random() < 0.5 else [op.inputs[2]]
    return graph, batch


def dw_fast(rng: Rng) -> Case:
    """Depthwise convolutions of pe_arm.h's fast form (the whole int8 range as clamp, a frozen
    bias), with and without the sign fix (output zero point -128 or not), any window."""
    graph, batch = dw_window(rng)
    return _full_range(rng, graph), batch


def dw_rows(rng: Rng) -> Case:
    """3x3, 5x5 and 7x7 depthwise layers of the whole int8 range with rows of 4 to 21 outputs
    (the four-output assembly of pe_arm_dw.h, stride 1 or 2 across, and the outputs after its
    last group), in the fast form or (a bias training changes) the one-rounding form."""
    k = int(rng.choice([3, 5, 7]))
    sw = int(rng.choice([1, 2]))
    out_w = int(rng.integers(4, 22))
    shape = (1, int(rng.integers(1, 6)), (out_w - 1) * sw + int(rng.choice([1, 2, 3])),
             int(rng.integers(1, 13)))
    stride = (int(rng.choice([1, 2])), sw)
    pads = cmsis_cases._same(shape[1:3], (k, k), stride)
    graph, batch = depthwise_conv2d_graph(rng, "int8", shape, 1, (k, k), stride, (1, 1),
                                          pads)
    op = graph.ops[0]
    if len(op.inputs) > 2 and op.inputs[2] and rng.random() < 0.4:
        graph.metadata[MUTABLE] = [op.inputs[2]]      # a trained bias: the one-rounding form
    return _full_range(rng, graph, 0.8), batch


def dw_ties(rng: Rng) -> Case:
    """Depthwise layers with a small right shift (input scale 1/2, weight scale 1/8, output
    scale 2/1.01: multiplier 1.01 * 2^30, shift -4), so that one result in sixteen falls on a
    rounding tie, negative ones included (TFLM rounds them away from zero), over channel counts
    that are multiples of four (Helium's four-channel path) and not."""
    k = (int(rng.choice([1, 3, 5])), int(rng.choice([1, 3, 5])))
    graph, batch = cmsis_cases._dw(rng, 1, k, int(rng.choice([4, 8, 12, 6])))
    op = graph.ops[0]
    for name, scale in ((op.inputs[0], 0.5), (op.inputs[1], 0.125), (op.outputs[0], 2 / 1.01)):
        t = graph.tensors[name]
        q = t.quant
        graph.tensors[name] = replace(t, quant=replace(
            q, scale=np.full(np.shape(q.scale), scale, np.float32)))
    if len(op.inputs) > 2 and op.inputs[2]:
        b = graph.tensors[op.inputs[2]]
        graph.tensors[b.name] = replace(b, quant=replace(
            b.quant, scale=np.full(np.shape(b.quant.scale), 0.0625, np.float32)))
    return graph, batch


def _full_range(rng: Rng, graph: Graph, low: float = 0.5) -> Graph:
    """The case with no fused activation, its output zero point -128 (no sign fix) with
    probability `low`."""
    op = graph.ops[0]
    y = graph.tensors[op.outputs[0]]
    zp = -128 if rng.random() < low else int(y.quant.zero_point[0])
    graph.tensors[y.name] = replace(y, quant=replace(y.quant, zero_point=np.array([zp])))
    graph.ops[0] = replace(op, attrs={**op.attrs, "activation": "none"})
    return graph


FAMILIES: dict[str, list[tuple[float, Callable[[Rng], Case]]]] = {
    "conv2d": [(0.25, lambda rng: cmsis_cases.case("conv2d", rng)), (0.15, conv_pointwise),
               (0.15, conv_kxk), (0.45, conv_stream)],
    "depthwise_conv2d": [(0.25, lambda rng: cmsis_cases.case("depthwise_conv2d", rng)),
                         (0.15, dw_window), (0.1, dw_fast), (0.1, dw_ties), (0.4, dw_rows)],
    "fully_connected": [(1.0, fc_wide)],
    "add": [(1.0, lambda rng: cmsis_cases.case("add", rng))],
    "stream_chain": [(1.0, lambda rng: stream_chain_case(rng, arm=True))],
}


def case(op_type: str, rng: Rng) -> Case:
    return cmsis_cases.draw(FAMILIES[op_type], rng)


def iter_cases(op_type: str, n: int, seed: int = 0
               ) -> Iterator[tuple[Graph, dict[str, np.ndarray], int]]:
    return cmsis_cases.feed_cases(case, op_type, n, seed, 7)


def path(graph: Graph, batch: int, form: str = "arm") -> str:
    """The arm kernel path of a case (the body record of ``form``, arm_helpers.FORMS; see
    runtime_c/kernels/arm)."""
    op = graph.ops[0]
    x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if op.type == "conv2d":
        call = arm.ARM.build(graph, op, batch, Target()) if form == "arm" else None
        if call is not None and call.kernel == arm.ROWS_KERNEL:
            mode = int(call.arg("mode").value)
            return "conv-rows-" + ("signed" if mode & arm.SIGNED else "relu")
        if call is not None and call.kernel == "pe_arm_conv_w16_s8":
            mode = int(call.arg("mode").value)
            return "conv-w16-" + "-".join(filter(None, [
                "fast" if mode & arm.FAST else "general",
                "signed" if mode & arm.SIGNED else "relu",
                "pad" if int(np.prod(graph.tensors[op.inputs[1]].shape[1:])) % 8 else "",
                "odd-pixels" if out.shape[1] * out.shape[2] * batch % 2 else ""]))
        w = graph.tensors[op.inputs[1]]
        k = int(np.prod(w.shape[1:]))
        pixels = out.shape[1] * out.shape[2] * batch
        return "conv-" + "-".join(filter(None, [
            "c4" if x.shape[3] % 4 == 0 else "c-any", "tail" if k % 4 else "",
            "odd-pixels" if pixels % 2 else "", "odd-c" if w.shape[0] % 2 else ""]))
    if op.type == "depthwise_conv2d":
        w = graph.tensors[op.inputs[1]]
        s = op.attrs["stride"][1]
        call = arm.ARM.build(graph, op, batch, Target()) if form == "arm" else None
        mode = int(call.args[-1][1].value) if call is not None else 0
        fast = ("-fast-signed" if mode & arm.SIGNED else "-fast") if mode & arm.FAST else ""
        # pe_arm_dw.h's four-output assembly: square 3x3, 5x5, 7x7 windows, fast form, or the
        # one-rounding form with the zero point folded and the whole int8 range as clamp
        whole = call is not None and mode == 0 and [
            int(a.value) for _, a in call.args[-4:-1]] == [0, -128, 127]
        rows4 = "-rows4" if (fast == "-fast" or whole) and w.shape[1] == w.shape[2] and \
            w.shape[2] in (3, 5, 7) and s in (1, 2) and out.shape[2] >= 4 else ""
        if w.shape[2] == 3 and s in (1, 2):
            return f"dw-3x3-s{s}{fast}{rows4}"
        if rows4:
            return f"dw-{w.shape[2]}x{w.shape[2]}-s{s}{fast}{rows4}"
        return ("dw-pairs" if s <= 2 else "dw-generic") + fast
    if op.type == "fully_connected":
        w = graph.tensors[op.inputs[1]]
        units, depth = w.shape
        return "fc-" + "-".join(filter(None, ["quads" if units >= 4 else "",
                                              "rest" if units % 4 else "",
                                              "tail" if depth % 4 else ""]))
    if op.type == "stream_chain":              # the forms of its stages, in order
        call = arm.stream_out_of_line(graph, op, batch, Target())
        forms = {v: k for k, v in arm.STREAM_FORMS.items()}
        names = [forms[st.values["form"]].removeprefix("pe_arm_").removesuffix("_s8")
                 for st in call.arg("arm_stages").values] if call is not None else ["ref"]
        return "stream-" + "+".join(names) + ("+add" if op.attrs["residual"] else "")
    call = arm.ARM.build(graph, op, batch, Target())
    assert call is not None
    return "add-generic" if isinstance(call.arg("rq"), NullArg) else "add-rq"
