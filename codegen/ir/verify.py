"""The IR verifier: structural and shape checks that can run between any two stages."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import ModelError
from .graph import DTYPES, MAX_ELEMENTS, Graph, Op, Role
from .ops import (
    ACTIVATIONS,
    OP_SPECS,
    PARAM_UPDATE_OPS,
    TRAINING_OP_SPECS,
    UPDATE_INPUTS,
    UPDATE_OPS,
    conv_out_size,
    weight_axis,
)


def nonfinite(a: np.ndarray) -> str | None:
    """None for an array without NaN and infinities, else what is wrong: the count and the
    first index ("2 NaN or infinite values (the first at index [3, 0]: nan)")."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return None
    bad = ~np.isfinite(a)
    n = int(np.count_nonzero(bad))
    if not n:
        return None
    first = [int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), a.shape)]
    return (f"{n} NaN or infinite value{'s' if n > 1 else ''} (the first at index {first}: "
            f"{a[tuple(first)]})")


def _fail(op: Op | None, msg: str) -> None:
    where = f"op {op.name!r} ({op.type}): " if op is not None else ""
    raise ModelError(f"{where}{msg}")


def verify(graph: Graph) -> Graph:
    """Raise ModelError naming the op and numbers if the graph is malformed; return it otherwise."""
    for t in graph.tensors.values():
        if t.dtype not in DTYPES:
            _fail(None, f"tensor {t.name!r} has unsupported dtype {t.dtype}")
        if any(d < 0 for d in t.shape):
            _fail(None, f"tensor {t.name!r} has negative dimension in shape {list(t.shape)}")
        if math.prod(t.shape) > MAX_ELEMENTS:
            _fail(None, f"tensor {t.name!r} has shape {list(t.shape)}: "
                        f"{math.prod(t.shape)} elements, at most {MAX_ELEMENTS} supported")
        if t.data is not None and tuple(t.data.shape) != t.shape:
            _fail(None, f"tensor {t.name!r}: data shape {list(t.data.shape)} != declared "
                        f"{list(t.shape)}")
        if t.data is not None and (bad := nonfinite(t.data)):
            _fail(None, f"constant tensor {t.name!r} has {bad}")
        q = t.quant
        if q is not None:
            if q.scale.shape != q.zero_point.shape:
                _fail(None, f"tensor {t.name!r}: {q.scale.size} scales but "
                            f"{q.zero_point.size} zero points")
            if not np.all(np.isfinite(q.scale)) or np.any(q.scale < 0):
                _fail(None, f"tensor {t.name!r}: invalid quantization scale")
            if q.axis is not None:
                if not 0 <= q.axis < len(t.shape):
                    _fail(None, f"tensor {t.name!r}: quantized axis {q.axis} outside shape "
                                f"{list(t.shape)}")
                if q.scale.size not in (1, t.shape[q.axis]):
                    _fail(None, f"tensor {t.name!r}: {q.scale.size} scales for "
                                f"{t.shape[q.axis]} channels on axis {q.axis}")
    for name in graph.inputs + graph.outputs:
        if name not in graph.tensors:
            _fail(None, f"graph input/output {name!r} is not a tensor")

    available = set(graph.inputs) | {t.name for t in graph.constants()}
    produced: set[str] = set()
    for op in graph.ops:
        spec = OP_SPECS.get(op.type)
        if spec is None:
            _fail(op, "unsupported op type")
        if not spec.min_inputs <= len(op.inputs) <= spec.max_inputs:
            _fail(op, f"has {len(op.inputs)} inputs, expected {spec.min_inputs}"
                      f"..{spec.max_inputs}")
        n_out = spec.n_outputs
        if op.type in TRAINING_OP_SPECS and "mode" in op.attrs:
            if op.attrs["mode"] not in ("fp32", "int8"):
                _fail(op, f"mode must be fp32 or int8, got {op.attrs['mode']!r}")
            if op.attrs["mode"] == "int8":
                n_out += spec.grad_outputs       # an exponent after each gradient output
        if len(op.outputs) != n_out:
            _fail(op, f"has {len(op.outputs)} outputs, expected {n_out}")
        for a in spec.attrs:
            if a not in op.attrs:
                _fail(op, f"missing attribute {a!r}")
        if "activation" in op.attrs and op.attrs["activation"] not in ACTIVATIONS:
            _fail(op, f"unsupported fused activation {op.attrs['activation']!r}")
        for i, name in enumerate(op.inputs):
            if name == "":
                if i < spec.min_inputs:
                    _fail(op, f"required input {i} is missing")
                continue
            if name not in graph.tensors:
                _fail(op, f"input {name!r} is not a tensor")
            if name not in available:
                _fail(op, f"input {name!r} is used before it is produced")
        for name in op.outputs:
            if name not in graph.tensors:
                _fail(op, f"output {name!r} is not a tensor")
            if name in produced or name in graph.inputs or graph.tensors[name].is_const:
                _fail(op, f"output {name!r} is written twice")
            produced.add(name)
            available.add(name)
        if op.type in TRAINING_OP_SPECS:
            _check_training_op(graph, op)
        else:
            _check_shapes(graph, op)
    for name in graph.outputs:
        if name not in available:
            _fail(None, f"graph output {name!r} is never produced")
    return graph


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return graph.tensors[name].shape


def _check_shapes(graph: Graph, op: Op) -> None:
    SHAPE_CHECKS[op.type](graph, op, _shape(graph, op.inputs[0]), _shape(graph, op.outputs[0]))


# One shape check per forward op: (graph, op, input 0's shape, output 0's shape) -> None, or
# ModelError through _fail.
ShapeCheck = Callable[[Graph, Op, tuple[int, ...], tuple[int, ...]], None]


def _check_window(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    """conv2d, depthwise_conv2d, avg_pool2d, max_pool2d."""
    a = op.attrs
    if len(x) != 4 or len(out) != 4:
        _fail(op, f"expects 4-D NHWC input and output, got {list(x)} -> {list(out)}")
    if op.type in ("avg_pool2d", "max_pool2d"):
        kh, kw = a["filter"]
        oc = x[3]
    else:
        w = _shape(graph, op.inputs[1])
        if len(w) != 4:
            _fail(op, f"weight must be 4-D, got {list(w)}")
        if op.type == "conv2d":
            oc, kh, kw, ic = w
            if ic <= 0 or x[3] % ic:
                _fail(op, f"input has {x[3]} channels but weight expects {ic}")
        else:
            _, kh, kw, oc = w
            if oc != x[3] * a["depth_multiplier"]:
                _fail(op, f"weight has {oc} channels, input {x[3]} x multiplier "
                          f"{a['depth_multiplier']}")
        if len(op.inputs) > 2 and op.inputs[2]:
            b = _shape(graph, op.inputs[2])
            if b != (oc,):
                _fail(op, f"bias shape {list(b)} does not match {oc} output channels")
    dh, dw = a.get("dilation", (1, 1))
    sh, sw = a["stride"]
    pt, pb, pl, pr = a["padding"]
    if min(sh, sw, dh, dw, kh, kw) < 1 or min(pt, pb, pl, pr) < 0:
        _fail(op, f"invalid stride {a['stride']}, kernel {(kh, kw)} or padding {a['padding']}")
    exp = (x[0], conv_out_size(x[1], kh, sh, dh, pt, pb),
           conv_out_size(x[2], kw, sw, dw, pl, pr), oc)
    if out != exp:
        _fail(op, f"output shape {list(out)} inconsistent with input {list(x)}, expected "
                  f"{list(exp)}")


def _check_fully_connected(graph: Graph, op: Op, x: tuple[int, ...],
                           out: tuple[int, ...]) -> None:
    w = _shape(graph, op.inputs[1])
    if len(w) != 2:
        _fail(op, f"weight must be 2-D, got {list(w)}")
    n = int(np.prod(x, dtype=np.int64))
    if w[1] == 0 or n % w[1]:
        _fail(op, f"input {list(x)} cannot be flattened to rows of {w[1]}")
    if not out or out[-1] != w[0] or math.prod(out) != n // w[1] * w[0]:
        _fail(op, f"output shape {list(out)} inconsistent with weight {list(w)} and input "
                  f"{list(x)}")
    if len(op.inputs) > 2 and op.inputs[2] and _shape(graph, op.inputs[2]) != (w[0],):
        _fail(op, f"bias shape {list(_shape(graph, op.inputs[2]))} does not match {w[0]} "
                  "outputs")


def _check_broadcast(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    """add, mul."""
    try:
        exp = np.broadcast_shapes(x, _shape(graph, op.inputs[1]))
    except ValueError:
        _fail(op, f"input shapes {list(x)} and {list(_shape(graph, op.inputs[1]))} do not "
                  "broadcast")
    if tuple(exp) != out:
        _fail(op, f"output shape {list(out)}, expected {list(exp)}")


def _check_reshape(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    if int(np.prod(x, dtype=np.int64)) != int(np.prod(out, dtype=np.int64)):
        _fail(op, f"cannot reshape {list(x)} ({int(np.prod(x))} elements) to {list(out)}")


def _check_same_shape(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    """softmax, quantize, dequantize, relu, relu6."""
    if x != out:
        _fail(op, f"output shape {list(out)} differs from input {list(x)}")


def _check_mean(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    a = op.attrs
    axes = a["axes"]
    if any(not 0 <= ax < len(x) for ax in axes):
        _fail(op, f"axes {list(axes)} outside input rank {len(x)}")
    exp = tuple(1 if i in axes else d for i, d in enumerate(x)) if a["keep_dims"] else \
        tuple(d for i, d in enumerate(x) if i not in axes)
    if out != exp:
        _fail(op, f"output shape {list(out)}, expected {list(exp)}")


def _check_pad(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    pads = op.attrs["pads"]
    if len(pads) != len(x) or any(p < 0 for pair in pads for p in pair):
        _fail(op, f"pads {pads} do not fit input rank {len(x)}")
    exp = tuple(d + p0 + p1 for d, (p0, p1) in zip(x, pads))
    if out != exp:
        _fail(op, f"output shape {list(out)}, expected {list(exp)}")


def _check_concat(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    ax = op.attrs["axis"]
    shapes = [_shape(graph, n) for n in op.inputs]
    if any(len(s) != len(out) for s in shapes) or not 0 <= ax < len(out):
        _fail(op, f"inputs {shapes} cannot be concatenated on axis {ax}")
    for s in shapes:
        if any(s[i] != out[i] for i in range(len(out)) if i != ax):
            _fail(op, f"input shape {list(s)} does not match output {list(out)} off axis {ax}")
    if sum(s[ax] for s in shapes) != out[ax]:
        _fail(op, f"output has {out[ax]} on axis {ax}, inputs sum to "
                  f"{sum(s[ax] for s in shapes)}")


def _check_stream_chain(graph: Graph, op: Op, x: tuple[int, ...], out: tuple[int, ...]) -> None:
    """The chain an op of the stream pass stands for: well-formed attributes, and every one of
    its ops' checks (ir.stream.chain_graph)."""
    from .stream import chain_graph, stage_inputs  # lazy: stream.py imports graph only

    stages, band = op.attrs["stages"], op.attrs["band_rows"]
    if not isinstance(band, int) or isinstance(band, bool) or band < 1:
        _fail(op, f"band_rows must be a positive integer, got {band!r}")
    if not isinstance(stages, (tuple, list)) or not stages \
            or len(op.inputs) != 1 + 2 * len(stages):
        _fail(op, f"{len(op.inputs)} inputs do not fit {len(stages or ())} stages "
                  "(x, then a weight and a bias per stage)")
    if any(not stage_inputs(op, j)[1] for j in range(len(stages))):
        _fail(op, "every stage needs a bias")
    try:
        chain = chain_graph(graph, op)
    except (KeyError, TypeError, ValueError) as e:
        _fail(op, f"malformed stages: {e}")
    if any(chain.tensors[n].dtype != "int8" for n in (*chain.inputs, *chain.outputs)):
        _fail(op, "streams int8 tensors only")
    try:
        verify(chain)
    except ModelError as e:
        _fail(op, f"its chain: {e}")


SHAPE_CHECKS: dict[str, ShapeCheck] = {
    "conv2d": _check_window,
    "depthwise_conv2d": _check_window,
    "fully_connected": _check_fully_connected,
    "avg_pool2d": _check_window,
    "max_pool2d": _check_window,
    "add": _check_broadcast,
    "mul": _check_broadcast,
    "reshape": _check_reshape,
    "softmax": _check_same_shape,
    "mean": _check_mean,
    "pad": _check_pad,
    "concat": _check_concat,
    "quantize": _check_same_shape,
    "dequantize": _check_same_shape,
    "relu": _check_same_shape,
    "relu6": _check_same_shape,
    "stream_chain": _check_stream_chain,
}


# -- training ops (docs/training.md) ----------------------------------------------------------

_MUTABLE_ROLES = (Role.WEIGHT, Role.BIAS, Role.OPTIMIZER_STATE)


def _check_training_op(graph: Graph, op: Op) -> None:
    """Shapes and dtypes of the training ops, exponent companions, mutated inputs."""
    t = graph.tensors
    int8 = op.attrs.get("mode") == "int8"
    if op.type in UPDATE_OPS:
        _check_update(graph, op)
        return
    if op.type == "merge_channels":
        _check_merge(graph, op)
        return
    # exponent companions: int8 mode, right after the gradient output(s)
    outs = list(op.outputs)
    if int8:
        exp = outs[-1]
        if t[exp].dtype != "int32" or t[exp].shape != (1,):
            _fail(op, f"exponent output {exp!r} must be int32 (1,), got {t[exp].dtype} "
                      f"{list(t[exp].shape)}")
        outs = outs[:-1]
    grads = [n for n in op.inputs if n and t[n].role == Role.GRADIENT]
    for n in [*grads, outs[-1]] if op.type != "act_mask" else []:
        want = ("int8", "int32") if int8 else ("float32",)
        if t[n].dtype not in want:
            _fail(op, f"gradient {n!r} has dtype {t[n].dtype}, expected {' or '.join(want)} in "
                      f"{'int8' if int8 else 'fp32'} mode")
    if op.type == "act_mask":
        x, m = t[op.inputs[0]], t[op.outputs[0]]
        if m.dtype != "bit" or m.shape != x.shape:
            _fail(op, f"mask {m.name!r} must be bit {list(x.shape)}, got {m.dtype} "
                      f"{list(m.shape)}")
        if not op.attrs["lo"] < op.attrs["hi"]:
            _fail(op, f"empty mask range lo={op.attrs['lo']} hi={op.attrs['hi']}")
    elif op.type in ("softmax_cross_entropy", "mse_loss"):
        loss, dy = t[op.outputs[0]], t[op.outputs[1]]
        y = t[op.inputs[0]]
        if loss.shape != (1,) or loss.dtype != "float32":
            _fail(op, f"loss {loss.name!r} must be float32 (1,)")
        if dy.shape != y.shape:
            _fail(op, f"gradient shape {list(dy.shape)} differs from {list(y.shape)}")
        if op.type == "mse_loss" and t[op.inputs[1]].shape != y.shape:
            _fail(op, f"target shape {list(t[op.inputs[1]].shape)} differs from output "
                      f"{list(y.shape)}")
        if op.type == "softmax_cross_entropy" and t[op.inputs[2]].shape != (256,):
            _fail(op, f"table {op.inputs[2]!r} must have 256 entries")
    elif op.type == "mask_grad" or op.type == "grad_add":
        ins = op.inputs[0::2] if int8 else op.inputs      # skip the exponents
        shapes = {t[n].shape for n in ins} | {t[outs[0]].shape}
        if len(shapes) != 1:
            _fail(op, f"shapes differ: {sorted(list(s) for s in shapes)}")
    elif op.type.endswith("_grad_weight"):
        ch = op.attrs["channels"]
        dw = t[outs[0]]
        axis = weight_axis(op.type.removesuffix("_grad_weight"))
        if ch is not None and dw.shape[axis] != len(ch):
            _fail(op, f"weight gradient {dw.name!r} has {dw.shape[axis]} channels, attr "
                      f"channels lists {len(ch)}")
        if ch is not None and (list(ch) != sorted(set(ch)) or min(ch) < 0):
            _fail(op, f"channels must be ascending distinct indices, got {list(ch)}")
    elif op.type == "bias_grad":
        dy, db = t[op.inputs[0]], t[outs[0]]
        if db.shape != (dy.shape[-1],):
            _fail(op, f"bias gradient shape {list(db.shape)}, expected [{dy.shape[-1]}]")


def _check_merge(graph: Graph, op: Op) -> None:
    """merge_channels (codegen.partial): trained rows + frozen rows = the whole weight."""
    a, b = (graph.tensors[n] for n in op.inputs)
    out = graph.tensors[op.outputs[0]]
    ch = list(op.attrs["channels"])
    if int(op.attrs["axis"]) != 0 or not a.shape or not out.shape:
        _fail(op, "merges rows on axis 0 only")
    if ch != sorted(set(ch)) or (ch and (ch[0] < 0 or ch[-1] >= out.shape[0])) \
            or a.shape[0] != len(ch):
        _fail(op, f"channels must be {a.shape[0]} ascending distinct rows of "
                  f"{out.shape[0]}, got {ch}")
    if a.shape[0] + b.shape[0] != out.shape[0] or a.shape[1:] != out.shape[1:] \
            or b.shape[1:] != out.shape[1:] or len({a.dtype, b.dtype, out.dtype}) != 1:
        _fail(op, f"{a.dtype} {list(a.shape)} and {b.dtype} {list(b.shape)} do not make "
                  f"{out.dtype} {list(out.shape)}")


def _check_update(graph: Graph, op: Op) -> None:
    t = graph.tensors
    if op.type in PARAM_UPDATE_OPS and len(op.inputs) != len(UPDATE_INPUTS):
        _fail(op, f"has {len(op.inputs)} inputs, expected the {len(UPDATE_INPUTS)} slots "
                  f"{', '.join(UPDATE_INPUTS)}")
    updates = op.attrs["updates"]
    given = [n for n in op.inputs if n]
    for n in updates:
        if n not in given:
            _fail(op, f"updates {n!r}, which is not one of its inputs")
        if t[n].role not in _MUTABLE_ROLES or not t[n].is_const:
            _fail(op, f"mutates {n!r} ({t[n].role.value}), which is not a parameter or "
                      "optimizer state with an initial value")
    if op.type == "step_counter":
        step = t[op.inputs[0]]
        if step.dtype != "int32" or step.shape != (1,):
            _fail(op, "step counter must be int32 (1,)")
        return
    slot = dict(zip(UPDATE_INPUTS, op.inputs))
    param, grad = t[slot["param"]], t[slot["grad"]]
    if slot["param"] not in updates:
        _fail(op, f"does not list its parameter {param.name!r} in updates")
    ch, axis = op.attrs["channels"], op.attrs["channel_axis"]
    if not 0 <= axis < len(param.shape):
        _fail(op, f"channel_axis {axis} outside parameter shape {list(param.shape)}")
    want = list(param.shape)
    if ch is not None:
        if any(not 0 <= c < param.shape[axis] for c in ch):
            _fail(op, f"channels {list(ch)} outside {param.shape[axis]} channels")
        want[axis] = len(ch)
    rows = op.attrs.get("rows")            # a block of the trained channels (update_blocks)
    grad_want = list(want)
    if rows is not None:
        j0, j1 = (int(r) for r in rows)
        if axis != 0 or not 0 <= j0 < j1 <= want[axis]:
            _fail(op, f"rows {list(rows)} must be a block [j0, j1) of the {want[axis]} "
                      "trained channels on axis 0")
        grad_want[axis] = j1 - j0
    if list(grad.shape) != grad_want:
        _fail(op, f"gradient shape {list(grad.shape)} does not match parameter "
                  f"{list(param.shape)} restricted to {grad_want[axis]} channels")
    if t[slot["qas"]].shape != (want[axis],):
        _fail(op, f"qas {slot['qas']!r} has shape {list(t[slot['qas']].shape)}, expected "
                  f"[{want[axis]}]")
    int8 = op.attrs["mode"] == "int8"
    if int8 != bool(slot["grad_exp"]) or int8 != bool(slot["qas_shift"]):
        _fail(op, "grad_exp and qas_shift must be given exactly in int8 mode")
    for name in ("buf1", "buf2", "master", "accum"):
        if slot[name] and list(t[slot[name]].shape) != want:
            _fail(op, f"{name} {slot[name]!r} has shape {list(t[slot[name]].shape)}, "
                      f"expected {want}")
    sat = slot["saturated"]
    if sat and (t[sat].dtype != "int32" or t[sat].shape != (1,) or sat not in updates):
        _fail(op, f"saturation counter {sat!r} must be an int32 (1,) tensor it updates")
    if op.type == "adam_update" and not (slot["buf1"] and slot["buf2"] and slot["pows"]):
        _fail(op, "adam_update needs m, v and pows")
