"""The memory plan: offsets of every tensor in its pool, pool sizes, and the board budget check.

Pools (``codegen.schedule.storage`` decides which tensor goes where):

- ``constant`` (flash): frozen constant data, packed in graph order;
- ``parameters`` (RAM, persistent): trainable parameters and optimizer state, packed in the
  order of ``graph.metadata["training"]``;
- ``arena`` (RAM, reused): activations, gradients, masks and kernel scratch, placed by the
  planner from the schedule's lifetimes.

Every offset is a multiple of ``alignment`` (16 by default), and so is every pool size.
``peak_bytes`` is the arena size (comparable with ``lower_bound_bytes``, the schedule's bound);
the RAM the model needs is ``ram_bytes`` = arena + parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PockError
from ..ir import Graph
from ..schedule import Kernels, Schedule, lower_bound, parameter_tensors
from ..schedule import schedule as make_schedule
from ..schedule.lifetimes import LiveBuffer
from ..schedule.storage import align_up
from .planner import Interval, OverlapError, SearchPlanner, check_overlaps


@dataclass(frozen=True)
class Placement:
    pool: str            # "arena" | "parameters" | "constant"
    offset: int
    nbytes: int          # the tensor's exact size


@dataclass(frozen=True)
class PlannedBuffer:
    buffer: LiveBuffer
    offset: int

    @property
    def end(self) -> int:
        return self.offset + self.buffer.size


@dataclass(frozen=True, eq=False)
class MemoryPlan:
    schedule: Schedule
    alignment: int
    buffers: tuple[PlannedBuffer, ...]       # the arena, schedule.buffers order
    offsets: dict[str, Placement]            # every tensor held in a pool
    arena_bytes: int
    params_bytes: int
    constant_bytes: int
    lower_bound_bytes: int
    algorithm: str
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def graph(self) -> Graph:
        return self.schedule.graph

    @property
    def peak_bytes(self) -> int:
        return self.arena_bytes

    @property
    def ram_bytes(self) -> int:
        return self.arena_bytes + self.params_bytes

    @property
    def param_image_bytes(self) -> int:
        """Flash for the initial values of the parameter pool (``pe_init`` copies them to RAM;
        all-zero optimizer state needs no image)."""
        g = self.graph
        return sum(align_up(p.nbytes, self.alignment) for t, p in self.pool("parameters").items()
                   if g.tensors[t].data is None or g.tensors[t].data.any())

    @property
    def flash_bytes(self) -> int:
        return self.constant_bytes + self.param_image_bytes

    def offset(self, tensor: str) -> int:
        return self.offsets[tensor].offset

    def pool(self, name: str) -> dict[str, Placement]:
        return {t: p for t, p in self.offsets.items() if p.pool == name}

    def scratch_offsets(self) -> dict[str, int]:
        """op name -> arena offset of its kernel scratch (ops that need scratch only)."""
        return {b.buffer.name.split(":", 1)[1]: b.offset for b in self.buffers
                if b.buffer.kind == "scratch"}

    def verify(self) -> None:
        """Raise OverlapError if two arena buffers live at one step share bytes, or a pool
        overlaps itself."""
        bufs = [Interval(b.buffer.size, b.buffer.first, b.buffer.last, b.buffer.name)
                for b in self.buffers]
        check_overlaps(bufs, [b.offset for b in self.buffers], self.alignment)
        for name in ("parameters", "constant"):
            spans = sorted((p.offset, p.offset + p.nbytes, t)
                           for t, p in self.pool(name).items())
            for (_s0, e0, t0), (s1, _e1, t1) in itertools.pairwise(spans):
                if s1 < e0:
                    raise OverlapError(f"{name} pool: {t0!r} and {t1!r} overlap")

    def to_json(self) -> dict[str, Any]:
        s = self.schedule
        arena = [{"name": b.buffer.name, "tensors": list(b.buffer.tensors),
                  "offset": b.offset, "size": b.buffer.size, "nbytes": b.buffer.nbytes,
                  "first": b.buffer.first, "last": b.buffer.last, "kind": b.buffer.kind}
                 for b in self.buffers]

        def listing(pool: str) -> list[dict[str, Any]]:
            return [{"name": t, "offset": p.offset, "nbytes": p.nbytes}
                    for t, p in sorted(self.pool(pool).items(), key=lambda kv: kv[1].offset)]

        return {
            "model": self.graph.name,
            "peak_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "arena_bytes": self.arena_bytes,
            "params_bytes": self.params_bytes,
            "constant_bytes": self.constant_bytes,
            "ram_bytes": self.ram_bytes,
            "flash_bytes": self.flash_bytes,
            "alignment": self.alignment,
            "algorithm": self.algorithm,
            "schedule_method": s.method,
            "schedule_exact": s.exact,
            "given_order_peak_bytes": s.given_peak,
            "pools": {
                "arena": {"bytes": self.arena_bytes, "memory": "ram", "buffers": arena},
                "parameters": {"bytes": self.params_bytes, "memory": "ram",
                               "tensors": listing("parameters")},
                "constant": {"bytes": self.constant_bytes, "memory": "flash",
                             "tensors": listing("constant")},
            },
            "schedule": [op.name for op in s.ops],
            "steps": [{"step": k, "op": op.name, "type": op.type, "live_bytes": live,
                       "scratch_bytes": scr}
                      for k, (op, live, scr) in enumerate(zip(s.ops, s.live_bytes, s.scratch))],
            "sharing": [{"op": sh.op, "output": sh.output, "input": sh.input, "kind": sh.kind}
                        for sh in s.sharing],
        }

    def describe(self) -> str:
        kib = _kib
        return (f"{self.graph.name}: arena {kib(self.arena_bytes)} (lower bound "
                f"{kib(self.lower_bound_bytes)}, {self.algorithm}), parameters "
                f"{kib(self.params_bytes)}, constants {kib(self.constant_bytes)} (flash); "
                f"{len(self.schedule.ops)} steps, schedule {self.schedule.method}")


def _pack(graph: Graph, names: Sequence[str], pool: str, alignment: int,
          out: dict[str, Placement]) -> int:
    """Tensors one after the other, each at a multiple of ``alignment``, but a scalar (at most
    4 bytes: a step or saturation counter) at a multiple of 4 only, beside the one before."""
    off = 0
    for t in names:
        nb = graph.tensors[t].nbytes
        off = align_up(off, alignment if nb > 4 else 4)
        out[t] = Placement(pool, off, nb)
        off += nb
    return align_up(off, alignment)


def plan_memory(graph: Graph, schedule: Schedule | None = None, *, keep_order: bool = False,
                alignment: int = 16, inplace: bool = True, kernels: Kernels | None = None,
                updates: str = "auto", iterations: int = 400, seed: int = 0,
                placements: Sequence[str] | None = None) -> MemoryPlan:
    """Schedule ``graph`` (unless ``schedule`` is given: then its alignment, sharing and
    scratch are used) and place every tensor in its pool.

    kernels: op name -> its kernel call record (scratch, in-place permission, aliases: the
        lowering stage's choice); without them nothing is shared and no scratch is planned.
    keep_order, alignment, inplace, updates: see ``codegen.schedule.schedule``.
    iterations, seed: the planner's improvement search (deterministic for a seed).
    placements: the greedy placement orders to try (default: all of ``planner.PLACEMENTS``).
    """
    sched = schedule
    if sched is None:
        sched = make_schedule(graph, keep_order=keep_order, alignment=alignment,
                              inplace=inplace, kernels=kernels, updates=updates)
    elif sched.graph is not graph:
        raise ValueError("the schedule belongs to another graph")
    alignment = sched.alignment
    planner = SearchPlanner(alignment, iterations=iterations, seed=seed, placements=placements)
    for b in sched.buffers:
        planner.add_buffer(b.size, b.first, b.last, b.name)
    offs = planner.offsets
    planner.verify()
    buffers = tuple(PlannedBuffer(b, o) for b, o in zip(sched.buffers, offs))
    offsets: dict[str, Placement] = {}
    for pb in buffers:
        for t in pb.buffer.tensors:
            offsets[t] = Placement("arena", pb.offset, graph.tensors[t].nbytes)
    params = parameter_tensors(graph)
    pset = set(params)
    used: list[str] = []
    seen: set[str] = set()
    for op in graph.ops:
        for t in op.inputs:
            if t and t not in seen and t not in pset and graph.tensors[t].is_const:
                seen.add(t)
                used.append(t)
    constants = [t for t in graph.tensors if t in seen]
    params_bytes = _pack(graph, params, "parameters", alignment, offsets)
    constant_bytes = _pack(graph, constants, "constant", alignment, offsets)
    arena_bytes = align_up(planner.peak(), alignment)
    return MemoryPlan(sched, alignment, buffers, offsets, arena_bytes, params_bytes,
                      constant_bytes, lower_bound(sched), planner.algorithm,
                      {"planner": planner.stats, "schedule": sched.stats})


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def _budget_kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n / 1024:.1f} KiB"


def check_budget(plan: MemoryPlan, sram_bytes: int, flash_bytes: int | None = None, *,
                 board: str | None = None) -> MemoryPlan:
    """Raise PockError (one line: needed vs available bytes) if the plan does not fit the
    board's SRAM (arena + parameters) or flash (constants; when ``flash_bytes`` is given)."""
    who = f"board {board}" if board else "board"
    name = plan.graph.name
    if plan.ram_bytes > sram_bytes:
        raise PockError(f"{name}: needs {_kib(plan.ram_bytes)} SRAM (arena "
                        f"{_kib(plan.arena_bytes)} + parameters {_kib(plan.params_bytes)}), "
                        f"{who} has {_budget_kib(sram_bytes)}")
    if flash_bytes is not None and plan.flash_bytes > flash_bytes:
        raise PockError(f"{name}: needs {_kib(plan.flash_bytes)} flash (constants "
                        f"{_kib(plan.constant_bytes)} + parameter images "
                        f"{_kib(plan.param_image_bytes)}), {who} has "
                        f"{_budget_kib(flash_bytes)}")
    return plan
