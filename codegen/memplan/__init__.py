"""Memory planning: offsets of every tensor in its pool (constant / parameters / arena).

``plan_memory(graph, kernels=calls)`` schedules the graph (``codegen.schedule``), places the arena buffers with
the best of several placement algorithms plus a seeded local search (``planner``), packs the
constant and parameter pools, and returns a ``MemoryPlan`` (``to_json()`` is the ``pockengine
plan --json`` contract). ``check_budget(plan, sram_bytes)`` raises a one-line ``PockError`` when
the plan does not fit a board; ``plot_plan(plan, path)`` draws it (SVG, or PNG with matplotlib).
"""

from .plan import MemoryPlan, Placement, PlannedBuffer, check_budget, plan_memory
from .planner import (
    PLACEMENTS,
    GreedyByConflictsPlanner,
    GreedyBySizePlanner,
    GreedyPlanner,
    Interval,
    MemoryPlanner,
    OverlapError,
    SearchPlanner,
    check_overlaps,
    conflict_lists,
    live_profile,
    lower_bound,
    place,
)
from .plot import plot_plan

__all__ = ["PLACEMENTS", "GreedyByConflictsPlanner", "GreedyBySizePlanner",
           "GreedyPlanner", "Interval", "MemoryPlan", "MemoryPlanner", "OverlapError",
           "Placement", "PlannedBuffer", "SearchPlanner",
           "check_budget", "check_overlaps", "conflict_lists", "live_profile", "lower_bound",
           "place", "plan_memory", "plot_plan"]
