"""add, mul, relu, relu6, quantize, dequantize: int8 (TFLM reference, bit exact) and float32."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import numerics as nx
from .common import Kernel, OpView, dtype_limits

_ADD_LEFT_SHIFT = 20           # int8 ADD (TFLM add_common.cc; 15 for int16)


def _binary_dtype(view: OpView) -> str:
    a, b, out = view.x(), view.input(1), view.out()
    assert b is not None
    if a.dtype != b.dtype or a.dtype != out.dtype:
        raise view.error(f"mixed dtypes {a.dtype}, {b.dtype} -> {out.dtype}")
    if a.dtype not in ("int8", "float32"):
        raise view.unsupported_dtype(a.dtype)
    return a.dtype


def _float_clamp(v: np.ndarray, activation: str) -> np.ndarray:
    if activation == "none":
        return v
    lo, hi = nx.float_activation_range(activation)
    return np.clip(v, np.float32(lo), np.float32(hi))


def _build_binary(view: OpView, float_op: Callable[..., np.ndarray],
                  build_int8: Callable[..., Kernel]) -> Kernel:
    """add / mul: float32 ``float_op`` then the fused activation's clamp; int8 the kernel of
    ``build_int8((s1, zp1), (s2, zp2), (s_out, zp_out), (lo, hi))``: the quantization of both
    inputs and the output, and the clamp range of the fused activation."""
    activation = view.attr("activation", "none")
    if _binary_dtype(view) == "float32":
        def binary_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return _float_clamp(float_op(a, b, dtype=np.float32), activation)
        return binary_f32

    b_t = view.input(1)
    assert b_t is not None
    q1, q2 = view.quant(view.x()), view.quant(b_t)
    s_out, zp_out = view.quant(view.out())
    return build_int8(q1, q2, (s_out, zp_out), nx.activation_range(activation, s_out, zp_out))


def _add_int8(q1: tuple[float, int], q2: tuple[float, int], q_out: tuple[float, int],
              clamp: tuple[int, int]) -> Kernel:
    (s1, zp1), (s2, zp2), (s_out, zp_out), (lo, hi) = q1, q2, q_out, clamp
    twice_max = 2.0 * float(max(np.float32(s1), np.float32(s2)))
    m1, sh1 = nx.quantize_multiplier(s1 / twice_max)
    m2, sh2 = nx.quantize_multiplier(s2 / twice_max)
    m_out, sh_out = nx.quantize_multiplier(twice_max / ((1 << _ADD_LEFT_SHIFT) * s_out))
    mbqm = nx.multiply_by_quantized_multiplier

    def add_int8(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        xa = mbqm((a.astype(np.int64) - zp1) << _ADD_LEFT_SHIFT, m1, sh1)
        xb = mbqm((b.astype(np.int64) - zp2) << _ADD_LEFT_SHIFT, m2, sh2)
        q = mbqm(nx.wrap_int32(xa + xb), m_out, sh_out) + zp_out
        return np.clip(q, lo, hi).astype(np.int8)
    return add_int8


def _mul_int8(q1: tuple[float, int], q2: tuple[float, int], q_out: tuple[float, int],
              clamp: tuple[int, int]) -> Kernel:
    (s1, zp1), (s2, zp2), (s_out, zp_out), (lo, hi) = q1, q2, q_out, clamp
    m, sh = nx.quantize_multiplier(s1 * s2 / s_out)

    def mul_int8(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        prod = (a.astype(np.int64) - zp1) * (b.astype(np.int64) - zp2)
        q = nx.multiply_by_quantized_multiplier(prod, m, sh) + zp_out
        return np.clip(q, lo, hi).astype(np.int8)
    return mul_int8


def build_add(view: OpView) -> Kernel:
    return _build_binary(view, np.add, _add_int8)


def build_mul(view: OpView) -> Kernel:
    return _build_binary(view, np.multiply, _mul_int8)


def build_relu(view: OpView) -> Kernel:
    x, out = view.x(), view.out()
    if x.dtype == "float32":
        def relu_f32(v: np.ndarray) -> np.ndarray:
            return np.maximum(v, np.float32(0.0))
        return relu_f32
    if x.dtype != "int8":
        raise view.unsupported_dtype(x.dtype)
    s_in, zp_in = view.quant(x)
    s_out, zp_out = view.quant(out)
    # TFLM CalculateReluOpData: the scale ratio is taken in float32; RELU requantizes.
    m, sh = nx.quantize_multiplier(float(np.float32(s_in) / np.float32(s_out)))
    lo, hi = nx.activation_range("relu", s_out, zp_out)

    def relu_int8(v: np.ndarray) -> np.ndarray:
        q = nx.multiply_by_quantized_multiplier(v.astype(np.int64) - zp_in, m, sh) + zp_out
        return np.clip(q, lo, hi).astype(np.int8)
    return relu_int8


def build_relu6(view: OpView) -> Kernel:
    x = view.x()
    if x.dtype == "float32":
        def relu6_f32(v: np.ndarray) -> np.ndarray:
            return np.clip(v, np.float32(0.0), np.float32(6.0))
        return relu6_f32
    if x.dtype != "int8":
        raise view.unsupported_dtype(x.dtype)
    # TFLM Relu6: clamps with the *input* quantization, no requantization.
    s_in, zp_in = view.quant(x)
    six = min(127, max(-128, zp_in + nx.round_half_away_int(np.float32(6.0) / np.float32(s_in))))
    lo = zp_in

    def relu6_int8(v: np.ndarray) -> np.ndarray:
        # val > six ? six : val < zero ? zero : val (six wins if six < zero).
        return np.where(v > six, six, np.where(v < lo, lo, v)).astype(np.int8)
    return relu6_int8


def build_quantize(view: OpView) -> Kernel:
    x, out = view.x(), view.out()
    if out.dtype not in ("int8", "int16", "int32", "uint8"):
        raise view.unsupported_dtype(out.dtype)
    s_out, zp_out = view.quant(out)
    lo, hi = dtype_limits(out.dtype)
    if x.dtype == "float32":
        def quantize_f32(v: np.ndarray) -> np.ndarray:
            return nx.quantize_float(v, s_out, zp_out, lo, hi).astype(out.dtype)
        return quantize_f32
    if x.dtype not in ("int8", "int16", "int32", "uint8"):
        raise view.unsupported_dtype(x.dtype)
    s_in, zp_in = view.quant(x)
    m, sh = nx.quantize_multiplier(s_in / s_out)

    def requantize(v: np.ndarray) -> np.ndarray:
        q = nx.multiply_by_quantized_multiplier(v.astype(np.int64) - zp_in, m, sh) + zp_out
        return np.clip(q, lo, hi).astype(out.dtype)
    return requantize


def build_dequantize(view: OpView) -> Kernel:
    x, out = view.x(), view.out()
    if out.dtype != "float32":
        raise view.unsupported_dtype(out.dtype)
    if x.dtype not in ("int8", "int16", "int32", "uint8"):
        raise view.unsupported_dtype(x.dtype)
    q = x.quant
    if q is None:
        raise view.error(f"tensor {x.name!r} has no quantization parameters")
    scale, zp = q.scale.astype(np.float64), q.zero_point
    if q.axis is not None and q.scale.size > 1:
        # Per-channel (e.g. dequantized weights): broadcast along the quantized axis.
        shape = [1] * len(x.shape)
        shape[q.axis] = q.scale.size
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    else:
        scale, zp = scale[0], int(zp[0])

    def dequantize(v: np.ndarray) -> np.ndarray:
        return nx.dequantize(v, scale, zp)
    return dequantize
