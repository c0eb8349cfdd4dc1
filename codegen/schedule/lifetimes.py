"""The static schedule: op order, arena buffers and their lifetimes (in steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import Graph, Op, Role
from .order import Step, simulate
from .problem import Problem


@dataclass(frozen=True)
class LiveBuffer:
    """One arena buffer: tensors sharing the same bytes, live from ``first`` to ``last`` (steps,
    inclusive). ``size`` is aligned; ``nbytes`` the largest member's exact size."""

    name: str                      # its first tensor (or "scratch:<op>")
    tensors: tuple[str, ...]
    size: int
    nbytes: int
    first: int
    last: int
    kind: str                      # input | output | activation | gradient | mask | scratch

    def overlaps(self, other: LiveBuffer) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Sharing:
    """``output`` occupies ``input``'s bytes: a zero-copy alias or an in-place write."""

    op: str
    output: str
    input: str
    kind: str                      # "alias" | "inplace"


@dataclass(frozen=True, eq=False)
class Schedule:
    graph: Graph
    ops: tuple[Op, ...]                     # in execution order
    buffers: tuple[LiveBuffer, ...]         # arena buffers incl. per-step kernel scratch
    lifetimes: dict[str, tuple[int, int]]   # arena tensor -> (first def step, last use step)
    buffer_of: dict[str, int]               # arena tensor -> index into buffers
    sharing: tuple[Sharing, ...]
    live_bytes: tuple[int, ...]             # per step, incl. scratch (aligned sizes)
    scratch: tuple[int, ...]                # per step kernel scratch bytes (aligned)
    alignment: int
    exact: bool                             # the order is proven optimal for this cost model
    method: str                             # given | search | beam
    given_peak: int                         # peak of graph.ops in their given order
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)

    @property
    def peak(self) -> int:
        return max(self.live_bytes, default=0)

    def buffer(self, tensor: str) -> LiveBuffer:
        return self.buffers[self.buffer_of[tensor]]


def lower_bound(schedule: Schedule) -> int:
    """Max over steps of the arena bytes live at that step: no placement can do better."""
    return schedule.peak


def _kind(graph: Graph, tensors: list[str]) -> str:
    if any(t in graph.outputs for t in tensors):
        return "output"
    if any(t in graph.inputs for t in tensors):
        return "input"
    t = graph.tensors[tensors[0]]
    if t.dtype == "bit":
        return "mask"
    if t.role == Role.GRADIENT:
        return "gradient"
    return "activation"


def build_schedule(p: Problem, order: list[int], *, exact: bool, method: str,
                   given_peak: int, stats: dict[str, Any] | None = None) -> Schedule:
    g = p.graph
    n = len(order)
    steps: list[Step] = simulate(p, order)
    pos = {o: k for k, o in enumerate(order)}
    n_groups = len(p.members)
    first = [0 if b < 0 else pos[b] for b in p.birth]
    last = []
    for gi in range(n_groups):
        if p.pinned[gi]:
            last.append(max(n - 1, first[gi]))
        else:
            users = [pos[o] for o in range(p.n) if p.cons[gi] >> o & 1]
            last.append(max(users, default=first[gi]))
    # merge groups through in-place writes into buffers
    buf_of_group = list(range(n_groups))
    sharing: list[Sharing] = [Sharing(g.ops[i].name, y, x, "alias") for i, y, x in p.alias_pairs]
    for s in steps:
        if s.inplace is not None:
            y, x = s.inplace
            gy, gx = p.group_of[y], p.group_of[x]
            buf_of_group[gy] = buf_of_group[gx]
            sharing.append(Sharing(g.ops[s.op].name, y, x, "inplace"))
    # resolve chains (an in-place output written over again later)
    for gi in range(n_groups):
        r = gi
        while buf_of_group[r] != r:
            r = buf_of_group[r]
        buf_of_group[gi] = r
    roots = sorted(set(buf_of_group), key=lambda r: (first[r], r))
    buffers: list[LiveBuffer] = []
    group_buffer: dict[int, int] = {}
    for r in roots:
        groups = sorted((gi for gi in range(n_groups) if buf_of_group[gi] == r),
                        key=lambda gi: (first[gi], gi))
        tensors = [t for gi in groups for t in p.members[gi]]
        for gi in groups:
            group_buffer[gi] = len(buffers)
        buffers.append(LiveBuffer(tensors[0], tuple(tensors), max(p.size[gi] for gi in groups),
                                  max(g.tensors[t].nbytes for t in tensors),
                                  min(first[gi] for gi in groups),
                                  max(last[gi] for gi in groups), _kind(g, tensors)))
    for k, s in enumerate(steps):
        if p.scratch[s.op]:
            op = g.ops[s.op]
            buffers.append(LiveBuffer(f"scratch:{op.name}", (), p.scratch[s.op],
                                      p.scratch[s.op], k, k, "scratch"))
    lifetimes: dict[str, tuple[int, int]] = {}
    made: dict[str, int] = {}
    used: dict[str, int] = {}
    for k, o in enumerate(order):
        op = g.ops[o]
        for t in op.outputs:
            made.setdefault(t, k)
        for t in op.inputs:
            used[t] = k
    for t in p.group_of:
        f = 0 if t in g.inputs else made.get(t, 0)
        end = n - 1 if t in g.outputs else used.get(t, f)
        lifetimes[t] = (f, max(end, f))
    return Schedule(graph=g, ops=tuple(g.ops[o] for o in order), buffers=tuple(buffers),
                    lifetimes=lifetimes,
                    buffer_of={t: group_buffer[gi] for t, gi in p.group_of.items()},
                    sharing=tuple(sharing), live_bytes=tuple(s.live for s in steps),
                    scratch=tuple(p.scratch[o] for o in order), alignment=p.alignment,
                    exact=exact, method=method, given_peak=given_peak, stats=dict(stats or {}))
