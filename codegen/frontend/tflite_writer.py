"""TFLite exporter: ir.Graph -> .tflite flatbuffer (schema version 3, one subgraph).

Loadable by the TFLite Micro interpreter and by ``read_tflite``. Lowering rules:
- explicit padding goes back to VALID (all zero) or SAME (when it equals TFLite's SAME split);
  otherwise conv2d / depthwise_conv2d get a PAD (padding with the input zero point) before a
  VALID conv, and max_pool2d a PADV2 with the lowest representable value before a VALID pool.
  avg_pool2d with other padding has no exact TFLite form and is refused.
- reshape gets a constant int32 ``new_shape`` input (and ReshapeOptions), pad an int32
  ``paddings`` constant, mean an int32 ``axis`` constant.
- buffer 0 is the empty sentinel; every constant tensor has its own 16-byte-aligned buffer.
- The IR op names are kept in a model metadata entry (``OP_NAMES_METADATA``) that TFLite and
  TFLM ignore and ``read_tflite`` uses, so names survive a write/read round trip.
- Operator versions come from ``graph.metadata["tflite_op_versions"]`` (set by the reader) or
  a default per op and dtype.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
import tflite

from ..errors import ModelError
from ..ir import Graph, Op, QuantParams, Tensor, free_name, same_padding, verify
from ..ir.stream import unstream
from .tflite_schema import (
    DEFAULT_OP_VERSIONS,
    DTYPE_TO_TENSOR_TYPE,
    FILE_IDENTIFIER,
    IR_TO_ACTIVATION,
    IR_TO_OPCODE,
    OP_NAMES_METADATA,
    PADDING_SAME,
    PADDING_VALID,
    SCHEMA_VERSION,
    BuiltinOperator,
    BuiltinOptions,
)

_DATA_ALIGNMENT = 16


# builtin options table -> its fields (in the order they are written) from the serializer, the
# op's options and its fused activation code
_OPTION_FIELDS: dict[str, Callable[[_Serializer, dict[str, Any], int], dict[str, Any]]] = {
    "Conv2DOptions": lambda w, o, act: {
        "Padding": o["padding"], "StrideH": o["stride"][0], "StrideW": o["stride"][1],
        "DilationHFactor": o["dilation"][0], "DilationWFactor": o["dilation"][1],
        "FusedActivationFunction": act},
    "DepthwiseConv2DOptions": lambda w, o, act: {
        "Padding": o["padding"], "StrideH": o["stride"][0], "StrideW": o["stride"][1],
        "DepthMultiplier": o["depth_multiplier"],
        "DilationHFactor": o["dilation"][0], "DilationWFactor": o["dilation"][1],
        "FusedActivationFunction": act},
    "Pool2DOptions": lambda w, o, act: {
        "Padding": o["padding"], "StrideH": o["stride"][0], "StrideW": o["stride"][1],
        "FilterHeight": o["filter"][0], "FilterWidth": o["filter"][1],
        "FusedActivationFunction": act},
    "FullyConnectedOptions": lambda w, o, act: {
        "FusedActivationFunction": act, "KeepNumDims": o["keep_num_dims"]},
    "AddOptions": lambda w, o, act: {"FusedActivationFunction": act},
    "MulOptions": lambda w, o, act: {"FusedActivationFunction": act},
    "ReshapeOptions": lambda w, o, act: {"NewShape": w.int32_vector(o["new_shape"])},
    "SoftmaxOptions": lambda w, o, act: {"Beta": o["beta"]},
    "ReducerOptions": lambda w, o, act: {"KeepDims": o["keep_dims"]},
    "ConcatenationOptions": lambda w, o, act: {"Axis": o["axis"], "FusedActivationFunction": act},
    "PadOptions": lambda w, o, act: {},
    "PadV2Options": lambda w, o, act: {},
    "QuantizeOptions": lambda w, o, act: {},
    "DequantizeOptions": lambda w, o, act: {},
}
_OPTION_TABLES: dict[int, str] = {getattr(BuiltinOptions, n): n for n in _OPTION_FIELDS}


@dataclass
class _TflOp:
    """One TFLite operator to emit."""

    name: str                      # the IR op it comes from (recorded in the metadata)
    code: int
    inputs: list[int]
    outputs: list[int]
    options_type: int = BuiltinOptions.NONE
    options: dict[str, Any] = field(default_factory=dict)
    version: int = 1


class _Lowering:
    """IR graph -> flat lists of tensors and TFLite operators."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensors: list[Tensor] = []
        self.index: dict[str, int] = {}
        self.ops: list[_TflOp] = []
        self.names = set(graph.tensors) | {op.name for op in graph.ops}
        self.versions: dict[str, int] = dict(graph.metadata.get("tflite_op_versions") or {})

    def fail(self, op: Op, msg: str) -> ModelError:
        return ModelError(f"op {op.name!r} ({op.type}): {msg}")

    def tensor_index(self, name: str) -> int:
        if name == "":
            return -1
        i = self.index.get(name)
        if i is None:
            i = self.add(self.graph.tensors[name])
        return i

    def add(self, t: Tensor) -> int:
        self.index[t.name] = len(self.tensors)
        self.tensors.append(t)
        return len(self.tensors) - 1

    def new_name(self, base: str) -> str:
        name = free_name(base, self.names)
        self.names.add(name)
        return name

    def constant(self, op: Op, suffix: str, values: Any, dtype: str = "int32",
                 quant: QuantParams | None = None) -> int:
        arr = np.asarray(values, dtype=dtype)
        return self.add(Tensor(self.new_name(f"{op.name}/{suffix}"), arr.shape, dtype,
                               data=arr, quant=quant))

    def version(self, op: Op, code: int) -> int:
        v = self.versions.get(op.name)
        if isinstance(v, int) and 1 <= v < 2**31 and IR_TO_OPCODE[op.type][0] == code:
            return v
        dtype = self.graph.tensors[op.inputs[0]].dtype
        int8_v, float_v = DEFAULT_OP_VERSIONS[code]
        return float_v if dtype == "float32" else int8_v

    def run(self) -> None:
        for name in self.graph.inputs:
            self.tensor_index(name)
        for op in self.graph.ops:
            if op.type not in IR_TO_OPCODE:
                raise self.fail(op, "has no TFLite equivalent")
            self.lower(op)
        for name in self.graph.outputs:
            self.tensor_index(name)

    def emit(self, op: Op, inputs: list[int], options: dict[str, Any] | None = None,
             output: int | None = None, code: int | None = None,
             options_type: int | None = None) -> None:
        c, ot = IR_TO_OPCODE[op.type]
        code = c if code is None else code
        ot = ot if options_type is None else options_type
        out = self.tensor_index(op.outputs[0]) if output is None else output
        self.ops.append(_TflOp(op.name, code, inputs, [out], ot, options or {},
                               self.version(op, code)))

    def pre_pad(self, op: Op, x: int, pads: tuple[int, int, int, int], value: float | None
                ) -> int:
        """Emit PAD (value None: zero point) or PADV2 before ``op``; return the padded tensor."""
        pt, pb, pl, pr = pads
        src = self.tensors[x]
        n, h, w, c = src.shape
        padded = self.add(Tensor(self.new_name(f"{op.name}/pad"), (n, h + pt + pb, w + pl + pr, c),
                                 src.dtype, quant=src.quant))
        paddings = self.constant(op, "paddings", [[0, 0], [pt, pb], [pl, pr], [0, 0]])
        inputs = [x, paddings]
        code, ot = BuiltinOperator.PAD, BuiltinOptions.PadOptions
        if value is not None:
            quant = None if src.quant is None else QuantParams(src.quant.scale[:1],
                                                               src.quant.zero_point[:1])
            inputs.append(self.constant(op, "pad_value", [value], src.dtype, quant))
            code, ot = BuiltinOperator.PADV2, BuiltinOptions.PadV2Options
        self.ops.append(_TflOp(f"{op.name}/pad", code, inputs, [padded], ot, {},
                               self.version(op, code)))
        return padded

    def window_padding(self, op: Op, kh: int, kw: int, dh: int = 1, dw: int = 1) -> int | None:
        """SAME / VALID for the op's explicit padding, or None if neither matches."""
        x = self.graph.tensors[op.inputs[0]].shape
        sh, sw = op.attrs["stride"]
        pads = tuple(op.attrs["padding"])
        if pads == (0, 0, 0, 0):
            return PADDING_VALID
        _, pt, pb = same_padding(x[1], kh, sh, dh)
        _, pl, pr = same_padding(x[2], kw, sw, dw)
        return PADDING_SAME if pads == (pt, pb, pl, pr) else None

    def lower(self, op: Op) -> None:
        LOWERINGS[op.type](self, op, [self.tensor_index(n) for n in op.inputs])

    # -- one lowering per IR op type (LOWERINGS): (op, its input tensor indices) -------------
    def conv(self, op: Op, ins: list[int]) -> None:
        """conv2d, depthwise_conv2d."""
        a = op.attrs
        w = self.graph.tensors[op.inputs[1]].shape
        dh, dw = a["dilation"]
        padding = self.window_padding(op, w[1], w[2], dh, dw)
        if padding is None:
            ins[0] = self.pre_pad(op, ins[0], tuple(a["padding"]), None)
            padding = PADDING_VALID
        opts = {"padding": padding, "stride": a["stride"], "dilation": (dh, dw),
                "activation": a["activation"]}
        if op.type == "depthwise_conv2d":
            opts["depth_multiplier"] = a["depth_multiplier"]
        self.emit(op, ins, opts)

    def pool(self, op: Op, ins: list[int]) -> None:
        """avg_pool2d, max_pool2d."""
        a = op.attrs
        fh, fw = a["filter"]
        padding = self.window_padding(op, fh, fw)
        if padding is None:
            if op.type == "avg_pool2d":
                raise self.fail(op, f"explicit padding {tuple(a['padding'])} is neither SAME "
                                    "nor VALID; TFLite AVERAGE_POOL_2D cannot express it")
            x = self.tensors[ins[0]]
            lowest = -np.finfo(np.float32).max if x.dtype == "float32" \
                else np.iinfo(x.dtype).min
            ins[0] = self.pre_pad(op, ins[0], tuple(a["padding"]), lowest)
            padding = PADDING_VALID
        self.emit(op, ins, {"padding": padding, "stride": a["stride"], "filter": (fh, fw),
                            "activation": a["activation"]})

    def fully_connected(self, op: Op, ins: list[int]) -> None:
        self.emit(op, ins, {"activation": op.attrs["activation"],
                            "keep_num_dims": bool(op.attrs["keep_num_dims"])})

    def with_activation(self, op: Op, ins: list[int]) -> None:
        """add, mul."""
        self.emit(op, ins, {"activation": op.attrs["activation"]})

    def reshape(self, op: Op, ins: list[int]) -> None:
        shape = [int(d) for d in op.attrs["shape"]]
        self.emit(op, [ins[0], self.constant(op, "shape", np.array(shape, dtype=np.int32)
                                             .reshape(len(shape)))], {"new_shape": shape})

    def softmax(self, op: Op, ins: list[int]) -> None:
        self.emit(op, ins, {"beta": float(op.attrs["beta"])})

    def mean(self, op: Op, ins: list[int]) -> None:
        axes = [int(ax) for ax in op.attrs["axes"]]
        self.emit(op, [ins[0], self.constant(op, "axis", np.array(axes, dtype=np.int32))],
                  {"keep_dims": bool(op.attrs["keep_dims"])})

    def pad(self, op: Op, ins: list[int]) -> None:
        pads = np.array([[int(p0), int(p1)] for p0, p1 in op.attrs["pads"]], dtype=np.int32)
        self.emit(op, [ins[0], self.constant(op, "paddings", pads.reshape(-1, 2))])

    def concat(self, op: Op, ins: list[int]) -> None:
        self.emit(op, ins, {"axis": int(op.attrs["axis"]), "activation": op.attrs["activation"]})

    def plain(self, op: Op, ins: list[int]) -> None:
        """quantize, dequantize, relu, relu6: no options."""
        self.emit(op, ins)


# IR op type -> its lowering (IR_TO_OPCODE gives the builtin and its options table).
LOWERINGS: dict[str, Callable[[_Lowering, Op, list[int]], None]] = {
    "conv2d": _Lowering.conv,
    "depthwise_conv2d": _Lowering.conv,
    "fully_connected": _Lowering.fully_connected,
    "avg_pool2d": _Lowering.pool,
    "max_pool2d": _Lowering.pool,
    "add": _Lowering.with_activation,
    "mul": _Lowering.with_activation,
    "reshape": _Lowering.reshape,
    "softmax": _Lowering.softmax,
    "mean": _Lowering.mean,
    "pad": _Lowering.pad,
    "concat": _Lowering.concat,
    "quantize": _Lowering.plain,
    "dequantize": _Lowering.plain,
    "relu": _Lowering.plain,
    "relu6": _Lowering.plain,
}


def write_tflite(graph: Graph) -> bytes:
    """Serialize a (verified) IR graph as a TFLite flatbuffer (stream_chain ops as the ops
    they stand for)."""
    graph = unstream(verify(graph))
    low = _Lowering(graph)
    low.run()
    return _Serializer(graph, low).build()


class _Serializer:
    def __init__(self, graph: Graph, low: _Lowering):
        self.graph, self.low = graph, low
        self.b = flatbuffers.Builder(1024 + sum(t.nbytes for t in low.tensors if t.is_const))

    def build(self) -> bytes:
        b = self.b
        # buffers: 0 = empty sentinel, then one per constant tensor
        buffer_of: dict[int, int] = {}
        buffer_offsets = [self.buffer(None)]
        for i, t in enumerate(self.low.tensors):
            if t.is_const:
                buffer_of[i] = len(buffer_offsets)
                buffer_offsets.append(self.buffer(t.data, t.dtype))
        names_json = json.dumps([op.name for op in self.low.ops]).encode()
        op_names_buffer = len(buffer_offsets)
        buffer_offsets.append(self.buffer(np.frombuffer(names_json, np.uint8), "uint8"))
        tensor_offsets = [self.tensor(t, buffer_of.get(i, 0))
                          for i, t in enumerate(self.low.tensors)]

        codes: dict[int, int] = {}
        for op in self.low.ops:
            codes[op.code] = max(codes.get(op.code, 1), op.version)
        code_index = {c: k for k, c in enumerate(codes)}
        opcode_offsets = [self.table(
            "OperatorCode",
            DeprecatedBuiltinCode=min(c, BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES),
            BuiltinCode=c, Version=v) for c, v in codes.items()]
        op_offsets = [self.operator(op, code_index[op.code]) for op in self.low.ops]

        idx = self.low.index
        sg_name = b.CreateString(str(self.graph.metadata.get("tflite_subgraph_name") or "main"))
        sg_tensors = self.vector_of_offsets(tensor_offsets)
        sg_inputs = self.int32_vector([idx[n] for n in self.graph.inputs])
        sg_outputs = self.int32_vector([idx[n] for n in self.graph.outputs])
        sg_ops = self.vector_of_offsets(op_offsets)
        subgraph = self.table("SubGraph", Tensors=sg_tensors, Inputs=sg_inputs,
                              Outputs=sg_outputs, Operators=sg_ops, Name=sg_name)

        description = b.CreateString(str(self.graph.metadata.get("tflite_description")
                                         or "pockengine"))
        m_codes = self.vector_of_offsets(opcode_offsets)
        m_subgraphs = self.vector_of_offsets([subgraph])
        m_buffers = self.vector_of_offsets(buffer_offsets)
        meta_name = b.CreateString(OP_NAMES_METADATA)
        m_metadata = self.vector_of_offsets(
            [self.table("Metadata", Name=meta_name, Buffer=op_names_buffer)])
        model = self.table("Model", Version=SCHEMA_VERSION, OperatorCodes=m_codes,
                           Subgraphs=m_subgraphs, Description=description, Buffers=m_buffers,
                           Metadata=m_metadata)
        b.Finish(model, file_identifier=FILE_IDENTIFIER)
        return bytes(b.Output())

    # -- helpers ----------------------------------------------------------------------------
    def table(self, name: str, **fields: Any) -> int:
        """A table of the schema, through the tflite module's ``<name>Start``, then
        ``<name>Add<Field>`` for each field in order (None: left out), then ``<name>End``.
        Its strings, vectors and other tables must be built first."""
        b = self.b
        getattr(tflite, f"{name}Start")(b)
        for field_name, value in fields.items():
            if value is not None:
                getattr(tflite, f"{name}Add{field_name}")(b, value)
        return getattr(tflite, f"{name}End")(b)

    def vector_of_offsets(self, offsets: list[int]) -> int:
        b = self.b
        b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    def int32_vector(self, values: list[int]) -> int:
        return self.b.CreateNumpyVector(np.asarray(values, dtype="<i4").reshape(-1))

    def buffer(self, values: np.ndarray | None, dtype: str = "uint8") -> int:
        b = self.b
        data = None
        if values is not None:
            payload = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
            raw = payload.tobytes()
            b.StartVector(1, len(raw), _DATA_ALIGNMENT)
            b.head = b.head - len(raw)
            b.Bytes[b.head:b.head + len(raw)] = raw
            b.vectorNumElems = len(raw)
            data = b.EndVector()
        return self.table("Buffer", Data=data)

    def quantization(self, q: QuantParams) -> int:
        b = self.b
        scale = b.CreateNumpyVector(np.asarray(q.scale, dtype="<f4"))
        zp = b.CreateNumpyVector(np.asarray(q.zero_point, dtype="<i8"))
        return self.table("QuantizationParameters", Scale=scale, ZeroPoint=zp,
                          QuantizedDimension=q.axis or 0)

    def tensor(self, t: Tensor, buffer_index: int) -> int:
        b = self.b
        name = b.CreateString(t.name)
        shape = self.int32_vector(list(t.shape))
        quant = self.quantization(t.quant) if t.quant is not None else None
        return self.table("Tensor", Shape=shape, Type=DTYPE_TO_TENSOR_TYPE[t.dtype],
                          Buffer=buffer_index, Name=name, Quantization=quant)

    def options(self, op: _TflOp) -> int | None:
        table = _OPTION_TABLES.get(op.options_type)
        if table is None:
            return None
        act = IR_TO_ACTIVATION.get(op.options.get("activation", "none"), 0)
        return self.table(table, **_OPTION_FIELDS[table](self, op.options, act))

    def operator(self, op: _TflOp, opcode_index: int) -> int:
        inputs = self.int32_vector(op.inputs)
        outputs = self.int32_vector(op.outputs)
        options = self.options(op)
        return self.table("Operator", OpcodeIndex=opcode_index, Inputs=inputs, Outputs=outputs,
                          BuiltinOptionsType=None if options is None else op.options_type,
                          BuiltinOptions=options)
