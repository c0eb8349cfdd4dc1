"""Where tensors live, which ops may share storage, and per-op kernel scratch.

Three memory pools (DESIGN.md):

- **constant** (flash): data the graph never writes — frozen weights, biases, multipliers and
  shifts, QAS factors, lookup tables (``Tensor.data`` set, not a parameter).
- **parameters** (RAM, persistent): the trainable tensors named in
  ``graph.metadata["training"]["parameters"]``, the optimizer state (``Role.OPTIMIZER_STATE``,
  or listed under ``metadata["training"]["state"]``) and anything an update op mutates
  (``attrs["updates"]``). Without a ``"training"`` record there are none.
- **arena** (RAM, reused over time): every other tensor — graph inputs, activations, gradients,
  activation masks — plus kernel scratch.

Storage sharing and scratch are facts of the *kernel* that runs an op, not of the op type: they
come from the kernel call records of the lowering stage (``codegen.backends``), which runs before
scheduling. The scheduler takes them as ``kernels``: op name -> an object with
:class:`KernelFacts`' attributes (a ``KernelCall`` is one):

- ``may_alias`` — ``(input, output)`` pairs that are zero copy: the output *is* the input's bytes
  (reshape). Applied when both are arena tensors of the same size; the two tensors then form one
  buffer that lives as long as either is used.
- ``inplace`` — inputs the kernel may write its output over (it reads them element by element,
  or row by row ahead of its writes). Applied at a step when such an input of exactly the output's
  size and dtype dies at that op (no later reader, not a graph output).
- ``scratch_bytes`` — temporary memory the kernel needs during its step (CMSIS-NN's im2col and
  kernel-sum buffers...), planned into the arena at that step like any buffer.

An op without facts (``kernels`` None, or no entry) shares nothing and needs no scratch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ..ir import Graph, Op, Role


class KernelFacts(Protocol):
    """What the scheduler and planner need to know of the kernel that runs an op."""

    scratch_bytes: int
    inplace: tuple[str, ...]
    may_alias: tuple[tuple[str, str], ...]


Kernels = Mapping[str, KernelFacts]


def align_up(n: int, alignment: int) -> int:
    return -(-int(n) // alignment) * alignment if alignment > 1 else int(n)


def mutated_tensors(graph: Graph) -> set[str]:
    """Tensors written in place by update ops (``attrs["updates"]``)."""
    out: set[str] = set()
    for op in graph.ops:
        out.update(n for n in op.attrs.get("updates", ()) or () if n)
    return out


def _names(entries: Iterable) -> list[str]:
    names = []
    for e in entries or ():
        if isinstance(e, str):
            names.append(e)
        elif isinstance(e, Mapping) and e.get("tensor"):
            names.append(str(e["tensor"]))
    return names


def parameter_tensors(graph: Graph) -> list[str]:
    """Tensors of the parameter pool, in a stable order: trainable parameters (metadata order),
    then optimizer state (metadata order, then graph order), then other mutated tensors."""
    training = graph.metadata.get("training")
    if not isinstance(training, Mapping):
        return []
    names = _names(training.get("parameters"))
    names += _names(training.get("state")) + _names(training.get("optimizer_state"))
    names += [t.name for t in graph.tensors.values() if t.role == Role.OPTIMIZER_STATE]
    mutated = mutated_tensors(graph)
    names += [n for n in graph.tensors if n in mutated]
    seen: set[str] = set()
    return [n for n in names if n in graph.tensors and not (n in seen or seen.add(n))]


def is_arena_tensor(graph: Graph, name: str, params: set[str]) -> bool:
    t = graph.tensors.get(name)
    return t is not None and not t.is_const and name not in params and t.nbytes > 0


def scratch_bytes(op: Op, kernels: Kernels | None) -> int:
    """Kernel scratch of ``op`` in bytes (0 without facts)."""
    facts = kernels.get(op.name) if kernels is not None else None
    return max(0, int(facts.scratch_bytes)) if facts is not None else 0


def kernel_aliases(op: Op, kernels: Kernels | None) -> tuple[tuple[str, str], ...]:
    """(input, output) pairs of ``op`` that may share their bytes (zero copy)."""
    facts = kernels.get(op.name) if kernels is not None else None
    return tuple(facts.may_alias) if facts is not None else ()


def inplace_candidates(graph: Graph, op: Op, kernels: Kernels | None) -> list[str]:
    """Inputs ``op``'s first output may overwrite: those its kernel allows that have the
    output's shape and dtype."""
    facts = kernels.get(op.name) if kernels is not None else None
    if facts is None or not facts.inplace or not op.outputs:
        return []
    out = graph.tensors[op.outputs[0]]
    seen: list[str] = []
    for name in facts.inplace:
        t = graph.tensors.get(name) if name in op.inputs else None
        if t is not None and t.shape == out.shape and t.dtype == out.dtype and name not in seen:
            seen.append(name)
    return seen
