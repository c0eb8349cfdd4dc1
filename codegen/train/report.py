"""Reading a training graph: op phases, what the backward keeps, a printable dump.

``format_training_graph(g)`` is what ``pockengine plan`` (and a debugging session) prints:
one line per op with its phase and outputs (shape, dtype, bytes), then the forward tensors
saved for the backward and the bytes of parameters, optimizer state and constants.
"""

from __future__ import annotations

from typing import Any

from ..ir import Graph, Op, Role
from ..ir.ops import TRAINING_OP_SPECS, UPDATE_OPS
from ..partial import MERGE_OP

LOSS_OPS = ("softmax_cross_entropy", "mse_loss")


def phase(op: Op) -> str:
    """forward | mask | loss | backward | update (a partial weight's merge: its reader's,
    attr ``phase``)."""
    if op.type == MERGE_OP:
        return str(op.attrs.get("phase", "forward"))
    if op.type not in TRAINING_OP_SPECS:
        return "forward"
    if op.type == "act_mask":
        return "mask"
    if op.type in LOSS_OPS:
        return "loss"
    if op.type in UPDATE_OPS:
        return "update"
    return "backward"


def backward_ops(g: Graph) -> list[Op]:
    return [op for op in g.ops if phase(op) == "backward"]


def update_ops(g: Graph) -> list[Op]:
    return [op for op in g.ops if phase(op) == "update"]


def saved_activations(g: Graph) -> list[str]:
    """Non-constant tensors made before the loss (forward activations, graph inputs, masks)
    that a backward or update op reads: what must stay alive from the forward pass."""
    forward: set[str] = set(g.inputs)
    for op in g.ops:
        if phase(op) in ("forward", "mask"):
            forward.update(op.outputs)
    seen: dict[str, None] = {}
    for op in g.ops:
        if phase(op) in ("backward", "update"):
            for n in op.inputs:
                if n in forward and not g.tensors[n].is_const:
                    seen[n] = None
    return list(seen)


def training_summary(g: Graph) -> dict[str, Any]:
    """Counts and bytes of a training graph (JSON-friendly)."""
    meta = g.metadata.get("training", {})
    saved = saved_activations(g)
    params = [p["tensor"] for p in meta.get("parameters", [])]
    state = [s["tensor"] for s in meta.get("state", [])]
    consts = [t.name for t in g.tensors.values() if t.role == Role.CONSTANT and t.is_const]
    grads = [t for t in g.tensors.values() if t.role == Role.GRADIENT]
    phases: dict[str, int] = {}
    for op in g.ops:
        phases[phase(op)] = phases.get(phase(op), 0) + 1

    def nbytes(names: list[str]) -> int:
        return sum(g.tensors[n].nbytes for n in names)

    return {
        "mode": meta.get("mode"),
        "ops": phases,
        "saved_activations": len(saved),
        "saved_activation_bytes": nbytes(saved),
        "mask_bytes": nbytes([n for n in saved if g.tensors[n].dtype == "bit"]),
        "trainable_parameters": len(params),
        "trainable_parameter_bytes": nbytes(params),
        "optimizer_state": len(state),
        "optimizer_state_bytes": nbytes(state),
        "constant_bytes": nbytes(consts),
        "gradient_tensors": len(grads),
        "largest_gradient_bytes": max((t.nbytes for t in grads), default=0),
    }


def _short(name: str, width: int = 44) -> str:
    """The readable tail of a (TFLite-style, ';'-joined) tensor or op name."""
    tail = name.rsplit(";", 1)[-1] if ";" in name and len(name) > width else name
    return tail if len(tail) <= width else "…" + tail[-(width - 1):]


def _tensor(g: Graph, name: str) -> str:
    if not name:
        return "-"
    t = g.tensors[name]
    return f"{_short(name, 36)} {t.dtype}[{','.join(map(str, t.shape))}] {t.nbytes} B"


def format_training_graph(g: Graph) -> str:
    """A readable dump of a training graph (ops, outputs, saved activations, memory)."""
    meta = g.metadata.get("training", {})
    opt = meta.get("optimizer", {})
    head = (f"training graph {g.name!r}: backward {meta.get('mode')}, loss {meta.get('loss')}, "
            f"{opt.get('name')} lr={opt.get('lr')}"
            + (f" momentum={opt.get('momentum')}" if opt.get("momentum") else "")
            + f", reorder {'on' if meta.get('reorder') else 'off'}")
    lines = [head, f"{'#':>4}  {'phase':<8}  {'op':<28}  {'name':<44}  outputs / updates"]
    for i, op in enumerate(g.ops):
        if op.outputs:
            what = ", ".join(_tensor(g, o) for o in op.outputs)
        else:
            what = "updates " + ", ".join(_short(n, 36) for n in op.attrs.get("updates", ()))
            ch = op.attrs.get("channels")
            if "kind" in op.attrs:
                what += f" ({op.attrs['kind']}"
                what += f", {len(ch)} channels)" if ch is not None else ")"
        lines.append(f"{i:>4}  {phase(op):<8}  {op.type:<28}  {_short(op.name):<44}  {what}")
    saved = saved_activations(g)
    s = training_summary(g)
    lines.append(f"saved for backward: {len(saved)} tensors, {s['saved_activation_bytes']} B "
                 f"({s['mask_bytes']} B of 1-bit masks)")
    for n in saved:
        lines.append(f"      {_tensor(g, n)}")
    lines.append(f"trainable parameters: {s['trainable_parameters']} tensors, "
                 f"{s['trainable_parameter_bytes']} B; optimizer state: {s['optimizer_state']} "
                 f"tensors, {s['optimizer_state_bytes']} B; constants {s['constant_bytes']} B; "
                 f"largest gradient {s['largest_gradient_bytes']} B")
    return "\n".join(lines)


def saturation_line(total: int, per_step: list[int]) -> str:
    """One line for a person: how many parameter updates saturated in a run (``fit`` and
    ``sim``; the counts of ``golden.training.fit`` / ``<prefix>_saturation_count()``)."""
    if not total:
        return "saturation: none (no parameter update was clamped)"
    hit = [k for k, n in enumerate(per_step) if n]
    first = f", first at step {hit[0] + 1}" if hit else ""
    return (f"saturation: {total:,} parameter updates clamped to the int8/int32 range in "
            f"{len(hit):,} of {len(per_step):,} steps{first} (the learning rate is too high "
            "for these parameters: lower it or train with master_weights)")
