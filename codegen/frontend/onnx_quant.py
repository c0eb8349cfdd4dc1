"""Quantized constants and QDQ arithmetic for the ONNX importer.

ONNX QuantizeLinear rounds half to even (``np.rint``) and saturates; TFLite-style values made
here (biases, weights we quantize ourselves) round half away from zero. uint8 data is turned
into int8 exactly: ``q - 128`` and ``zero_point - 128`` (the real values do not change).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import QuantParams

INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-2**31, 2**31 - 1)}
INT32_SAT = 2**31 - 1


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (C ``round``), in float64."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    r = np.floor(a)
    r = r + (a - r >= 0.5)
    return np.copysign(r, x)


@dataclass(frozen=True, eq=False)
class QConst:
    """A quantized constant in ONNX layout: real = scale * (q - zero_point).

    ``q`` is int8 (uint8 already shifted by -128) or int32; ``scale``/``zero_point`` have shape
    (1,) per tensor or (C,) along ``axis``.
    """

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.q.shape)

    def _along(self, v: np.ndarray) -> np.ndarray:
        if self.axis is None or v.size == 1:
            return v.reshape(())
        shape = [1] * self.q.ndim
        shape[self.axis] = v.size
        return v.reshape(shape)

    def dequantize(self) -> np.ndarray:
        s = self._along(self.scale.astype(np.float32))
        zp = self._along(self.zero_point.astype(np.int64))
        return ((self.q.astype(np.int64) - zp).astype(np.float32) * s).astype(np.float32)

    def params(self, ir_axis: int | None = None) -> QuantParams:
        return QuantParams(self.scale, self.zero_point, ir_axis if self.axis is not None
                           else None)


def signed_params(dtype: str, scale: np.ndarray, zero_point: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(scale float32, zero point int64) with uint8 zero points moved to int8."""
    zp = np.asarray(zero_point, dtype=np.int64).reshape(-1)
    if dtype == "uint8":
        zp = zp - 128
    return np.asarray(scale, dtype=np.float32).reshape(-1), zp


def signed_data(q: np.ndarray) -> np.ndarray:
    """int8/uint8/int32 quantized data -> int8 (uint8 shifted by -128) or int32."""
    if q.dtype == np.uint8:
        return (q.astype(np.int16) - 128).astype(np.int8)
    if q.dtype == np.int8:
        return q
    return q.astype(np.int32)


def onnx_quantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int | None,
                  dtype: str) -> np.ndarray:
    """ONNX QuantizeLinear of a constant: rint(x / scale) + zp, saturated to ``dtype``."""
    lo, hi = INT_RANGES[dtype]
    s = scale.astype(np.float32)
    z = zp.astype(np.int64)
    if axis is not None and s.size > 1:
        shape = [1] * x.ndim
        shape[axis] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    else:
        s, z = s.reshape(()), z.reshape(())
    with np.errstate(all="ignore"):
        q = np.rint(x.astype(np.float32) / s).astype(np.float64) + z
    return np.clip(np.nan_to_num(q), lo, hi).astype(dtype)


def quantize_bias(real: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Bias reals -> int32 with per-element ``scale``: half away from zero, saturated."""
    with np.errstate(all="ignore"):
        q = round_half_away(real.astype(np.float64) / scale.astype(np.float64))
    q = np.nan_to_num(q, nan=0.0, posinf=INT32_SAT, neginf=-INT32_SAT)
    return np.clip(q, -INT32_SAT, INT32_SAT).astype(np.int32)


def symmetric_weights(w: np.ndarray, axis: int | None) -> QConst:
    """Symmetric int8 quantization (zero point 0) of a float weight, per channel on ``axis``
    (scale max|w| / 127; an all-zero channel gets scale 1)."""
    w = w.astype(np.float32)
    if axis is None:
        absmax = np.array([np.max(np.abs(w)) if w.size else 0.0], np.float32)
    else:
        absmax = np.max(np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)), axis=1)
    scale = (absmax / np.float32(127)).astype(np.float32)
    scale[scale == 0] = 1.0
    qc = QConst(np.zeros(w.shape, np.int8), scale, np.zeros(scale.size, np.int64), axis)
    s = qc._along(scale)
    q = np.clip(round_half_away(w / s), -127, 127).astype(np.int8)
    return QConst(q, scale, qc.zero_point, axis)


def asymmetric_constant(arr: np.ndarray) -> QConst:
    """Per-tensor asymmetric int8 quantization of a float constant (range widened to 0)."""
    arr = arr.astype(np.float32)
    lo = min(float(arr.min()) if arr.size else 0.0, 0.0)
    hi = max(float(arr.max()) if arr.size else 0.0, 0.0)
    if hi - lo < 1e-8:
        lo, hi = 0.0, 1.0
    scale = np.float32((hi - lo) / 255.0)
    zp = int(np.clip(round_half_away(np.float64(-128 - lo / scale)), -128, 127))
    q = np.clip(round_half_away(arr / scale) + zp, -128, 127).astype(np.int8)
    return QConst(q, np.array([scale], np.float32), np.array([zp], np.int64), None)
