"""Post-training quantization: a float32 IR graph + calibration inputs -> an int8 IR graph.

Stages (each a function below):
1. ``prepare``: fold DEQUANTIZE of constants (and read int8 "hybrid" weights as floats), turn
   QUANTIZE/DEQUANTIZE pairs on activations into fixed quantization parameters, fuse standalone
   RELU/RELU6 into the producing conv/FC/add/mul.
2. ``calibrate`` (calibrate.py): golden float execution, min/max per tensor.
3. ``plan_activation_params``: group tensors whose int8 kernels need identical parameters
   (OpSpec.shares_quant: reshape, pools, pad; and concat) and give each group parameters from
   its calibrated range; softmax outputs get scale 1/256, zero point -128 (OpSpec.int8_output).
   A concat input whose parameters are pinned differently gets a requantizing QUANTIZE op.
4. ``build_int8_graph``: int8 activations, per-channel (or per-tensor) symmetric int8 weights,
   int32 biases with scale s_in * s_w; int8 graph inputs/outputs (no QUANTIZE/DEQUANTIZE at the
   ends), their parameters in metadata["input_quant"] / ["output_quant"].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PockError
from ..ir import (
    FORWARD_OPS,
    OP_SPECS,
    PARAMETRIC_OPS,
    Graph,
    Op,
    QuantParams,
    Role,
    Tensor,
    int8_output_params,
    verify,
    weight_axis,
)
from .calibrate import CalibData, Ranges, calibrate, calibration_batches
from .params import activation_params, bias_params, dequantize_array, quantize_array, weight_params

# The op facts used here live on ir.OpSpec: weight_axis (the weight quantization axis of the
# parametric ops), shares_quant (int8 kernels that copy or compare values: output parameters
# equal the input's), fusable_activation (a standalone relu/relu6 fuses into it), is_activation
# (the standalone relu/relu6) and int8_output (softmax: fixed output parameters).
# Every forward op quantizes (quantize/dequantize are folded or pinned by ``prepare``).


def _op_error(op: Op, msg: str) -> PockError:
    return PockError(f"op {op.name!r} ({op.type}): {msg}")


def quantize(graph: Graph, calib: CalibData, *, per_channel: bool = True) -> Graph:
    """Post-training quantization of a float32 graph to int8 (TFLite conventions).

    ``calib``: calibration inputs, batch on axis 0, in the IR's input layout (NHWC for images);
    an array for a one-input graph, or a list (or dict by input name) with one array per input.
    ``per_channel``: per-output-channel weight scales (default) or one scale per weight tensor.
    Raises PockError (one line, naming the op) for what int8 kernels cannot do.
    """
    _check_float_graph(graph)
    prepared = prepare(graph)
    batches = calibration_batches(prepared.graph, calib)
    ranges = calibrate(prepared.graph, batches)
    plan = plan_activation_params(prepared, ranges)
    q = build_int8_graph(plan, per_channel=per_channel)
    q.metadata["quantization"] = {"method": "ptq-minmax", "per_channel": bool(per_channel),
                                  "calibration_samples": int(ranges.samples)}
    return verify(q)


# -- 0. checks --------------------------------------------------------------------------------

def _check_float_graph(graph: Graph) -> None:
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.dtype != "float32":
            what = "already quantized" if t.dtype in ("int8", "uint8") else "not a float model"
            raise PockError(f"model input {name!r} is {t.dtype}: the model is {what}; "
                            "quantize takes a float32 model")
    for op in graph.ops:
        if op.type not in FORWARD_OPS:
            raise _op_error(op, "not supported by the int8 quantizer")


# -- 1. prepare -------------------------------------------------------------------------------

@dataclass
class Prepared:
    graph: Graph
    fixed: dict[str, QuantParams] = field(default_factory=dict)   # pinned activation params


def _as_int8_per_tensor(op: Op, t: Tensor) -> QuantParams:
    q = t.quant
    if q is None or q.scale.size != 1:
        raise _op_error(op, f"tensor {t.name!r} needs per-tensor quantization parameters")
    if t.dtype == "int8":
        return QuantParams(q.scale.copy(), q.zero_point.copy())
    if t.dtype == "uint8":
        return QuantParams(q.scale.copy(), q.zero_point - 128)
    raise _op_error(op, f"output {t.name!r} is {t.dtype}; only int8/uint8 QUANTIZE is supported")


def float_constant(t: Tensor) -> np.ndarray:
    """A constant's real values: float data as is, int8/uint8 data with its quantization
    dequantized (e.g. TFLite 'hybrid' weights)."""
    if t.data is None:
        raise ValueError(t.name)
    if t.dtype == "float32":
        return np.asarray(t.data, np.float32)
    if t.dtype in ("int8", "uint8", "int32") and t.quant is not None:
        return dequantize_array(t.data, t.quant)
    raise PockError(f"constant {t.name!r} is {t.dtype} without quantization parameters; "
                    "expected float32")


def prepare(graph: Graph) -> Prepared:
    """Remove QUANTIZE/DEQUANTIZE (folding or pinning parameters) and fuse standalone relus."""
    tensors = dict(graph.tensors)
    fixed: dict[str, QuantParams] = {}
    rename: dict[str, str] = {}
    ops: list[Op] = []

    def r(name: str) -> str:
        while name in rename:
            name = rename[name]
        return name

    for op in graph.ops:
        op = op.replace(inputs=tuple(r(i) if i else i for i in op.inputs))
        if op.type == "dequantize":
            src = tensors[op.inputs[0]]
            out = tensors[op.outputs[0]]
            if src.is_const:                      # int8 weights stored quantized: fold
                role = src.role if src.role != Role.ACTIVATION else Role.CONSTANT
                tensors[out.name] = Tensor(out.name, out.shape, "float32", role,
                                           data=float_constant(src))
            elif src.dtype == "float32":          # second half of a QUANTIZE/DEQUANTIZE pair
                rename[out.name] = src.name
            else:
                raise _op_error(op, f"input {src.name!r} is an {src.dtype} activation: the "
                                    "model is partly quantized; give a float32 model")
            continue
        if op.type == "quantize":
            src = tensors[op.inputs[0]]
            out = tensors[op.outputs[0]]
            if src.dtype != "float32" or src.is_const:
                raise _op_error(op, f"input {src.name!r} is {src.dtype}"
                                    f"{' constant' if src.is_const else ''}; only float32 "
                                    "activations can be quantized in a float model")
            params = _as_int8_per_tensor(op, out)
            if src.name in fixed and fixed[src.name] != params:
                raise _op_error(op, f"tensor {src.name!r} is quantized twice with different "
                                    "parameters")
            fixed[src.name] = params
            rename[out.name] = src.name
            continue
        ops.append(op)

    outputs = [r(n) for n in graph.outputs]
    if len(set(outputs)) != len(outputs):
        raise PockError(f"graph outputs {graph.outputs} collapse to the same tensor after "
                        "removing QUANTIZE/DEQUANTIZE")
    g = Graph(graph.name, tensors, ops, list(graph.inputs), outputs, dict(graph.metadata))
    g = _fuse_standalone_relus(g, fixed).prune()
    for op in g.ops:
        if op.type in PARAMETRIC_OPS:
            for k, what in ((1, "weight"), (2, "bias")):
                name = op.inputs[k] if k < len(op.inputs) else ""
                if name and not g.tensors[name].is_const:
                    raise _op_error(op, f"{what} {name!r} is not a constant; the int8 "
                                        "quantizer needs constant weights and biases")
    for name, t in g.tensors.items():
        if t.dtype != "float32" and not t.is_const:
            users = g.consumers(name)
            where = f"op {users[0].name!r} ({users[0].type}): " if users else ""
            raise PockError(f"{where}tensor {name!r} is {t.dtype}; the int8 quantizer handles "
                            "float32 activations only")
    return Prepared(g, fixed)


def _fuse_standalone_relus(g: Graph, fixed: dict[str, QuantParams]) -> Graph:
    ops = list(g.ops)
    i = 0
    while i < len(ops):
        op = ops[i]
        if OP_SPECS[op.type].is_activation:
            mid = op.inputs[0]
            prod = next((p for p in ops if mid in p.outputs), None)
            users = [o for o in ops if mid in o.inputs]
            if (prod is not None and OP_SPECS[prod.type].fusable_activation
                    and prod.attrs.get("activation", "none") == "none"
                    and len(users) == 1 and mid not in g.outputs and mid not in fixed):
                j = ops.index(prod)
                attrs = dict(prod.attrs, activation=op.type)
                ops[j] = prod.replace(outputs=(op.outputs[0],), attrs=attrs)
                del ops[i]
                continue
        i += 1
    return Graph(g.name, dict(g.tensors), ops, list(g.inputs), list(g.outputs),
                 dict(g.metadata))


# -- 3. activation parameters -------------------------------------------------------------------

class _Classes:
    """Union-find over tensor names: groups that must share quantization parameters, each
    with at most one pinned (fixed) parameter set."""

    def __init__(self, fixed: dict[str, QuantParams]) -> None:
        self.parent: dict[str, str] = {}
        self.pin: dict[str, QuantParams] = {}
        for name, p in fixed.items():
            self.pin[self.find(name)] = p

    def find(self, a: str) -> str:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def pinned(self, a: str) -> QuantParams | None:
        return self.pin.get(self.find(a))

    def union(self, a: str, b: str) -> bool:
        """Merge the groups of a and b; False (and no change) if pinned differently."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        pa, pb = self.pin.get(ra), self.pin.get(rb)
        if pa is not None and pb is not None and pa != pb:
            return False
        self.parent[rb] = ra
        if pa is None and pb is not None:
            self.pin[ra] = pb
        self.pin.pop(rb, None)
        return True

    def members(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for a in list(self.parent):
            groups.setdefault(self.find(a), []).append(a)
        return groups


@dataclass
class Plan:
    graph: Graph                                  # prepared float graph (+ requantize ops)
    params: dict[str, QuantParams]                # every float value tensor -> int8 params


def _value_inputs(op: Op) -> list[str]:
    """Inputs that are int8 values (not weights/biases) in the quantized graph."""
    if op.type in PARAMETRIC_OPS:
        return [op.inputs[0]]
    return [i for i in op.inputs if i]


def plan_activation_params(prepared: Prepared, ranges: Ranges) -> Plan:
    g = prepared.graph.copy()
    fixed = dict(prepared.fixed)
    for op in g.ops:
        want = int8_output_params(op.type)
        if want is not None:                      # softmax: 1/256, -128
            out = op.outputs[0]
            if out in fixed and fixed[out] != want:
                raise _op_error(op, f"output {out!r} is pinned to {fixed[out]}, int8 {op.type} "
                                    f"needs scale 1/{round(1 / want.s)}, zero point {want.zp}")
            fixed[out] = want
        if op.type == "concat" and op.attrs.get("activation", "none") != "none":
            raise _op_error(op, f"fused activation {op.attrs['activation']!r} is not supported "
                                "by int8 concatenation")

    # constants used as values (add/mul operands, concat pieces ...) calibrate from their data
    lo = dict(ranges.lo)
    hi = dict(ranges.hi)
    for op in g.ops:
        for name in _value_inputs(op):
            t = g.tensors[name]
            if t.is_const:
                v = float_constant(t)
                lo[name], hi[name] = float(v.min(initial=0.0)), float(v.max(initial=0.0))

    classes = _Classes(fixed)
    for name, t in g.tensors.items():
        if t.dtype == "float32" and (not t.is_const or name in lo):
            classes.find(name)
    for op in g.ops:
        if OP_SPECS[op.type].shares_quant and not classes.union(op.inputs[0], op.outputs[0]):
            raise _op_error(op, f"input and output are pinned to different quantization "
                                f"parameters ({classes.pinned(op.inputs[0])} vs "
                                f"{classes.pinned(op.outputs[0])}); int8 {op.type} needs "
                                "equal ones")

    new_ops: list[Op] = []
    for op in g.ops:
        if op.type == "concat":
            ins = list(op.inputs)
            out = op.outputs[0]
            pins = [classes.pinned(name) for name in ins]
            for name, pin in zip(ins, pins):
                if pin is None:
                    classes.union(name, out)
            for k, (name, pin) in enumerate(zip(ins, pins)):
                if pin is None:
                    continue
                p_out = classes.pinned(out)
                if (p_out == pin or p_out is None and all(p == pin for p in pins)) \
                        and classes.union(name, out):
                    continue
                # pinned differently (e.g. a softmax output): requantize into the concat's params
                rq = g.unique_name(f"{name}_requant")
                g.add_tensor(Tensor(rq, g.tensors[name].shape, "float32"))
                lo[rq], hi[rq] = lo.get(name, 0.0), hi.get(name, 0.0)
                classes.union(out, rq)
                new_ops.append(Op("quantize", g.unique_name(f"{op.name}_requant{k}"), (name,),
                                  (rq,)))
                ins[k] = rq
            op = op.replace(inputs=tuple(ins))
        new_ops.append(op)
    g.ops = new_ops

    params: dict[str, QuantParams] = {}
    for root, members in classes.members().items():
        p = classes.pin.get(root)
        if p is None:
            seen = [m for m in members if m in lo]
            if seen:
                p = activation_params(min(lo[m] for m in seen), max(hi[m] for m in seen))
            else:                                 # never observed (not reached by calibration)
                p = activation_params(0.0, 1.0)
        for m in members:
            params[m] = p
    return Plan(g, params)


# -- 4. build ---------------------------------------------------------------------------------

def build_int8_graph(plan: Plan, *, per_channel: bool = True) -> Graph:
    g = plan.graph
    # float op versions (TFLite reader) do not describe the int8 ops: the writer picks its own
    meta = {k: v for k, v in g.metadata.items() if k != "tflite_op_versions"}
    out = Graph(g.name, {}, [], list(g.inputs), list(g.outputs), meta)

    def value_tensor(name: str) -> str:
        if name in out.tensors:
            return name
        t = g.tensors[name]
        p = plan.params[name]
        data = quantize_array(float_constant(t), p) if t.is_const else None
        role = t.role if t.is_const else Role.ACTIVATION
        out.add_tensor(Tensor(name, t.shape, "int8", role, p, data))
        return name

    weights_done: dict[str, QuantParams] = {}
    for op in g.ops:
        if op.type in PARAMETRIC_OPS:
            x = value_tensor(op.inputs[0])
            w_name = op.inputs[1]
            w_t = g.tensors[w_name]
            if not w_t.is_const:
                raise _op_error(op, f"weight {w_name!r} is not a constant")
            w = float_constant(w_t)
            axis = weight_axis(op.type) if per_channel else None
            if w_name not in weights_done:
                wq = weight_params(w, axis)
                out.add_tensor(Tensor(w_name, w_t.shape, "int8", Role.WEIGHT, wq,
                                      quantize_array(w, wq, narrow=True)))
                weights_done[w_name] = wq
            wq = weights_done[w_name]
            bq = bias_params(plan.params[x].s, wq)
            b_name = op.inputs[2] if len(op.inputs) > 2 else ""
            if b_name:
                b_t = g.tensors[b_name]
                if not b_t.is_const:
                    raise _op_error(op, f"bias {b_name!r} is not a constant")
                b = float_constant(b_t).reshape(-1)
                shape = b_t.shape
            else:                                  # int8 kernels (and bias training) want one
                n_out = w.shape[weight_axis(op.type)]
                b = np.zeros(n_out, np.float32)
                shape = (n_out,)
                b_name = _fresh(out, g, f"{op.name}_bias")
            if b_name in out.tensors and out.tensors[b_name].quant != bq:
                b_name = _fresh(out, g, f"{b_name}_{op.name}")
            if b_name not in out.tensors:
                out.add_tensor(Tensor(b_name, shape, "int32", Role.BIAS, bq,
                                      quantize_array(b, bq, "int32")))
            inputs = (x, w_name, b_name)
        else:
            inputs = tuple(value_tensor(i) if i else i for i in op.inputs)
        for o in op.outputs:
            value_tensor(o)
        out.add_op(op.replace(inputs=inputs))
    for name in out.inputs + out.outputs:
        value_tensor(name)

    in_q = [_qdict(out.tensors[n].quant) for n in out.inputs]
    out_q = [_qdict(out.tensors[n].quant) for n in out.outputs]
    out.metadata["input_quant"] = in_q[0]
    out.metadata["output_quant"] = out_q[0]
    out.metadata["inputs_quant"] = in_q
    out.metadata["outputs_quant"] = out_q
    return out


def _fresh(out: Graph, g: Graph, base: str) -> str:
    name, i = base, 1
    while name in out.tensors or name in g.tensors:
        name, i = f"{base}_{i}", i + 1
    return name


def _qdict(q: QuantParams | None) -> dict[str, float | int]:
    assert q is not None
    return {"scale": q.s, "zero_point": q.zp}
