"""Layer converters of the ONNX importer: ONNX layers -> IR ops, float32 or int8.

``LayerConverters`` is a mixin of ``onnx_reader._Importer`` (which owns the value table, the
error helpers and IR construction): one method per ONNX layer type, plus the fusion of a
layer with the nodes that follow it (BatchNormalization, a bias Add, Relu/Clip) and the
weight / bias conversions (TFLite layouts: conv OHWI, depthwise 1HW(C*M), fully connected
(O, I); int8 weights symmetric, int32 biases with scale s_in * s_w).

Values (``Value``): an ``Act`` (a computed tensor, held by an IR tensor), a ``QConst`` (a
dequantized integer constant) or a plain numpy array (a constant, ONNX layout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..ir import MAX_ELEMENTS, QuantParams, Role, conv_out_size, int8_output_params, weight_axis
from .onnx_layout import (
    broadcast_constant,
    chw_to_hwc_columns,
    ir_axis,
    ir_shape,
    reshape_is_plain,
    same_order,
    to_ir_array,
)
from .onnx_quant import QConst, asymmetric_constant, onnx_quantize, quantize_bias, symmetric_weights

# TFLite's int8 softmax output parameters (scale 1/256, zero point -128: OpSpec.int8_output).
SOFTMAX_OUTPUT = int8_output_params("softmax")

# -- values -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Flat:
    """An NHWC tensor flattened to 2-D whose ONNX (C, H, W) column order differs from ours."""

    node: str
    c: int
    h: int
    w: int


@dataclass(frozen=True)
class Act:
    """An ONNX activation value, held by IR tensor ``tensor`` (int8 tensors hold the real
    values through their quantization unless ``raw``: then the ONNX value is the integer
    tensor itself, i.e. a QuantizeLinear output)."""

    tensor: str
    shape: tuple[int, ...]            # ONNX shape (NCHW for 4-D)
    raw: bool = False
    flat: Flat | None = None


Value = Act | QConst | np.ndarray


@dataclass
class Chain:
    """Nodes absorbed after a layer: BN (scale, shift), a bias Add, a fused activation."""

    out: str
    bn: tuple[np.ndarray, np.ndarray] | None = None
    bias: np.ndarray | QConst | None = None
    activation: str = "none"


ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64"}
CLIP_ACTIVATIONS = {(0.0, None): "relu", (0.0, 6.0): "relu6", (-1.0, 1.0): "relu_n1_to_1"}
# Ops that may consume a flattened NCHW tensor carrying a Flat marker.
FLAT_OK = ("Gemm", "MatMul", "Relu", "Clip", "Identity", "Dropout", "QuantizeLinear",
           "DequantizeLinear", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Shape")


class LayerConverters:
    """The per-layer half of the ONNX importer (see ``onnx_reader._Importer``)."""

    # -- fusion chains ------------------------------------------------------------------------
    def _chain(self, idx: int, *, bn: bool = False, bias_width: int | None = None,
               act: bool = True) -> Chain:
        ch = Chain(self.nodes[idx].output[0])
        if bn:
            nxt = self._sole_consumer(ch.out)
            if nxt is not None and self.nodes[nxt].op_type == "BatchNormalization":
                folded = self._bn_params(nxt, require=False)
                if folded is not None and self.nodes[nxt].input[0] == ch.out:
                    ch.bn = folded
                    self.done.add(nxt)
                    ch.out = self.nodes[nxt].output[0]
        if bias_width is not None:
            nxt = self._sole_consumer(ch.out)
            if nxt is not None and self.nodes[nxt].op_type == "Add":
                n = self.nodes[nxt]
                other = n.input[1] if n.input[0] == ch.out else n.input[0]
                v = self.values.get(other)
                if (isinstance(v, (np.ndarray, QConst)) and other != ch.out
                        and v.shape[-1:] in ((bias_width,), (1,), ())
                        and int(np.prod(v.shape)) in (1, bias_width)):
                    ch.bias = v
                    self.done.add(nxt)
                    ch.out = n.output[0]
        if act:
            nxt = self._sole_consumer(ch.out)
            if nxt is not None and self.nodes[nxt].op_type in ("Relu", "Clip"):
                activation = self._activation_of(nxt)
                if activation is not None:
                    ch.activation = activation
                    self.done.add(nxt)
                    ch.out = self.nodes[nxt].output[0]
        return ch

    def _activation_of(self, idx: int) -> str | None:
        node = self.nodes[idx]
        if node.op_type == "Relu":
            return "relu"
        a = self._attrs(idx)
        if self.opset < 11:
            lo, hi = a.get("min"), a.get("max")
        else:
            ins = self._inputs(idx)
            bounds = []
            for i in (1, 2):
                v = ins[i] if i < len(ins) else None
                if isinstance(v, Act):
                    return None
                bounds.append(None if v is None else float(self._float_const(v).reshape(-1)[0]))
            lo, hi = bounds
        if hi is not None and math.isinf(hi) and hi > 0:
            hi = None
        key = (None if lo is None else float(lo), None if hi is None else float(hi))
        return CLIP_ACTIVATIONS.get(key)

    def _bn_params(self, idx: int, require: bool) -> tuple[np.ndarray, np.ndarray] | None:
        node = self.nodes[idx]
        a = self._attrs(idx)
        ins = self._inputs(idx)
        ok = (len(ins) >= 5 and all(isinstance(v, (np.ndarray, QConst)) for v in ins[1:5])
              and not a.get("training_mode", 0)
              and not any(o and (self.consumers.get(o) or o in self.graph_outputs)
                          for o in node.output[1:]))
        if not ok:
            if require:
                raise self.err("only inference-mode BatchNormalization with constant "
                               "parameters is supported")
            return None
        gamma, beta, mean, var = (self._float_const(v).astype(np.float64).reshape(-1)
                                  for v in ins[1:5])
        if not gamma.size == beta.size == mean.size == var.size:
            raise self.err("BatchNormalization parameters have different sizes")
        eps = float(a.get("epsilon", 1e-5))
        for what, v in (("scale", gamma), ("B", beta), ("mean", mean), ("var", var),
                        ("epsilon", np.array([eps]))):
            if not np.all(np.isfinite(v)):
                raise self.err(f"BatchNormalization {what} is not finite "
                               f"({v[~np.isfinite(v)][0]})", idx)
        if np.any(var + eps <= 0):
            c = int(np.flatnonzero(var + eps <= 0)[0])
            raise self.err(f"BatchNormalization var + epsilon must be > 0, channel {c} has "
                           f"{var[c]} + {eps}", idx)
        with np.errstate(over="ignore", invalid="ignore"):
            scale = gamma / np.sqrt(var + eps)
            shift = beta - mean * scale
        return self._f32(scale, "BatchNormalization scale", idx), \
            self._f32(shift, "BatchNormalization shift", idx)

    def _f32(self, a: np.ndarray, what: str, idx: int | None = None) -> np.ndarray:
        """``a`` as float32, or an error naming ``what`` if it does not fit (no overflow
        warning: the value is named instead)."""
        a = np.asarray(a, dtype=np.float64)
        bad = ~(np.abs(a) <= np.finfo(np.float32).max)
        if np.any(bad):
            raise self.err(f"{what} does not fit float32 ({a[bad][0]:.6g})", idx)
        return a.astype(np.float32)

    # -- weights ------------------------------------------------------------------------------
    def _int8_weight(self, w: np.ndarray | QConst, what: str) -> QConst:
        """``w`` (ONNX layout, output channels on axis 0) as a symmetric int8 QConst."""
        if not isinstance(w, QConst):
            return symmetric_weights(self._float_const(w), 0)
        if w.q.dtype != np.int8:
            raise self.err(f"{what} is quantized to {w.q.dtype}; int8 weights are needed")
        if np.any(w.zero_point != 0):
            raise self.err(f"{what} has non-zero zero points (asymmetric weights are not "
                           "supported; quantize weights symmetrically)")
        if w.axis not in (None, 0):
            raise self.err(f"{what} is quantized per channel on axis {w.axis}; the output "
                           "channel axis is needed")
        return w

    def _int32_bias(self, b: np.ndarray | QConst | None, n_out: int, s_in: np.float32,
                    w: QConst, base: str) -> str:
        s_w = np.broadcast_to(w.scale, (n_out,)) if w.scale.size == 1 else w.scale
        scale = (np.float32(s_in) * s_w.astype(np.float32)).astype(np.float32)
        per_channel = w.axis is not None
        if b is None:
            q = np.zeros(n_out, np.int32)
        elif (isinstance(b, QConst) and b.q.dtype == np.int32 and np.all(b.zero_point == 0)
              and np.allclose(np.broadcast_to(b.scale, (n_out,)), scale, rtol=1e-6, atol=0)):
            q = np.broadcast_to(b.q.reshape(-1), (n_out,)).astype(np.int32)
        else:
            real = self._float_const(b).reshape(-1)
            q = quantize_bias(np.broadcast_to(real, (n_out,)), scale)
        bq = QuantParams(scale if per_channel else scale[:1], np.zeros(
            n_out if per_channel else 1, np.int64), 0 if per_channel else None)
        return self._const_tensor(base, q, Role.BIAS, bq)

    def _bias_vector(self, b: np.ndarray | QConst | None, n_out: int) -> np.ndarray | None:
        if b is None:
            return None
        arr = self._float_const(b)
        if arr.size == 1:
            return np.full(n_out, arr.reshape(-1)[0], np.float32)
        if arr.size != n_out or arr.shape[-1] != n_out:
            raise self.err(f"bias shape {list(arr.shape)} does not fit {n_out} outputs")
        return arr.reshape(n_out)

    def _base(self, i: int, suffix: str) -> str:
        """A name for the IR constant made from input ``i`` of the current node."""
        node = self.nodes[self.cur]
        if i < len(node.input) and node.input[i]:
            name = node.input[i]
            for tail in ("_DequantizeLinear_Output", "_dequantized"):
                if name.endswith(tail) and len(name) > len(tail):
                    return name[:-len(tail)]
            return name
        return f"{self.labels[self.cur]}/{suffix}"

    @staticmethod
    def _int8_activation(activation: str, out_q: QuantParams) -> str:
        """onnxruntime drops a Relu whose output QuantizeLinear has zero point -128 (real 0 is
        the int8 minimum): the clamp is then exactly a ReLU, so say so (training needs it)."""
        return "relu" if activation == "none" and out_q.zp == -128 else activation

    # -- op handlers ---------------------------------------------------------------------------
    def conv(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        w = self._const(ins, 1, "weight")
        b = self._const(ins, 2, "bias") if len(ins) > 2 and ins[2] is not None else None
        a = self._attrs(idx)
        if len(x.shape) != 4 or len(w.shape) != 4:
            raise self.err(f"only 2-D convolutions are supported (input {list(x.shape)}, "
                           f"weight {list(w.shape)})")
        n, c, h, wd = x.shape
        o, ig, kh, kw = w.shape
        group = int(a.get("group", 1))
        if group < 1 or ig * group != c:
            raise self.err(f"input has {c} channels but the weight {list(w.shape)} with group "
                           f"{group} expects {ig * group}")
        if "kernel_shape" in a and tuple(a["kernel_shape"]) != (kh, kw):
            raise self.err(f"kernel_shape {list(a['kernel_shape'])} differs from the weight "
                           f"{list(w.shape)}")
        if group == 1:
            op_type, mult = "conv2d", None
        elif group == c and ig == 1 and o % c == 0:
            op_type, mult = "depthwise_conv2d", o // c
        else:
            raise self.err(f"grouped convolution (group={group}, {c} input channels, {o} "
                           "outputs) is not supported; only group=1 and depthwise are")
        if b is not None and int(np.prod(b.shape)) != o:
            raise self.err(f"bias shape {list(b.shape)} does not match {o} output channels")
        stride = self._pair(a, "strides", 1)
        dil = self._pair(a, "dilations", 1)
        pads = self._pads(a, (h, wd), (kh, kw), stride, dil)
        oh = conv_out_size(h, kh, stride[0], dil[0], pads[0], pads[1])
        ow = conv_out_size(wd, kw, stride[1], dil[1], pads[2], pads[3])
        if oh < 1 or ow < 1:
            raise self.err(f"output would be {oh}x{ow} for a {h}x{wd} input, kernel {kh}x{kw}, "
                           f"stride {list(stride)}, padding {list(pads)}")
        in_q = self._is_q(x)
        ch = self._chain(idx, bn=not in_q)
        out_q = self._out_quant([x], ch.out)
        attrs: dict[str, Any] = {"stride": stride, "dilation": dil, "padding": pads,
                                 "activation": ch.activation}
        if mult is not None:
            attrs["depth_multiplier"] = mult
        ir_w = ((lambda arr: arr.transpose(0, 2, 3, 1)) if mult is None
                else (lambda arr: arr.transpose(1, 2, 3, 0)))
        w_axis = weight_axis(op_type)
        if out_q is not None:
            attrs["activation"] = self._int8_activation(ch.activation, out_q)
            wq = self._int8_weight(w, "the weight")
            w_name = self._const_tensor(self._base(1, "weight"), ir_w(wq.q), Role.WEIGHT,
                                        wq.params(w_axis))
            b_name = self._int32_bias(b, o, self._tquant(x).scale[0], wq,
                                      self._base(2, "bias"))
            self._emit(op_type, [x.tensor, w_name, b_name], ch.out, (n, o, oh, ow), "int8",
                       out_q, attrs)
            return
        wf = self._float_const(w)
        bf = self._bias_vector(b, o)
        if ch.bn is not None:
            scale, shift = ch.bn
            if scale.size != o:
                raise self.err(f"BatchNormalization has {scale.size} channels, the conv {o}")
            with np.errstate(over="ignore", invalid="ignore"):
                w64 = wf.astype(np.float64) * scale[:, None, None, None]
                b64 = (np.zeros(o) if bf is None else bf.astype(np.float64)) * scale + shift
            wf = self._f32(w64, "the weight with BatchNormalization folded in")
            bf = self._f32(b64, "the bias with BatchNormalization folded in")
        w_name = self._const_tensor(self._base(1, "weight"), ir_w(wf), Role.WEIGHT)
        b_name = self._const_tensor(self._base(2, "bias"), bf, Role.BIAS) if bf is not None \
            else ""
        self._emit(op_type, [self._float(x), w_name, b_name], ch.out, (n, o, oh, ow),
                   "float32", None, attrs)

    def _pair(self, a: dict[str, Any], key: str, default: int) -> tuple[int, int]:
        v = a.get(key)
        if v is None:
            return (default, default)
        v = [int(x) for x in v]
        if len(v) != 2 or min(v) < 1:
            raise self.err(f"{key} {v} must be two positive integers")
        return (v[0], v[1])

    def _pads(self, a: dict[str, Any], size: tuple[int, int], k: tuple[int, int],
              stride: tuple[int, int], dil: tuple[int, int]) -> tuple[int, int, int, int]:
        """Explicit (top, bottom, left, right) padding from ONNX pads / auto_pad."""
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else str(auto)
        if auto in ("NOTSET", ""):
            p = [int(x) for x in a.get("pads", [0, 0, 0, 0])]
            if len(p) != 4 or min(p) < 0:
                raise self.err(f"pads {p} must be 4 non-negative integers")
            return (p[0], p[2], p[1], p[3])
        if auto == "VALID":
            return (0, 0, 0, 0)
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            raise self.err(f"auto_pad {auto!r} is not supported")
        out: list[int] = []
        for n, kk, s, d in zip(size, k, stride, dil):
            total = max((-(-n // s) - 1) * s + (kk - 1) * d + 1 - n, 0)
            small, big = total // 2, total - total // 2
            out += [small, big] if auto == "SAME_UPPER" else [big, small]
        return (out[0], out[1], out[2], out[3])

    def gemm(self, idx: int, ins: list[Value | None]) -> None:
        a = self._attrs(idx)
        x = self._act(ins, 0)
        b = self._const(ins, 1, "weight")
        c = self._const(ins, 2, "bias") if len(ins) > 2 and ins[2] is not None else None
        if a.get("transA", 0):
            raise self.err("transA=1 is not supported")
        if float(a.get("alpha", 1.0)) != 1.0 or (c is not None and
                                                  float(a.get("beta", 1.0)) != 1.0):
            raise self.err(f"alpha={a.get('alpha', 1.0)}, beta={a.get('beta', 1.0)}: only 1.0 "
                           "is supported")
        if len(x.shape) != 2 or len(b.shape) != 2:
            raise self.err(f"expects a 2-D input and weight, got {list(x.shape)} and "
                           f"{list(b.shape)}")
        w = b if a.get("transB", 0) else transpose2d(b)
        self._fully_connected(idx, x, w, c, self._chain(idx))

    def matmul(self, idx: int, ins: list[Value | None]) -> None:
        if not isinstance(ins[0], Act):
            raise self.err("MatMul with a constant first operand is not supported")
        x = ins[0]
        if isinstance(ins[1], Act):
            raise self.err("MatMul of two computed tensors is not supported (the second "
                           "operand must be a constant weight)")
        b = self._const(ins, 1, "weight")
        if len(b.shape) != 2 or len(x.shape) < 2 or len(x.shape) == 4:
            raise self.err(f"only a 2-D constant weight and a 2-D or 3-D input are supported, "
                           f"got {list(x.shape)} x {list(b.shape)}")
        ch = self._chain(idx, bias_width=b.shape[1])
        self._fully_connected(idx, x, transpose2d(b), ch.bias, ch)

    def _fully_connected(self, idx: int, x: Act, w: np.ndarray | QConst,
                         bias: np.ndarray | QConst | None, ch: Chain) -> None:
        o, i = w.shape
        if x.shape[-1] != i:
            raise self.err(f"input has {x.shape[-1]} features but the weight (out={o}, in={i}) "
                           f"expects {i} (input shape {list(x.shape)})")
        if x.flat is not None:
            f = x.flat
            if isinstance(w, QConst):
                w = replace(w, q=chw_to_hwc_columns(w.q, f.c, f.h, f.w))
            else:
                w = chw_to_hwc_columns(self._float_const(w), f.c, f.h, f.w)
        out_shape = tuple(x.shape[:-1]) + (o,)
        attrs = {"activation": ch.activation, "keep_num_dims": len(x.shape) > 2}
        out_q = self._out_quant([x], ch.out)
        if out_q is not None:
            attrs["activation"] = self._int8_activation(ch.activation, out_q)
            wq = self._int8_weight(w, "the weight")
            w_name = self._const_tensor(self._base(1, "weight"), wq.q, Role.WEIGHT,
                                        wq.params(0))
            b_name = self._int32_bias(bias, o, self._tquant(x).scale[0], wq,
                                      self._base(2, "bias"))
            self._emit("fully_connected", [x.tensor, w_name, b_name], ch.out, out_shape,
                       "int8", out_q, attrs)
            return
        w_name = self._const_tensor(self._base(1, "weight"), self._float_const(w), Role.WEIGHT)
        bf = self._bias_vector(bias, o)
        b_name = self._const_tensor(self._base(2, "bias"), bf, Role.BIAS) if bf is not None \
            else ""
        self._emit("fully_connected", [self._float(x), w_name, b_name], ch.out, out_shape,
                   "float32", None, attrs)

    def binary(self, idx: int, ins: list[Value | None]) -> None:
        op = self.nodes[idx].op_type
        a, b = ins[0], ins[1] if len(ins) > 1 else None
        if a is None or b is None:
            raise self.err("needs two inputs")
        if not isinstance(a, Act):
            if op in ("Sub", "Div"):
                raise self.err(f"{op} with a constant first operand is not supported")
            a, b = b, a
        assert isinstance(a, Act)
        if isinstance(b, Act):
            if op in ("Sub", "Div"):
                raise self.err(f"{op} of two computed tensors is not supported")
            if len(a.shape) != len(b.shape) and 4 in (len(a.shape), len(b.shape)):
                raise self.err(f"broadcasting {list(a.shape)} with {list(b.shape)} across "
                               "layouts is not supported")
            other_shape = b.shape
        else:
            other_shape = tuple(b.shape)
        try:
            out_shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, other_shape))
        except ValueError:
            raise self.err(f"input shapes {list(a.shape)} and {list(other_shape)} do not "
                           "broadcast") from None
        ir_op = "add" if op in ("Add", "Sub") else "mul"
        ch = self._chain(idx)
        acts = [a] + ([b] if isinstance(b, Act) else [])
        out_q = self._out_quant(acts, ch.out) if op in ("Add", "Mul") else None
        attrs = {"activation": ch.activation}
        if isinstance(b, Act):
            if out_q is not None:
                names = [a.tensor, b.tensor]
            else:
                names = [self._float(a), self._float(b)]
        else:
            if len(other_shape) > len(a.shape):
                raise self.err(f"constant of shape {list(other_shape)} raises the rank of "
                               f"{list(a.shape)} (not supported)")
            if op == "Sub":
                b = -self._float_const(b)
            elif op == "Div":
                with np.errstate(all="ignore"):
                    b = (np.float32(1) / self._float_const(b)).astype(np.float32)
            if out_q is not None:
                bq = b if isinstance(b, QConst) and b.axis is None and b.q.dtype == np.int8 \
                    else asymmetric_constant(self._float_const(b))
                data = broadcast_constant(bq.q, len(a.shape))
                c_name = self._const_tensor(self._base(1, "constant"), data, Role.CONSTANT,
                                            bq.params())
                names = [a.tensor, c_name]
            else:
                data = broadcast_constant(self._float_const(b), len(a.shape))
                c_name = self._const_tensor(self._base(1, "constant"), data, Role.CONSTANT)
                names = [self._float(a), c_name]
        if out_q is not None:
            attrs["activation"] = self._int8_activation(ch.activation, out_q)
            self._emit(ir_op, names, ch.out, out_shape, "int8", out_q, attrs)
        else:
            self._emit(ir_op, names, ch.out, out_shape, "float32", None, attrs)

    def _passthrough(self, x: Act, op_type: str, attrs: dict[str, Any], out: str,
                     shape: tuple[int, ...], flat: Flat | None = None,
                     requantizes: bool = False, temp: bool = False) -> Act:
        """An op that moves or compares values: int8 keeps the input's parameters, unless the
        op ``requantizes`` (int8 mean, relu) and its output feeds QuantizeLinear nodes."""
        t = self.graph.tensors[x.tensor]
        quant = t.quant
        if requantizes and t.dtype == "int8":
            quant = self._q_consumers(out) or quant
        return self._emit(op_type, [x.tensor], out, shape, t.dtype, quant, attrs, flat,
                          temp=temp)

    def pool(self, idx: int, ins: list[Value | None]) -> None:
        op = self.nodes[idx].op_type
        x = self._act(ins, 0)
        a = self._attrs(idx)
        if len(x.shape) != 4:
            raise self.err(f"only 2-D pooling of 4-D inputs is supported, got {list(x.shape)}")
        n, c, h, wd = x.shape
        if op.startswith("Global"):
            if op == "GlobalAveragePool":
                self._passthrough(x, "mean", {"axes": (1, 2), "keep_dims": True},
                                  self.nodes[idx].output[0], (n, c, 1, 1), requantizes=True)
            else:
                self._passthrough(x, "max_pool2d", {"filter": (h, wd), "stride": (1, 1),
                                                    "padding": (0, 0, 0, 0),
                                                    "activation": "none"},
                                  self.nodes[idx].output[0], (n, c, 1, 1))
            return
        ks = a.get("kernel_shape")
        if ks is None or len(ks) != 2 or min(ks) < 1:
            raise self.err(f"kernel_shape {ks} must be two positive integers")
        k = (int(ks[0]), int(ks[1]))
        stride = self._pair(a, "strides", 1)
        if self._pair(a, "dilations", 1) != (1, 1):
            raise self.err(f"dilations {a.get('dilations')} are not supported for pooling")
        pads = list(self._pads(a, (h, wd), k, stride, (1, 1)))
        include_pad = op == "AveragePool" and bool(a.get("count_include_pad", 0))
        if include_pad and any(pads):
            raise self.err(f"count_include_pad=1 with padding {pads} is not supported "
                           "(padding taps are excluded from the average, as TFLite does)")
        out = []
        for i, (size, kk, s) in enumerate(zip((h, wd), k, stride)):
            before, after = pads[2 * i], pads[2 * i + 1]
            floor_out = conv_out_size(size, kk, s, 1, before, after)
            if a.get("ceil_mode", 0):
                ceil_out = -(-(size + before + after - kk) // s) + 1
                if (ceil_out - 1) * s >= size + before:      # window must start in the input
                    ceil_out -= 1
                if ceil_out != floor_out:
                    if include_pad:
                        raise self.err("ceil_mode=1 with count_include_pad=1 is not supported")
                    pads[2 * i + 1] += (ceil_out - 1) * s + kk - (size + before + after)
                    floor_out = ceil_out
            if floor_out < 1:
                raise self.err(f"output would be empty for input {h}x{wd}, kernel {list(k)}, "
                               f"stride {list(stride)}, padding {pads}")
            out.append(floor_out)
        ir_op = "avg_pool2d" if op == "AveragePool" else "max_pool2d"
        attrs = {"filter": k, "stride": stride, "padding": tuple(pads), "activation": "none"}
        self._passthrough(x, ir_op, attrs, self.nodes[idx].output[0], (n, c, out[0], out[1]))

    def reduce_mean(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        a = self._attrs(idx)
        r = len(x.shape)
        if self.opset >= 18 and len(ins) > 1 and ins[1] is not None:
            axes = self._int_list(ins[1], "axes")
        else:
            axes = [int(v) for v in a.get("axes", [])]
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                self._alias(idx, x)
                return
            axes = list(range(r))
        axes = sorted({ax + r if ax < 0 else ax for ax in axes})
        if any(not 0 <= ax < r for ax in axes):
            raise self.err(f"axes {axes} outside rank {r}")
        keep = bool(a.get("keepdims", 1))
        ir_axes = tuple(sorted(ir_axis(ax, r) for ax in axes))
        kept = [i for i in range(r) if i not in axes]
        out_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
            tuple(x.shape[i] for i in kept)
        out = self.nodes[idx].output[0]
        if keep or r != 4:
            self._passthrough(x, "mean", {"axes": ir_axes, "keep_dims": keep}, out, out_shape,
                              requantizes=True)
            return
        if not same_order(kept, x.shape, r):
            raise self.err(f"reducing {list(x.shape)} over {axes} without keepdims reorders "
                           "NHWC data (not supported)")
        xs = ir_shape(x.shape)
        natural = tuple(d for i, d in enumerate(xs) if i not in ir_axes)
        if natural == ir_shape(out_shape):
            self._passthrough(x, "mean", {"axes": ir_axes, "keep_dims": False}, out, out_shape,
                              requantizes=True)
            return
        mid = self._passthrough(x, "mean", {"axes": ir_axes, "keep_dims": True},
                                f"{out}_keepdims", tuple(1 if i in axes else d
                                                         for i, d in enumerate(x.shape)),
                                temp=True)
        self._passthrough(mid, "reshape", {"shape": ir_shape(out_shape)}, out, out_shape)

    def softmax(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        a = self._attrs(idx)
        r = len(x.shape)
        axis = int(a.get("axis", -1 if self.opset >= 13 else 1))
        axis = axis + r if axis < 0 else axis
        if not 0 <= axis < r:
            raise self.err(f"axis {a.get('axis')} outside rank {r}")
        if self.opset < 13 and any(d != 1 for d in x.shape[axis + 1:]):
            raise self.err(f"softmax over the flattened axes {axis}.. of {list(x.shape)} is not "
                           "supported")
        if ir_axis(axis, r) != r - 1:
            raise self.err(f"softmax over ONNX axis {axis} of {list(x.shape)} is not over the "
                           "last NHWC axis (not supported)")
        out = self.nodes[idx].output[0]
        out_q = self._out_quant([x], out)
        if out_q is not None and out_q == SOFTMAX_OUTPUT:
            self._emit("softmax", [x.tensor], out, x.shape, "int8", out_q, {"beta": 1.0})
        elif out_q is not None:                 # int8 softmax needs 1/256, -128: requantize
            mid = self._emit("softmax", [x.tensor], f"{out}_softmax", x.shape, "int8",
                             SOFTMAX_OUTPUT, {"beta": 1.0}, temp=True)
            self._emit("quantize", [mid.tensor], out, x.shape, "int8", out_q, {},
                       name=f"{self.labels[idx]}/requantize")
        else:
            self._emit("softmax", [self._float(x)], out, x.shape, "float32", None,
                       {"beta": 1.0})

    def concat(self, idx: int, ins: list[Value | None]) -> None:
        a = self._attrs(idx)
        vals = [v for v in ins if v is not None]
        acts = [v for v in vals if isinstance(v, Act)]
        if not acts:
            raise self.err("needs at least one computed input")
        r = len(acts[0].shape)
        if "axis" not in a:
            raise self.err("missing axis")
        axis = int(a["axis"])
        axis = axis + r if axis < 0 else axis
        shapes = [tuple(v.shape) for v in vals]
        if any(len(s) != r for s in shapes) or not 0 <= axis < r:
            raise self.err(f"inputs {[list(s) for s in shapes]} cannot be concatenated on "
                           f"axis {a['axis']}")
        for s in shapes:
            if any(s[i] != shapes[0][i] for i in range(r) if i != axis):
                raise self.err(f"input shapes {[list(s) for s in shapes]} differ off axis "
                               f"{axis}")
        out_shape = tuple(sum(s[axis] for s in shapes) if i == axis else d
                          for i, d in enumerate(shapes[0]))
        out = self.nodes[idx].output[0]
        out_q = self._out_quant(acts, out)
        if out_q is None and all(self._is_q(t) for t in acts):
            qs = [self._tquant(t) for t in acts]
            if all(q == qs[0] for q in qs):
                out_q = qs[0]
        names = []
        for i, v in enumerate(ins):
            if v is None:
                continue
            if isinstance(v, Act) and out_q is None:
                names.append(self._float(v))
            elif isinstance(v, Act):               # int8 concat: every input in out_q
                if self._tquant(v) == out_q:
                    names.append(v.tensor)
                else:
                    names.append(self._emit("quantize", [v.tensor], f"{v.tensor}_requantized",
                                            v.shape, "int8", out_q, {}, temp=True,
                                            name=f"{self.labels[idx]}/requantize_{i}").tensor)
            elif out_q is not None:
                q = onnx_quantize(self._float_const(v), out_q.scale, out_q.zero_point, None,
                                  "int8")
                names.append(self._const_tensor(self._base(i, "constant"), to_ir_array(q),
                                                Role.CONSTANT, out_q))
            else:
                names.append(self._const_tensor(self._base(i, "constant"),
                                                to_ir_array(self._float_const(v)),
                                                Role.CONSTANT))
        attrs = {"axis": ir_axis(axis, r), "activation": "none"}
        if out_q is not None:
            self._emit("concat", names, out, out_shape, "int8", out_q, attrs)
        else:
            self._emit("concat", names, out, out_shape, "float32", None, attrs)

    def pad(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        a = self._attrs(idx)
        r = len(x.shape)
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode != "constant":
            raise self.err(f"pad mode {mode!r} is not supported (only constant)")
        if self.opset < 11:
            pads = [int(p) for p in a.get("pads", [])]
            value = float(a.get("value", 0.0))
        else:
            pads = self._int_list(ins[1] if len(ins) > 1 else None, "pads")
            cv = ins[2] if len(ins) > 2 else None
            if isinstance(cv, Act):
                raise self.err("the pad value must be a constant")
            value = 0.0 if cv is None or self._float_const(cv).size == 0 else \
                float(self._float_const(cv).reshape(-1)[0])
        axes = list(range(r))
        if len(ins) > 3 and ins[3] is not None:
            axes = [ax + r if ax < 0 else ax for ax in self._int_list(ins[3], "axes")]
        if len(pads) != 2 * len(axes) or any(not 0 <= ax < r for ax in axes):
            raise self.err(f"pads {pads} do not fit axes {axes} of rank {r}")
        if any(p < 0 for p in pads):
            raise self.err(f"negative pads {pads} (cropping) are not supported")
        if value != 0.0:
            raise self.err(f"pad value {value} is not supported (only 0)")
        per = [[0, 0] for _ in range(r)]
        for j, ax in enumerate(axes):
            per[ax] = [pads[j], pads[j + len(axes)]]
        out_shape = tuple(d + p[0] + p[1] for d, p in zip(x.shape, per))
        if math.prod(out_shape) > MAX_ELEMENTS:
            raise self.err(f"pads {pads} make the output {list(out_shape)} "
                           f"({math.prod(out_shape)} elements; at most {MAX_ELEMENTS})")
        ir_pads = tuple(tuple(per[i]) for i in ((0, 2, 3, 1) if r == 4 else range(r)))
        self._passthrough(x, "pad", {"pads": ir_pads}, self.nodes[idx].output[0], out_shape)

    def reshape(self, idx: int, ins: list[Value | None]) -> None:
        node = self.nodes[idx]
        x = self._act(ins, 0)
        a = self._attrs(idx)
        old = x.shape
        r = len(old)
        op = node.op_type
        if op == "Reshape":
            spec = (self._int_list(ins[1] if len(ins) > 1 else None, "shape")
                    if self.opset >= 5 else [int(v) for v in a.get("shape", [])])
            new = self._reshape_target(old, spec, bool(a.get("allowzero", 0)))
        elif op == "Flatten":
            ax = int(a.get("axis", 1))
            ax = ax + r if ax < 0 else ax
            if not 0 <= ax <= r:
                raise self.err(f"axis {a.get('axis')} outside rank {r}")
            new = (int(np.prod(old[:ax], dtype=np.int64)), int(np.prod(old[ax:], dtype=np.int64)))
        elif op == "Squeeze":
            axes = (self._int_list(ins[1], "axes") if self.opset >= 13 and len(ins) > 1
                    and ins[1] is not None else [int(v) for v in a.get("axes", [])])
            axes = [ax + r if ax < 0 else ax for ax in axes]
            if not axes:
                axes = [i for i, d in enumerate(old) if d == 1]
            if any(not 0 <= ax < r or old[ax] != 1 for ax in axes):
                raise self.err(f"cannot squeeze axes {axes} of {list(old)}")
            new = tuple(d for i, d in enumerate(old) if i not in axes)
        else:                                   # Unsqueeze
            axes = (self._int_list(ins[1] if len(ins) > 1 else None, "axes")
                    if self.opset >= 13 else [int(v) for v in a.get("axes", [])])
            rank = r + len(axes)
            axes = sorted(ax + rank if ax < 0 else ax for ax in axes)
            if any(not 0 <= ax < rank for ax in axes) or len(set(axes)) != len(axes):
                raise self.err(f"cannot unsqueeze {list(old)} at axes {axes}")
            it = iter(old)
            new = tuple(1 if i in axes else next(it) for i in range(rank))
        self._reshape(idx, x, tuple(new))

    def transpose(self, idx: int, ins: list[Value | None]) -> None:
        """Only transposes that move size-1 dimensions (a reshape in disguise)."""
        x = self._act(ins, 0)
        r = len(x.shape)
        perm = [int(p) for p in self._attrs(idx).get("perm", [])] or list(range(r))[::-1]
        if sorted(perm) != list(range(r)):
            raise self.err(f"perm {perm} is not a permutation of {r} axes")
        moved = [p for p in perm if x.shape[p] != 1]
        if moved != sorted(moved):
            raise self.err(f"Transpose {perm} of {list(x.shape)} reorders data (only moving "
                           "size-1 dimensions is supported)")
        self._reshape(idx, x, tuple(x.shape[p] for p in perm))

    def _reshape_target(self, old: tuple[int, ...], spec: list[int], allowzero: bool
                        ) -> tuple[int, ...]:
        n = int(np.prod(old, dtype=np.int64))
        out: list[int] = []
        infer = None
        for i, d in enumerate(spec):
            if d == 0 and not allowzero:
                if i >= len(old):
                    raise self.err(f"shape {spec}: dimension {i} copies a missing input dim")
                out.append(old[i])
            elif d == -1 and infer is None:
                infer = i
                out.append(1)
            elif d < 0 or (d == 0 and allowzero):
                raise self.err(f"shape {spec} is not supported")
            else:
                out.append(d)
        known = int(np.prod(out, dtype=np.int64))
        if infer is not None:
            if known == 0 or n % known:
                raise self.err(f"cannot reshape {list(old)} ({n} elements) to {spec}")
            out[infer] = n // known
        return tuple(out)

    def _reshape(self, idx: int, x: Act, new: tuple[int, ...]) -> None:
        out = self.nodes[idx].output[0]
        n_old = int(np.prod(x.shape, dtype=np.int64))
        if int(np.prod(new, dtype=np.int64)) != n_old:
            raise self.err(f"cannot reshape {list(x.shape)} ({n_old} elements) to {list(new)}")
        if new == x.shape:
            self._alias(idx, x)
            return
        if x.flat is not None:
            raise self.err(f"node '{x.flat.node}' flattens a {x.flat.c}x{x.flat.h}x{x.flat.w} "
                           f"NCHW tensor whose element order differs in NHWC; it cannot be "
                           f"reshaped again to {list(new)}")
        if reshape_is_plain(x.shape, new):
            self._passthrough(x, "reshape", {"shape": ir_shape(new)}, out, new)
        elif len(x.shape) == 4 and len(new) == 2 and new[0] == x.shape[0]:
            _, c, h, w = x.shape
            flat = Flat(self.labels[idx], c, h, w)
            self._passthrough(x, "reshape", {"shape": new}, out, new, flat=flat)
        else:
            raise self.err(f"reshaping {list(x.shape)} to {list(new)} mixes the NCHW and NHWC "
                           "element orders (not supported)")

    def activation(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        act = self._activation_of(idx)
        if act not in ("relu", "relu6"):
            raise self.err("only Clip(0, 6) and Clip(0, inf) are supported as standalone "
                           "activations")
        self._passthrough(x, act, {}, self.nodes[idx].output[0], x.shape, flat=x.flat,
                          requantizes=act == "relu")

    def batchnorm(self, idx: int, ins: list[Value | None]) -> None:
        x = self._act(ins, 0)
        params = self._bn_params(idx, require=True)
        assert params is not None
        scale, shift = params
        r = len(x.shape)
        if r not in (2, 4) or x.shape[1] != scale.size:
            raise self.err(f"BatchNormalization with {scale.size} channels on input "
                           f"{list(x.shape)} (only 2-D and 4-D NCHW inputs are supported)")
        label = self.labels[idx]
        out = self.nodes[idx].output[0]
        s_name = self._const_tensor(f"{label}/scale", scale.astype(np.float32), Role.CONSTANT)
        b_name = self._const_tensor(f"{label}/shift", shift.astype(np.float32), Role.CONSTANT)
        mid = self._emit("mul", [self._float(x), s_name], f"{out}_scaled", x.shape, "float32",
                         None, {"activation": "none"}, name=f"{label}/mul", temp=True)
        self._emit("add", [mid.tensor, b_name], out, x.shape, "float32", None,
                   {"activation": "none"}, name=f"{label}/add")

    def identity(self, idx: int, ins: list[Value | None]) -> None:
        node = self.nodes[idx]
        mode = ins[2] if node.op_type == "Dropout" and len(ins) > 2 else None
        if mode is not None and (isinstance(mode, Act) or bool(self._float_const(mode).any())):
            raise self.err("Dropout in training mode is not supported")
        if node.op_type == "Cast":
            to = ONNX_DTYPES.get(int(self._attrs(idx).get("to", 0)))
            if to != "float32" or self.graph.tensors[self._act(ins, 0).tensor].dtype not in (
                    "float32", "int8"):
                raise self.err(f"Cast of a computed tensor to {to or 'this type'} is not "
                               "supported")
        self._alias(idx, self._act(ins, 0))

    def _alias(self, idx: int, x: Act) -> None:
        self._set(self.nodes[idx].output[0], x)


def transpose2d(w: np.ndarray | QConst) -> np.ndarray | QConst:
    if isinstance(w, QConst):
        axis = None if w.axis is None else 1 - w.axis
        return QConst(np.ascontiguousarray(w.q.T), w.scale, w.zero_point, axis)
    return np.ascontiguousarray(w.T)
