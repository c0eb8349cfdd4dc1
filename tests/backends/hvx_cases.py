"""Random single-op cases for the hvx backend: the int8 cases of the arm and CMSIS-NN case
generators plus cases aimed at the hvx kernels' paths: output channel counts around the
32-lane blocks (1, 31, 32, 33, 64, 70), input channel counts that are and are not multiples
of four (direct rows vs gathered rows), pixel counts that leave a partial tile of four,
depthwise channel counts that give one, several or per-pixel lane patterns (8, 48, 64, 96,
130, 256) at strides 1 and 2, weights marked as trained (packed at run time), pooling windows
with padding.

``iter_cases(op_type, n, seed)`` yields (graph, feeds, batch); ``path(graph, batch)`` names
the kernel path a case takes so the tests can check each was reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from codegen.backends import NullArg, Target, hvx
from codegen.backends.params import MUTABLE
from codegen.ir import Graph
from tests.backends import arm_cases, cmsis_cases
from tests.frontend.single_op import single_op_graph
from tests.kernels.cases import (
    ACTIVATIONS,
    CASES,
    Case,
    Rng,
    _act,
    _act_q,
    _bias,
    _out_q,
    _weights,
    conv2d_graph,
    depthwise_conv2d_graph,
)

OPS = tuple(hvx.FORWARD_BUILDERS)
TARGET = Target("hexagon-v67", "hexagon", frozenset({"hvx"}))


def _trained(rng: Rng, graph: Graph, p: float = 0.35) -> Graph:
    """Weights and bias marked as changed at run time (a training graph's) with probability
    p: the kernel packs them at every call."""
    op = graph.ops[0]
    if rng.random() < p:
        graph.metadata[MUTABLE] = [n for n in op.inputs[1:3] if n]
    return graph


def conv_blocks(rng: Rng) -> Case:
    cin = int(rng.choice([4, 8, 16, 64, 3, 5, 17]))
    out_c = int(rng.choice([1, 12, 31, 32, 33, 64, 70]))
    shape = (1, int(rng.integers(1, 7)), int(rng.integers(1, 7)), cin)
    if rng.random() < 0.6:
        graph, batch = conv2d_graph(rng, "int8", shape, out_c, (1, 1), cin, (1, 1), (1, 1),
                                    (0, 0, 0, 0))
    else:
        pads = (1, 1, 1, 1) if rng.random() < 0.5 else (0, 1, 0, 1)
        graph, batch = conv2d_graph(rng, "int8", shape, out_c, (3, 3), cin, (1, 1), (1, 1),
                                    pads)
    return _trained(rng, graph), batch


def conv_any(rng: Rng) -> Case:
    graph, batch = cmsis_cases.case("conv2d", rng) if rng.random() < 0.5 else \
        arm_cases.conv_kxk(rng)
    return _trained(rng, graph, 0.2), batch


def dw_channels(rng: Rng) -> Case:
    chans = int(rng.choice([8, 48, 64, 96, 130, 256]))
    k = (3, 3) if rng.random() < 0.7 else (5, 5)
    stride = (1, 1) if rng.random() < 0.6 else (2, 2)
    shape = (1, int(rng.integers(k[0], 8)), int(rng.integers(k[1], 8)), chans)
    pads = (1, 1, 1, 1) if k == (3, 3) else (2, 2, 2, 2)
    if rng.random() < 0.3:
        pads = (0, 0, 0, 0)
    graph, batch = depthwise_conv2d_graph(rng, "int8", shape, 1, k, stride, (1, 1), pads)
    return _trained(rng, graph, 0.3), batch


def fc_trained(rng: Rng) -> Case:
    graph, batch = arm_cases.fc_wide(rng) if rng.random() < 0.6 else fc_long(rng)
    return _trained(rng, graph), batch


def fc_long(rng: Rng) -> Case:
    """One row of 130 to 300 inputs (several 128-byte steps), units around a block of 32."""
    depth, units = int(rng.choice([130, 200, 256, 300])), int(rng.choice([1, 12, 33, 40]))
    xq = _act_q(rng)
    x = _act("x", (1, depth), "int8", xq)
    w = _weights(rng, (units, depth), 0, "int8", per_channel=rng.random() < 0.5)
    b = _bias(rng, units, xq.s, w, "int8")
    y = _act("y", (1, units), "int8", _out_q(rng, xq.s, w, depth))
    return single_op_graph("fully_connected", [x, w, b], y, {"activation": "none",
                                                            "keep_num_dims": False}), 1


def fc_rows(rng: Rng) -> Case:
    """Several rows (more than the small kernel takes): the gemm over packed weights, frozen
    or trained, output channel counts around a block of 32, depths that are and are not
    multiples of four."""
    depth = int(rng.choice([3, 8, 24, 50, 64, 100, 150]))
    units = int(rng.choice([1, 12, 31, 33, 40, 70]))
    rows = int(rng.integers(hvx.FC_SMALL_ROWS + 1, 9))
    xq = _act_q(rng)
    x = _act("x", (rows, depth), "int8", xq)
    w = _weights(rng, (units, depth), 0, "int8", per_channel=rng.random() < 0.5)
    b = _bias(rng, units, xq.s, w, "int8")
    y = _act("y", (rows, units), "int8", _out_q(rng, xq.s, w, depth))
    graph = single_op_graph("fully_connected", [x, w, b], y, {
        "activation": str(rng.choice(ACTIVATIONS)), "keep_num_dims": False})
    return _trained(rng, graph, 0.5), 1


def fc_small(rng: Rng) -> Case:
    """Layers the small FC kernel takes: rows of 1 to 512 inputs around its 32-, 64- and
    128-byte slots, 1 to 32 units around its trees' sizes, an input zero point of -128 half the time
    (the ReLU form: no c * sum w), now and then 2 or 3 rows; and layers just past its limits
    (the dot kernel when one row, else the gemm)."""
    depth = int(rng.choice([1, 3, 4, 8, 17, 24, 31, 32, 33, 40, 50, 63, 64, 65, 100, 128, 129,
                            200, 256, 300, 512]))
    units = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 15, 16, 17, 24, 31, 32] if depth <= 32
                           else [1, 2, 3, 5, 8, 9, 12, 16] if depth <= 64
                           else [1, 2, 3, 4, 5, 8]))
    if rng.random() < 0.2:             # just past it: the dot kernel's one-row blocks
        depth, units = ((int(rng.choice([33, 50, 64])), int(rng.choice([17, 24, 32])))
                        if rng.random() < 0.5 else
                        (int(rng.choice([65, 100, 513])), int(rng.choice([9, 32]))))
    rows = 1 if rng.random() < 0.8 else int(rng.integers(2, 4))
    xq = _act_q(rng)
    if rng.random() < 0.5:
        xq = type(xq)(xq.scale, -128)
    x = _act("x", (rows, depth), "int8", xq)
    w = _weights(rng, (units, depth), 0, "int8", per_channel=rng.random() < 0.5)
    b = _bias(rng, units, xq.s, w, "int8") if rng.random() < 0.85 else None
    y = _act("y", (rows, units), "int8", _out_q(rng, xq.s, w, depth))
    graph = single_op_graph("fully_connected", [x, w, b], y, {
        "activation": str(rng.choice(ACTIVATIONS)), "keep_num_dims": False})
    return _trained(rng, graph), 1


def _int8(build: Callable[[Rng], Case]) -> Callable[[Rng], Case]:
    def make(rng: Rng) -> Case:
        while True:
            graph, batch = build(rng)
            if all(graph.tensors[n].dtype == "int8" for n in graph.inputs[:1]):
                return graph, batch
    return make


FAMILIES: dict[str, list[tuple[float, Callable[[Rng], Case]]]] = {
    "conv2d": [(0.5, conv_blocks), (0.5, conv_any)],
    "depthwise_conv2d": [(0.4, dw_channels), (0.3, lambda rng: cmsis_cases.case(
        "depthwise_conv2d", rng)), (0.15, arm_cases.dw_window), (0.15, arm_cases.dw_ties)],
    "fully_connected": [(0.35, fc_trained), (0.45, fc_small), (0.2, fc_rows)],
    "avg_pool2d": [(1.0, _int8(CASES["avg_pool2d"]))],
    "max_pool2d": [(1.0, _int8(CASES["max_pool2d"]))],
    "add": [(1.0, lambda rng: cmsis_cases.case("add", rng))],
    "mul": [(1.0, lambda rng: cmsis_cases.case("mul", rng))],
}


def case(op_type: str, rng: Rng) -> Case:
    return cmsis_cases.draw(FAMILIES[op_type], rng)


def iter_cases(op_type: str, n: int, seed: int = 0
               ) -> Iterator[tuple[Graph, dict[str, np.ndarray], int]]:
    return cmsis_cases.feed_cases(case, op_type, n, seed, 11)


def path(graph: Graph, batch: int) -> str:
    """The hvx kernel path of a case that hvx takes."""
    op = graph.ops[0]
    call = hvx.HVX.build(graph, op, batch, TARGET)
    assert call is not None
    if call.kernel == "pe_fully_connected_s8_dot_hvx":
        depth = int(graph.tensors[op.inputs[1]].shape[1])
        return "fc-dot" + ("-long" if depth > 128 else "-short")
    if call.kernel == "pe_fully_connected_s8_small_hvx":
        depth = int(graph.tensors[op.inputs[1]].shape[1])
        rows = int(call.arg("input_dims").value.values["n"])
        relu = call.arg("params").value.values["input_offset"] == 128
        return ("fc-small-" + ("32" if depth <= 32 else "64" if depth <= 64 else "128")
                + ("-relu" if relu else "")
                + ("-rows" if rows > 1 else ""))
    if op.type in ("conv2d", "fully_connected"):
        w = graph.tensors[op.inputs[1]]
        out_c, k = int(w.shape[0]), int(np.prod(w.shape[1:]))
        trained = isinstance(call.arg("packed"), NullArg)
        gathered = call.scratch_bytes > hvx.gemm_scratch(out_c, k, not trained, False)
        dilated = op.type == "conv2d" and max(op.attrs.get("dilation", (1, 1))) > 1
        # gathered rows of K > 128 values or dilated taps: copied span by span everywhere
        # (else as whole vectors inside the input, span by span at its borders)
        parts = ["fc"] if op.type == "fully_connected" else [
            "conv", "gathered" if gathered else "direct"] + (
            ["wide"] if gathered and (k > 128 or dilated) else [])
        return "-".join(parts + ["trained" if trained else "packed"]
                        + (["odd-blocks"] if -(-out_c // 32) % 2 else [])
                        + (["tail"] if k % 4 else []))
    if op.type == "depthwise_conv2d":
        flat = int(call.arg("flat").value)
        patterns = int(call.arg("patterns").value)
        trained = isinstance(call.arg("weights"), NullArg)
        return f"dw-{'flat' if flat else 'pixel'}-{'one' if patterns == 1 else 'many'}" + \
            ("-trained" if trained else "")
    return op.type
