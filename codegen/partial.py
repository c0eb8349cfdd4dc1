"""Partial trainable tensors (issue 13): only the trained channels of a channel-sparse weight
live in RAM; its frozen channels stay in flash.

    found = partial_weights(tg)              # weight -> PartialWeight, for the weights it can split
    tg2 = split_partial(tg, found)           # the training graph with them split
    ig2 = split_partial(ig, found)           # and the inference graph beside it
    partial_report(tg2)                      # what was split (plan --json, compile)

**What is split.** An int8 weight on output-channel axis 0 (conv2d OHWI, fully connected
(O, I)) whose update ops (sgd_update / adam_update, one or the blocks of one) train a subset of
its channels. It becomes two tensors: ``<w>:trained``, the trained rows in channel order, a
parameter (RAM, initialised from flash by ``<p>_init`` like any parameter), and
``<w>:frozen``, the other rows in order, a constant (flash). Every op that reads the whole
weight (the forward layer, its input gradient; the inference graph's layer) reads instead a
copy that a ``merge_channels`` op assembles in the arena just before it (trained rows and
frozen rows interleaved as the channels say; ``pe_merge_rows_s8``): the copy lives only
during that op, at a point of the step where the arena has room (the layers that train are
the late, small ones). The update ops update ``<w>:trained`` whole (their channels are all
of its rows; a blocked update's rows index it directly), and their optimizer state and
master copies were already over the trained channels only. So the arithmetic is unchanged:
every kernel reads the same bytes as before.

**What stays the same outside.** The exported parameters (``<p>_params_export`` /
``_import`` / ``_stream``, the serial protocol, ``params_sha256``, the manifest's trained
tensors) are still the whole weight, assembled from the two parts; an import whose frozen
channels differ from those in flash is refused (``<P>_ERR_ARGUMENT``, nothing written): they
cannot change on this build.

**When** is the caller's choice (``pipeline.plan_project``: when it lowers the RAM the
training step needs, arena + parameters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ir import Graph, Op, Role, Tensor
from .ir.graph import free_name
from .ir.ops import PARAM_UPDATE_OPS, TRAINING_OP_SPECS, UPDATE_INPUTS

MERGE_OP = "merge_channels"
MUTABLE = "mutable_tensors"          # backends.params.MUTABLE (pipeline.beside_training)

__all__ = ["MERGE_OP", "PartialWeight", "export_name", "partial_report", "partial_weights",
           "runs", "split_partial"]

_PARAM = UPDATE_INPUTS.index("param")


@dataclass(frozen=True)
class PartialWeight:
    """A weight split in two: its trained ``channels`` (ascending, on axis 0) and the names
    of the two parts."""

    weight: str
    channels: tuple[int, ...]
    trained: str
    frozen: str


def runs(channels: tuple[int, ...], total: int) -> list[int]:
    """Row counts taken in turn from the trained part (even entries, the first may be 0) and
    the frozen part (odd entries) that make up the ``total`` rows."""
    mask = np.zeros(int(total), bool)
    mask[list(channels)] = True
    out: list[int] = []
    want = True                              # a trained run first
    i = 0
    while i < total:
        j = i
        while j < total and bool(mask[j]) == want:
            j += 1
        out.append(j - i)
        i, want = j, not want
    return out


def partial_weights(graph: Graph) -> dict[str, PartialWeight]:
    """The weights of training graph ``graph`` that ``split_partial`` can split (see the
    module docstring), by name."""
    by_param: dict[str, list[Op]] = {}
    for op in graph.ops:
        if op.type in PARAM_UPDATE_OPS:
            by_param.setdefault(op.inputs[_PARAM], []).append(op)
    out: dict[str, PartialWeight] = {}
    for w, ups in by_param.items():
        t = graph.tensors[w]
        chs = {None if u.attrs.get("channels") is None else tuple(int(c) for c in
                                                                  u.attrs["channels"])
               for u in ups}
        if t.dtype != "int8" or t.data is None or len(chs) != 1 or len(t.shape) < 1:
            continue
        ch = chs.pop()
        if ch is None or not 0 < len(ch) < t.shape[0] or list(ch) != sorted(set(ch)) \
                or any(int(u.attrs.get("channel_axis", 0)) != 0 for u in ups) \
                or w in graph.outputs:
            continue
        out[w] = PartialWeight(w, ch, graph.unique_name(f"{w}:trained"),
                               graph.unique_name(f"{w}:frozen"))
    return out


def split_partial(graph: Graph, found: Mapping[str, PartialWeight]) -> Graph:
    """``graph`` (a training graph, or the inference graph beside it) with the weights of
    ``found`` it holds split in two (module docstring); ``graph`` itself when none."""
    found = {w: p for w, p in found.items() if w in graph.tensors}
    if not found:
        return graph
    g = graph.copy()
    ops: list[Op] = []
    taken = {op.name for op in graph.ops}
    for w, p in found.items():
        t = graph.tensors[w]
        mask = np.zeros(t.shape[0], bool)
        mask[list(p.channels)] = True
        g.add_tensor(Tensor(p.trained, (len(p.channels), *t.shape[1:]), t.dtype, t.role,
                            data=np.ascontiguousarray(t.data[mask])))
        g.add_tensor(Tensor(p.frozen, (t.shape[0] - len(p.channels), *t.shape[1:]), t.dtype,
                            Role.CONSTANT, data=np.ascontiguousarray(t.data[~mask])))
    for op in graph.ops:
        hit = [n for n in dict.fromkeys(op.inputs) if n in found]
        if op.type in PARAM_UPDATE_OPS and op.inputs[_PARAM] in found:
            p = found[op.inputs[_PARAM]]
            ins = list(op.inputs)
            ins[_PARAM] = p.trained
            ups = tuple(p.trained if n == p.weight else n for n in op.attrs.get("updates", ()))
            ops.append(op.replace(inputs=tuple(ins), attrs={**op.attrs, "channels": None,
                                                            "updates": ups,
                                                            "partial_of": p.weight}))
            continue
        ins = list(op.inputs)
        for w in hit:
            p, t = found[w], graph.tensors[w]
            merged = g.add_tensor(Tensor(g.unique_name(f"{w}:merged"), t.shape, t.dtype,
                                         t.role, quant=t.quant)).name
            name = free_name(f"{w}:merge", taken)
            taken.add(name)
            # the phase its reader's: the forward's copy is forward work (train.report.phase)
            phase = "backward" if op.type in TRAINING_OP_SPECS else "forward"
            ops.append(Op(MERGE_OP, name, (p.trained, p.frozen), (merged,),
                          {"channels": p.channels, "axis": 0, "partial_of": w,
                           "phase": phase}))
            ins = [merged if n == w else n for n in ins]
        ops.append(op.replace(inputs=tuple(ins)) if hit else op)
    g.ops = ops
    for w in found:
        del g.tensors[w]
    meta = dict(g.metadata)
    if MUTABLE in meta:
        meta[MUTABLE] = sorted({found[n].trained if n in found else n for n in meta[MUTABLE]})
    tr = meta.get("training")
    if isinstance(tr, Mapping):
        params = []
        for e in tr.get("parameters", ()):
            name = e["tensor"] if isinstance(e, Mapping) else str(e)
            if name in found:
                p = found[name]
                e = {**(e if isinstance(e, Mapping) else {}), "tensor": p.trained,
                     "export": name, "bytes": g.tensors[p.trained].nbytes,
                     "partial": {"frozen": p.frozen, "channels": p.channels,
                                 "shape": list(graph.tensors[name].shape)}}
            params.append(e)
        meta["training"] = {**tr, "parameters": params}
    g.metadata = meta
    return g


def export_name(entry: Any) -> str:
    """The name a trained-parameter entry of ``metadata["training"]["parameters"]`` is
    exported under (the whole weight's, for a split one)."""
    if isinstance(entry, Mapping):
        return str(entry.get("export") or entry["tensor"])
    return str(entry)


def partial_report(graph: Graph) -> list[dict[str, Any]]:
    """Per split weight of ``graph``: its name, trained and total channels, the bytes in RAM
    (trained rows) and in flash (frozen rows), and the merge ops that assemble it."""
    merges: dict[str, list[str]] = {}
    for op in graph.ops:
        if op.type == MERGE_OP:
            merges.setdefault(str(op.attrs.get("partial_of")), []).append(op.name)
    out = []
    for e in (graph.metadata.get("training") or {}).get("parameters", ()):
        part = e.get("partial") if isinstance(e, Mapping) else None
        if not part:
            continue
        tr, fr = graph.tensors[e["tensor"]], graph.tensors[part["frozen"]]
        out.append({"weight": e["export"], "channels": len(part["channels"]),
                    "total_channels": int(part["shape"][0]), "ram_bytes": tr.nbytes,
                    "flash_bytes": fr.nbytes, "merges": merges.get(e["export"], [])})
    return out
