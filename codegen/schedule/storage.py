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

Storage sharing (decided per schedule, see ``codegen.schedule.lifetimes``):

- ``ALIAS_OPS`` — zero copy: the output *is* the input's bytes (reshape, reshape_grad). Always
  applied when the input is an arena tensor of the same size; the two tensors then form one
  buffer that lives as long as either is used.
- ``INPLACE_OPS`` — the kernel may write its output over an input it reads element by element
  (``out[i]`` depends only on ``in[i]`` of each input): relu, relu6, mask_grad, add, mul,
  grad_add. Applied at a step when an input of exactly the output's shape and dtype dies at
  that op (no later reader, not a graph output). Kernels for these ops must therefore accept
  ``out == in`` (and must not assume ``restrict``).

Kernel scratch: ``SCRATCH_RULES`` maps an op type to a function ``(graph, op) -> bytes`` of
temporary memory the kernel needs during its step (counted in the arena at that step). The
portable reference kernels need none, so the table starts empty; a backend passes its own table
(e.g. CMSIS-NN's im2col buffer sizes) to ``schedule()`` / ``plan_memory()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..ir import Graph, Op, Role

ALIAS_OPS: tuple[str, ...] = ("reshape", "reshape_grad")
INPLACE_OPS: tuple[str, ...] = ("relu", "relu6", "mask_grad", "add", "mul", "grad_add")

ScratchFn = Callable[[Graph, Op], int]
ScratchRules = Mapping[str, ScratchFn]
SCRATCH_RULES: dict[str, ScratchFn] = {}


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


def scratch_bytes(graph: Graph, op: Op, rules: ScratchRules | None = None) -> int:
    """Kernel scratch of ``op`` in bytes (0 when the table has no rule for its type)."""
    fn = (SCRATCH_RULES if rules is None else rules).get(op.type)
    return max(0, int(fn(graph, op))) if fn is not None else 0


def inplace_candidates(graph: Graph, op: Op) -> list[str]:
    """Inputs ``op``'s first output may overwrite (same shape and dtype), per INPLACE_OPS."""
    if op.type not in INPLACE_OPS or not op.outputs:
        return []
    out = graph.tensors[op.outputs[0]]
    seen: list[str] = []
    for name in op.inputs:
        t = graph.tensors.get(name) if name else None
        if t is not None and t.shape == out.shape and t.dtype == out.dtype and name not in seen:
            seen.append(name)
    return seen
