"""Quantization parameters and value conversion, with TFLite's conventions.

- Activations: per-tensor asymmetric int8. The calibrated range is widened to include 0, the
  scale is ``(max - min) / 255`` in float32 and the zero point is nudged to an integer
  (``round_half_away(-128 - min / scale)``, clamped to [-128, 127]) so that real 0.0 is exactly
  representable (TFLite ``GetAsymmetricQuantizationParams``).
- Weights: symmetric int8 with zero point 0, ``scale = max|w| / 127`` per output channel (or per
  tensor). A channel whose weights are all zero gets scale 1.0 (as TFLite's MLIR quantizer), so
  its bias stays representable and no division by zero happens.
- Biases: int32, ``scale = s_in * s_w[c]`` (float32 product), zero point 0, rounded half away
  from zero and saturated to [-(2**31 - 1), 2**31 - 1].
"""

from __future__ import annotations

import numpy as np

from ..ir import QuantParams

INT8_MIN, INT8_MAX = -128, 127
INT32_SAT = 2**31 - 1
# A calibrated range narrower than this is treated as empty (all zeros): such a tensor gets the
# range [0, 1] instead of a scale so small that downstream multipliers underflow.
MIN_RANGE = 1e-8


def round_half_away(x: np.ndarray | float) -> np.ndarray:
    """Round to nearest, ties away from zero (C ``round``/``std::round``; not Python's)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    r = np.floor(a)
    r = r + (a - r >= 0.5)            # exact, unlike floor(a + 0.5)
    return np.copysign(r, x)


def activation_params(rmin: float, rmax: float) -> QuantParams:
    """Per-tensor asymmetric int8 parameters for the real range [rmin, rmax]."""
    rmin = min(float(np.float32(rmin)), 0.0)
    rmax = max(float(np.float32(rmax)), 0.0)
    if not (np.isfinite(rmin) and np.isfinite(rmax)):
        raise ValueError(f"range [{rmin}, {rmax}] is not finite")
    if rmax - rmin < MIN_RANGE:
        rmin, rmax = 0.0, 1.0
    fmin, fmax = np.float32(rmin), np.float32(rmax)
    scale = np.float32((fmax - fmin) / np.float32(INT8_MAX - INT8_MIN))
    zp_from_min = np.float32(np.float32(INT8_MIN) - fmin / scale)
    if zp_from_min < INT8_MIN:
        zp = INT8_MIN
    elif zp_from_min > INT8_MAX:
        zp = INT8_MAX
    else:
        zp = int(round_half_away(float(zp_from_min)))
    return QuantParams(np.array([scale], np.float32), np.array([zp], np.int64))


def weight_params(w: np.ndarray, axis: int | None) -> QuantParams:
    """Symmetric int8 parameters (zero point 0) per channel along ``axis``, or per tensor."""
    w = np.asarray(w, dtype=np.float32)
    if axis is None:
        absmax = np.array([np.max(np.abs(w))], np.float32) if w.size else np.zeros(1, np.float32)
    else:
        moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
        absmax = np.max(np.abs(moved), axis=1) if moved.shape[1] else \
            np.zeros(w.shape[axis], np.float32)
    scale = (absmax.astype(np.float32) / np.float32(INT8_MAX)).astype(np.float32)
    scale[scale == 0] = 1.0
    return QuantParams(scale, np.zeros(scale.size, np.int64), axis)


def _broadcast(values: np.ndarray, q: QuantParams, ndim: int) -> np.ndarray:
    if q.axis is None or values.size == 1:
        return values.reshape(()) if values.size == 1 else values
    shape = [1] * ndim
    shape[q.axis] = values.size
    return values.reshape(shape)


def quantize_array(x: np.ndarray, q: QuantParams, dtype: str = "int8",
                   narrow: bool = False) -> np.ndarray:
    """Real values -> int8 (or int32) with ``q``: round half away from zero, saturate.

    ``narrow`` keeps int8 in [-127, 127] (symmetric weights, as TFLite).
    """
    x = np.asarray(x, dtype=np.float64)
    scale = _broadcast(q.scale.astype(np.float64), q, x.ndim)
    zp = _broadcast(q.zero_point.astype(np.float64), q, x.ndim)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(scale == 0, 0.0, x / np.where(scale == 0, 1.0, scale))
    v = round_half_away(v) + zp
    if dtype == "int8":
        lo, hi = (-INT8_MAX if narrow else INT8_MIN), INT8_MAX
    elif dtype == "int32":
        lo, hi = -INT32_SAT, INT32_SAT
    else:
        raise ValueError(f"cannot quantize to {dtype}")
    return np.clip(v, lo, hi).astype(dtype)


def dequantize_array(q_values: np.ndarray, q: QuantParams) -> np.ndarray:
    """int8/int32 values -> float32 reals with ``q``."""
    v = np.asarray(q_values, dtype=np.float64)
    scale = _broadcast(q.scale.astype(np.float64), q, v.ndim)
    zp = _broadcast(q.zero_point.astype(np.float64), q, v.ndim)
    return ((v - zp) * scale).astype(np.float32)


def bias_params(s_in: float, w_q: QuantParams) -> QuantParams:
    """int32 bias parameters: scale ``s_in * s_w[c]`` (float32 product), zero point 0."""
    scale = (np.float32(s_in) * w_q.scale.astype(np.float32)).astype(np.float32)
    axis = 0 if w_q.axis is not None else None
    return QuantParams(scale, np.zeros(scale.size, np.int64), axis)
