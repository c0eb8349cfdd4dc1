"""ONNX importer: ModelProto bytes -> ir.Graph (NHWC, TFLite weight layouts).

``read_onnx(data, source)`` returns a graph that has passed ``ir.verify`` or raises a one-line
``ModelError`` naming the file and, for op problems, the op type and node name
(``"model.onnx: unsupported op LSTM at node '/lstm/LSTM'"``).

How a model is read (this module: parsing, constants, graph inputs/outputs, Q/DQ; the layers
are in ``onnx_layers``, layout and quantization helpers in ``onnx_layout`` / ``onnx_quant``):
1. Parse and sanity-check the protobuf; nodes are put in topological order.
2. Constant folding: every node whose inputs are all constants (initializers, Constant nodes,
   shapes of activations) is evaluated with ``onnx.reference``. DequantizeLinear of integer
   constants gives quantized constants (``QConst``) that int8 layers take as weights/biases.
3. Conversion, node by node. Every 4-D activation becomes NHWC; axes of Concat/Softmax/
   ReduceMean/Pad are remapped. Conv/Gemm/MatMul/Add/Mul absorb a following
   BatchNormalization (Conv, float), Add of a constant (MatMul, as the bias) and Relu/Clip(0, 6)
   (fused activation) when they are the producer's only consumer.
   A Flatten/Reshape of a non-trivial NCHW tensor to 2-D is emitted as an NHWC reshape whose
   result carries a marker; the Gemm/MatMul that consumes it permutes its weight columns from
   C,H,W to H,W,C order. Any other consumer of such a tensor is an error naming the reshape.
4. QDQ models (onnxruntime ``quantize_static``, QuantFormat.QDQ): a layer whose activation
   inputs are dequantized int8 tensors and whose output feeds only QuantizeLinear nodes (with
   identical parameters) becomes an int8 IR op with that output quantization; weights and int32
   biases come from the dequantized constants (uint8 data and zero points shifted by -128).
   An int8 conv/FC/add/mul whose output zero point is -128 gets activation "relu" (exactly the
   int8 clamp; onnxruntime removes such Relus). Layers that only move or compare values
   (reshape, pools, pad, relu6) keep the input's parameters (mean and relu take the following
   QuantizeLinear's); a QuantizeLinear with other parameters becomes a requantizing ``quantize``
   op, as do concat inputs whose parameters differ from the output's and a softmax whose output
   is not TFLite's (1/256, -128). A graph input consumed only by QuantizeLinear becomes an int8
   input; a graph output produced by DequantizeLinear becomes the int8 tensor before it.
   Anything else falls back to float ops with explicit ``dequantize``/``quantize`` ops.

``graph.metadata``: ``source_format`` ("onnx"), ``source``, ``onnx_opset``, ``onnx_producer``,
``input_layout`` ("NCHW"), ``source_input_shapes`` / ``source_output_shapes`` ({ONNX name:
ONNX shape}, a dynamic batch read as 1), ``input_layouts`` / ``output_layouts`` ({IR name:
"NHWC" for 4-D tensors converted from NCHW, else "unchanged"}), ``dynamic_batch``; for QDQ models
also ``quant_format`` ("qdq"), ``input_quant`` / ``output_quant`` ({"scale", "zero_point"} of the
first input / output, None if float), ``inputs_quant`` / ``outputs_quant`` (one per input /
output) and ``output_dequantize`` (True when the model's outputs were DequantizeLinear results).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ModelError
from ..ir import MAX_ELEMENTS, Graph, Op, QuantParams, Role, Tensor, verify
from .onnx_layers import FLAT_OK, ONNX_DTYPES, Act, Flat, LayerConverters, Value
from .onnx_layout import ir_shape, to_ir_array
from .onnx_quant import QConst, onnx_quantize, signed_data, signed_params

__all__ = ["read_onnx"]

MIN_OPSET = 7
MAX_FOLDED_ELEMENTS = 1 << 26        # constant folding refuses to build larger tensors
DEFAULT_DOMAINS = ("", "ai.onnx")


def read_onnx(data: bytes, source: str = "<bytes>") -> Graph:
    """Import an ONNX model (float or QDQ int8) from its serialized bytes."""
    model = _parse(data, source)
    importer = _Importer(model, source)
    try:
        with np.errstate(all="ignore"):   # float trouble in constants: verify() names it
            graph = importer.run()
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001 - untrusted input: any failure is the model's fault
        msg = f"{type(e).__name__}: {e}"
        if len(msg) > 200:
            msg = msg[:200] + "..."
        raise ModelError(f"{source}: cannot import the model{importer.where()} ({msg})") from None
    try:
        return verify(graph)
    except ModelError as e:
        raise ModelError(f"{source}: {e}") from None


# -- parsing ----------------------------------------------------------------------------------

def _parse(data: bytes, source: str) -> Any:
    import onnx  # optional: onnx

    def bad(why: str) -> ModelError:
        return ModelError(f"{source}: not a valid ONNX model ({why})")

    try:
        model = onnx.ModelProto()
        model.ParseFromString(bytes(data))
    except Exception as e:  # noqa: BLE001 - DecodeError and friends
        raise bad(f"{type(e).__name__}: {e}".strip().rstrip(":")) from None
    if model.ir_version <= 0:
        raise bad("no IR version")
    if not model.HasField("graph"):
        raise bad("no graph")
    if not any(o.domain in DEFAULT_DOMAINS for o in model.opset_import):
        raise bad("no ai.onnx opset import")
    if len(model.graph.output) == 0:
        raise bad("the graph has no outputs")
    return model


class _Importer(LayerConverters):
    def __init__(self, model: Any, source: str):
        self.model = model
        self.gp = model.graph
        self.src = source
        self.opset = max(o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS)
        self.graph = Graph(name=self.gp.name or "model")
        self.values: dict[str, Value] = {}
        self.used: set[str] = set()
        self.nodes = list(self.gp.node)
        self.labels: list[str] = []
        self.consumers: dict[str, list[int]] = defaultdict(list)
        self.graph_outputs = {o.name for o in self.gp.output}
        self.done: set[int] = set()          # folded or absorbed nodes
        self.declared: dict[str, tuple[int | None, ...]] = {}
        self.dequantized: dict[str, str] = {}
        self.cur: int | None = None
        self.qdq = False

    # -- errors -------------------------------------------------------------------------------
    def where(self) -> str:
        if self.cur is None:
            return ""
        return f" at node '{self.labels[self.cur]}' ({self.nodes[self.cur].op_type})"

    def err(self, msg: str, idx: int | None = None) -> ModelError:
        idx = self.cur if idx is None else idx
        if idx is None:
            return ModelError(f"{self.src}: {msg}")
        return ModelError(f"{self.src}: node '{self.labels[idx]}' ({self.nodes[idx].op_type}): "
                          f"{msg}")

    def unsupported(self, idx: int) -> ModelError:
        node = self.nodes[idx]
        op = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        return ModelError(f"{self.src}: unsupported op {op} at node '{self.labels[idx]}'")

    # -- driver -------------------------------------------------------------------------------
    def run(self) -> Graph:
        if self.opset < MIN_OPSET:
            raise self.err(f"opset {self.opset} is too old (opset {MIN_OPSET} or newer needed)")
        self._index_nodes()
        self._read_initializers()
        self._read_declared_shapes()
        order = self._topological_order()
        self.cur = None
        for idx in order:                       # 1. constants
            self.cur = idx
            self._try_fold(idx)
        self.cur = None
        self._read_inputs()
        for idx in order:                       # 2. layers
            if idx in self.done:
                continue
            self.cur = idx
            self._convert(idx)
        self.cur = None
        self._read_outputs()
        return self.graph

    def _index_nodes(self) -> None:
        seen: set[str] = set()
        for idx, node in enumerate(self.nodes):
            label = node.name or f"{node.op_type}_{idx}"
            if label in seen:
                label = f"{label}#{idx}"
            seen.add(label)
            self.labels.append(label)
            for name in node.input:
                if name:
                    self.consumers[name].append(idx)

    def _read_initializers(self) -> None:
        from onnx import TensorProto, numpy_helper  # optional: onnx

        if len(self.gp.sparse_initializer):
            raise self.err("sparse initializers are not supported")
        for t in self.gp.initializer:
            if t.data_location == TensorProto.EXTERNAL:
                raise self.err(f"initializer '{t.name}' uses external data (not supported)")
            try:
                arr = numpy_helper.to_array(t)
            except Exception as e:  # noqa: BLE001 - corrupt tensor data
                raise self.err(f"initializer '{t.name}' is corrupt ({type(e).__name__}: {e})"
                               ) from None
            self.values[t.name] = self._normalize_const(arr, f"initializer '{t.name}'")

    def _normalize_const(self, arr: Any, what: str) -> np.ndarray:
        arr = np.asarray(arr)
        if arr.dtype.kind == "f" and arr.dtype != np.float32:
            with np.errstate(over="ignore", invalid="ignore"):
                f32 = arr.astype(np.float32)
            if np.any(np.isinf(f32) & np.isfinite(arr)):
                raise self.err(f"{what} has values that do not fit float32 "
                               f"({arr[np.isinf(f32) & np.isfinite(arr)][0]:.6g})")
            arr = f32
        if arr.dtype.kind not in "fiub":
            raise self.err(f"{what} has unsupported type {arr.dtype}")
        if arr.size > MAX_FOLDED_ELEMENTS:
            raise self.err(f"{what} has {arr.size} elements (too large)")
        return arr

    def _read_declared_shapes(self) -> None:
        for vi in list(self.gp.value_info) + list(self.gp.output):
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
                continue
            self.declared[vi.name] = tuple(
                d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in tt.shape.dim)

    def _topological_order(self) -> list[int]:
        producer: dict[str, int] = {}
        for idx, node in enumerate(self.nodes):
            for name in node.output:
                if not name:
                    continue
                if name in producer or name in self.values:
                    raise self.err(f"value '{name}' is produced twice", idx)
                producer[name] = idx
        graph_inputs = {vi.name for vi in self.gp.input}
        deps: list[set[int]] = []
        users: dict[int, list[int]] = defaultdict(list)
        for idx, node in enumerate(self.nodes):
            d: set[int] = set()
            for name in node.input:
                if not name:
                    continue
                if name in producer:
                    d.add(producer[name])
                elif name not in self.values and name not in graph_inputs:
                    raise self.err(f"input '{name}' is not produced by any node, initializer "
                                   "or graph input", idx)
            deps.append(d)
            for p in d:
                users[p].append(idx)
        count = [len(d) for d in deps]
        ready = [i for i, c in enumerate(count) if c == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users[i]:
                count[u] -= 1
                if count[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) != len(self.nodes):
            stuck = min(i for i, c in enumerate(count) if c > 0)
            raise self.err("the graph has a cycle", stuck)
        for name in self.graph_outputs:
            if name not in producer and name not in self.values and name not in graph_inputs:
                raise self.err(f"graph output '{name}' is never produced")
        return order

    # -- graph inputs and outputs --------------------------------------------------------------
    def _read_inputs(self) -> None:
        md = self.graph.metadata
        md.update({"source_format": "onnx", "source": self.src, "onnx_opset": self.opset,
                   "onnx_producer": " ".join(p for p in (self.model.producer_name,
                                                         self.model.producer_version) if p),
                   "input_layout": "NCHW", "source_input_shapes": {},
                   "source_output_shapes": {}, "input_layouts": {}, "output_layouts": {},
                   "dynamic_batch": False})
        inputs_quant: list[dict[str, Any] | None] = []
        for vi in self.gp.input:
            if vi.name in self.values:           # an initializer listed as input (old IR)
                continue
            shape = self._static_shape(vi, "input")
            dtype = ONNX_DTYPES.get(vi.type.tensor_type.elem_type)
            if dtype != "float32":
                raise self.err(f"input '{vi.name}' has type {dtype or 'unsupported'}; only "
                               "float32 model inputs are supported")
            md["source_input_shapes"][vi.name] = shape
            qp = self._q_consumers(vi.name)
            name = self._fresh(vi.name)
            if qp is None:
                self.graph.add_tensor(Tensor(name, ir_shape(shape), "float32"))
                inputs_quant.append(None)
            else:
                self.graph.add_tensor(Tensor(name, ir_shape(shape), "int8", quant=qp))
                inputs_quant.append(_qdict(qp))
            self.graph.inputs.append(name)
            md["input_layouts"][name] = "NHWC" if len(shape) == 4 else "unchanged"
            self.values[vi.name] = Act(name, shape)
        if not self.graph.inputs:
            raise self.err("the model has no (non-constant) inputs")
        if any(q is not None for q in inputs_quant):
            md["input_quant"] = inputs_quant[0]
            md["inputs_quant"] = inputs_quant

    def _static_shape(self, vi: Any, what: str) -> tuple[int, ...]:
        if not vi.type.HasField("tensor_type"):
            raise self.err(f"{what} '{vi.name}' is not a tensor")
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            raise self.err(f"{what} '{vi.name}' has no shape")
        shape = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                shape.append(int(d.dim_value))
            elif i == 0 and not d.HasField("dim_value"):
                shape.append(1)
                self.graph.metadata["dynamic_batch"] = True
            else:
                dim = d.dim_param or d.dim_value
                raise self.err(f"{what} '{vi.name}' has dimension {i} = {dim!r}; only the "
                               "batch dimension may be dynamic")
        if math.prod(shape) > MAX_ELEMENTS:
            raise self.err(f"{what} '{vi.name}' has shape {shape}: {math.prod(shape)} "
                           f"elements, at most {MAX_ELEMENTS} supported")
        return tuple(shape)

    def _read_outputs(self) -> None:
        md = self.graph.metadata
        outputs_quant: list[dict[str, Any] | None] = []
        dequantized = False
        renamed: dict[str, str] = {}
        for vi in self.gp.output:
            v = self.values.get(vi.name)
            if v is None:
                raise self.err(f"graph output '{vi.name}' is never produced")
            if isinstance(v, Act):
                if v.flat is not None:
                    raise self.err(f"graph output '{vi.name}' is a flattened NCHW tensor whose "
                                   f"element order differs in NHWC (from node '{v.flat.node}')")
                name, shape = renamed.get(v.tensor, v.tensor), v.shape
                t = self.graph.tensors[name]
                if t.dtype == "int8" and not v.raw:
                    dequantized = True
            else:
                arr = v.dequantize() if isinstance(v, QConst) else v
                shape = tuple(arr.shape)
                name = self._const_tensor(vi.name, to_ir_array(arr), Role.CONSTANT)
                t = self.graph.tensors[name]
            outputs_quant.append(_qdict(t.quant) if t.quant is not None else None)
            md["source_output_shapes"][vi.name] = shape
            if name != vi.name and self._renamable(name, vi.name):
                self._rename(name, vi.name)
                renamed[name] = vi.name
                name = vi.name
            self.graph.outputs.append(name)
            md["output_layouts"][name] = "NHWC" if len(shape) == 4 else "unchanged"
        if self.qdq:
            md["quant_format"] = "qdq"
            md["output_dequantize"] = dequantized
            md.setdefault("input_quant", None)
            md.setdefault("inputs_quant", [None] * len(self.graph.inputs))
            md["output_quant"] = outputs_quant[0]
            md["outputs_quant"] = outputs_quant

    def _renamable(self, old: str, new: str) -> bool:
        g = self.graph
        return (new not in self.used and old not in g.inputs and old not in g.outputs
                and not g.tensors[old].is_const)

    def _rename(self, old: str, new: str) -> None:
        g = self.graph
        g.tensors = {(new if n == old else n): (t.replace(name=new) if n == old else t)
                     for n, t in g.tensors.items()}
        g.ops = [op.replace(inputs=tuple(new if i == old else i for i in op.inputs),
                            outputs=tuple(new if o == old else o for o in op.outputs))
                 for op in g.ops]
        self.used.add(new)

    # -- IR construction ---------------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        base = base or "t"
        name, i = base, 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name

    def _const_tensor(self, base: str, data: np.ndarray, role: Role,
                      quant: QuantParams | None = None) -> str:
        name = self._fresh(base)
        data = np.ascontiguousarray(data)
        self.graph.add_tensor(Tensor(name, data.shape, str(data.dtype), role, quant, data))
        return name

    def _emit(self, op_type: str, inputs: list[str], out: str, shape: tuple[int, ...],
              dtype: str, quant: QuantParams | None, attrs: dict[str, Any],
              flat: Flat | None = None, name: str | None = None, temp: bool = False) -> Act:
        """Add an op with one new output tensor (named after ONNX value ``out``, which it
        defines unless ``temp``: an intermediate tensor with no ONNX counterpart)."""
        assert self.cur is not None
        if math.prod(shape) > MAX_ELEMENTS or min(shape, default=0) < 0:
            raise self.err(f"output '{out}' would have shape {list(shape)} "
                           f"({math.prod(shape)} elements; at most {MAX_ELEMENTS} supported)")
        t = self._fresh(out)
        self.graph.add_tensor(Tensor(t, ir_shape(shape), dtype, Role.ACTIVATION, quant))
        op_name = self._fresh(name or self.labels[self.cur])
        self.graph.add_op(Op(op_type, op_name, tuple(inputs), (t,), attrs))
        act = Act(t, tuple(shape), flat=flat)
        if not temp:
            self._set(out, act)
        return act

    def _set(self, name: str, value: Value) -> None:
        if isinstance(value, Act):
            want = self.declared.get(name)
            got = value.shape
            mismatch = want is not None and (len(want) != len(got) or any(
                w is not None and w != g for w, g in zip(want, got)))
            batch_only = (mismatch and self.graph.metadata.get("dynamic_batch")
                          and len(want) == len(got)
                          and all(w is None or w == g for w, g in zip(want[1:], got[1:])))
            if mismatch and not batch_only:
                shown = ["?" if w is None else w for w in want]
                raise self.err(f"computed shape {list(got)} for '{name}' but the model "
                               f"declares {shown}")
        self.values[name] = value

    def _is_q(self, a: Act) -> bool:
        return self.graph.tensors[a.tensor].dtype == "int8"

    def _tquant(self, a: Act) -> QuantParams | None:
        return self.graph.tensors[a.tensor].quant

    def _float(self, a: Act) -> str:
        """The IR name of ``a`` as float32 (a dequantize op for an int8 tensor, once)."""
        t = self.graph.tensors[a.tensor]
        if t.dtype == "float32":
            return a.tensor
        if a.tensor not in self.dequantized:
            out = self._fresh(f"{a.tensor}_dequantized")
            self.graph.add_tensor(Tensor(out, t.shape, "float32"))
            self.graph.add_op(Op("dequantize", self._fresh(f"{a.tensor}_dequantize"),
                                 (a.tensor,), (out,), {}))
            self.dequantized[a.tensor] = out
        return self.dequantized[a.tensor]

    # -- node access ------------------------------------------------------------------------
    def _inputs(self, idx: int) -> list[Value | None]:
        out: list[Value | None] = []
        for name in self.nodes[idx].input:
            out.append(self.values.get(name) if name else None)
        return out

    def _attrs(self, idx: int) -> dict[str, Any]:
        from onnx import helper  # optional: onnx

        return {a.name: helper.get_attribute_value(a) for a in self.nodes[idx].attribute}

    def _act(self, ins: list[Value | None], i: int, what: str = "input") -> Act:
        v = ins[i] if i < len(ins) else None
        if not isinstance(v, Act):
            raise self.err(f"{what} {i} must be a tensor computed by the model "
                           f"({'missing' if v is None else 'a constant'})")
        return v

    def _const(self, ins: list[Value | None], i: int, what: str) -> np.ndarray | QConst:
        v = ins[i] if i < len(ins) else None
        if v is None or isinstance(v, Act):
            name = self.nodes[self.cur].input[i] if i < len(self.nodes[self.cur].input) else "?"
            raise self.err(f"{what} '{name}' must be a constant"
                           f"{' (it is missing)' if v is None else ''}")
        return v

    def _float_const(self, v: np.ndarray | QConst) -> np.ndarray:
        arr = v.dequantize() if isinstance(v, QConst) else v
        return np.asarray(arr, dtype=np.float32)

    def _int_list(self, v: Value | None, what: str) -> list[int]:
        if v is None or isinstance(v, Act):
            raise self.err(f"{what} must be a constant")
        arr = v.dequantize() if isinstance(v, QConst) else v
        if arr.dtype.kind not in "iu" or arr.ndim > 1:
            raise self.err(f"{what} must be a 1-D integer constant")
        return [int(x) for x in arr.reshape(-1)]

    def _sole_consumer(self, name: str) -> int | None:
        if name in self.graph_outputs:
            return None
        users = self.consumers.get(name, [])
        if len(users) != 1 or users[0] in self.done:
            return None
        return users[0]

    # -- constant folding -----------------------------------------------------------------------
    def _try_fold(self, idx: int) -> bool:
        node = self.nodes[idx]
        if node.domain not in DEFAULT_DOMAINS:
            return False
        ins = self._inputs(idx)
        names = [n for n in node.input if n]
        if any(self.values.get(n) is None for n in names):
            return False
        if node.op_type == "Shape" and len(ins) == 1 and isinstance(ins[0], Act):
            shape = np.array(ins[0].shape, dtype=np.int64)
            a = self._attrs(idx)
            start, end = a.get("start", 0), a.get("end", None)
            self._set_outputs(idx, [shape[start:end]])
            return True
        if node.op_type == "Size" and len(ins) == 1 and isinstance(ins[0], Act):
            self._set_outputs(idx, [np.array(int(np.prod(ins[0].shape)), np.int64)])
            return True
        if any(isinstance(v, Act) for v in ins):
            return False
        if not names and node.op_type != "Constant":     # RandomNormal & co: not constants
            return False
        if node.op_type == "QuantizeLinear":
            self._set_outputs(idx, [self._fold_quantize(idx, ins)])
        elif node.op_type == "DequantizeLinear":
            self._set_outputs(idx, [self._fold_dequantize(idx, ins)])
        else:
            self._set_outputs(idx, self._evaluate(idx, ins))
        return True

    def _set_outputs(self, idx: int, results: list[Any]) -> None:
        node = self.nodes[idx]
        for name, r in zip(node.output, results):
            if name:
                self.values[name] = (r if isinstance(r, QConst) else
                                     self._normalize_const(r, f"value '{name}'"))
        self.done.add(idx)

    def _evaluate(self, idx: int, ins: list[Value | None]) -> list[np.ndarray]:
        from onnx.reference import ReferenceEvaluator  # optional: onnx

        node = self.nodes[idx]
        feeds = {}
        for name, v in zip(node.input, ins):
            if name:
                feeds[name] = v.dequantize() if isinstance(v, QConst) else v
        self._check_fold_size(idx, feeds)
        opsets = {o.domain or "": o.version for o in self.model.opset_import}
        opsets[""] = self.opset
        try:
            with np.errstate(all="ignore"):
                res = ReferenceEvaluator(node, opsets=opsets).run(None, feeds)
        except Exception as e:  # noqa: BLE001 - unknown op or bad constant inputs
            if _is_unknown_op(e):
                raise self.unsupported(idx) from None
            raise self.err(f"cannot evaluate this node on its constant inputs "
                           f"({type(e).__name__}: {str(e)[:150]})") from None
        return [np.asarray(r) for r in res]

    def _check_fold_size(self, idx: int, feeds: dict[str, np.ndarray]) -> None:
        """Refuse folds whose result size comes from data (ConstantOfShape, Expand, Tile,
        Range, Pad, Resize, ...) before the evaluator tries to allocate it."""
        node = self.nodes[idx]
        arrs = [feeds.get(n) if n else None for n in node.input]

        def num(i: int) -> np.ndarray | None:
            a = arrs[i] if i < len(arrs) else None
            return None if a is None else np.abs(a.astype(np.float64)).reshape(-1)

        first = float(arrs[0].size) if arrs and arrs[0] is not None else 1.0
        op = node.op_type
        est = first
        with np.errstate(all="ignore"):
            if op == "ConstantOfShape" and num(0) is not None:
                est = float(np.prod(num(0)))
            elif op == "Expand" and num(1) is not None:
                est = max(float(np.prod(num(1))), first)
            elif op in ("Tile", "Upsample") and num(1) is not None:
                est = first * float(np.prod(num(1)))
            elif op == "Resize":
                sizes, scales = num(3), num(2)
                est = (float(np.prod(sizes)) if sizes is not None and sizes.size else
                       first * float(np.prod(scales)) if scales is not None and scales.size
                       else first)
            elif op == "Range" and len(arrs) == 3 and all(a is not None for a in arrs):
                st, lim, d = (float(a.reshape(-1)[0]) if a.size else 0.0 for a in arrs)
                est = abs((lim - st) / d) if d else math.inf
            elif op == "Pad" and num(1) is not None and arrs[0] is not None:
                p = num(1)
                dims = np.array(arrs[0].shape, np.float64)
                est = (float(np.prod(dims + p[:dims.size] + p[dims.size:2 * dims.size]))
                       if p.size == 2 * dims.size else first)
            elif op == "OneHot" and num(1) is not None:
                est = first * float(num(1).sum())
        if not est <= MAX_FOLDED_ELEMENTS:
            raise self.err("constant folding would create a tensor with too many elements")

    def _qdq_params(self, idx: int, ins: list[Value | None], rank: int, data_dtype: str | None
                    ) -> tuple[np.ndarray, np.ndarray, int | None, str]:
        """(scale, zero point, axis or None, quantized dtype) of a Q/DQ node; int8-shifted."""
        a = self._attrs(idx)
        if a.get("block_size", 0):
            raise self.err("blocked quantization is not supported")
        scale = self._const(ins, 1, "scale")
        if isinstance(scale, QConst) or scale.dtype != np.float32:
            raise self.err("the scale must be a float32 constant")
        zp = ins[2] if len(ins) > 2 else None
        if isinstance(zp, (Act, QConst)):
            raise self.err("the zero point must be a plain constant")
        if zp is not None:
            dtype = str(zp.dtype)
        elif data_dtype is not None:
            dtype = data_dtype
        else:
            dtype = ONNX_DTYPES.get(int(a.get("output_dtype", 0)) or 2, "unsupported")
        if data_dtype is not None and dtype != data_dtype:
            raise self.err(f"zero point type {dtype} differs from the data type {data_dtype}")
        if dtype not in ("int8", "uint8", "int32"):
            raise self.err(f"quantized type {dtype} is not supported (int8, uint8, int32 are)")
        zp_arr = np.zeros(scale.shape, np.int64) if zp is None else zp.astype(np.int64)
        if zp_arr.size != scale.size or scale.ndim > 1:
            raise self.err(f"{scale.size} scales but {zp_arr.size} zero points")
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise self.err("quantization scales must be positive and finite")
        axis = None
        if scale.size > 1 or scale.ndim == 1 and rank > 0 and a.get("axis") is not None:
            ax = int(a.get("axis", 1))
            ax = ax + rank if ax < 0 else ax
            if not 0 <= ax < rank:
                raise self.err(f"quantization axis {a.get('axis', 1)} outside rank {rank}")
            axis = ax if scale.size > 1 else None
        s, z = signed_params(dtype, scale, zp_arr)
        return s, z, axis, dtype

    def _fold_quantize(self, idx: int, ins: list[Value | None]) -> np.ndarray:
        x = self._float_const(self._const(ins, 0, "input"))
        s, z, axis, dtype = self._qdq_params(idx, ins, x.ndim, None)
        if axis is not None and x.shape[axis] != s.size:
            raise self.err(f"{s.size} scales for {x.shape[axis]} channels on axis {axis}")
        zp = z + 128 if dtype == "uint8" else z                # back to the ONNX zero point
        return onnx_quantize(x, s, zp, axis, dtype)

    def _fold_dequantize(self, idx: int, ins: list[Value | None]) -> QConst:
        q = self._const(ins, 0, "input")
        if isinstance(q, QConst) or q.dtype.kind not in "iu":
            raise self.err("DequantizeLinear input must be integer data")
        s, z, axis, _ = self._qdq_params(idx, ins, q.ndim, str(q.dtype))
        if axis is not None and q.shape[axis] != s.size:
            raise self.err(f"{s.size} scales for {q.shape[axis]} channels on axis {axis}")
        self.qdq = True
        return QConst(signed_data(q), s, z, axis)

    # -- conversion ----------------------------------------------------------------------------
    def _convert(self, idx: int) -> None:
        node = self.nodes[idx]
        if node.domain not in DEFAULT_DOMAINS:
            raise self.unsupported(idx)
        if self._try_fold(idx):
            return
        handler = _HANDLERS.get(node.op_type)
        if handler is None:
            raise self.unsupported(idx)
        self._check_arity(idx)
        ins = self._inputs(idx)
        for name, v in zip(node.input, ins):
            if isinstance(v, Act) and v.raw and node.op_type != "DequantizeLinear":
                raise self.err(f"input '{name}' is a quantized integer tensor; only "
                               "DequantizeLinear may consume it")
            if isinstance(v, Act) and v.flat is not None and node.op_type not in FLAT_OK:
                f = v.flat
                raise self.err(f"node '{f.node}' flattens a {f.c}x{f.h}x{f.w} NCHW tensor whose "
                               f"element order differs in NHWC; only a Gemm/MatMul may consume "
                               f"it, not this node", None)
        for extra in node.output[1:]:
            used = bool(extra) and (bool(self.consumers.get(extra))
                                    or extra in self.graph_outputs)
            if used and node.op_type in ("MaxPool", "Dropout", "BatchNormalization"):
                raise self.err(f"output '{extra}' (only the first output is supported)")
        handler(self, idx, ins)

    def _check_arity(self, idx: int) -> None:
        """Input/output counts against the operator schema of the model's opset."""
        import onnx.defs  # optional: onnx

        node = self.nodes[idx]
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, "")
        except Exception:  # noqa: BLE001 - no schema: the handler checks what it needs
            return
        n_in = len(node.input)
        optional = onnx.defs.OpSchema.FormalParameterOption.Optional
        required = sum(1 for i, f in enumerate(schema.inputs) if i < n_in and not node.input[i]
                       and f.option != optional)
        if not schema.min_input <= n_in <= schema.max_input or required:
            raise self.err(f"has {n_in} inputs, the op takes {schema.min_input}.."
                           f"{schema.max_input}{' (a required input is empty)' if required else ''}")
        if not schema.min_output <= len(node.output) <= schema.max_output:
            raise self.err(f"has {len(node.output)} outputs, the op has {schema.min_output}.."
                           f"{schema.max_output}")

    def _out_quant(self, acts: list[Act], out: str) -> QuantParams | None:
        if acts and all(self._is_q(a) for a in acts):
            return self._q_consumers(out)
        return None

    def _q_consumers(self, name: str) -> QuantParams | None:
        """Output quantization of ``name`` if it feeds only QuantizeLinear nodes (same params;
        Shape/Size nodes, which read only the shape, may feed on it too)."""
        if name in self.graph_outputs:
            return None
        users = self.consumers.get(name, [])
        found: QuantParams | None = None
        for u in users:
            n = self.nodes[u]
            if n.op_type in ("Shape", "Size") and n.domain in DEFAULT_DOMAINS:
                continue
            if (n.op_type != "QuantizeLinear" or n.domain not in DEFAULT_DOMAINS
                    or n.input[0] != name):
                return None
            ins = self._inputs(u)
            scale = ins[1] if len(ins) > 1 else None
            if not isinstance(scale, np.ndarray) or scale.size != 1:
                return None
            saved, self.cur = self.cur, u
            try:
                s, z, _, dtype = self._qdq_params(u, ins, 0, None)
            finally:
                self.cur = saved
            if s.size != 1 or dtype not in ("int8", "uint8"):
                return None
            qp = QuantParams(s, z)
            if found is not None and qp != found:
                return None
            found = qp
        return found

    # -- QuantizeLinear / DequantizeLinear of computed tensors ---------------------------
    def quantize_linear(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        s, z, _, dtype = self._qdq_params(idx, ins, len(x.shape), None)
        if s.size != 1 or dtype not in ("int8", "uint8"):
            raise self.err("only per-tensor int8/uint8 quantization of activations is "
                           "supported")
        self.qdq = True
        qp = QuantParams(s, z)
        out = self.nodes[idx].output[0]
        t = self.graph.tensors[x.tensor]
        if t.dtype == "int8" and t.quant == qp:
            self._set(out, replace(x, raw=True))
            return
        act = self._emit("quantize", [x.tensor], out, x.shape, "int8", qp, {}, flat=x.flat)
        self._set(out, replace(act, raw=True))

    def dequantize_linear(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        t = self.graph.tensors[x.tensor]
        if not x.raw or t.dtype != "int8":
            raise self.err("DequantizeLinear of a tensor that is not a QuantizeLinear result "
                           "is not supported")
        s, z, _, _ = self._qdq_params(idx, ins, len(x.shape), None)
        qp = QuantParams(s, z)
        if s.size != 1 or qp != t.quant:
            raise self.err(f"DequantizeLinear parameters {qp} differ from the tensor's {t.quant}")
        self._set(self.nodes[idx].output[0], replace(x, raw=False))


def _qdict(q: QuantParams) -> dict[str, Any]:
    if q.axis is not None or q.scale.size != 1:
        return {"scale": [float(s) for s in q.scale], "zero_point": [int(z) for z in
                                                                      q.zero_point],
                "axis": q.axis}
    return {"scale": q.s, "zero_point": q.zp}


def _is_unknown_op(e: Exception) -> bool:
    text = f"{type(e).__name__} {e}"
    return "not implemented" in text.lower() or "unable to find" in text.lower() or \
        "NotImplementedError" in text


_HANDLERS: dict[str, Callable[[_Importer, int, list[Value | None]], None]] = {
    "Conv": _Importer.conv,
    "Gemm": _Importer.gemm,
    "MatMul": _Importer.matmul,
    "Add": _Importer.binary,
    "Sub": _Importer.binary,
    "Mul": _Importer.binary,
    "Div": _Importer.binary,
    "Relu": _Importer.activation,
    "Clip": _Importer.activation,
    "BatchNormalization": _Importer.batchnorm,
    "AveragePool": _Importer.pool,
    "MaxPool": _Importer.pool,
    "GlobalAveragePool": _Importer.pool,
    "GlobalMaxPool": _Importer.pool,
    "ReduceMean": _Importer.reduce_mean,
    "Softmax": _Importer.softmax,
    "Concat": _Importer.concat,
    "Pad": _Importer.pad,
    "Reshape": _Importer.reshape,
    "Flatten": _Importer.reshape,
    "Squeeze": _Importer.reshape,
    "Unsqueeze": _Importer.reshape,
    "Transpose": _Importer.transpose,
    "Identity": _Importer.identity,
    "Dropout": _Importer.identity,
    "Cast": _Importer.identity,
    "QuantizeLinear": _Importer.quantize_linear,
    "DequantizeLinear": _Importer.dequantize_linear,
}
