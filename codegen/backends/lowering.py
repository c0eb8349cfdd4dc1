"""Lowering: one kernel call record per op, chosen along a board's chain of backends.

For every op, each backend of the chain whose builder accepts it is a *candidate*. The choice:

1. a pin (``kernels: {conv_12: ref}`` in a spec, or the API's ``pins``) names the backend;
2. else a cost function (``cost(op, call) -> instructions | None``: measured counts or the
   static cost model of ``codegen.backends.cost``) picks the cheapest candidate, when it can
   price them all;
3. else the first candidate in chain order.

The result maps op names to records; the scheduler and planner read each record's scratch and
in-place facts, and the renderer emits them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import ModelError, PockError
from ..ir import Graph, Op
from .base import Backend, Target
from .kernel_call import KernelCall

CostFn = Callable[[Op, KernelCall], "float | None"]


@dataclass(frozen=True)
class Choice:
    """The kernel chosen for one op, the candidates it was chosen from, and why."""

    call: KernelCall
    candidates: tuple[KernelCall, ...]
    reason: str                       # pinned | cheapest | chain order | only candidate
    costs: tuple[float | None, ...] = ()


@dataclass(frozen=True, eq=False)
class Lowering:
    """Kernel records of one graph's ops, by op name (graph order kept)."""

    graph: Graph
    choices: Mapping[str, Choice]
    backends: tuple[Backend, ...]
    cost: CostFn | None = None        # what the choices were priced by
    target: Target = field(default_factory=Target)
    pins: Mapping[str, str] = field(default_factory=dict)

    @property
    def chain(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)

    def with_pins(self, pins: Mapping[str, str]) -> Lowering:
        """The same lowering with more ops pinned (same chain, cost and target)."""
        return lower_graph(self.graph, self.backends, pins={**self.pins, **pins},
                           cost=self.cost, target=self.target)

    @property
    def calls(self) -> dict[str, KernelCall]:
        return {name: c.call for name, c in self.choices.items()}

    def in_order(self, ops: Sequence[Op]) -> tuple[KernelCall, ...]:
        return tuple(self.choices[op.name].call for op in ops)

    def table(self) -> list[dict]:
        """Per op: kernel, backend, scratch, candidates with their costs (JSON-ready)."""
        rows = []
        for op in self.graph.ops:
            c = self.choices[op.name]
            rows.append({"op": op.name, "type": op.type, "kernel": c.call.kernel,
                         "backend": c.call.backend, "scratch_bytes": c.call.scratch_bytes,
                         "macs": c.call.macs, "reason": c.reason,
                         "candidates": [{"backend": k.backend, "kernel": k.kernel,
                                         "scratch_bytes": k.scratch_bytes, "cost": cost}
                                        for k, cost in zip(c.candidates, c.costs or
                                                           (None,) * len(c.candidates))]})
        return rows


def lower_graph(graph: Graph, chain: Sequence[Backend], *, pins: Mapping[str, str] | None = None,
                cost: CostFn | None = None, batch: int = 1, target: Target | None = None
                ) -> Lowering:
    """Records for every op of ``graph`` along ``chain`` for ``target`` (default: the host);
    see the module docstring."""
    if not chain:
        raise PockError("no backend to lower the graph with")
    pins = dict(pins or {})
    names = {b.name for b in chain}
    op_names = {op.name for op in graph.ops}
    for op_name, backend in pins.items():
        if op_name not in op_names:
            raise PockError(f"kernels: no op {op_name!r} in graph {graph.name!r} to pin")
        if backend not in names:
            raise PockError(f"kernels: {op_name} is pinned to backend {backend!r}, which is not "
                            f"in this build's chain ({', '.join(b.name for b in chain)})")
    choices: dict[str, Choice] = {}
    for op in graph.ops:
        choices[op.name] = _choose(graph, op, chain, pins.get(op.name), cost, batch,
                                   target or Target())
    return Lowering(graph, choices, tuple(chain), cost, target or Target(), pins)


def _choose(graph: Graph, op: Op, chain: Sequence[Backend], pin: str | None,
            cost: CostFn | None, batch: int, target: Target) -> Choice:
    candidates: list[KernelCall] = []
    error: ModelError | None = None
    for backend in chain:
        if pin is not None and backend.name != pin:
            continue
        try:
            call = backend.build(graph, op, batch, target)
        except ModelError as e:           # this backend cannot; maybe no backend can
            error = error or e
            continue
        if call is not None:
            candidates.append(call)
    if not candidates:
        if error is not None:
            raise error
        where = f"backend {pin}" if pin else f"backends {', '.join(b.name for b in chain)}"
        raise ModelError(f"op {op.name!r} ({op.type}): no kernel for it in {where}")
    if pin is not None:
        return Choice(candidates[0], tuple(candidates), "pinned")
    if len(candidates) == 1:
        return Choice(candidates[0], tuple(candidates), "only candidate")
    costs = tuple(cost(op, c) for c in candidates) if cost is not None else ()
    if costs and all(v is not None for v in costs):
        best = min(range(len(costs)), key=lambda i: (costs[i], i))   # ties: chain order
        return Choice(candidates[best], tuple(candidates), "cheapest", costs)
    return Choice(candidates[0], tuple(candidates), "chain order", costs)   # not all priced
