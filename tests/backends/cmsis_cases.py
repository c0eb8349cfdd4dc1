"""Random single-op cases for the CMSIS-NN backend: the general cases of tests/kernels/cases.py
plus cases aimed at each kernel CMSIS-NN's wrappers dispatch to (1x1 and 1xN convolutions,
grouped ones, the 3x3 / opt / generic depthwise kernels and the Helium one-input-channel
depthwise-as-convolution, equally shaped add / mul), int8 only (CMSIS-NN has no float kernels).

``iter_cases(op_type, n, seed)`` yields (graph, feeds) like tests.kernels.cases.iter_cases;
``path(op, target)`` names the CMSIS-NN kernel a record runs on a core, so the tests can check
that every kernel was reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from codegen.backends import Target
from codegen.backends import cmsis_nn as cm
from codegen.ir import Graph, QuantParams, same_padding
from tests.frontend.single_op import single_op_graph
from tests.kernels.cases import (
    CASES,
    Case,
    Rng,
    _act,
    _act_q,
    _padding,
    _pair,
    conv2d_graph,
    depthwise_conv2d_graph,
    random_feeds,
)

OPS = tuple(cm.BUILDERS)


def _pads(rng: Rng, in_hw, k, stride, dilation=(1, 1)) -> tuple[int, int, int, int] | None:
    pads = _padding(rng, in_hw, k, stride, dilation)
    for i in range(2):
        eff = (k[i] - 1) * dilation[i] + 1
        if in_hw[i] + pads[2 * i] + pads[2 * i + 1] < eff:
            return None
    return pads


def _same(in_hw, k, stride) -> tuple[int, int, int, int]:
    _, t, b = same_padding(in_hw[0], k[0], stride[0], 1)
    _, left, r = same_padding(in_hw[1], k[1], stride[1], 1)
    return (t, b, left, r)


def conv_1x1(rng: Rng) -> Case:
    stride = (1, 1) if rng.random() < 0.6 else _pair(rng, 1, 3)
    cin = int(rng.integers(1, 13))
    shape = (1, int(rng.integers(1, 10)), int(rng.integers(1, 10)), cin)
    return conv2d_graph(rng, "int8", shape, int(rng.integers(1, 13)), (1, 1), cin, stride,
                        (1, 1), (0, 0, 0, 0))


def conv_1xn(rng: Rng) -> Case:
    """One input row, a 1 x k filter, stride x channels a multiple of 4 (the wrapper's 1xN
    kernel), TFLite SAME / VALID or explicit padding."""
    while True:
        k = (1, int(rng.integers(1, 8)))
        stride = (1, int(rng.integers(1, 4)))
        cin = int(rng.choice([4, 8, 12, 2, 6])) if stride[1] % 2 else int(rng.choice([2, 4, 6]))
        if (stride[1] * cin) % 4:
            cin = 4
        w = int(rng.integers(1, 16))
        kind = rng.random()
        pads = (_same((1, w), k, stride) if kind < 0.5 else (0, 0, 0, 0) if kind < 0.7
                else _pads(rng, (1, w), k, stride))
        if pads is not None and w + pads[2] + pads[3] >= k[1]:
            break
    return conv2d_graph(rng, "int8", (1, 1, w, cin), int(rng.integers(1, 9)), k, cin, stride,
                        (int(rng.integers(1, 3)), 1), pads)


def conv_grouped(rng: Rng) -> Case:
    while True:
        groups = int(rng.integers(2, 4))
        ci = int(rng.integers(1, 5))
        k = _pair(rng, 1, 3)
        shape = (1, int(rng.integers(1, 8)), int(rng.integers(1, 8)), ci * groups)
        stride = _pair(rng, 1, 2)
        pads = _pads(rng, shape[1:3], k, stride)
        if pads is not None:
            break
    return conv2d_graph(rng, "int8", shape, groups * int(rng.integers(1, 4)), k, ci, stride,
                        (1, 1), pads)


def _dw(rng: Rng, mult: int, k, channels: int, dilation=(1, 1), pads=None) -> Case:
    while True:
        shape = (1, int(rng.integers(1, 10)), int(rng.integers(1, 10)), channels)
        stride = _pair(rng, 1, 2)
        p = pads(shape[1:3], k, stride) if pads else _pads(rng, shape[1:3], k, stride, dilation)
        if p is not None and all(
                shape[1 + i] + p[2 * i] + p[2 * i + 1] >= (k[i] - 1) * dilation[i] + 1
                for i in range(2)):
            break
    return depthwise_conv2d_graph(rng, "int8", shape, mult, k, stride, dilation, p)


def dw_3x3(rng: Rng) -> Case:
    graph, _ = _dw(rng, 1, (3, 3), int(rng.integers(1, 13)),
                   pads=lambda hw, k, s: _same(hw, k, s) if rng.random() < 0.7
                   else _pads(rng, hw, k, s))
    return graph, 1


def dw_opt(rng: Rng) -> Case:
    graph, _ = _dw(rng, 1, _pair(rng, 1, 5), int(rng.integers(1, 13)))
    return graph, 1


def dw_mult(rng: Rng) -> Case:
    mult = int(rng.choice([2, 3, 4, 8]))
    return _dw(rng, mult, _pair(rng, 1, 4), int(rng.integers(1, 6)),
               dilation=_pair(rng, 1, 2))


def dw_one_channel(rng: Rng) -> Case:
    return _dw(rng, int(rng.integers(2, 10)), _pair(rng, 1, 4), 1)


def elementwise_same(kind: str) -> Callable[[Rng], Case]:
    def build(rng: Rng) -> Case:
        shape = (1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 17)))
        qa, qb = _act_q(rng), _act_q(rng)
        if rng.random() < 0.2:
            qb = QuantParams(qa.scale, qb.zp)
        s_out = ((qa.s + qb.s) * float(rng.uniform(0.4, 1.5)) if kind == "add"
                 else qa.s * qb.s * 128 * float(rng.uniform(0.2, 1.0)))
        g = single_op_graph(kind, [_act("x0", shape, "int8", qa), _act("x1", shape, "int8", qb)],
                            _act("y", shape, "int8", _act_q(rng, s_out)),
                            {"activation": str(rng.choice(["none", "relu", "relu6"]))})
        return g, int(rng.integers(1, 3))
    return build


# op -> [(weight, builder)]: the general cases and the targeted ones
FAMILIES: dict[str, list[tuple[float, Callable[[Rng], Case]]]] = {
    "conv2d": [(0.4, CASES["conv2d"]), (0.25, conv_1x1), (0.25, conv_1xn),
               (0.1, conv_grouped)],
    "depthwise_conv2d": [(0.3, CASES["depthwise_conv2d"]), (0.25, dw_3x3), (0.2, dw_opt),
                         (0.15, dw_mult), (0.1, dw_one_channel)],
    "add": [(0.4, CASES["add"]), (0.6, elementwise_same("add"))],
    "mul": [(0.4, CASES["mul"]), (0.6, elementwise_same("mul"))],
}


def draw(families: list[tuple[float, Callable[[Rng], Case]]], rng: Rng) -> Case:
    """One case of a builder drawn from weighted ``families``."""
    weights = np.array([w for w, _ in families])
    return families[int(rng.choice(len(families), p=weights / weights.sum()))][1](rng)


def case(op_type: str, rng: Rng) -> Case:
    """One int8 case of ``op_type`` (float cases of the general builders are redrawn)."""
    while True:
        graph, batch = draw(FAMILIES.get(op_type, [(1.0, CASES[op_type])]), rng)
        if all(graph.tensors[n].dtype != "float32" for n in graph.ops[0].inputs if n):
            return graph, batch


def feed_cases(case_of: Callable[[str, Rng], Case], op_type: str, n: int, seed: int, salt: int
               ) -> Iterator[tuple[Graph, dict[str, np.ndarray], int]]:
    """``n`` cases of one op drawn by ``case_of``: (graph, feeds with the batch on axis 0,
    batch); ``salt`` keeps one backend's case stream apart from another's."""
    rng = np.random.default_rng(seed + salt * sum(map(ord, op_type)))
    for _ in range(n):
        graph, batch = case_of(op_type, rng)
        yield graph, random_feeds(graph, batch, rng), batch


def iter_cases(op_type: str, n: int, seed: int = 0
               ) -> Iterator[tuple[Graph, dict[str, np.ndarray], int]]:
    """``n`` int8 cases of one op: (graph, feeds with the batch on axis 0, batch)."""
    return feed_cases(case, op_type, n, seed, 1)


def path(graph: Graph, batch: int, target: Target) -> str:
    """The CMSIS-NN kernel that runs the case's op on ``target``'s core."""
    from codegen.backends.params import OpArgs

    op = graph.ops[0]
    view = OpArgs(graph, op, batch)
    core = cm.core(target)
    if op.type == "conv2d":
        return "conv-" + cm.conv_kernel_branch(cm.ConvGeometry.of(view))
    if op.type == "depthwise_conv2d":
        g = cm.ConvGeometry.of(view, depthwise=True)
        p = cm.depthwise_path(core, g)
        return "dw-" + (p if p != "conv" else "conv-" + cm.conv_kernel_branch(
            cm.depthwise_as_conv(g)))
    if op.type == "fully_connected":
        w = graph.tensors[op.inputs[1]]
        return "fc-per-channel" if w.quant.scale.size > 1 else "fc-per-tensor"
    if op.type == "softmax":
        return f"softmax-{graph.tensors[op.outputs[0]].dtype}"
    return op.type


# -- configurations the builders decline (tests show CMSIS-NN gets them wrong) --------------------
def dw_3x3_padded_right(rng: Rng) -> Case:
    """3x3 depthwise whose last windows' middle column lies in a right padding of 2+."""
    shape = (1, int(rng.integers(2, 7)), int(rng.integers(1, 6)), int(rng.integers(1, 9)))
    pads = (1, 1, int(rng.integers(0, 2)), int(rng.integers(2, 4)))
    graph, _ = depthwise_conv2d_graph(rng, "int8", shape, 1, (3, 3), (1, 1), (1, 1), pads)
    return graph, 1


def max_pool_padded(rng: Rng) -> Case:
    """Max pooling with bottom/right padding wider than the filter: windows in the padding."""
    from codegen.ir import conv_out_size

    f = _pair(rng, 1, 2)
    shape = (1, int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 9)))
    pads = (0, f[0] + int(rng.integers(0, 2)), 0, f[1] + int(rng.integers(0, 2)))
    oh = conv_out_size(shape[1], f[0], 1, 1, pads[0], pads[1])
    ow = conv_out_size(shape[2], f[1], 1, 1, pads[2], pads[3])
    q = _act_q(rng)
    g = single_op_graph("max_pool2d", [_act("x", shape, "int8", q)],
                        _act("y", (1, oh, ow, shape[3]), "int8", q),
                        {"filter": f, "stride": (1, 1), "padding": pads, "activation": "none"})
    return g, 1


def conv_1x1_padded(rng: Rng) -> Case:
    cin = int(rng.integers(1, 9))
    shape = (1, int(rng.integers(1, 7)), int(rng.integers(1, 7)), cin)
    pads = (0, int(rng.integers(1, 3)), 0, int(rng.integers(0, 3)))
    return conv2d_graph(rng, "int8", shape, int(rng.integers(1, 9)), (1, 1), cin, (1, 1),
                        (1, 1), pads)
