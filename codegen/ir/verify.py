"""The IR verifier: structural and shape checks that can run between any two stages."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .graph import DTYPES, Graph, Op
from .ops import ACTIVATIONS, OP_SPECS, conv_out_size


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
        if t.data is not None and tuple(t.data.shape) != t.shape:
            _fail(None, f"tensor {t.name!r}: data shape {list(t.data.shape)} != declared "
                        f"{list(t.shape)}")
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
        if len(op.outputs) != spec.n_outputs:
            _fail(op, f"has {len(op.outputs)} outputs, expected {spec.n_outputs}")
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
        _check_shapes(graph, op)
    for name in graph.outputs:
        if name not in available:
            _fail(None, f"graph output {name!r} is never produced")
    return graph


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return graph.tensors[name].shape


def _check_shapes(graph: Graph, op: Op) -> None:
    out = _shape(graph, op.outputs[0])
    x = _shape(graph, op.inputs[0])
    a = op.attrs
    if op.type in ("conv2d", "depthwise_conv2d", "avg_pool2d", "max_pool2d"):
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
    elif op.type == "fully_connected":
        w = _shape(graph, op.inputs[1])
        if len(w) != 2:
            _fail(op, f"weight must be 2-D, got {list(w)}")
        n = int(np.prod(x, dtype=np.int64))
        if w[1] == 0 or n % w[1]:
            _fail(op, f"input {list(x)} cannot be flattened to rows of {w[1]}")
        if out[-1] != w[0] or int(np.prod(out, dtype=np.int64)) != n // w[1] * w[0]:
            _fail(op, f"output shape {list(out)} inconsistent with weight {list(w)} and input "
                      f"{list(x)}")
        if len(op.inputs) > 2 and op.inputs[2] and _shape(graph, op.inputs[2]) != (w[0],):
            _fail(op, f"bias shape {list(_shape(graph, op.inputs[2]))} does not match {w[0]} "
                      "outputs")
    elif op.type in ("add", "mul"):
        try:
            exp = np.broadcast_shapes(x, _shape(graph, op.inputs[1]))
        except ValueError:
            _fail(op, f"input shapes {list(x)} and {list(_shape(graph, op.inputs[1]))} do not "
                      "broadcast")
        if tuple(exp) != out:
            _fail(op, f"output shape {list(out)}, expected {list(exp)}")
    elif op.type == "reshape":
        if int(np.prod(x, dtype=np.int64)) != int(np.prod(out, dtype=np.int64)):
            _fail(op, f"cannot reshape {list(x)} ({int(np.prod(x))} elements) to {list(out)}")
    elif op.type in ("softmax", "quantize", "dequantize", "relu", "relu6"):
        if x != out:
            _fail(op, f"output shape {list(out)} differs from input {list(x)}")
    elif op.type == "mean":
        axes = a["axes"]
        if any(not 0 <= ax < len(x) for ax in axes):
            _fail(op, f"axes {list(axes)} outside input rank {len(x)}")
        exp = tuple(1 if i in axes else d for i, d in enumerate(x)) if a["keep_dims"] else \
            tuple(d for i, d in enumerate(x) if i not in axes)
        if out != exp:
            _fail(op, f"output shape {list(out)}, expected {list(exp)}")
    elif op.type == "pad":
        pads = a["pads"]
        if len(pads) != len(x) or any(p < 0 for pair in pads for p in pair):
            _fail(op, f"pads {pads} do not fit input rank {len(x)}")
        exp = tuple(d + p0 + p1 for d, (p0, p1) in zip(x, pads))
        if out != exp:
            _fail(op, f"output shape {list(out)}, expected {list(exp)}")
    elif op.type == "concat":
        ax = a["axis"]
        shapes = [_shape(graph, n) for n in op.inputs]
        if any(len(s) != len(out) for s in shapes) or not 0 <= ax < len(out):
            _fail(op, f"inputs {shapes} cannot be concatenated on axis {ax}")
        for s in shapes:
            if any(s[i] != out[i] for i in range(len(out)) if i != ax):
                _fail(op, f"input shape {list(s)} does not match output {list(out)} off axis {ax}")
        if sum(s[ax] for s in shapes) != out[ax]:
            _fail(op, f"output has {out[ax]} on axis {ax}, inputs sum to "
                      f"{sum(s[ax] for s in shapes)}")
