"""The stream_chain op: what its attributes hold, the chain of ops it stands for, and the row
bands every kernel of it follows (``codegen/stream.py`` is the pass that makes it).

A stream_chain op computes exactly what a chain of forward ops computes,

    x -> s_0 -> s_1 -> ... -> s_n-1  [-> add(s_n-1, x)]

(each s_j an int8 conv2d or depthwise_conv2d whose output only the next op reads), but its
kernel produces the output in bands of ``band_rows`` rows and keeps of each intermediate only
the rows that the next stage's window still needs: no intermediate tensor exists whole.

Inputs: (x, w_0, b_0, ..., w_n-1, b_n-1); output: the last op's (the add's, with a residual).
Attributes:

- ``stages``: one dict per s_j: ``op`` (the original op's name), ``type``, ``stride``,
  ``dilation``, ``padding``, ``activation``, ``depth_multiplier`` (depthwise only) and ``out``:
  its output tensor as ``{name, shape, scale, zero_point}`` (int8, per tensor), or None for the
  stage whose output is the op's output;
- ``residual``: None, or the add that ends the chain: ``{op, activation, order}`` (``order``:
  the chain's position, 0 or 1, among the add's inputs; the other one is x) — then every stage
  has an ``out``, the last one the add's input;
- ``band_rows``: output rows per band, at least 1 (chosen at compile time).

``chain_graph(graph, op)`` rebuilds the chain as a graph of its own (its ops, and the
intermediate tensors with their quantization): the golden kernel runs it, the ref record
builder lowers its stages, the verifier checks it and the model writers write it
(``unstream``). ``band_plan`` is the band schedule every kernel of the op follows
(runtime_c/kernels/pe_stream.h does the same steps at run time): which rows of each
intermediate each band computes, the rows each buffer must hold, and what is carried over.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .graph import Graph, Op, QuantParams, Role, Tensor

STREAM_OP = "stream_chain"
STAGE_TYPES = ("conv2d", "depthwise_conv2d")
BUFFER_ALIGNMENT = 16           # every row buffer starts at a multiple of this in the scratch
STATE_BYTES = 12                # the schedule's state per stage (pe_stream.h pe_stream_rows)


def stage_inputs(op: Op, j: int) -> tuple[str, str]:
    """The (weight, bias) tensor names of stage ``j``."""
    return op.inputs[1 + 2 * j], op.inputs[2 + 2 * j]


def out_record(t: Tensor) -> dict[str, Any]:
    """A stage's output tensor as a stream_chain op keeps it (the tensor leaves the graph)."""
    assert t.quant is not None
    return {"name": t.name, "shape": tuple(int(d) for d in t.shape),
            "scale": float(t.quant.scale[0]), "zero_point": int(t.quant.zero_point[0])}


def _tensor(rec: dict[str, Any]) -> Tensor:
    return Tensor(str(rec["name"]), tuple(int(d) for d in rec["shape"]), "int8",
                  Role.ACTIVATION,
                  QuantParams(np.float32(rec["scale"]), int(rec["zero_point"])))


def chain_graph(graph: Graph, op: Op) -> Graph:
    """The ops ``op`` stands for, as a graph: input x, output the op's output, the stages (and
    the add) under their own names, intermediate tensors rebuilt from the attributes.
    KeyError / TypeError / ValueError on malformed attributes (``ir.verify`` reports them)."""
    stages = op.attrs["stages"]
    residual = op.attrs["residual"]
    x = graph.tensors[op.inputs[0]]
    out = graph.tensors[op.outputs[0]]
    g = Graph(name=op.name)
    g.add_tensor(x)
    prev = x.name
    for j, st in enumerate(stages):
        w, b = stage_inputs(op, j)
        for name in (w, b):
            if name and name not in g.tensors:
                g.add_tensor(graph.tensors[name])
        if st["type"] not in STAGE_TYPES:
            raise ValueError(f"stage {j} has type {st['type']!r}")
        if st.get("out") is None:
            if j != len(stages) - 1 or residual is not None:
                raise ValueError(f"stage {j} ({st['op']}) has no output tensor")
            y = out.name
            g.add_tensor(out)
        else:
            y = g.add_tensor(_tensor(st["out"])).name
        attrs = {k: tuple(st[k]) for k in ("stride", "dilation", "padding")}
        attrs["activation"] = st["activation"]
        if st["type"] == "depthwise_conv2d":
            attrs["depth_multiplier"] = int(st["depth_multiplier"])
        g.add_op(Op(st["type"], str(st["op"]), (prev, w, b), (y,), attrs))
        prev = y
    if residual is not None:
        g.add_tensor(out)
        pair = (prev, x.name) if int(residual["order"]) == 0 else (x.name, prev)
        g.add_op(Op("add", str(residual["op"]), pair, (out.name,),
                    {"activation": residual["activation"]}))
    g.inputs, g.outputs = [x.name], [out.name]
    return g


def unstream(graph: Graph, only: Collection[str] | None = None) -> Graph:
    """``graph`` with every stream_chain op (or those named in ``only``) replaced by the ops it
    stands for and their intermediate tensors: what a model file holds. ``graph`` itself when
    there is nothing to replace."""
    if not any(op.type == STREAM_OP and (only is None or op.name in only) for op in graph.ops):
        return graph
    g = graph.copy()
    g.ops = []
    for op in graph.ops:
        if op.type != STREAM_OP or (only is not None and op.name not in only):
            g.ops.append(op)
            continue
        sub = chain_graph(graph, op)
        for name, t in sub.tensors.items():
            g.tensors.setdefault(name, t)
        g.ops.extend(sub.ops)
    return g


# -- row bands --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RowStage:
    """What the band schedule needs of one stage: its input and output heights, the height
    of its window ((k_h - 1) * dilation + 1), stride and top padding (rows), and the bytes of
    one output row."""

    in_h: int
    out_h: int
    window: int
    stride: int
    pad: int
    row_bytes: int


def row_stages(chain: Graph) -> list[RowStage]:
    """The RowStage of every conv / depthwise stage of a ``chain_graph``."""
    out = []
    for op in chain.ops:
        if op.type not in STAGE_TYPES:
            continue
        x, y = chain.tensors[op.inputs[0]], chain.tensors[op.outputs[0]]
        k_h = chain.tensors[op.inputs[1]].shape[1]
        out.append(RowStage(int(x.shape[1]), int(y.shape[1]),
                            (int(k_h) - 1) * int(op.attrs["dilation"][0]) + 1,
                            int(op.attrs["stride"][0]), int(op.attrs["padding"][0]),
                            int(y.shape[2]) * int(y.shape[3])))
    return out


@dataclass(frozen=True)
class BandPlan:
    """The band schedule of one stream_chain op for one band height (``band_plan``)."""

    band_rows: int
    bands: int
    buffer_rows: tuple[int, ...]      # rows of stage j's output its buffer holds (j < n-1)
    buffer_offsets: tuple[int, ...]   # where each buffer starts in the kernel's scratch
    scratch_bytes: int                # the buffers (each aligned to BUFFER_ALIGNMENT)
    state_bytes: int                  # then the schedule's state (aligned)
    rows_computed: tuple[int, ...]    # rows each stage computes in all
    max_rows: tuple[int, ...]         # the most rows a stage computes in one band (one call)
    recomputed_rows: int              # rows computed more than once: 0, rows are carried
    moved_bytes: int                  # bytes of carried rows copied to a buffer's front


def band_plan(stages: Sequence[RowStage], band_rows: int) -> BandPlan:
    """Run the band schedule of a chain of ``stages`` with ``band_rows`` output rows per band
    (the steps pe_stream.h's pe_stream_run takes):

    for each band [o0, o1) of the last stage's rows, from the last stage back to the first,
    the rows each stage must have produced (``target``: enough for the window of the rows the
    next stage produces in this band); then from the first stage on, each stage that has rows
    to produce first drops from its output buffer the rows the next stage will no longer read
    (those below the top of the next stage's first window), copying the rest to the buffer's
    front, then appends its new rows. Every row of every stage is computed once (rows a window
    needs again are carried over, never recomputed); rows no window reads (the bottom of a
    strided stage's input) are not computed at all."""
    n = len(stages)
    if n == 0 or band_rows < 1:
        raise ValueError("band_plan needs at least one stage and band_rows >= 1")
    height = stages[-1].out_h
    nxt, lo, cap, computed, most = [0] * n, [0] * n, [0] * n, [0] * n, [0] * n
    moved = bands = 0
    for o0 in range(0, height, band_rows):
        bands += 1
        target = [0] * n
        target[-1] = min(height, o0 + band_rows)
        for j in range(n - 1, 0, -1):
            s = stages[j]
            if target[j] > nxt[j]:
                need = min(s.in_h, (target[j] - 1) * s.stride - s.pad + s.window)
                target[j - 1] = max(nxt[j - 1], need)
            else:
                target[j - 1] = nxt[j - 1]
        for j in range(n):
            if target[j] <= nxt[j]:
                continue
            if j < n - 1:
                reader = stages[j + 1]
                first = min(max(nxt[j + 1] * reader.stride - reader.pad, 0), nxt[j])
                if first > lo[j]:
                    moved += (nxt[j] - first) * stages[j].row_bytes
                    lo[j] = first
                cap[j] = max(cap[j], target[j] - lo[j])
            computed[j] += target[j] - nxt[j]
            most[j] = max(most[j], target[j] - nxt[j])
            nxt[j] = target[j]
    assert nxt[-1] == height
    offsets, off = [], 0
    for j in range(n - 1):
        offsets.append(off)
        off += -(-cap[j] * stages[j].row_bytes // BUFFER_ALIGNMENT) * BUFFER_ALIGNMENT
    state = -(-n * STATE_BYTES // BUFFER_ALIGNMENT) * BUFFER_ALIGNMENT
    return BandPlan(band_rows, bands, tuple(cap[:-1]), tuple(offsets), off, state,
                    tuple(computed), tuple(most), 0, moved)
