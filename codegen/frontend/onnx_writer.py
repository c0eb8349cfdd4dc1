"""ONNX exporter: an int8 ir.Graph -> a QDQ ONNX model (bytes), the format onnxruntime's
``quantize_static`` (QuantFormat.QDQ) writes and ``read_onnx`` reads.

``write_onnx(graph)`` returns the serialized ModelProto (opset 13) or raises a one-line
``ModelError`` naming the op it cannot express (``cannot export op '/fc/dq' (dequantize) to
ONNX: ...``); ``check_onnx_export(graph)`` raises the same error without writing (``fit -o
X.onnx`` asks before training).

How an IR graph is written:
- Layout: every 4-D activation is NCHW in ONNX (the IR's NHWC transposed, as the importer
  expects); weights go back to ONNX layouts (conv OIHW, depthwise (C*M, 1, H, W), Gemm B (O, I)
  with ``transB=1``); padding, axes and pads are translated. A reshape whose element order
  differs between NHWC and NCHW is written only where the importer can take it back: a flatten
  of a 4-D tensor to 2-D consumed by fully connected layers, whose weight columns are then
  written in C,H,W order (``Flatten`` + the permuted Gemm weight). Other such reshapes are
  refused, naming the op. A fully connected layer on a 3-D input (``keep_num_dims``) is a
  ``MatMul`` by the transposed weight and an ``Add`` of the bias.
- Quantization: an int8 tensor T is, in ONNX, the float value
  ``DequantizeLinear(QuantizeLinear(x, s, zp), s, zp)`` of the float result ``x`` of the op that
  computes it, with T's scale and zero point; a layer's fused activation is a ``Relu`` (or
  ``Clip``) between the layer and its QuantizeLinear (what the importer fuses back). Weights
  are int8 initializers (symmetric: zero point 0; per channel on the output-channel axis when
  the IR has per-channel scales) behind a DequantizeLinear; biases int32 initializers with
  scale ``s_in * s_w[c]`` and zero point 0. Graph inputs are float32 (NCHW), quantized by a
  QuantizeLinear; graph outputs are DequantizeLinear results, so onnxruntime takes and gives
  float values. Ops that keep the integers as they are in TFLM (reshape, pad, pools, relu6,
  concat) must have their input's quantization on the output (QDQ would requantize instead);
  other graphs are refused.
- Reading back gives the same tensors (data, quantization) and ops, with one exception of the
  importer's: an int8 conv/FC/add/mul without activation whose output zero point is -128 is
  read with activation ``relu`` (onnxruntime drops such Relus; the clamp is the same).
- Names: ONNX inputs, outputs, nodes and the values before each QuantizeLinear carry the IR
  names (weights ``W`` as ``W_quantized`` / ``W_dequantized``), so ``read_onnx`` gives the
  same tensor and op names back.
- The batch dimension is dynamic (``N``) when every op keeps it apart (no reshape, mean,
  concat or pad across it), else fixed at the IR's size.

Only int8 graphs (and their int8-to-int8 requantizations) are written: an op with a float
output (dequantize, float layers) is refused with its name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import __version__
from ..errors import ModelError
from ..ir import FORWARD_OPS, Graph, Op, Tensor, free_name, verify
from ..ir.stream import unstream
from .onnx_layout import reshape_is_plain, same_order

__all__ = ["ONNX_OPSET", "check_onnx_export", "write_onnx"]

ONNX_OPSET = 13
ONNX_IR_VERSION = 8                # what onnxruntime of any recent version accepts
NHWC_TO_NCHW = (0, 3, 1, 2)        # transpose permutation of data
IR_TO_ONNX_AXIS = (0, 2, 3, 1)     # IR (NHWC) axis a -> ONNX (NCHW) axis IR_TO_ONNX_AXIS[a]
ACTIVATION_CLIPS = {"relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}


def write_onnx(graph: Graph) -> bytes:
    """Serialize an int8 IR graph as a QDQ ONNX model (see the module docstring)."""
    return _model(graph).SerializeToString()


def check_onnx_export(graph: Graph) -> None:
    """Raise the ModelError ``write_onnx`` would raise for this graph (nothing is written)."""
    _model(graph, check=False)


def _model(graph: Graph, check: bool = True) -> Any:
    try:
        import onnx  # optional: onnx
        from onnx import helper  # optional: onnx
    except ModuleNotFoundError:
        raise ModelError("writing ONNX models needs the 'onnx' package (pip install "
                         "onnx)") from None
    graph = unstream(verify(graph))          # stream_chain ops: the ops they stand for
    w = _Writer(graph)
    w.run()
    g = helper.make_graph(w.nodes, graph.name or "model", w.inputs, w.outputs, w.inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
                              producer_name="pockengine", producer_version=__version__)
    model.ir_version = ONNX_IR_VERSION
    model.doc_string = "int8 QDQ model written by pockengine"
    if check:
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as e:       # a bug here, not the user's input
            raise RuntimeError(f"the ONNX model written is not valid: {e}") from None
    return model


def _onnx_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[i] for i in NHWC_TO_NCHW) if len(shape) == 4 else tuple(shape)


def _onnx_axis(axis: int, rank: int) -> int:
    return IR_TO_ONNX_AXIS[axis] if rank == 4 else axis


def _onnx_data(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr.transpose(NHWC_TO_NCHW)) if arr.ndim == 4 else arr


class _Writer:
    def __init__(self, graph: Graph):
        self.g = graph
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.used: set[str] = set(graph.tensors) | {op.name for op in graph.ops}
        self.value: dict[str, str] = {}           # IR tensor -> ONNX value holding its reals
        self.flat: dict[str, tuple[int, int, int]] = {}  # flattened NHWC tensors: (c, h, w)
        self.consts: dict[str, str] = {}          # IR constant -> its dequantized ONNX value
        self.dynamic = self._batch_free()

    # -- helpers ------------------------------------------------------------------------------
    def fail(self, op: Op, msg: str) -> ModelError:
        return ModelError(f"cannot export op {op.name!r} ({op.type}) to ONNX: {msg}")

    def fresh(self, base: str) -> str:
        name = free_name(base, self.used)
        self.used.add(name)
        return name

    def node(self, op_type: str, inputs: list[str], outputs: list[str], name: str,
             **attrs: Any) -> None:
        from onnx import helper  # optional: onnx

        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, **attrs))

    def init(self, base: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper  # optional: onnx

        name = self.fresh(base)
        # np.array, not np.ascontiguousarray: a 0-d scale must stay a scalar (per-tensor
        # quantization; onnxruntime's fused QDQ kernels insist)
        self.inits.append(numpy_helper.from_array(np.array(arr, order="C"), name))
        return name

    def value_info(self, name: str, shape: tuple[int, ...]) -> Any:
        from onnx import TensorProto, helper  # optional: onnx

        dims: list[Any] = list(_onnx_shape(shape))
        if self.dynamic and dims:
            dims[0] = "N"
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)

    def _batch_free(self) -> bool:
        """Whether every op keeps the batch dimension (axis 0) apart, so that ONNX may leave it
        dynamic."""
        g = self.g
        if any(not g.tensors[n].shape or g.tensors[n].shape[0] != 1 for n in g.inputs):
            return False
        return not any(self._mixes_batch(op) for op in g.ops)

    def _mixes_batch(self, op: Op) -> bool:
        g, a = self.g, op.attrs
        rank = len(g.tensors[op.inputs[0]].shape) if op.inputs and op.inputs[0] else 0
        if op.type == "reshape":
            src, dst = g.tensors[op.inputs[0]].shape, g.tensors[op.outputs[0]].shape
            return not src or not dst or src[0] != dst[0]
        if op.type in ("add", "mul"):
            return any(g.tensors[n].is_const and len(g.tensors[n].shape) == rank
                       and g.tensors[n].shape[0] != 1 for n in op.inputs)
        return ((op.type == "mean" and 0 in tuple(a["axes"]))
                or (op.type == "concat" and int(a["axis"]) == 0)
                or (op.type == "pad" and tuple(a["pads"][0]) != (0, 0))
                or (op.type == "fully_connected" and rank not in (2, 4)))

    def quant_init(self, base: str, t: Tensor, zp_dtype: Any) -> tuple[str, str, int | None]:
        """(scale, zero point, axis) initializers of ``t``'s quantization (ONNX axis)."""
        q = t.quant
        assert q is not None
        if q.axis is None:
            scale = np.asarray(q.scale[0], np.float32)
            zp = np.asarray(q.zero_point[0], zp_dtype)
            axis = None
        else:
            scale = q.scale.astype(np.float32)
            zp = q.zero_point.astype(zp_dtype)
            axis = q.axis
        return self.init(f"{base}_scale", scale), self.init(f"{base}_zero_point", zp), axis

    def dequantized_const(self, op: Op, name: str, data: np.ndarray, axis: int | None,
                          qtype: Any) -> str:
        """A quantized constant (``data`` in ONNX layout, ``axis`` its ONNX channel axis)
        behind a DequantizeLinear; returns the float value."""
        key = f"{name}\0{axis}\0{data.shape}"
        if key in self.consts:
            return self.consts[key]
        t = self.g.tensors[name]
        if t.quant is None:
            raise self.fail(op, f"constant {name!r} has no quantization (only int8 graphs can "
                                "be exported)")
        q = self.init(f"{name}_quantized", data.astype(qtype))
        s, z, per_channel = self.quant_init(name, t, qtype)
        out = self.fresh(f"{name}_dequantized")
        attrs = {} if per_channel is None else {"axis": int(axis if axis is not None else 0)}
        self.node("DequantizeLinear", [q, s, z], [out], self.fresh(f"{name}_DequantizeLinear"),
                  **attrs)
        self.consts[key] = out
        return out

    def activation_in(self, op: Op, name: str, rank: int | None = None) -> str:
        """The float ONNX value of an int8 input of ``op`` (computed, or a constant, given in
        the broadcast form against an activation of ``rank``)."""
        if name in self.flat and op.type != "fully_connected":
            c, h, w = self.flat[name]
            raise self.fail(op, f"its input {name!r} flattens a {h}x{w}x{c} NHWC tensor, whose "
                                "element order NCHW ONNX cannot express (only fully connected "
                                "layers may consume it)")
        t = self.g.tensors[name]
        if t.dtype != "int8":
            raise self.fail(op, f"input {name!r} is {t.dtype} (only int8 graphs can be "
                                "exported)")
        if t.is_const:
            data = np.asarray(t.data)
            if rank == 4 and data.ndim < 4:
                data = data.reshape((1,) * (4 - data.ndim) + data.shape)
            if data.ndim == 4:
                data = _onnx_data(data)
            if t.quant is not None and t.quant.axis is not None:
                raise self.fail(op, f"constant {name!r} is quantized per channel (not "
                                    "supported as an activation operand)")
            return self.dequantized_const(op, name, data, None, np.int8)
        return self.value[name]

    def output(self, op: Op, float_value: str, name: str | None = None) -> None:
        """QuantizeLinear + DequantizeLinear of the op's float result with its output's
        quantization; the dequantized value stands for the IR tensor from now on."""
        out = op.outputs[0]
        t = self.g.tensors[out]
        s, z, _ = self.quant_init(out, t, np.int8)
        q = self.fresh(f"{out}_quantized") if name is None else name
        self.node("QuantizeLinear", [float_value, s, z], [q],
                  op.name if name is not None else self.fresh(f"{out}_QuantizeLinear"))
        dq = out if out in self.g.outputs else self.fresh(f"{out}_dequantized")
        self.node("DequantizeLinear", [q, s, z], [dq], self.fresh(f"{out}_DequantizeLinear"))
        self.value[out] = dq

    def pre(self, out: str) -> str:
        """The name of the float value before the QuantizeLinear of IR tensor ``out``: its own
        name (what the importer names the tensor after), except for a graph output, whose name
        goes to the DequantizeLinear result."""
        return self.fresh(f"{out}_float") if out in self.g.outputs else out

    def layer(self, op: Op, onnx_type: str, inputs: list[str], **attrs: Any) -> None:
        """A layer (its fused activation after it), then its output's Q/DQ pair."""
        out = op.outputs[0]
        pre = self.pre(out)
        act = op.attrs.get("activation", "none")
        if act == "none":
            self.node(onnx_type, inputs, [pre], op.name, **attrs)
        else:
            mid = self.fresh(f"{out}_{onnx_type}")
            self.node(onnx_type, inputs, [mid], op.name, **attrs)
            self.activation(op, act, mid, pre)
        self.output(op, pre)

    def activation(self, op: Op, act: str, x: str, out: str) -> None:
        if act == "relu":
            self.node("Relu", [x], [out], self.fresh(f"{op.name}/Relu"))
            return
        if act not in ACTIVATION_CLIPS:
            raise self.fail(op, f"activation {act!r} has no ONNX form here")
        lo, hi = ACTIVATION_CLIPS[act]
        self.node("Clip", [x, self.init(f"{op.name}/clip_min", np.asarray(lo, np.float32)),
                           self.init(f"{op.name}/clip_max", np.asarray(hi, np.float32))],
                  [out], self.fresh(f"{op.name}/Clip"))

    # -- driver -------------------------------------------------------------------------------
    def run(self) -> None:
        g = self.g
        for name in g.inputs:
            t = g.tensors[name]
            if t.dtype != "int8" or t.quant is None or t.quant.axis is not None:
                raise ModelError(f"cannot export to ONNX: input {name!r} is {t.dtype} "
                                 "(only int8 graphs with per-tensor input quantization can be "
                                 "exported)")
            self.inputs.append(self.value_info(name, t.shape))
            s, z, _ = self.quant_init(name, t, np.int8)
            q = self.fresh(f"{name}_quantized")
            self.node("QuantizeLinear", [name, s, z], [q], self.fresh(f"{name}_QuantizeLinear"))
            dq = self.fresh(f"{name}_dequantized")
            self.node("DequantizeLinear", [q, s, z], [dq],
                      self.fresh(f"{name}_DequantizeLinear"))
            self.value[name] = dq
        for op in g.ops:
            if op.type not in SUPPORTED:
                raise self.fail(op, f"no QDQ ONNX form (ops that can be exported: "
                                    f"{', '.join(SUPPORTED)})")
            t = g.tensors[op.outputs[0]]
            if t.dtype != "int8" or t.quant is None:
                raise self.fail(op, f"its output {op.outputs[0]!r} is {t.dtype} (only int8 "
                                    "graphs can be exported)")
            if t.quant.axis is not None:
                raise self.fail(op, f"its output {op.outputs[0]!r} is quantized per channel")
            getattr(self, f"op_{op.type}")(op)
        for name in g.outputs:
            if name in self.flat:
                raise ModelError(f"cannot export to ONNX: output {name!r} is a flattened NHWC "
                                 "tensor whose element order NCHW ONNX cannot express")
            if name in g.inputs or name not in self.value:
                raise ModelError(f"cannot export to ONNX: output {name!r} is not computed by "
                                 "an op")
            self.outputs.append(self.value_info(name, g.tensors[name].shape))

    # -- ops ------------------------------------------------------------------------------------
    def _bias(self, op: Op, n_out: int) -> list[str]:
        if len(op.inputs) < 3 or not op.inputs[2]:
            return []
        b = self.g.tensors[op.inputs[2]]
        if b.dtype != "int32" or b.quant is None or not b.is_const:
            raise self.fail(op, f"bias {op.inputs[2]!r} is not an int32 constant")
        if np.any(b.quant.zero_point != 0):
            raise self.fail(op, f"bias {op.inputs[2]!r} has non-zero zero points")
        data = np.asarray(b.data).reshape(-1)
        if data.size != n_out:
            raise self.fail(op, f"bias {op.inputs[2]!r} has {data.size} values for {n_out} "
                                "outputs")
        return [self.dequantized_const(op, op.inputs[2], data, 0, np.int32)]

    def _weight(self, op: Op, data: np.ndarray, onnx_axis: int) -> str:
        w = self.g.tensors[op.inputs[1]]
        if w.dtype != "int8" or w.quant is None or not w.is_const:
            raise self.fail(op, f"weight {op.inputs[1]!r} is not an int8 constant")
        if np.any(w.quant.zero_point != 0):
            raise self.fail(op, f"weight {op.inputs[1]!r} has non-zero zero points")
        return self.dequantized_const(op, op.inputs[1], data, onnx_axis, np.int8)

    @staticmethod
    def _window(op: Op) -> dict[str, Any]:
        t, b, left, r = (int(p) for p in op.attrs["padding"])
        return {"strides": [int(s) for s in op.attrs["stride"]], "pads": [t, left, b, r]}

    def op_conv2d(self, op: Op) -> None:
        w = np.asarray(self.g.tensors[op.inputs[1]].data)            # OHWI
        wv = self._weight(op, w.transpose(0, 3, 1, 2), 0)
        x = self.activation_in(op, op.inputs[0])
        self.layer(op, "Conv", [x, wv, *self._bias(op, w.shape[0])],
                   kernel_shape=[w.shape[1], w.shape[2]],
                   dilations=[int(d) for d in op.attrs["dilation"]], group=1,
                   **self._window(op))

    def op_depthwise_conv2d(self, op: Op) -> None:
        w = np.asarray(self.g.tensors[op.inputs[1]].data)            # 1HW(C*M)
        c = self.g.tensors[op.inputs[0]].shape[3]
        wv = self._weight(op, w.transpose(3, 0, 1, 2), 0)
        x = self.activation_in(op, op.inputs[0])
        self.layer(op, "Conv", [x, wv, *self._bias(op, w.shape[3])],
                   kernel_shape=[w.shape[1], w.shape[2]],
                   dilations=[int(d) for d in op.attrs["dilation"]], group=int(c),
                   **self._window(op))

    def op_fully_connected(self, op: Op) -> None:
        w = np.asarray(self.g.tensors[op.inputs[1]].data)            # (O, I)
        o, i = w.shape
        xt = self.g.tensors[op.inputs[0]]
        x = self.activation_in(op, op.inputs[0])
        flat = self.flat.get(op.inputs[0])
        if len(xt.shape) == 4 and not op.attrs["keep_num_dims"] and \
                int(np.prod(xt.shape[1:])) == i:
            _, h, wd, c = xt.shape
            mid = self.fresh(f"{op.inputs[0]}_flattened")
            self.node("Flatten", [x], [mid], self.fresh(f"{op.name}/Flatten"), axis=1)
            x = mid
            if h * wd != 1 and c != 1:
                flat = (c, h, wd)
        elif len(xt.shape) == 3 and op.attrs["keep_num_dims"]:
            self._matmul(op, x, w)
            return
        elif len(xt.shape) != 2:
            raise self.fail(op, f"input shape {list(xt.shape)} (2-D inputs, 3-D ones with "
                                "keep_num_dims and 4-D ones flattened whole can be exported)")
        if flat is not None:                       # the columns in ONNX's C,H,W order
            c, h, wd = flat
            w = w.reshape(o, h, wd, c).transpose(0, 3, 1, 2).reshape(o, i)
        wv = self._weight(op, w, 0)
        self.layer(op, "Gemm", [x, wv, *self._bias(op, o)], transB=1)

    def _matmul(self, op: Op, x: str, w: np.ndarray) -> None:
        """A fully connected layer on a 3-D input: MatMul by the transposed weight (per-channel
        scales on axis 1), then the bias Add (what the importer fuses back)."""
        o = w.shape[0]
        wv = self._weight(op, np.ascontiguousarray(w.T), 1)
        bias = self._bias(op, o)
        out = op.outputs[0]
        pre = self.pre(out)
        act = op.attrs.get("activation", "none")
        chain = [("MatMul", op.name, [wv])] + ([("Add", f"{op.name}/Add", bias)] if bias
                                               else [])
        value = x
        for k, (onnx_type, name, extra) in enumerate(chain):
            last = k == len(chain) - 1 and act == "none"
            res = pre if last else self.fresh(f"{out}_{onnx_type}")
            self.node(onnx_type, [value, *extra], [res],
                      name if k == 0 else self.fresh(name))
            value = res
        if act != "none":
            self.activation(op, act, value, pre)
        self.output(op, pre)

    def same_quant(self, op: Op, names: list[str] | None = None) -> None:
        """Ops that move or compare integers without requantizing (TFLM's reshape, pad, pools,
        relu6, concat) keep their input's quantization; with another output quantization the
        integers would be reinterpreted, which QDQ cannot express."""
        out = self.g.tensors[op.outputs[0]].quant
        for n in names if names is not None else op.inputs[:1]:
            if self.g.tensors[n].quant != out:
                raise self.fail(op, f"input {n!r} is quantized {self.g.tensors[n].quant}, the "
                                    f"output {out} (the op keeps the integers; QDQ ONNX "
                                    "requantizes)")

    def _pool(self, op: Op, onnx_type: str, **extra: Any) -> None:
        self.same_quant(op)
        x = self.activation_in(op, op.inputs[0])
        self.layer(op, onnx_type, [x], kernel_shape=[int(f) for f in op.attrs["filter"]],
                   **self._window(op), **extra)

    def op_avg_pool2d(self, op: Op) -> None:
        self._pool(op, "AveragePool", count_include_pad=0)

    def op_max_pool2d(self, op: Op) -> None:
        self._pool(op, "MaxPool")

    def _binary(self, op: Op, onnx_type: str) -> None:
        rank = len(self.g.tensors[op.outputs[0]].shape)
        a, b = op.inputs
        ta, tb = self.g.tensors[a], self.g.tensors[b]
        if ta.is_const and tb.is_const:
            raise self.fail(op, "both operands are constants")
        if not ta.is_const and not tb.is_const and len(ta.shape) != len(tb.shape) \
                and 4 in (len(ta.shape), len(tb.shape)):
            raise self.fail(op, f"broadcasting {list(ta.shape)} with {list(tb.shape)} across "
                                "layouts")
        self.layer(op, onnx_type, [self.activation_in(op, a, rank),
                                   self.activation_in(op, b, rank)])

    def op_add(self, op: Op) -> None:
        self._binary(op, "Add")

    def op_mul(self, op: Op) -> None:
        self._binary(op, "Mul")

    def op_reshape(self, op: Op) -> None:
        src = self.g.tensors[op.inputs[0]].shape
        dst = self.g.tensors[op.outputs[0]].shape
        if op.inputs[0] in self.flat:
            c, h, w = self.flat[op.inputs[0]]
            raise self.fail(op, f"its input flattens a {h}x{w}x{c} NHWC tensor, whose element "
                                "order NCHW ONNX cannot express")
        self.same_quant(op)
        x = self.activation_in(op, op.inputs[0])
        osrc, odst = _onnx_shape(src), _onnx_shape(dst)
        if len(dst) == 2 and src and dst[0] == src[0]:
            if not reshape_is_plain(osrc, odst):
                if len(src) != 4:
                    raise self.fail(op, f"reshaping {list(src)} to {list(dst)} mixes the NHWC "
                                        "and NCHW element orders")
                consumers = self.g.consumers(op.outputs[0])
                if not consumers or any(c.type != "fully_connected" or c.inputs[0] !=
                                        op.outputs[0] for c in consumers):
                    raise self.fail(op, f"flattening {list(src)} (NHWC) has another element "
                                        "order than in NCHW; only fully connected layers may "
                                        "consume it")
                _, h, w, c = src
                self.flat[op.outputs[0]] = (c, h, w)
            self.layer(op, "Flatten", [x], axis=1)
            return
        if not reshape_is_plain(osrc, odst):
            raise self.fail(op, f"reshaping {list(src)} to {list(dst)} mixes the NHWC and NCHW "
                                "element orders")
        spec = list(odst)
        if self.dynamic and spec:
            spec[0] = 0                             # copy the (dynamic) batch dimension
        shape = self.init(f"{op.name}/shape", np.asarray(spec, np.int64))
        self.layer(op, "Reshape", [x, shape])

    def op_softmax(self, op: Op) -> None:
        if float(op.attrs["beta"]) != 1.0:
            raise self.fail(op, f"beta {op.attrs['beta']} (ONNX Softmax has none; only 1.0)")
        rank = len(self.g.tensors[op.inputs[0]].shape)
        x = self.activation_in(op, op.inputs[0])
        self.layer(op, "Softmax", [x], axis=_onnx_axis(rank - 1, rank))

    def op_mean(self, op: Op) -> None:
        shape = self.g.tensors[op.inputs[0]].shape
        rank = len(shape)
        axes = sorted(_onnx_axis(int(a), rank) for a in op.attrs["axes"])
        keep = bool(op.attrs["keep_dims"])
        x = self.activation_in(op, op.inputs[0])
        if rank == 4 and keep and axes == [2, 3]:
            self.layer(op, "GlobalAveragePool", [x])
            return
        if not keep and rank == 4:
            oshape = _onnx_shape(shape)
            kept = [i for i in range(rank) if i not in axes]
            if not same_order(kept, oshape, rank):
                raise self.fail(op, f"reducing {list(shape)} over axes {list(op.attrs['axes'])}"
                                    " without keep_dims leaves a tensor whose element order "
                                    "differs between NHWC and NCHW")
        self.layer(op, "ReduceMean", [x], axes=axes, keepdims=int(keep))

    def op_pad(self, op: Op) -> None:
        pads = [(int(p0), int(p1)) for p0, p1 in op.attrs["pads"]]
        rank = len(pads)
        order = NHWC_TO_NCHW if rank == 4 else tuple(range(rank))
        spec = [pads[d][0] for d in order] + [pads[d][1] for d in order]
        self.same_quant(op)
        x = self.activation_in(op, op.inputs[0])
        self.layer(op, "Pad", [x, self.init(f"{op.name}/pads", np.asarray(spec, np.int64))],
                   mode="constant")

    def op_concat(self, op: Op) -> None:
        rank = len(self.g.tensors[op.outputs[0]].shape)
        self.same_quant(op, list(op.inputs))
        xs = [self.activation_in(op, n, rank) for n in op.inputs]
        self.layer(op, "Concat", xs, axis=_onnx_axis(int(op.attrs["axis"]), rank))

    def op_quantize(self, op: Op) -> None:
        x = self.activation_in(op, op.inputs[0])        # int8 -> int8: requantization
        out = op.outputs[0]
        self.output(op, x, name=self.pre(out))

    def op_relu(self, op: Op) -> None:
        x = self.activation_in(op, op.inputs[0])
        out = op.outputs[0]
        pre = self.pre(out)
        self.activation(op, "relu", x, pre)
        self.output(op, pre)

    def op_relu6(self, op: Op) -> None:
        self.same_quant(op)
        x = self.activation_in(op, op.inputs[0])
        out = op.outputs[0]
        pre = self.pre(out)
        self.activation(op, "relu6", x, pre)
        self.output(op, pre)


# The ops that can be exported: those with an ``op_<type>`` method of _Writer, in FORWARD_OPS
# order (not dequantize: its float output has no place in an int8 QDQ export).
SUPPORTED = tuple(t for t in FORWARD_OPS if hasattr(_Writer, f"op_{t}"))
