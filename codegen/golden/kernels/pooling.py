"""avg_pool2d, max_pool2d and mean: int8 (TFLM reference, bit exact) and float32."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir import OpView as IROpView
from .. import numerics as nx
from .common import Kernel, OpView, dtype_limits, pad_hw, pair, quad, tap


def _pool_setup(view: OpView):
    dtype = view.x().dtype
    if dtype not in ("int8", "float32"):
        raise view.unsupported_dtype(dtype)
    if view.out().dtype != dtype:
        raise view.error(f"input is {dtype} but output is {view.out().dtype}")
    kernel = pair(view.attr("filter"), "filter", view)
    stride = pair(view.attr("stride"), "stride", view)
    padding = quad(view.attr("padding"), "padding", view)
    out_hw = view.out().shape[1:3]
    activation = view.attr("activation", "none")
    if dtype == "int8":
        lo, hi = int8_pool_range(view, activation)
    else:
        lo, hi = nx.float_activation_range(activation)
    return dtype, kernel, stride, padding, out_hw, activation, lo, hi


def int8_pool_range(view: IROpView, activation: str) -> tuple[int, int]:
    """int8 pooling: the clamp range of its fused activation, once the input and the output
    have one quantization (TFLM's Prepare: pooling does not requantize)."""
    s_in, zp_in = view.quant(view.x())
    s_out, zp_out = view.quant(view.out())
    if abs(np.float32(s_in) - np.float32(s_out)) > 1e-6 or zp_in != zp_out:
        raise view.error(f"int8 pooling needs equal input and output quantization, got "
                         f"scale {s_in:g} zp {zp_in} -> scale {s_out:g} zp {zp_out}")
    return nx.activation_range(activation, s_out, zp_out)


def int8_mean_requant(view: IROpView, axes: Sequence[int]) -> tuple[int, int, int]:
    """int8 mean over ``axes``: (n, multiplier, shift), n the number of values averaged and
    the multiplier of s_in / (s_out * n) (TFLM's QuantizedMeanOrSum folds 1/n into the
    multiplier of s_in / s_out)."""
    x = view.x()
    s_in, _ = view.quant(x)
    s_out, _ = view.quant(view.out())
    multiplier, shift = nx.quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        raise view.error("mean over an empty axis")
    extra = min(n.bit_length() - 1, 32, 31 + shift)
    return n, (multiplier << extra) // n, shift - extra


def _window_sum(xp: np.ndarray, kernel, out_hw, stride) -> np.ndarray:
    acc = None
    for fy in range(kernel[0]):
        for fx in range(kernel[1]):
            t = tap(xp, fy, fx, out_hw, stride, (1, 1))
            acc = t.copy() if acc is None else acc + t
    assert acc is not None
    return acc


def _window_max(xp: np.ndarray, kernel, out_hw, stride) -> np.ndarray:
    acc = None
    for fy in range(kernel[0]):
        for fx in range(kernel[1]):
            t = tap(xp, fy, fx, out_hw, stride, (1, 1))
            acc = t.copy() if acc is None else np.maximum(acc, t)
    assert acc is not None
    return acc


def build_avg_pool2d(view: OpView) -> Kernel:
    dtype, kernel, stride, padding, out_hw, activation, lo, hi = _pool_setup(view)
    h, w = view.x().shape[1:3]
    # Number of in-image taps per output position (TFLM divides by it).
    inside = pad_hw(np.ones((1, h, w, 1), dtype=np.int64), padding, 0)
    count = _window_sum(inside, kernel, out_hw, stride)
    if np.any(count == 0):
        raise view.error("a pooling window lies entirely in the padding")

    if dtype == "float32":
        def avg_pool_f32(x: np.ndarray) -> np.ndarray:
            xp = pad_hw(x.astype(np.float64), padding, 0.0)
            mean = _window_sum(xp, kernel, out_hw, stride) / count
            if activation != "none":
                mean = np.clip(mean, lo, hi)
            return mean.astype(np.float32)
        return avg_pool_f32

    half = count // 2

    def avg_pool_int8(x: np.ndarray) -> np.ndarray:
        xp = pad_hw(x.astype(np.int64), padding, 0)
        acc = _window_sum(xp, kernel, out_hw, stride)
        # acc > 0 ? (acc + n/2) / n : (acc - n/2) / n, with C's truncating division.
        q = np.where(acc > 0, (acc + half) // count, -((half - acc) // count))
        return np.clip(q, lo, hi).astype(np.int8)
    return avg_pool_int8


def build_max_pool2d(view: OpView) -> Kernel:
    dtype, kernel, stride, padding, out_hw, activation, lo, hi = _pool_setup(view)

    if dtype == "float32":
        def max_pool_f32(x: np.ndarray) -> np.ndarray:
            xp = pad_hw(x, padding, -np.inf)
            m = _window_max(xp, kernel, out_hw, stride)
            if activation != "none":
                m = np.clip(m, lo, hi)
            return m.astype(np.float32)
        return max_pool_f32

    def max_pool_int8(x: np.ndarray) -> np.ndarray:
        xp = pad_hw(x, padding, -128)              # TFLM starts from the int8 minimum
        return np.clip(_window_max(xp, kernel, out_hw, stride), lo, hi).astype(np.int8)
    return max_pool_int8


def build_mean(view: OpView) -> Kernel:
    x, out = view.x(), view.out()
    axes = tuple(sorted({int(a) for a in view.attr("axes")}))
    keep_dims = bool(view.attr("keep_dims"))
    if any(not 0 <= a < len(x.shape) for a in axes):
        raise view.error(f"axes {list(axes)} outside input rank {len(x.shape)}")

    if x.dtype == "float32":
        def mean_f32(v: np.ndarray) -> np.ndarray:
            return v.astype(np.float64).mean(axis=axes, keepdims=keep_dims).astype(np.float32)
        return mean_f32
    if x.dtype != "int8":
        raise view.unsupported_dtype(x.dtype)
    if out.dtype != "int8":
        raise view.error(f"input is int8 but output is {out.dtype}")

    n, multiplier, shift = int8_mean_requant(view, axes)
    zp_in, zp_out = view.quant(x)[1], view.quant(out)[1]
    lo, hi = dtype_limits(out.dtype)

    def mean_int8(v: np.ndarray) -> np.ndarray:
        total = v.astype(np.int64).sum(axis=axes, keepdims=keep_dims) - zp_in * n
        q = nx.multiply_by_quantized_multiplier(nx.wrap_int32(total), multiplier, shift)
        return np.clip(q + zp_out, lo, hi).astype(np.int8)
    return mean_int8
