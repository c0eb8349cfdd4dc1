"""reshape, pad and concat: data movement (int8 kernels copy raw values, as TFLM does).

int8 concat needs one quantization on all inputs and the output (TFLM's Prepare refuses
anything else; it never rescales). A fused activation on concat, which TFLM refuses, is
applied here as the usual clamp.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir import OpView as IROpView
from ...ir import Tensor
from .. import numerics as nx
from .common import Kernel, OpView


def build_reshape(view: OpView) -> Kernel:
    shape = view.out().shape
    lead_is_batch = bool(shape) and shape[0] == 1

    def reshape(x: np.ndarray, *_) -> np.ndarray:
        if lead_is_batch:
            return x.reshape((x.shape[0] if x.ndim else 1,) + shape[1:])
        return x.reshape(shape)
    return reshape


def build_pad(view: OpView) -> Kernel:
    x, out = view.x(), view.out()
    try:
        pads = tuple((int(a), int(b)) for a, b in view.attr("pads"))
    except (TypeError, ValueError):
        raise view.error(f"attribute pads must be (before, after) pairs, got "
                         f"{view.attr('pads')!r}") from None
    if len(pads) != len(x.shape):
        raise view.error(f"pads {list(pads)} do not fit input rank {len(x.shape)}")
    if x.dtype == "float32":
        value: float | int = 0.0
    elif x.dtype == "int8":
        value = view.quant(out)[1]           # TFLM pads with the output zero point
    else:
        raise view.unsupported_dtype(x.dtype)

    def pad(v: np.ndarray) -> np.ndarray:
        return np.pad(v, pads, constant_values=value)
    return pad


def build_concat(view: OpView) -> Kernel:
    out = view.out()
    axis = int(view.attr("axis"))
    activation = view.attr("activation", "none")
    ins = [view.graph.tensors[n] for n in view.op.inputs]
    if any(t.dtype != out.dtype for t in ins):
        raise view.error(f"mixed dtypes {[t.dtype for t in ins]} -> {out.dtype}")
    if out.dtype == "float32":
        lo, hi = nx.float_activation_range(activation)
    elif out.dtype == "int8":
        lo, hi = int8_concat_range(view, ins, activation)
    else:
        raise view.unsupported_dtype(out.dtype)

    def concat(*values: np.ndarray) -> np.ndarray:
        n = max(v.shape[0] for v in values if v.ndim == len(out.shape))
        parts = [v if v.shape[0] == n or axis == 0 else np.broadcast_to(v, (n,) + v.shape[1:])
                 for v in values]
        result = np.concatenate(parts, axis=axis)
        if activation != "none":
            result = np.clip(result, lo, hi).astype(result.dtype)
        return result
    return concat


def int8_concat_range(view: IROpView, ins: Sequence[Tensor], activation: str) -> tuple[int, int]:
    """int8 concat: the clamp range of its fused activation, once every input has the output's
    quantization (TFLM's int8 CONCATENATION does not rescale: its Prepare rejects this)."""
    s_out, zp_out = view.quant(view.out())
    for t in ins:
        s, zp = view.quant(t)
        if np.float32(s) != np.float32(s_out) or zp != zp_out:
            raise view.error(f"int8 concat needs equal quantization on every input and the "
                             f"output; input {t.name!r} has scale {s:g} zp {zp}, output "
                             f"scale {s_out:g} zp {zp_out}")
    return nx.activation_range(activation, s_out, zp_out)
