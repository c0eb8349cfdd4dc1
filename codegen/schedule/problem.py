"""The scheduling problem of one graph: storage groups, their consumers, order constraints.

A *storage group* is a set of arena tensors that always share bytes (a tensor and its zero-copy
reshapes). A group is born when the op producing its first tensor runs (graph inputs: before
step 0) and dies after the last op reading any of its tensors (graph outputs: never). The bytes
live while op ``o`` runs from the state "ops in S have run" are::

    live(S) + births(o) - inplace_saving(S, o) + scratch(o)

and ``live(S)`` depends on S only, which is what makes the dynamic program over executed-op sets
exact (``codegen.schedule.order``).

Order constraints besides data flow (``order_edges``):

- *hazards*: for a tensor an op mutates (``attrs["updates"]``: parameters, optimizer state),
  every op touching it keeps its given order relative to each op that mutates it, so readers see
  the value the builder intended;
- ``step_counter`` runs last (docs/training.md);
- ``attrs["after"]``: an op runs after the ops it names (the blocks of a blocked update run
  in order: block k + 1's gradient after block k's update, ``codegen.blocks``);
- *anchored updates* (``updates="anchored"``): update ops keep their given order relative to
  each other and to every backward op (loss, gradient ops), i.e. the builder's placement.

With ``updates="free"`` only data flow and hazards constrain the update ops: any such order
computes exactly the same values, and the search may move a weight-gradient op together with
its update later than the builder put them (e.g. after the layer's grad_input has been consumed
further down the backward pass) when that lowers the peak. ``"auto"`` (default) anchors the
updates of a graph built with ``reorder=False`` — the "no update reordering" baseline keeps all
updates at the end — and leaves those of a reordered graph free.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Graph, Op, Role
from ..ir.ops import TRAINING_OP_SPECS, UPDATE_OPS
from .storage import (
    Kernels,
    align_up,
    inplace_candidates,
    is_arena_tensor,
    kernel_aliases,
    parameter_tensors,
    scratch_bytes,
)


def is_update_op(op: Op) -> bool:
    return op.type in UPDATE_OPS or (not op.outputs and "updates" in op.attrs)


def is_backward_op(graph: Graph, op: Op) -> bool:
    """Loss and gradient ops: training ops other than act_mask and updates, or any op reading a
    gradient tensor."""
    if is_update_op(op):
        return False
    if op.type in TRAINING_OP_SPECS and op.type != "act_mask":
        return True
    return any(graph.tensors[n].role == Role.GRADIENT for n in op.inputs if n in graph.tensors)


UPDATE_MODES = ("auto", "free", "anchored")


def update_mode(graph: Graph, updates: str = "auto") -> str:
    """"auto": "anchored" for a training graph built with ``reorder=False`` (the baseline
    without update reordering), else "free"."""
    if updates not in UPDATE_MODES:
        raise ValueError(f"updates must be one of {UPDATE_MODES}, got {updates!r}")
    if updates != "auto":
        return updates
    training = graph.metadata.get("training")
    if isinstance(training, dict) and training.get("reorder") is False:
        return "anchored"
    return "free"


def order_edges(graph: Graph, updates: str = "auto") -> list[set[int]]:
    """preds[i]: indices of ops that must run before op i (data, hazards, anchors)."""
    updates = update_mode(graph, updates)
    ops = graph.ops
    n = len(ops)
    producer: dict[str, int] = {}
    for i, op in enumerate(ops):
        for t in op.outputs:
            if t:
                producer[t] = i
    preds: list[set[int]] = [set() for _ in range(n)]
    for i, op in enumerate(ops):
        for t in op.inputs:
            p = producer.get(t) if t else None
            if p is not None and p != i:
                preds[i].add(p)
    # hazards on mutated tensors
    touching: dict[str, list[int]] = {}
    writers: dict[str, set[int]] = {}
    for i, op in enumerate(ops):
        for t in set(op.inputs) | set(op.outputs):
            if t:
                touching.setdefault(t, []).append(i)
        for t in op.attrs.get("updates", ()) or ():
            if t:
                writers.setdefault(t, set()).add(i)
                if i not in touching.setdefault(t, []):
                    touching[t].append(i)
    for t, ws in writers.items():
        idx = sorted(touching[t])
        for a_pos, a in enumerate(idx):
            for b in idx[a_pos + 1:]:
                if a in ws or b in ws:
                    preds[b].add(a)
    index = {op.name: i for i, op in enumerate(ops)}
    for i, op in enumerate(ops):
        if op.type == "step_counter":        # always the last op (docs/training.md)
            preds[i].update(range(i))
        for name in op.attrs.get("after", ()) or ():
            if name in index and index[name] != i:
                preds[i].add(index[name])
    if updates == "anchored":
        ups = [i for i, op in enumerate(ops) if is_update_op(op)]
        if ups:
            backward = [i for i, op in enumerate(ops) if is_backward_op(graph, op)]
            for u_pos, u in enumerate(ups):
                if u_pos:
                    preds[u].add(ups[u_pos - 1])
                for b in backward:
                    if b < u:
                        preds[u].add(b)
                    else:
                        preds[b].add(u)
    return preds


@dataclass
class Problem:
    """Everything the order search and the lifetime computation need, indexed by op/group."""

    graph: Graph
    alignment: int
    inplace: bool
    arena: set[str]                   # arena tensor names
    group_of: dict[str, int]          # arena tensor -> group
    members: list[list[str]]          # group -> tensors (root first)
    size: list[int]                   # group -> aligned bytes
    pinned: list[bool]                # group holds a graph output: never dies
    birth: list[int]                  # op index creating the group, -1 for graph inputs
    cons: list[int]                   # group -> bitmask of ops reading it
    reads: list[tuple[int, ...]]      # op -> groups it reads
    births: list[tuple[int, ...]]     # op -> groups it creates
    candidates: list[tuple[tuple[int, int, str, str], ...]]  # op -> (G in, H out, in, out)
    alias_pairs: list[tuple[int, str, str]]  # (op index, output, input) zero-copy aliases
    scratch: list[int]                # op -> kernel scratch bytes (aligned)
    preds: list[int]                  # op -> bitmask of predecessors
    succs: list[list[int]]
    updates: str                      # "free" | "anchored"

    @property
    def n(self) -> int:
        return len(self.graph.ops)


def build_problem(graph: Graph, *, alignment: int = 16, inplace: bool = True,
                  kernels: Kernels | None = None, updates: str = "auto") -> Problem:
    if alignment < 1 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    ops = graph.ops
    params = set(parameter_tensors(graph))
    referenced = [*graph.inputs, *(t for op in ops for t in op.inputs + op.outputs),
                  *graph.outputs]
    names = [t for t in dict.fromkeys(referenced) if t and is_arena_tensor(graph, t, params)]
    arena = set(names)
    parent = {t: t for t in names}

    def find(t: str) -> str:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    alias_pairs: list[tuple[int, str, str]] = []
    aliased: set[str] = set()
    if inplace:
        for i, op in enumerate(ops):
            for x, y in kernel_aliases(op, kernels):
                if x in arena and y in arena and x != y and y not in graph.inputs \
                        and graph.tensors[x].nbytes == graph.tensors[y].nbytes:
                    parent[find(y)] = find(x)
                    aliased.add(y)
                    alias_pairs.append((i, y, x))
    root_index: dict[str, int] = {}
    members: list[list[str]] = []
    group_of: dict[str, int] = {}
    for t in names:
        r = find(t)
        if r not in root_index:
            root_index[r] = len(members)
            members.append([])
        group_of[t] = root_index[r]
    for t in names:
        group = members[group_of[t]]
        if t in aliased:
            group.append(t)
        else:
            group.insert(0, t)          # the root: the one tensor not made by an alias op
    n_groups = len(members)
    producer: dict[str, int] = {t: i for i, op in enumerate(ops) for t in op.outputs if t}
    outputs = set(graph.outputs)
    size = [align_up(max(graph.tensors[t].nbytes for t in m), alignment) for m in members]
    pinned = [any(t in outputs for t in m) for m in members]
    birth = [producer.get(m[0], -1) for m in members]
    cons = [0] * n_groups
    reads: list[tuple[int, ...]] = []
    births: list[list[int]] = [[] for _ in ops]
    for g, b in enumerate(birth):
        if b >= 0:
            births[b].append(g)
    candidates: list[tuple[tuple[int, int, str, str], ...]] = []
    for i, op in enumerate(ops):
        rg: list[int] = []
        for t in op.inputs:
            if t in arena:
                g = group_of[t]
                cons[g] |= 1 << i
                if g not in rg:
                    rg.append(g)
        reads.append(tuple(rg))
        cands = []
        if inplace and op.outputs and op.outputs[0] in arena:
            y = op.outputs[0]
            h = group_of[y]
            if birth[h] == i:
                for x in inplace_candidates(graph, op, kernels):
                    if x in arena and group_of[x] != h and size[group_of[x]] == size[h]:
                        cands.append((group_of[x], h, x, y))
        candidates.append(tuple(cands))
    scratch = [align_up(scratch_bytes(op, kernels), alignment) for op in ops]
    pred_sets = order_edges(graph, updates)
    preds = [sum(1 << p for p in s) for s in pred_sets]
    succs: list[list[int]] = [[] for _ in ops]
    for i, s in enumerate(pred_sets):
        for p in s:
            succs[p].append(i)
    return Problem(graph, alignment, inplace, arena, group_of, members, size, pinned, birth,
                   cons, reads, [tuple(b) for b in births], candidates, alias_pairs, scratch,
                   preds, [sorted(s) for s in succs], update_mode(graph, updates))
