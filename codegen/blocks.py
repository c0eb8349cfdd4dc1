"""The blocked-update pass (issue 13): a weight gradient computed and applied in blocks of
output channels, so that the whole gradient never exists (PockEngine and tiny-training apply
each gradient as soon as it is computed; this goes one step further and splits one
gradient).

    pairs = blockable(tg)                    # (grad_weight op, update op) that can be split
    bg = block_updates(tg, {update.name: 4 for _, update in pairs})
    block_report(bg)                         # what was split (plan --json, compile)

**What is split.** A conv2d / fully connected weight gradient (output channels on axis 0)
read by its update op only (and its exponent, in int8 mode, too), updated by an sgd_update or
adam_update op. Block k of n computes the gradient of trained channels j0..j1 (the grad_weight
op with those channels) and updates them at once (the update op with attr ``rows`` = (j0, j1):
its parameter channels, its per-channel constants and its optimizer state rows j0..j1; the
other rows are untouched). Both ops are per channel (a channel's gradient reads only its own
weights' products, its update only its own gradient and state, and the saturation count is a
sum), so the result is the same bits in any split; the blocks run in order (attr ``after``:
block k + 1's gradient after block k's update, a scheduling constraint), each gradient block
freed by its update before the next is computed. The bias gradients, the input gradients
and every other op are unchanged.

**How many blocks** is the caller's choice (``pipeline.plan_project``: the fewest that give
the smallest arena).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from .ir import Graph, Op, Tensor
from .ir.ops import PARAM_UPDATE_OPS, UPDATE_INPUTS

GRAD_WEIGHT_OPS = ("conv2d_grad_weight", "fully_connected_grad_weight")
ROWS_KEY = "rows"                  # the update op's attr: its block (j0, j1) of the channels

__all__ = ["block_report", "block_updates", "blockable", "bounds", "reblock"]

_GRAD = UPDATE_INPUTS.index("grad")
_GRAD_EXP = UPDATE_INPUTS.index("grad_exp")


def blockable(graph: Graph) -> list[tuple[Op, Op]]:
    """The (grad_weight op, update op) pairs of ``graph`` that can be split (see the module
    docstring), in update op order."""
    producer = {t: op for op in graph.ops for t in op.outputs if t}
    readers: dict[str, list[Op]] = {}
    for op in graph.ops:
        for t in set(op.inputs):
            if t:
                readers.setdefault(t, []).append(op)
    outputs = set(graph.outputs)
    out = []
    for u in graph.ops:
        if u.type not in PARAM_UPDATE_OPS or u.attrs.get(ROWS_KEY) is not None \
                or int(u.attrs.get("channel_axis", 0)) != 0:
            continue
        grad = u.inputs[_GRAD]
        gw = producer.get(grad)
        if gw is None or gw.type not in GRAD_WEIGHT_OPS or gw.outputs[0] != grad:
            continue
        if any(t in outputs or [o.name for o in readers.get(t, [])] != [u.name]
               for t in gw.outputs if t):
            continue
        if len(gw.outputs) > 1 and u.inputs[_GRAD_EXP] != gw.outputs[1]:
            continue
        if graph.tensors[grad].shape[0] >= 2:
            out.append((gw, u))
    return out


def bounds(count: int, n: int) -> list[tuple[int, int]]:
    """[j0, j1) of ``n`` blocks of ``count`` rows, as even as can be (n capped at count)."""
    n = max(1, min(int(n), int(count)))
    edges = [count * k // n for k in range(n + 1)]
    return list(pairwise(edges))


def block_updates(graph: Graph, blocks: Mapping[str, int]) -> Graph:
    """``graph`` with the gradient of each update op named in ``blocks`` (update op name ->
    number of blocks; pairs ``blockable`` does not list, and counts below 2, are left alone)
    computed and applied in that many blocks; ``graph`` itself when nothing is split."""
    pairs = {u.name: (gw, u) for gw, u in blockable(graph) if int(blocks.get(u.name, 1)) >= 2}
    if not pairs:
        return graph
    g = graph.copy()
    gone = {gw.name for gw, _ in pairs.values()}
    dropped: set[str] = set()
    ops: list[Op] = []
    for op in graph.ops:
        if op.name in gone:
            continue
        if op.name not in pairs:
            ops.append(op)
            continue
        gw, u = pairs[op.name]
        grad = graph.tensors[gw.outputs[0]]
        ch = gw.attrs.get("channels")
        full = tuple(range(grad.shape[0])) if ch is None else tuple(int(c) for c in ch)
        dropped.update(t for t in gw.outputs if t)
        prev = None                         # the previous block's update: this block after it
        for k, (j0, j1) in enumerate(bounds(grad.shape[0], blocks[u.name])):
            outs = []
            for t in gw.outputs:
                src = graph.tensors[t]
                shape = (j1 - j0, *src.shape[1:]) if t == grad.name else src.shape
                outs.append(g.add_tensor(Tensor(g.unique_name(f"{t}:b{k}"), shape,
                                                src.dtype, src.role)).name)
            attrs = {**gw.attrs, "channels": full[j0:j1]}
            if prev is not None:
                attrs["after"] = (prev,)
            ops.append(Op(gw.type, g.unique_name(f"{gw.name}:b{k}"), gw.inputs, tuple(outs),
                          attrs))
            ins = list(u.inputs)
            ins[_GRAD] = outs[0]
            if len(outs) > 1:
                ins[_GRAD_EXP] = outs[1]
            prev = g.unique_name(f"{u.name}:b{k}")
            ops.append(Op(u.type, prev, tuple(ins), (), {**u.attrs, ROWS_KEY: (j0, j1)}))
    g.ops = ops
    g.tensors = {n: t for n, t in g.tensors.items() if n not in dropped}
    return g


def block_report(graph: Graph) -> list[dict[str, Any]]:
    """Per blocked update (its blocks' ops share the parameter): the parameter, the number of
    blocks, the rows of each and the bytes of the largest gradient block against the whole
    gradient's."""
    out: dict[str, dict[str, Any]] = {}
    for op in graph.ops:
        rows = op.attrs.get(ROWS_KEY) if op.type in PARAM_UPDATE_OPS else None
        if rows is None:
            continue
        param = op.inputs[0]
        grad = graph.tensors[op.inputs[_GRAD]]
        r = out.setdefault(param, {"param": param, "layer": op.attrs.get("forward", ""),
                                   "blocks": 0, "rows": [], "block_bytes": 0,
                                   "gradient_bytes": 0})
        r["blocks"] += 1
        r["rows"].append([int(rows[0]), int(rows[1])])
        r["block_bytes"] = max(r["block_bytes"], grad.nbytes)
        r["gradient_bytes"] += grad.nbytes
    return list(out.values())


def reblock(graph: Graph, report: list[dict[str, Any]] | None) -> Graph:
    """``graph`` split again as ``report`` (``block_report`` of a blocked graph, e.g. from a
    project's manifest) says: the same ops, names and tensors."""
    n = {r["param"]: len(r["rows"]) for r in report or ()}
    return block_updates(graph, {u.name: n[u.inputs[0]] for _, u in blockable(graph)
                                 if u.inputs[0] in n})
