"""TFLite importer: a .tflite flatbuffer (subgraph 0) -> ir.Graph.

The file is untrusted input: every offset, length, index, shape and data size is checked (see
``checked_flatbuffer``), and any problem ends in a one-line ``ModelError`` naming the file and,
for op problems, the op and its node name. The resulting graph has passed ``ir.verify``.

Mapping:
- Tensors keep their flatbuffer names (made unique; unnamed ones become ``tensor_<index>``).
  Constant tensors get ``Role.WEIGHT`` (input 1 of conv/depthwise/fully-connected),
  ``Role.BIAS`` (input 2) or ``Role.CONSTANT``.
- Ops are named after their (first) output tensor, unless the file carries the op names
  ``write_tflite`` records (metadata entry ``pockengine_op_names``).
- SAME/VALID become explicit (top, bottom, left, right) padding; constant shape / paddings /
  axis inputs of RESHAPE, PAD, PADV2 and MEAN become attributes and are dropped from the inputs.
- A PAD (zero point / 0.0) feeding only a VALID CONV_2D / DEPTHWISE_CONV_2D, or a PADV2 with
  the lowest value feeding only a VALID MAX_POOL_2D, is folded into the op's explicit padding
  (exact; it is how ``write_tflite`` expresses padding that is neither SAME nor VALID, so
  read(write(graph)) gives the graph back). Folded pad ops: ``metadata["tflite_folded_pads"]``.
- Hybrid (dynamic-range) models — float32 activations with int8 constant weights, such as
  the MLPerf KWS "float32" model — get their weights dequantized to float32
  (``scale * (q - zero_point)``), giving a plain float graph (TFLM cannot run hybrid models;
  the quantizer and golden model need float weights). Their names are listed in
  ``graph.metadata["tflite_dequantized_weights"]``.
- ``graph.metadata``: ``source_format`` "tflite", ``source``, ``tflite_description``,
  ``tflite_subgraph_name``, ``tflite_op_versions`` ({op name: operator version}).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np

from ..errors import ModelError
from ..ir import (
    MAX_ELEMENTS,
    PARAMETRIC_OPS,
    Graph,
    Op,
    QuantParams,
    Role,
    Tensor,
    same_padding,
    verify,
)
from .checked_flatbuffer import FlatBuffer, FlatBufferError, Table
from .tflite_schema import (
    ACTIVATION_NAMES,
    ACTIVATION_TO_IR,
    EXPECTED_OPTIONS,
    FILE_IDENTIFIER,
    OP_NAMES_METADATA,
    OPCODE_NAMES,
    OPCODE_TO_IR,
    PADDING_SAME,
    PADDING_VALID,
    SCHEMA_VERSION,
    TENSOR_TYPE_NAMES,
    TENSOR_TYPES,
    BuiltinOperator,
    Slot,
)

MAX_RANK = 8
_NARROW_INTS = ("int8", "uint8", "int16")
# What a converter gives: the op's attributes and its input tensor names.
_Converted = tuple[dict[str, Any], tuple[str, ...]]


class _Invalid(Exception):
    """A problem found while importing; read_tflite prefixes the file name."""


@dataclass
class _TensorInfo:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    quant: QuantParams | None
    data: np.ndarray | None


def read_tflite(data: bytes, source: str = "<bytes>") -> Graph:
    """Import subgraph 0 of a TFLite model; ModelError("SOURCE: problem") for any bad input."""
    try:
        graph = _Importer(bytes(data), source).run()
        return verify(graph)
    except ModelError as e:
        raise ModelError(f"{source}: {e}") from None
    except _Invalid as e:
        raise ModelError(f"{source}: {e}") from None
    except FlatBufferError as e:
        raise ModelError(f"{source}: corrupt or truncated TFLite file: {e}") from None
    except RecursionError:
        raise ModelError(f"{source}: corrupt TFLite file (structure too deep)") from None
    except MemoryError:
        raise ModelError(f"{source}: corrupt TFLite file (needs too much memory)") from None
    except Exception as e:  # noqa: BLE001  (last line of defence: no crash on bad files)
        raise ModelError(f"{source}: corrupt TFLite file ({type(e).__name__}: {e})") from None


class _Importer:
    def __init__(self, data: bytes, source: str):
        self.source = source
        if len(data) < 8:
            raise _Invalid(f"not a TFLite model (file is only {len(data)} bytes)")
        if data[4:8] != FILE_IDENTIFIER:
            raise _Invalid(f"not a TFLite model (file identifier {bytes(data[4:8])!r}, "
                           f"expected {FILE_IDENTIFIER!r})")
        self.fb = FlatBuffer(data)
        self.copied_bytes = 0

    # -- model level ------------------------------------------------------------------------
    def run(self) -> Graph:
        model = self.fb.root("Model")
        version = model.scalar(Slot.Model.VERSION, "u32", 0)
        if version != SCHEMA_VERSION:
            raise _Invalid(f"unsupported TFLite schema version {version} (expected "
                           f"{SCHEMA_VERSION})")
        self.opcodes = model.tables(Slot.Model.OPERATOR_CODES, "operator_codes")
        self.buffers = model.tables(Slot.Model.BUFFERS, "buffers")
        subgraphs = model.tables(Slot.Model.SUBGRAPHS, "subgraphs")
        if len(subgraphs) == 0:
            raise _Invalid("model has no subgraphs")
        sg = subgraphs[0]
        self.tensor_tables = sg.tables(Slot.SubGraph.TENSORS, "tensors")
        self.n_tensors = len(self.tensor_tables)
        self.tensor_cache: dict[int, _TensorInfo] = {}
        self.used_names: set[str] = set()
        self.next_suffix: dict[str, int] = {}
        self.names: list[str] = self._tensor_names()

        graph = Graph(name=self._graph_name())
        graph.metadata.update({
            "source_format": "tflite",
            "source": self.source,
            "tflite_description": model.string(Slot.Model.DESCRIPTION, "description") or "",
            "tflite_subgraph_name": sg.string(Slot.SubGraph.NAME, "subgraph name") or "",
            "tflite_op_versions": {},
        })
        if len(subgraphs) > 1:
            graph.metadata["tflite_ignored_subgraphs"] = len(subgraphs) - 1

        inputs = self._index_list(sg.array(Slot.SubGraph.INPUTS, "<i4", "subgraph inputs"),
                                  "subgraph input")
        outputs = self._index_list(sg.array(Slot.SubGraph.OUTPUTS, "<i4", "subgraph outputs"),
                                   "subgraph output")
        if not outputs:
            raise _Invalid("subgraph 0 has no outputs")

        ops: list[Op] = []
        self.hybrid_weights: set[int] = set()
        self.pad_pending: dict[str, tuple[str, _Invalid]] = {}
        roles: dict[int, Role] = {}
        op_names: set[str] = set()
        self.op_suffix: dict[str, int] = {}
        operators = sg.tables(Slot.SubGraph.OPERATORS, "operators")
        self.op_base_names = self._recorded_op_names(model, len(operators))
        for k in range(len(operators)):
            op, version = self._operator(operators[k], k, op_names, roles)
            ops.append(op)
            graph.metadata["tflite_op_versions"][op.name] = version

        ops = self._fold_pads(ops, {self.names[i] for i in outputs}, graph.metadata)
        for op in ops:
            if op.name in self.pad_pending:
                raise self.pad_pending[op.name][1]

        # tensors referenced by the graph, in flatbuffer order
        referenced = {self._index_of(n) for op in ops for n in op.inputs + op.outputs if n}
        referenced.update(inputs)
        referenced.update(outputs)
        for i in sorted(referenced):
            info = self._tensor(i)
            if i in self.hybrid_weights:
                info = _dequantized(info)
            role = roles.get(i, Role.CONSTANT if info.data is not None else Role.ACTIVATION)
            graph.add_tensor(Tensor(info.name, info.shape, info.dtype, role, info.quant,
                                    info.data))
        graph.ops = ops
        if self.hybrid_weights:
            graph.metadata["tflite_dequantized_weights"] = sorted(
                self.names[i] for i in self.hybrid_weights)
        graph.inputs = [self.names[i] for i in inputs if self._tensor(i).data is None]
        graph.outputs = [self.names[i] for i in outputs]
        return graph

    def _fold_pads(self, ops: list[Op], graph_outputs: set[str],
                   metadata: dict[str, Any]) -> list[Op]:
        """Fold PAD (zero point) -> VALID conv / depthwise conv, and PADV2 (lowest value) ->
        VALID max pool, into the op's explicit padding — exact, and the form ``write_tflite``
        emits for padding that is neither SAME nor VALID. Only when the padded tensor feeds
        nothing else, pads only H and W, and keeps dtype and quantization."""
        producer = {op.outputs[0]: i for i, op in enumerate(ops)}
        uses: dict[str, int] = {}
        for op in ops:
            for name in op.inputs:
                uses[name] = uses.get(name, 0) + 1
        dropped: set[int] = set()
        for i, op in enumerate(ops):
            if op.type not in ("conv2d", "depthwise_conv2d", "max_pool2d") \
                    or any(op.attrs["padding"]):
                continue
            p = producer.get(op.inputs[0])
            if p is None or p in dropped or ops[p].type != "pad":
                continue
            pad = ops[p]
            kind = self.pad_pending.get(pad.name, ("zero",))[0]
            if kind != ("lowest" if op.type == "max_pool2d" else "zero"):
                continue
            mid, src = pad.outputs[0], pad.inputs[0]
            pads = pad.attrs["pads"]
            a, b = self._tensor(self.index_by_name[src]), self._tensor(self.index_by_name[mid])
            if uses.get(mid) != 1 or mid in graph_outputs or len(pads) != 4 \
                    or pads[0] != (0, 0) or pads[3] != (0, 0) or a.dtype != b.dtype \
                    or a.quant != b.quant or a.data is not None:
                continue
            padding = (pads[1][0], pads[1][1], pads[2][0], pads[2][1])
            ops[i] = op.replace(inputs=(src,) + op.inputs[1:],
                                attrs={**op.attrs, "padding": padding})
            dropped.add(p)
            self.pad_pending.pop(pad.name, None)
            metadata["tflite_op_versions"].pop(pad.name, None)
            metadata.setdefault("tflite_folded_pads", []).append(pad.name)
        return [op for i, op in enumerate(ops) if i not in dropped]

    def _recorded_op_names(self, model: Table, n_ops: int) -> list[str] | None:
        """The op names write_tflite recorded in the model metadata, if present and sane."""
        entries = model.tables(Slot.Model.METADATA, "metadata")
        for k in range(min(len(entries), 64)):
            entry = entries[k]
            if entry.string(Slot.Metadata.NAME, "metadata name") != OP_NAMES_METADATA:
                continue
            b = entry.scalar(Slot.Metadata.BUFFER, "u32", 0)
            if not 0 < b < len(self.buffers):
                return None
            raw = self.buffers[b].raw(Slot.Buffer.DATA, f"buffer {b} data")
            try:
                names = json.loads(bytes(raw or b"").decode("utf-8"))
            except (ValueError, RecursionError):
                return None
            if isinstance(names, list) and len(names) == n_ops and all(
                    isinstance(n, str) and 0 < len(n) <= 1024 for n in names):
                return names
            return None
        return None

    def _graph_name(self) -> str:
        if self.source.startswith("<"):
            return "model"
        return PurePath(self.source).stem or "model"

    def _index_list(self, arr: np.ndarray | None, what: str) -> list[int]:
        out = []
        for v in ([] if arr is None else arr.tolist()):
            if not 0 <= v < self.n_tensors:
                raise _Invalid(f"{what} refers to tensor {v}, but subgraph 0 has "
                               f"{self.n_tensors} tensors")
            out.append(v)
        return out

    # -- tensors ----------------------------------------------------------------------------
    def _tensor_names(self) -> list[str]:
        names = []
        for i in range(self.n_tensors):
            raw = self.tensor_tables[i].string(Slot.Tensor.NAME, f"tensor {i} name")
            base = (raw or "").strip() or f"tensor_{i}"
            if len(base) > 1024:
                base = base[:1024]
            names.append(self._unique(base))
        self.index_by_name = {n: i for i, n in enumerate(names)}
        return names

    def _unique(self, base: str) -> str:
        return _unique_name(base, self.used_names, self.next_suffix)

    def _index_of(self, name: str) -> int:
        return self.index_by_name[name]

    def _tensor(self, i: int) -> _TensorInfo:
        info = self.tensor_cache.get(i)
        if info is None:
            info = self._parse_tensor(i)
            self.tensor_cache[i] = info
        return info

    def _parse_tensor(self, i: int) -> _TensorInfo:
        t = self.tensor_tables[i]
        name = self.names[i]
        where = f"tensor {i} {name!r}"
        code = t.scalar(Slot.Tensor.TYPE, "i8", 0)
        dtype = TENSOR_TYPES.get(code)
        if dtype is None:
            tname = TENSOR_TYPE_NAMES.get(code, f"code {code}")
            raise _Invalid(f"{where} has unsupported type {tname}")
        if t.has(Slot.Tensor.SPARSITY):
            raise _Invalid(f"{where} is sparse (sparse tensors are not supported)")
        arr = t.array(Slot.Tensor.SHAPE, "<i4", f"{where} shape")
        shape = () if arr is None else tuple(int(d) for d in arr)
        if len(shape) > MAX_RANK:
            raise _Invalid(f"{where} has rank {len(shape)} (at most {MAX_RANK} supported)")
        if any(d < 0 for d in shape):
            raise _Invalid(f"{where} has dynamic or negative shape {list(shape)}")
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if any(d > MAX_ELEMENTS for d in shape) or n > MAX_ELEMENTS:
            raise _Invalid(f"{where} has {n} elements (shape {list(shape)}); at most "
                           f"{MAX_ELEMENTS} supported")
        quant = self._quant(t, shape, dtype, where)
        data = self._data(t, shape, n, dtype, where)
        return _TensorInfo(i, name, shape, dtype, quant, data)

    def _quant(self, t: Table, shape: tuple[int, ...], dtype: str,
               where: str) -> QuantParams | None:
        q = t.table(Slot.Tensor.QUANTIZATION, f"{where} quantization")
        if q is None:
            return None
        if q.scalar(Slot.Quantization.DETAILS_TYPE, "u8", 0) != 0:
            raise _Invalid(f"{where} uses custom quantization (not supported)")
        scale = q.array(Slot.Quantization.SCALE, "<f4", f"{where} scales")
        if scale is None or scale.size == 0:
            return None
        zp = q.array(Slot.Quantization.ZERO_POINT, "<i8", f"{where} zero points")
        if zp is None or zp.size == 0:
            zp = np.zeros(scale.shape, dtype=np.int64)
        if zp.size != scale.size:
            raise _Invalid(f"{where} has {scale.size} quantization scales but {zp.size} zero "
                           "points")
        if not np.all(np.isfinite(scale)) or np.any(scale < 0):
            raise _Invalid(f"{where} has an invalid quantization scale "
                           f"({scale[~np.isfinite(scale) | (scale < 0)][0]})")
        lo, hi = (np.iinfo(dtype).min, np.iinfo(dtype).max) if dtype in _NARROW_INTS \
            else (-2**31, 2**31 - 1)
        if np.any((zp < lo) | (zp > hi)):
            raise _Invalid(f"{where} has zero point {int(zp[(zp < lo) | (zp > hi)][0])} "
                           f"outside [{lo}, {hi}]")
        if scale.size == 1:
            return QuantParams(scale, zp, None)
        axis = q.scalar(Slot.Quantization.QUANTIZED_DIMENSION, "i32", 0)
        if not 0 <= axis < len(shape) or shape[axis] != scale.size:
            raise _Invalid(f"{where} has {scale.size} per-channel scales on dimension {axis}, "
                           f"shape is {list(shape)}")
        return QuantParams(scale, zp, axis)

    def _data(self, t: Table, shape: tuple[int, ...], n: int, dtype: str,
              where: str) -> np.ndarray | None:
        b = t.scalar(Slot.Tensor.BUFFER, "u32", 0)
        if b == 0:
            return None
        if b >= len(self.buffers):
            raise _Invalid(f"{where} refers to buffer {b}, but the model has "
                           f"{len(self.buffers)} buffers")
        buf = self.buffers[b]
        raw = buf.raw(Slot.Buffer.DATA, f"buffer {b} data")
        offset = buf.scalar(Slot.Buffer.OFFSET, "u64", 0)
        if (raw is None or len(raw) == 0) and offset > 1:
            size = buf.scalar(Slot.Buffer.SIZE, "u64", 0)
            self.fb.need(offset, size, f"buffer {b} external data")
            raw = memoryview(self.fb.data)[offset:offset + size]
        if raw is None or len(raw) == 0:
            return None
        itemsize = np.dtype(dtype).itemsize
        if len(raw) != n * itemsize:
            raise _Invalid(f"{where}: buffer {b} holds {len(raw)} bytes, but shape "
                           f"{list(shape)} of {dtype} needs {n * itemsize}")
        self.copied_bytes += len(raw)
        if self.copied_bytes > 8 * self.fb.size + 2**20:
            raise _Invalid("tensors share buffers so much that the constants exceed 8x the "
                           "file size")
        arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"), count=n)
        return arr.astype(dtype).reshape(shape)

    # -- operators --------------------------------------------------------------------------
    def _operator(self, t: Table, k: int, op_names: set[str],
                  roles: dict[int, Role]) -> tuple[Op, int]:
        ins = t.array(Slot.Operator.INPUTS, "<i4", f"operator {k} inputs")
        outs = t.array(Slot.Operator.OUTPUTS, "<i4", f"operator {k} outputs")
        ins = [] if ins is None else ins.tolist()
        outs = [] if outs is None else outs.tolist()
        for v in ins:
            if not -1 <= v < self.n_tensors:
                raise _Invalid(f"operator {k} input refers to tensor {v}, but subgraph 0 has "
                               f"{self.n_tensors} tensors")
        for v in outs:
            if not 0 <= v < self.n_tensors:
                raise _Invalid(f"operator {k} output refers to tensor {v}, but subgraph 0 has "
                               f"{self.n_tensors} tensors")
        if self.op_base_names is not None:
            base = self.op_base_names[k]
        else:
            base = self.names[outs[0]] if outs else f"operator_{k}"
        name = _unique_name(base, op_names, self.op_suffix)

        idx = t.scalar(Slot.Operator.OPCODE_INDEX, "u32", 0)
        if idx >= len(self.opcodes):
            raise _Invalid(f"operator {k} ({name!r}) uses operator code {idx}, but the model "
                           f"has {len(self.opcodes)}")
        oc = self.opcodes[idx]
        code = max(oc.scalar(Slot.OperatorCode.DEPRECATED_BUILTIN_CODE, "i8", 0),
                   oc.scalar(Slot.OperatorCode.BUILTIN_CODE, "i32", 0))
        version = oc.scalar(Slot.OperatorCode.VERSION, "i32", 1)
        if code == BuiltinOperator.CUSTOM:
            custom = oc.string(Slot.OperatorCode.CUSTOM_CODE, "custom code") or "?"
            raise _Invalid(f"unsupported custom op {custom!r} at node {name!r} (operator {k})")
        op_type = OPCODE_TO_IR.get(code)
        if op_type is None:
            opname = OPCODE_NAMES.get(code, f"with builtin code {code}")
            raise _Invalid(f"unsupported op {opname} at node {name!r} (operator {k})")
        ctx = _OpContext(self, k, name, OPCODE_NAMES[code], t, code, ins, outs)
        op = ctx.convert(op_type)
        for slot, role in ((1, Role.WEIGHT), (2, Role.BIAS)):
            if op_type in PARAMETRIC_OPS and len(ins) > slot and ins[slot] >= 0 \
                    and self._tensor(ins[slot]).data is not None:
                roles.setdefault(ins[slot], role)
        if op_type in PARAMETRIC_OPS and self._tensor(ins[0]).dtype == "float32":
            w = self._tensor(ins[1])
            if w.data is not None and w.dtype in ("int8", "uint8", "int16"):
                if w.quant is None:
                    raise _Invalid(f"{OPCODE_NAMES[code]} at node {name!r} (operator {k}): "
                                   f"float input with {w.dtype} weights that have no "
                                   "quantization parameters")
                self.hybrid_weights.add(ins[1])
        return op, version


def _unique_name(base: str, used: set[str], next_suffix: dict[str, int]) -> str:
    """``base``, or ``base_<k>`` with the first free k (amortized O(1) per call)."""
    name = base
    k = next_suffix.get(base, 1)
    while name in used:
        name = f"{base}_{k}"
        k += 1
    next_suffix[base] = k
    used.add(name)
    return name


def _dequantized(info: _TensorInfo) -> _TensorInfo:
    """The float32 form of a hybrid model's integer weight: scale * (q - zero_point)."""
    q = info.quant
    assert q is not None and info.data is not None
    bshape = [1] * len(info.shape)
    if q.axis is not None:
        bshape[q.axis] = q.scale.size
    scale = q.scale.reshape(bshape) if bshape else q.scale.reshape(())
    zp = q.zero_point.reshape(scale.shape).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):   # verify() names what overflowed
        data = ((info.data.astype(np.float32) - zp) * scale).astype(np.float32)
    return _TensorInfo(info.index, info.name, info.shape, "float32", None, data)


class _OpContext:
    """Converts one TFLite operator; errors name the op type, node and operator index."""

    def __init__(self, imp: _Importer, k: int, name: str, tfl_name: str, table: Table,
                 code: int, ins: list[int], outs: list[int]):
        self.imp, self.k, self.name, self.tfl_name = imp, k, name, tfl_name
        self.table, self.code, self.ins, self.outs = table, code, ins, outs

    def fail(self, msg: str) -> _Invalid:
        return _Invalid(f"{self.tfl_name} at node {self.name!r} (operator {self.k}): {msg}")

    def tensor(self, pos: int) -> _TensorInfo:
        return self.imp._tensor(self.ins[pos])

    def options(self) -> Table | None:
        expected = EXPECTED_OPTIONS[self.code]
        got = self.table.scalar(Slot.Operator.BUILTIN_OPTIONS_TYPE, "u8", 0)
        opts = self.table.table(Slot.Operator.BUILTIN_OPTIONS, f"{self.tfl_name} options")
        if opts is None or got == 0:
            return None
        if got != expected:
            raise self.fail(f"has options of type {got}, expected {expected}")
        return opts

    def activation(self, opts: Table | None, slot: int) -> str:
        code = 0 if opts is None else opts.scalar(slot, "i8", 0)
        act = ACTIVATION_TO_IR.get(code)
        if act is None:
            raise self.fail(f"unsupported fused activation "
                            f"{ACTIVATION_NAMES.get(code, code)}")
        return act

    def names(self, positions: list[int]) -> tuple[str, ...]:
        return tuple(self.imp.names[self.ins[p]] if self.ins[p] >= 0 else "" for p in positions)

    def need_inputs(self, lo: int, hi: int) -> None:
        if not lo <= len(self.ins) <= hi:
            raise self.fail(f"has {len(self.ins)} inputs, expected {lo}..{hi}")
        for p in range(lo):
            if self.ins[p] < 0:
                raise self.fail(f"required input {p} is missing")

    def constant(self, pos: int, what: str) -> np.ndarray:
        if pos >= len(self.ins) or self.ins[pos] < 0:
            raise self.fail(f"{what} input is missing")
        info = self.tensor(pos)
        if info.data is None:
            raise self.fail(f"{what} must be a constant tensor (dynamic {what} not supported)")
        if info.dtype not in ("int32", "int64"):
            raise self.fail(f"{what} has type {info.dtype}, expected int32 or int64")
        return info.data

    def rank4(self, pos: int, what: str) -> tuple[int, ...]:
        s = self.tensor(pos).shape
        if len(s) != 4:
            raise self.fail(f"{what} must be 4-D, got shape {list(s)}")
        return s

    def window(self, opts: Table | None, pad_slot: int, sw_slot: int, sh_slot: int,
               kh: int, kw: int, dh: int = 1, dw: int = 1) -> dict[str, Any]:
        get = (lambda s, d: d) if opts is None else (lambda s, d: opts.scalar(s, "i32", d))
        sh, sw = get(sh_slot, 0), get(sw_slot, 0)
        if min(sh, sw, dh, dw, kh, kw) < 1:
            raise self.fail(f"invalid stride {(sh, sw)}, dilation {(dh, dw)} or kernel "
                            f"{(kh, kw)}")
        x = self.rank4(0, "input")
        padding = 0 if opts is None else opts.scalar(pad_slot, "i8", 0)
        if padding == PADDING_SAME:
            _, pt, pb = same_padding(x[1], kh, sh, dh)
            _, pl, pr = same_padding(x[2], kw, sw, dw)
        elif padding == PADDING_VALID:
            pt = pb = pl = pr = 0
        else:
            raise self.fail(f"unknown padding type {padding}")
        return {"stride": (sh, sw), "padding": (pt, pb, pl, pr)}

    def convert(self, op_type: str) -> Op:
        if len(self.outs) != 1:
            raise self.fail(f"has {len(self.outs)} outputs, expected 1")
        opts = self.options()
        attrs, inputs = CONVERTERS[op_type](self, op_type, opts)
        if "" in inputs[:1]:
            raise self.fail("input 0 is missing")
        return Op(op_type, self.name, inputs, (self.imp.names[self.outs[0]],), attrs)

    # -- one converter per IR op type (CONVERTERS): (op type, options) -> (attrs, inputs) ----
    def conv(self, op_type: str, opts: Table | None) -> _Converted:
        """conv2d, depthwise_conv2d."""
        self.need_inputs(2, 3)
        w = self.rank4(1, "weight")
        s = Slot.Conv2D if op_type == "conv2d" else Slot.DepthwiseConv2D
        dh = 1 if opts is None else opts.scalar(s.DILATION_H, "i32", 1)
        dw = 1 if opts is None else opts.scalar(s.DILATION_W, "i32", 1)
        attrs = self.window(opts, s.PADDING, s.STRIDE_W, s.STRIDE_H, w[1], w[2], dh, dw)
        attrs["dilation"] = (dh, dw)
        attrs["activation"] = self.activation(opts, s.ACTIVATION)
        if op_type == "depthwise_conv2d":
            c = self.tensor(0).shape[3]
            if c > 0 and w[3] % c == 0:
                attrs["depth_multiplier"] = w[3] // c
            else:
                attrs["depth_multiplier"] = (
                    1 if opts is None else opts.scalar(s.DEPTH_MULTIPLIER, "i32", 1))
        return attrs, self.names(list(range(len(self.ins))))

    def fully_connected(self, op_type: str, opts: Table | None) -> _Converted:
        self.need_inputs(2, 3)
        s = Slot.FullyConnected
        fmt = 0 if opts is None else opts.scalar(s.WEIGHTS_FORMAT, "i8", 0)
        if fmt != 0:
            raise self.fail(f"unsupported weights format {fmt} (only DEFAULT)")
        attrs = {"activation": self.activation(opts, s.ACTIVATION),
                 "keep_num_dims": False if opts is None
                 else opts.scalar(s.KEEP_NUM_DIMS, "bool", False)}
        return attrs, self.names(list(range(len(self.ins))))

    def pool(self, op_type: str, opts: Table | None) -> _Converted:
        """avg_pool2d, max_pool2d."""
        self.need_inputs(1, 1)
        s = Slot.Pool2D
        fh = 0 if opts is None else opts.scalar(s.FILTER_H, "i32", 0)
        fw = 0 if opts is None else opts.scalar(s.FILTER_W, "i32", 0)
        attrs = self.window(opts, s.PADDING, s.STRIDE_W, s.STRIDE_H, fh, fw)
        attrs["filter"] = (fh, fw)
        attrs["activation"] = self.activation(opts, s.ACTIVATION)
        return attrs, self.names([0])

    def binary(self, op_type: str, opts: Table | None) -> _Converted:
        """add, mul."""
        self.need_inputs(2, 2)
        return {"activation": self.activation(opts, 0)}, self.names([0, 1])

    def reshape(self, op_type: str, opts: Table | None) -> _Converted:
        self.need_inputs(1, 2)
        return {"shape": self.imp._tensor(self.outs[0]).shape}, self.names([0])

    def softmax(self, op_type: str, opts: Table | None) -> _Converted:
        self.need_inputs(1, 1)
        beta = 0.0 if opts is None else opts.scalar(Slot.Softmax.BETA, "f32", 0.0)
        if not np.isfinite(beta):
            raise self.fail(f"invalid beta {beta}")
        return {"beta": float(beta)}, self.names([0])

    def mean(self, op_type: str, opts: Table | None) -> _Converted:
        self.need_inputs(2, 2)
        rank = len(self.tensor(0).shape)
        axes = self.constant(1, "axis").reshape(-1).tolist()
        if any(not -rank <= a < rank for a in axes):
            raise self.fail(f"axis {axes} outside input rank {rank}")
        attrs = {"axes": tuple(sorted({a % rank for a in axes})),
                 "keep_dims": False if opts is None
                 else opts.scalar(Slot.Reducer.KEEP_DIMS, "bool", False)}
        return attrs, self.names([0])

    def pad(self, op_type: str, opts: Table | None) -> _Converted:
        is_v2 = self.code == BuiltinOperator.PADV2
        self.need_inputs(2, 3 if is_v2 else 2)
        rank = len(self.tensor(0).shape)
        pads = self.constant(1, "paddings")
        if pads.shape != (rank, 2):
            raise self.fail(f"paddings have shape {list(pads.shape)}, expected "
                            f"[{rank}, 2]")
        if np.any(pads < 0) or np.any(pads > MAX_ELEMENTS):
            raise self.fail(f"invalid paddings {pads.tolist()}")
        if is_v2 and len(self.ins) > 2 and self.ins[2] >= 0:
            self.pad_value_kind()
        return {"pads": tuple((int(a), int(b)) for a, b in pads.tolist())}, self.names([0])

    def concat(self, op_type: str, opts: Table | None) -> _Converted:
        self.need_inputs(1, 64)
        rank = len(self.imp._tensor(self.outs[0]).shape)
        axis = 0 if opts is None else opts.scalar(Slot.Concatenation.AXIS, "i32", 0)
        if not -rank <= axis < rank:
            raise self.fail(f"axis {axis} outside output rank {rank}")
        attrs = {"axis": axis % rank,
                 "activation": self.activation(opts, Slot.Concatenation.ACTIVATION)}
        return attrs, self.names(list(range(len(self.ins))))

    def unary(self, op_type: str, opts: Table | None) -> _Converted:
        """quantize, dequantize, relu, relu6: one input, no attributes."""
        self.need_inputs(1, 1)
        return {}, self.names([0])

    def pad_value_kind(self) -> None:
        """Classify PADV2's constant value: the zero point (a plain pad) or the lowest value
        (foldable into a following MAX_POOL_2D); anything else is refused after folding."""
        info = self.tensor(2)
        out = self.imp._tensor(self.outs[0])
        if info.data is None or info.data.size != 1:
            raise self.fail("constant_values must be a constant scalar")
        value = info.data.reshape(-1)[0]
        if out.dtype == "float32":
            zero, lowest = float(value) == 0.0, float(value) <= -float(np.finfo(np.float32).max)
        else:
            zp = out.quant.zp if out.quant is not None else 0
            zero = int(value) == zp
            lowest = out.dtype in ("int8", "uint8", "int16") and \
                int(value) == int(np.iinfo(out.dtype).min)
        if zero:
            return
        self.imp.pad_pending[self.name] = (
            "lowest" if lowest else "other",
            self.fail(f"padding with value {value} is not supported (only the zero point / 0.0, "
                      "or the lowest value directly before a VALID MAX_POOL_2D)"))


# IR op type -> its converter (OPCODE_TO_IR gives the IR op type of a TFLite builtin).
CONVERTERS: dict[str, Callable[[_OpContext, str, Table | None], _Converted]] = {
    "conv2d": _OpContext.conv,
    "depthwise_conv2d": _OpContext.conv,
    "fully_connected": _OpContext.fully_connected,
    "avg_pool2d": _OpContext.pool,
    "max_pool2d": _OpContext.pool,
    "add": _OpContext.binary,
    "mul": _OpContext.binary,
    "reshape": _OpContext.reshape,
    "softmax": _OpContext.softmax,
    "mean": _OpContext.mean,
    "pad": _OpContext.pad,
    "concat": _OpContext.concat,
    "quantize": _OpContext.unary,
    "dequantize": _OpContext.unary,
    "relu": _OpContext.unary,
    "relu6": _OpContext.unary,
}
