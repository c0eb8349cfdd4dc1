"""Static schedule: a topological order of the graph's ops that minimises peak live arena bytes,
and the lifetimes (first definition step, last use step) of every arena buffer.

``schedule(graph)`` searches exactly (dynamic programming over the sets of executed ops) while
the number of such sets per step stays under ``max_states``, and degrades to a beam search of
that width beyond; it never returns an order worse than the given one, and keeps the given order
when it is as good. ``keep_order=True`` reproduces ``graph.ops`` exactly.

The cost model (``codegen.schedule.storage``): arena tensors at their aligned sizes, zero-copy
aliases and in-place writes and per-op scratch of the kernels that run the ops (their call
records). ``lower_bound(schedule)`` is the largest
number of bytes live at one step; the memory planner (``codegen.memplan``) places the buffers and
cannot do better than that.
"""

from __future__ import annotations

import time

from ..ir import Graph
from .lifetimes import LiveBuffer, Schedule, Sharing, build_schedule, lower_bound
from .order import is_topological, peak_of, search, simulate
from .problem import (
    UPDATE_MODES,
    Problem,
    build_problem,
    is_backward_op,
    is_update_op,
    order_edges,
    update_mode,
)
from .storage import (
    KernelFacts,
    Kernels,
    align_up,
    inplace_candidates,
    is_arena_tensor,
    kernel_aliases,
    mutated_tensors,
    parameter_tensors,
    scratch_bytes,
)

__all__ = [
    "UPDATE_MODES",
    "KernelFacts",
    "Kernels",
    "LiveBuffer",
    "Problem",
    "Schedule",
    "Sharing",
    "align_up",
    "build_problem",
    "inplace_candidates",
    "is_arena_tensor",
    "is_backward_op",
    "is_topological",
    "is_update_op",
    "kernel_aliases",
    "lower_bound",
    "mutated_tensors",
    "order_edges",
    "parameter_tensors",
    "peak_of",
    "schedule",
    "scratch_bytes",
    "simulate",
    "update_mode",
]

# Work budget of the search: about this many (state, op) expansions in all.
SEARCH_BUDGET = 300_000


def schedule(graph: Graph, *, keep_order: bool = False, alignment: int = 16,
             inplace: bool = True, kernels: Kernels | None = None,
             updates: str = "auto", max_states: int | None = None) -> Schedule:
    """Order ``graph.ops`` for minimal peak arena bytes; lifetimes of the arena buffers.

    keep_order: use graph.ops as given (no search).
    alignment: buffer sizes are rounded up to this (a power of two).
    inplace: allow the zero-copy aliases and in-place writes the kernels permit (storage.py).
    kernels: op name -> the facts of its kernel call (scratch bytes, in-place permission,
        aliases), from the lowering stage; None: nothing shared, no scratch.
    updates: "free" (data flow and read/write hazards only), "anchored" (update ops keep the
        builder's order relative to each other and to the backward ops) or "auto": anchored
        for a training graph built with ``reorder=False``, free otherwise
        (``problem.order_edges``).
    max_states: beam width of the search (sets of executed ops kept per step); by default
        derived from ``SEARCH_BUDGET`` and the graph size.
    """
    t0 = time.perf_counter()
    p = build_problem(graph, alignment=alignment, inplace=inplace, kernels=kernels,
                      updates=updates)
    given = list(range(p.n))
    given_peak = peak_of(p, given)
    stats: dict = {"updates": p.updates}
    if keep_order:
        stats["seconds"] = time.perf_counter() - t0
        return build_schedule(p, given, exact=False, method="given", given_peak=given_peak,
                              stats=stats)
    if not is_topological(p, given):
        raise ValueError(f"graph {graph.name!r}: ops are not in a valid execution order")
    if max_states is None:
        max_states = max(32, SEARCH_BUDGET // max(1, 4 * p.n))
    order, peak, exact = search(p, max_states)
    if peak >= given_peak:
        order, peak, method = given, given_peak, "given"
    else:
        method = "search" if exact else "beam"
    stats.update(seconds=time.perf_counter() - t0, max_states=max_states)
    return build_schedule(p, order, exact=exact, method=method, given_peak=given_peak,
                          stats=stats)
