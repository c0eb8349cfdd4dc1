"""Random single-op cases for the native backend: the arm backend's int8 cases (every kernel
geometry, dead channels, rounding ties), the same with the weights marked as changed at run
time (a training graph's: packed at every call, or read as they are by the FC), and wide
layers whose channel counts are and are not multiples of sixteen over position counts that
are and are not multiples of four (the kernels' whole and partial tiles).

``iter_cases(op_type, n, seed)`` yields (graph, feeds, batch); ``path(graph, batch)`` names
the kernel path a case takes, so the tests can check that every path was reached.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from codegen.backends import native
from codegen.backends.params import MUTABLE
from codegen.ir import Graph
from tests.backends import arm_cases, cmsis_cases
from tests.kernels.cases import Case, Rng, conv2d_graph, depthwise_conv2d_graph

OPS = tuple(native.OUT_OF_LINE)


def conv_wide(rng: Rng) -> Case:
    cin = int(rng.choice([16, 17, 24, 33, 64]))
    k = (1, 1) if rng.random() < 0.6 else (3, 3)
    shape = (1, int(rng.integers(1, 7)), int(rng.integers(1, 7)), cin)
    pads = (0, 0, 0, 0) if k == (1, 1) else (1, 1, 1, 1)
    return conv2d_graph(rng, "int8", shape, int(rng.choice([15, 16, 17, 32, 40])), k, cin,
                        (1, 1), (1, 1), pads)


def dw_flat(rng: Rng) -> Case:
    """Fewer than sixteen channels (a divisor of 16) with stride 1 along the width: positions
    run several to a vector; widths around the window's, every padding."""
    c = int(rng.choice([1, 2, 4, 8]))
    k = (int(rng.choice([1, 3, 5])), int(rng.choice([1, 3, 5])))
    shape = (1, int(rng.integers(k[0], k[0] + 6)), int(rng.integers(k[1], k[1] + 12)), c)
    pads = (int(rng.integers(0, k[0])), int(rng.integers(0, k[0])),
            int(rng.integers(0, k[1])), int(rng.integers(0, k[1])))
    stride = (int(rng.integers(1, 3)), 1)
    return depthwise_conv2d_graph(rng, "int8", shape, 1, k, stride, (1, 1), pads)


def dw_wide(rng: Rng) -> Case:
    c = int(rng.choice([16, 17, 31, 48]))
    shape = (1, int(rng.integers(3, 8)), int(rng.integers(3, 8)), c)
    stride = (int(rng.integers(1, 3)),) * 2
    return depthwise_conv2d_graph(rng, "int8", shape, 1, (3, 3), stride, (1, 1), (1, 1, 1, 1))


def _mutable(graph: Graph) -> Graph:
    """The case with its weights (and bias) changed at run time, as a training graph's."""
    op = graph.ops[0]
    graph.metadata[MUTABLE] = [t for t in op.inputs[1:] if t]
    return graph


FAMILIES = {
    "conv2d": [(0.5, lambda rng: arm_cases.case("conv2d", rng)), (0.5, conv_wide)],
    "depthwise_conv2d": [(0.45, lambda rng: arm_cases.case("depthwise_conv2d", rng)),
                         (0.3, dw_wide), (0.25, dw_flat)],
    "fully_connected": [(1.0, lambda rng: arm_cases.case("fully_connected", rng))],
    "add": [(1.0, lambda rng: arm_cases.case("add", rng))],
    "avg_pool2d": [(1.0, lambda rng: cmsis_cases.case("avg_pool2d", rng))],
}


def case(op_type: str, rng: Rng) -> Case:
    graph, batch = cmsis_cases.draw(FAMILIES[op_type], rng)
    if op_type not in ("add", "avg_pool2d") and rng.random() < 0.4:
        graph = _mutable(graph)
    return graph, batch


def iter_cases(op_type: str, n: int, seed: int = 0
               ) -> Iterator[tuple[Graph, dict[str, np.ndarray], int]]:
    return cmsis_cases.feed_cases(case, op_type, n, seed, 11)


def path(graph: Graph, batch: int) -> str:
    """The native kernel path of a case: the kernel, how it reads the weights and, for the
    matrix product, whether the last tile of positions and the last block of channels are
    whole."""
    op = graph.ops[0]
    call = native.out_of_line(graph, op, batch)
    assert call is not None
    if op.type in ("add", "avg_pool2d"):
        return op.type
    if call.kernel == "pe_fully_connected_s8_native":
        return "fc-direct"
    packed = "packed" if not isinstance(call.arg("w8" if op.type != "depthwise_conv2d"
                                                 else "w32"), native.NullArg) else "runtime"
    lit = {n: int(a.value) for n, a in call.args if isinstance(a, native.ScalarArg)}
    if op.type == "depthwise_conv2d":
        flat = native.depthwise_flat(lit["channels"], lit["s_w"], lit["d_w"])
        return f"dw-{packed}" + ("-flat" if flat else "-tail" if lit["channels"] % native.LANES
                                 else "")
    positions = lit["batches"] * lit["out_h"] * lit["out_w"]
    return "-".join(filter(None, [
        "conv", packed, "rows-tail" if positions % native.ROWS else "rows-whole",
        "c-tail" if lit["out_c"] % native.LANES else "",
        "pair-blocks" if -(-lit["out_c"] // native.LANES) >= 2 else ""]))
