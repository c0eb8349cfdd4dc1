"""The stream pass (issue 13): chains of frozen convolutions run in bands of output rows, so
that their intermediate tensors never exist whole (MCUNetV2's patch-based inference, in row
bands, applied to the forward of training graphs and to inference graphs).

    sg = stream_graph(graph)            # chains fused into stream_chain ops (band_rows 1)
    stream_report(sg)                   # what was streamed (plan --json, compile)
    with_bands(sg, {"v0..v2_conv_2": 8})

**What is fused.** A chain of int8 conv2d / depthwise_conv2d ops in which each op's output is
read by the next op only (not by a mask, a backward or update op, not a graph output), and the
residual add that may end it (an add of the chain's output and the chain's input x): an
inverted-residual block (expand 1x1, depthwise, project 1x1, with or without its add), a stem
conv with what follows it, a MobileNetV1 run of depthwise/pointwise pairs. Every op of it must
be out of the backward's reach: weights and bias frozen (constants no update writes: neither
a trainable parameter nor, in an inference graph compiled beside training, a tensor the
training step changes) and the op not the forward op of any training op. So only ops whose
outputs no backward or update op reads are fused, and the result is the same bits (the
stream_chain op's contract, ``codegen.ir.stream``).

**Where chains are cut.** A maximal chain is cut into the segments whose largest step is the
smallest (``_partition``: the bytes live while a segment runs are its input, its output and
its row buffers at one band row; an op left alone costs its input and output; with a
residual, x stays alive throughout), ties going to fewer segments. A segment of one op is left
as it is (unless it ends in the residual add).

**Band heights** are chosen by the caller once the graph is planned (``pipeline``: the
smallest peak, then the fewest recomputed rows — none here: rows a window needs again are
carried over in the row buffers, ``ir.stream.band_plan`` — then the fewest bytes carried and
bands); ``band_options`` lists what each height costs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .golden.training import trainable_parameters
from .ir import Graph, Op
from .ir.ops import STREAM_MAX_STAGES, TRAINING_OP_SPECS
from .ir.stream import (
    STAGE_TYPES,
    STREAM_OP,
    BandPlan,
    RowStage,
    band_plan,
    chain_graph,
    out_record,
    row_stages,
    unstream,
)

ALIGN = 16                               # the planner's alignment (schedule.align_up)
MUTABLE_KEY = "mutable_tensors"          # backends.params.MUTABLE (pipeline.beside_training)

__all__ = ["STREAM_OP", "band_options", "fuse", "plan_of", "stream_graph", "stream_report",
           "unstream", "with_bands"]


def _nb(graph: Graph, name: str) -> int:
    return -(-graph.tensors[name].nbytes // ALIGN) * ALIGN


def _mutable(graph: Graph) -> set[str]:
    """Tensors the training step writes (trainable parameters, what update ops change) and,
    in an inference graph compiled beside training, the ones listed as changing."""
    names = set(graph.metadata.get(MUTABLE_KEY, ()))
    if "training" in graph.metadata:
        names.update(trainable_parameters(graph))
    for op in graph.ops:
        names.update(n for n in op.attrs.get("updates", ()) or () if n)
    return names


def _per_tensor_int8(graph: Graph, name: str) -> bool:
    t = graph.tensors[name]
    return (t.dtype == "int8" and len(t.shape) == 4 and t.quant is not None
            and t.quant.scale.size == 1)


def _frozen(graph: Graph, name: str, dtype: str, mutable: set[str]) -> bool:
    t = graph.tensors.get(name) if name else None
    return t is not None and t.data is not None and t.dtype == dtype and name not in mutable


def _stage_ok(graph: Graph, op: Op, mutable: set[str], reached: set[str]) -> bool:
    """May ``op`` be a stage of a stream_chain op?"""
    if op.type not in STAGE_TYPES or op.name in reached or len(op.inputs) != 3:
        return False
    x, w, b = op.inputs
    return (_per_tensor_int8(graph, x) and _per_tensor_int8(graph, op.outputs[0])
            and _frozen(graph, w, "int8", mutable) and _frozen(graph, b, "int32", mutable))


def _row_stage(graph: Graph, op: Op) -> RowStage:
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    k_h = graph.tensors[op.inputs[1]].shape[1]
    return RowStage(x.shape[1], y.shape[1], (k_h - 1) * int(op.attrs["dilation"][0]) + 1,
                    int(op.attrs["stride"][0]), int(op.attrs["padding"][0]),
                    y.shape[2] * y.shape[3])


@dataclass(frozen=True)
class _Chain:
    stages: tuple[Op, ...]
    add: Op | None                       # the residual add that may end it


def _chains(graph: Graph, keep: Collection[str] = ()) -> list[_Chain]:
    """The maximal chains of stage ops (each output read by the next stage only); ops named
    in ``keep`` are no stage."""
    mutable = _mutable(graph) | set(keep)
    reached = {str(op.attrs["forward"]) for op in graph.ops
               if op.type in TRAINING_OP_SPECS and op.attrs.get("forward")}
    consumers: dict[str, list[Op]] = {}
    for op in graph.ops:
        for n in dict.fromkeys(op.inputs):
            if n:
                consumers.setdefault(n, []).append(op)
    ends = set(graph.outputs) | set(graph.inputs)
    ok = {op.name for op in graph.ops
          if op.name not in keep and _stage_ok(graph, op, mutable, reached)}

    def only_reader(t: str) -> Op | None:
        readers = consumers.get(t, [])
        return readers[0] if len(readers) == 1 and t not in ends else None

    taken: set[str] = set()
    out = []
    for op in graph.ops:
        if op.name not in ok or op.name in taken:
            continue
        chain = [op]
        while (nxt := only_reader(chain[-1].outputs[0])) is not None and nxt.name in ok \
                and len(chain) < STREAM_MAX_STAGES:
            chain.append(nxt)
        taken.update(o.name for o in chain)
        x, y = chain[0].inputs[0], chain[-1].outputs[0]
        add = only_reader(y)
        if add is not None and not (
                add.type == "add" and add.name not in reached and sorted(add.inputs) ==
                sorted((x, y)) and x != y and _per_tensor_int8(graph, add.outputs[0])
                and graph.tensors[x].shape == graph.tensors[y].shape
                == graph.tensors[add.outputs[0]].shape):
            add = None
        out.append(_Chain(tuple(chain), add))
    return out


def _scratch(graph: Graph, stages: Sequence[Op]) -> int:
    """The scratch of a stream_chain of ``stages`` at one row per band (ref's kernel)."""
    p = band_plan([_row_stage(graph, op) for op in stages], 1)
    return p.scratch_bytes + p.state_bytes


def _partition(graph: Graph, c: _Chain) -> list[tuple[int, int, bool]]:
    """The segments (first, last stage index, with the add) of a chain: the partition whose
    largest step is the smallest, then the fewest segments."""
    s = c.stages
    n = len(s)
    x = s[0].inputs[0]
    keep_x = _nb(graph, x) if c.add is not None else 0

    def cost(a: int, b: int) -> int:
        live = _nb(graph, s[a].inputs[0]) + _nb(graph, s[b].outputs[0])
        live += _scratch(graph, s[a:b + 1]) if b > a else 0
        return live + (keep_x if a > 0 else 0)

    best: list[tuple[int, int, list[tuple[int, int, bool]]]] = [(0, 0, [])]
    for i in range(1, n + 1):
        best.append(min(((max(best[a][0], cost(a, i - 1)), best[a][1] + 1,
                          best[a][2] + [(a, i - 1, False)]) for a in range(i)),
                        key=lambda t: (t[0], t[1])))
    peak, count, segs = best[n]
    if c.add is not None:
        y, z = s[-1].outputs[0], c.add.outputs[0]
        peak = max(peak, _nb(graph, y) + keep_x + _nb(graph, z))
        whole = _nb(graph, x) + _nb(graph, z) + _scratch(graph, s)
        if (whole, 1) <= (peak, count):
            return [(0, n - 1, True)]
    return [seg for seg in segs if seg[1] > seg[0]]


def _cover(graph: Graph, c: _Chain, seg: tuple[int, int, bool], needed: Collection[str]
           ) -> tuple[int, int, bool] | None:
    """The least of segment ``seg`` that still streams every op of it named in ``needed``
    (the ops whose step alone is over the budget): None when it has none; the residual add
    only if it is needed itself; a single needed stage with the neighbour that makes the
    smaller step."""
    a, b, with_add = seg
    if with_add and c.add is not None and c.add.name in needed:
        return seg
    idx = [i for i in range(a, b + 1) if c.stages[i].name in needed]
    if not idx:
        return None
    lo, hi = min(idx), max(idx)
    if hi > lo:
        return lo, hi, False
    pairs = [(i, i + 1) for i in (lo - 1, lo) if a <= i and i + 1 <= b]
    if not pairs:
        return None                      # one stage alone (its add not needed): no gain

    def step(pair: tuple[int, int]) -> int:
        i, j = pair
        return (_nb(graph, c.stages[i].inputs[0]) + _nb(graph, c.stages[j].outputs[0])
                + _scratch(graph, c.stages[i:j + 1]))
    i, j = min(pairs, key=step)
    return i, j, False


def _fused(graph: Graph, stages: Sequence[Op], add: Op | None, name: str) -> Op:
    recs = []
    for j, op in enumerate(stages):
        st: dict[str, Any] = {"op": op.name, "type": op.type}
        st.update({k: tuple(int(v) for v in op.attrs[k])
                   for k in ("stride", "dilation", "padding")})
        st["activation"] = op.attrs["activation"]
        if op.type == "depthwise_conv2d":
            st["depth_multiplier"] = int(op.attrs["depth_multiplier"])
        last = j == len(stages) - 1
        st["out"] = out_record(graph.tensors[op.outputs[0]]) if not last or add else None
        recs.append(st)
    residual = None
    out = stages[-1].outputs[0]
    if add is not None:
        residual = {"op": add.name, "activation": add.attrs["activation"],
                    "order": list(add.inputs).index(out)}
        out = add.outputs[0]
    inputs = [stages[0].inputs[0]]
    for op in stages:
        inputs += [op.inputs[1], op.inputs[2]]
    return Op(STREAM_OP, name, tuple(inputs), (out,),
              {"stages": tuple(recs), "residual": residual, "band_rows": 1})


def stream_graph(graph: Graph, *, needed: Collection[str] | None = None,
                 keep: Collection[str] = ()) -> Graph:
    """``graph`` with its frozen chains fused into stream_chain ops (band_rows 1; see the
    module docstring); ``graph`` itself when there is none.

    ``needed``: stream only what these ops need (ops whose step is over a budget unstreamed):
    each segment shrinks to the least that still holds the needed ops in it (``_cover``),
    segments without one are left alone. ``keep``: ops never fused (pinned to a kernel)."""
    fused: dict[str, Op] = {}          # last member's name -> the fused op
    gone: set[str] = set()             # member ops
    dropped: set[str] = set()          # intermediate tensors
    used = set(graph.tensors) | {op.name for op in graph.ops}
    for c in _chains(graph, keep):
        segments = _partition(graph, c)
        if needed is not None:
            segments = [s for s in (_cover(graph, c, seg, needed) for seg in segments)
                        if s is not None]
        for a, b, with_add in segments:
            stages = c.stages[a:b + 1]
            add = c.add if with_add else None
            last = add or stages[-1]
            name = f"{stages[0].name}..{last.name}"
            k = 1
            while name in used:
                name, k = f"{stages[0].name}..{last.name}_{k}", k + 1
            used.add(name)
            fused[last.name] = _fused(graph, stages, add, name)
            members = [*stages, *([add] if add else [])]
            gone.update(op.name for op in members)
            dropped.update(op.outputs[0] for op in members[:-1])
    if not fused:
        return graph
    g = graph.copy()
    g.ops = [fused.get(op.name, op) for op in graph.ops
             if op.name in fused or op.name not in gone]
    g.tensors = {n: t for n, t in graph.tensors.items() if n not in dropped}
    return g


def fuse(graph: Graph, stages: Sequence[str], add: str | None = None,
         band_rows: int = 1) -> Graph:
    """``graph`` with the named chain of ops (and the residual ``add`` after it) fused into one
    stream_chain op, whatever the pass would choose (tests; ValueError when they are not a
    chain it could fuse)."""
    ops = {op.name: op for op in graph.ops}
    chain = next((c for c in _chains(graph) if stages[0] in [o.name for o in c.stages]), None)
    names = [o.name for o in chain.stages] if chain is not None else []
    at = names.index(stages[0]) if chain is not None else 0
    if chain is None or names[at:at + len(stages)] != list(stages) \
            or (add is not None and (len(stages) != len(names) or chain.add is None
                                     or chain.add.name != add)):
        raise ValueError(f"{list(stages)} (+ {add}) is not a chain the stream pass can fuse")
    members = [ops[n] for n in stages]
    last = ops[add] if add is not None else members[-1]
    op = _fused(graph, members, last if add is not None else None,
                f"{members[0].name}..{last.name}")
    op = op.replace(attrs={**op.attrs, "band_rows": int(band_rows)})
    gone = {o.name for o in members} | {last.name}
    dropped = {o.outputs[0] for o in [*members, last][:-1]} - {last.outputs[0]}
    g = graph.copy()
    g.ops = [op if o.name == last.name else o for o in graph.ops
             if o.name == last.name or o.name not in gone]
    g.tensors = {n: t for n, t in graph.tensors.items() if n not in dropped}
    return g


def plan_of(graph: Graph, op: Op, band_rows: int | None = None) -> BandPlan:
    """The band plan of a stream_chain op (at its band height, or ``band_rows``)."""
    stages = row_stages(chain_graph(graph, op))
    return band_plan(stages, int(op.attrs["band_rows"]) if band_rows is None else band_rows)


def band_options(graph: Graph, op: Op) -> list[BandPlan]:
    """The band plan of every band height of ``op``, 1 up to its output's height."""
    stages = row_stages(chain_graph(graph, op))
    return [band_plan(stages, b) for b in range(1, stages[-1].out_h + 1)]


def with_bands(graph: Graph, bands: Mapping[str, int]) -> Graph:
    """``graph`` with the band heights of the stream_chain ops named in ``bands``."""
    g = graph.copy()
    g.ops = [op.replace(attrs={**op.attrs, "band_rows": int(bands[op.name])})
             if op.type == STREAM_OP and op.name in bands else op for op in graph.ops]
    return g


def stream_report(graph: Graph) -> list[dict[str, Any]]:
    """Per stream_chain op of ``graph``: the ops it stands for, band height and count, its
    row buffers (the kernel's scratch), the bytes of the intermediate tensors that no longer
    exist, and what the bands cost: rows recomputed (none) and bytes carried over."""
    out = []
    for op in graph.ops:
        if op.type != STREAM_OP:
            continue
        chain = chain_graph(graph, op)
        p = plan_of(graph, op)
        inter = [n for o in chain.ops[:-1] for n in o.outputs]
        out.append({"op": op.name, "ops": [o.name for o in chain.ops],
                    "residual": op.attrs["residual"] is not None,
                    "input": op.inputs[0], "output": op.outputs[0],
                    "band_rows": p.band_rows, "bands": p.bands,
                    "buffer_rows": list(p.buffer_rows), "scratch_bytes": p.scratch_bytes,
                    "intermediate_bytes": sum(chain.tensors[n].nbytes for n in inter),
                    "recomputed_rows": p.recomputed_rows, "moved_bytes": p.moved_bytes})
    return out
