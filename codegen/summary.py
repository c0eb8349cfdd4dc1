"""Model summary for `pockengine inspect`: ops, shapes, dtypes, quant params, MACs, bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ir import PARAMETRIC_OPS, Graph, Op, Role, Tensor
from .train.spec import layer_kind, parametric_layers


def op_macs(graph: Graph, op: Op) -> int:
    """Multiply-accumulates of one op for batch 1."""
    out = graph.tensors[op.outputs[0]]
    if op.type == "conv2d":
        _, kh, kw, ic = graph.tensors[op.inputs[1]].shape
        return out.size * kh * kw * ic
    if op.type == "depthwise_conv2d":
        _, kh, kw, _ = graph.tensors[op.inputs[1]].shape
        return out.size * kh * kw
    if op.type == "fully_connected":
        o, i = graph.tensors[op.inputs[1]].shape
        return out.size // o * o * i
    return 0


def kernel_macs(graph: Graph, op: Op) -> int:
    """Multiply-accumulates of one op of any graph (batch 1): ``op_macs`` for forward ops;
    the input gradient of a conv, depthwise conv or FC layer takes as many as its forward op,
    the weight gradient as many times the share of the weight's entries it computes (the
    selected channels); other ops count none."""
    if not op.outputs:
        return 0
    base = op_macs(graph, op)
    if base or not op.type.endswith(("_grad_input", "_grad_weight")):
        return base
    fwd = next((o for o in graph.ops if o.name == op.attrs.get("forward")), None)
    if fwd is None or fwd.type not in PARAMETRIC_OPS:
        return 0
    macs = op_macs(graph, fwd)
    if op.type.endswith("_grad_weight"):
        w, g = graph.tensors[fwd.inputs[1]], graph.tensors[op.outputs[0]]
        macs = macs * g.size // max(1, w.size)
    return macs


def _quant(t: Tensor) -> dict[str, Any] | None:
    q = t.quant
    if q is None:
        return None
    if q.axis is None:
        return {"scale": q.s, "zero_point": q.zp}
    return {"axis": q.axis, "channels": int(q.scale.size),
            "scale_min": float(q.scale.min()), "scale_max": float(q.scale.max()),
            "zero_point": int(q.zero_point[0]) if np.all(q.zero_point == q.zero_point[0])
            else [int(z) for z in q.zero_point]}


def _tensor(t: Tensor) -> dict[str, Any]:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "role": t.role.value,
            "quant": _quant(t)}


def _attr(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_attr(x) for x in v]
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    return v


def trainable_layers(graph: Graph) -> list[dict[str, Any]]:
    """The parametric layers as a training spec selects them: ``index`` (the spec's index),
    ``name`` (the op's full name), ``type``, ``kind`` (conv, dwconv, fc, gconv) and
    ``kind_index`` (its index among the layers of its kind: ``bias:conv.2``), the weight's
    shape and what can train (``trainable``: weight when it is a constant, bias when the layer
    has one; a float model's layers all get one when quantized)."""
    quantized = graph.tensors[graph.inputs[0]].dtype != "float32" if graph.inputs else True
    seen: dict[str, int] = {}
    out = []
    for i, op in enumerate(parametric_layers(graph)):
        kind = layer_kind(graph, op)
        seen[kind] = seen.get(kind, -1) + 1
        w = graph.tensors[op.inputs[1]]
        has_bias = len(op.inputs) > 2 and bool(op.inputs[2])
        out.append({"index": i, "name": op.name, "type": op.type, "kind": kind,
                    "kind_index": seen[kind], "weight_shape": list(w.shape),
                    "trainable": [p for p, ok in (("weight", w.data is not None),
                                                   ("bias", has_bias or not quantized)) if ok]})
    return out


def summarize(graph: Graph) -> dict[str, Any]:
    """JSON-ready description of a graph (the `inspect --json` contract)."""
    ops = []
    for op in graph.ops:
        ops.append({
            "name": op.name, "type": op.type,
            "inputs": [_tensor(graph.tensors[n]) for n in op.inputs if n],
            "outputs": [_tensor(graph.tensors[n]) for n in op.outputs],
            "attrs": {k: _attr(v) for k, v in op.attrs.items()},
            "macs": op_macs(graph, op),
        })
    consts = [t for t in graph.tensors.values() if t.is_const]
    acts = [t for t in graph.tensors.values() if not t.is_const and t.role == Role.ACTIVATION]
    return {
        "model": graph.name,
        "format": graph.metadata.get("source_format", "unknown"),
        "inputs": [_tensor(graph.tensors[n]) for n in graph.inputs],
        "outputs": [_tensor(graph.tensors[n]) for n in graph.outputs],
        "ops": ops,
        "op_counts": {t: sum(op.type == t for op in graph.ops)
                      for t in sorted({op.type for op in graph.ops})},
        "macs": sum(o["macs"] for o in ops),
        "param_count": sum(t.size for t in consts if t.role in (Role.WEIGHT, Role.BIAS)),
        "param_bytes": sum(t.nbytes for t in consts),
        "activation_bytes": sum(t.nbytes for t in acts),
        "largest_activation_bytes": max((t.nbytes for t in acts), default=0),
        "layers": trainable_layers(graph),
    }


def _fmt_quant(q: dict[str, Any] | None) -> str:
    if q is None:
        return "-"
    if "axis" in q:
        return f"per-ch[{q['channels']}]@{q['axis']}"
    return f"s={q['scale']:.4g} zp={q['zero_point']}"


def format_summary(s: dict[str, Any]) -> str:
    """Human-readable table of a summarize() result."""
    head = (f"model {s['model']} ({s['format']}): {len(s['ops'])} ops, {s['macs']:,} MACs, "
            f"{s['param_count']:,} parameters ({s['param_bytes']:,} B constant data), "
            f"{s['activation_bytes']:,} B activations "
            f"(largest {s['largest_activation_bytes']:,} B)")
    lines = [head]
    for kind in ("inputs", "outputs"):
        for t in s[kind]:
            lines.append(f"  {kind[:-1]:6} {t['name']}: {t['shape']} {t['dtype']} "
                         f"{_fmt_quant(t['quant'])}")
    header = f"  {'#':>3}  {'op':18} {'name':28} {'output':18} {'dtype':7} {'quant':22} {'MACs':>12}"
    lines.append(header)
    for i, op in enumerate(s["ops"]):
        out = op["outputs"][0]
        name = op["name"] if len(op["name"]) <= 28 else "…" + op["name"][-27:]
        lines.append(f"  {i:>3}  {op['type']:18} {name:28} {out['shape']!s:18} "
                     f"{out['dtype']:7} {_fmt_quant(out['quant']):22} {op['macs']:>12,}")
    lines += format_layers(s.get("layers", []))
    return "\n".join(lines)


def format_layers(layers: list[dict[str, Any]]) -> list[str]:
    """The trainable layers as a training spec names them: by index (``bias:3``, ``bias:1..3``)
    or by kind and index within the kind (``bias:conv.2``, ``weight:fc.last1``), or by name."""
    if not layers:
        return ["  no trainable layers (no conv2d, depthwise_conv2d or fully_connected op)"]
    head = (f"  trainable layers ({len(layers)}): a --train spec selects them by # (bias:3, "
            "bias:1..3, bias:last2), by kind.# (bias:conv.2, weight:fc.last1) or by name "
            "(docs/training.md)")
    lines = [head, f"  {'#':>3}  {'kind':10} {'type':18} {'trains':13} name"]
    for layer in layers:
        lines.append(f"  {layer['index']:>3}  {layer['kind'] + '.' + str(layer['kind_index']):10}"
                     f" {layer['type']:18} {', '.join(layer['trainable']) or '-':13} "
                     f"{layer['name']}")
    return lines
