"""Exact integer arithmetic of TFLM's reference kernels, vectorised with NumPy.

Everything here works on ``int64`` arrays whose values are int32 quantities (the C code's
``int32_t``); results are returned the same way, so callers can chain them without casts.
Where C would overflow an ``int32_t`` (undefined behaviour that wraps on every target TFLM
runs on) we wrap explicitly with :func:`wrap_int32`.

The recipes are those of NUMERICS.md (TFLM default build: double rounding).
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT8_MIN, INT8_MAX = -128, 127

# ---------------------------------------------------------------------------------------------
# Rounding and wrapping


def round_half_away(x: np.ndarray | float) -> np.ndarray:
    """C ``round``/``roundf``: nearest integer, ties away from zero, in the input's float type.

    Exact for float32 and float64 (unlike ``floor(x + 0.5)``, which misrounds 0.49999997f).
    """
    a = np.abs(np.asarray(x))
    r = np.floor(a)
    r = r + (a - r >= 0.5)          # a - floor(a) is exact
    return np.copysign(r, x)


def round_half_away_int(x: float) -> int:
    """Scalar ``round`` half away from zero, as a Python int."""
    return int(round_half_away(x))


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values into the int32 range (C ``int32_t`` overflow)."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


# ---------------------------------------------------------------------------------------------
# Multiplier / shift


def quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLM ``QuantizeMultiplier``: ``d ~= m * 2**(shift - 31)``, m a Q31 int32.

    frexp, rounding half away from zero, the ``m == 2**31`` fix-up and the flush of
    multipliers below 2**-31 (shift < -31) to (0, 0). A positive shift is a left shift.
    """
    d = float(d)
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    v = abs(q) * 2.0**31                # exact: q has 53 bits, scaling by 2**31 is exact
    m = math.floor(v)
    if v - m >= 0.5:
        m += 1
    if q < 0:
        m = -m
    if m == 2**31:
        m //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return m, shift


def quantize_multipliers(ds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`quantize_multiplier` per element of a float64 array -> (int64 m, int64 shift)."""
    pairs = [quantize_multiplier(float(d)) for d in np.ravel(ds)]
    m = np.array([p[0] for p in pairs], dtype=np.int64).reshape(np.shape(ds))
    s = np.array([p[1] for p in pairs], dtype=np.int64).reshape(np.shape(ds))
    return m, s


# ---------------------------------------------------------------------------------------------
# gemmlowp primitives (int32 semantics on int64 arrays)


def sat_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` (ARM VQRDMULH) on int32 values.

    The nudge-then-truncating-division recipe equals ``floor((a*b + 2**30) / 2**31)`` for every
    int64 product, which is what we compute; INT32_MIN * INT32_MIN saturates to INT32_MAX.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    out = (a * b + (1 << 30)) >> 31
    both_min = (a == INT32_MIN) & (b == INT32_MIN)
    if np.any(both_min):
        out = np.where(both_min, INT32_MAX, out)
    return out


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: arithmetic shift right rounding half away from zero."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: np.ndarray | int,
                                     shift: np.ndarray | int) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplier(int32 x, int32 m, int shift)``, double rounding.

    ``multiplier``/``shift`` broadcast against ``x`` (e.g. per-channel on the last axis).
    """
    x = np.asarray(x, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    if np.any(left):
        x = wrap_int32(x << left)
    return rounding_divide_by_pot(sat_rounding_doubling_high_mul(x, multiplier), right)


def multiply_by_quantized_multiplier_greater_than_one(x: np.ndarray, multiplier: int,
                                                      left_shift: int) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplierGreaterThanOne`` (double rounding build)."""
    x = wrap_int32(np.asarray(x, dtype=np.int64) << left_shift)
    return sat_rounding_doubling_high_mul(x, multiplier)


def saturating_rounding_multiply_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<exponent>`` on int32 values."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    out = x << exponent
    out = np.where(x > threshold, INT32_MAX, out)
    return np.where(x < -threshold, INT32_MIN, out)


def rounding_half_sum(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum`` for int32: (a + b) / 2 rounded away from zero."""
    s = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    s = s + np.where(s >= 0, 1, -1)
    return np.where(s >= 0, s >> 1, -((-s) >> 1))      # C division truncates toward zero


def count_leading_zeros_u32(x: np.ndarray) -> np.ndarray:
    """Leading zero bits of the uint32 reinterpretation of int32 values (32 for 0)."""
    u = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    n = np.full(u.shape, 32, dtype=np.int64)
    nz = u > 0
    # frexp gives the bit length exactly for integers below 2**53.
    _, e = np.frexp(np.where(nz, u, 1).astype(np.float64))
    return np.where(nz, 32 - e.astype(np.int64), n)


# Q0.31 fixed-point constants used by gemmlowp (raw int32 values).
_EXP_M1_8 = 1895147668                 # exp(-1/8)
_ONE_THIRD = 715827883                 # 1/3
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))   # exp(-2**k)
_48_OVER_17 = 1515870810               # Q2.29
_NEG_32_OVER_17 = -1010580540          # Q2.29


def exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray) -> np.ndarray:
    """gemmlowp: exp(a) for Q0.31 ``a`` in [-1/4, 0), result Q0.31."""
    srdhm = sat_rounding_doubling_high_mul
    x = wrap_int32(np.asarray(a, dtype=np.int64) + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(
        wrap_int32(srdhm(wrap_int32(x4_over_4 + x3), _ONE_THIRD) + x2), 1)
    return wrap_int32(_EXP_M1_8 + srdhm(_EXP_M1_8, wrap_int32(x + poly)))


def exp_on_negative_values(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values`` for a Q(integer_bits).(31-integer_bits) input.

    Returns Q0.31 raw values.
    """
    a = np.asarray(a, dtype=np.int64)
    frac_bits = 31 - integer_bits
    one_quarter = 1 << (frac_bits - 2)
    a_mod = wrap_int32((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod, integer_bits))
    remainder = wrap_int32(a_mod - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (frac_bits + exponent)
            result = np.where(remainder & bit, sat_rounding_doubling_high_mul(result, multiplier),
                              result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp: 1 / (1 + a) for Q0.31 ``a`` in [0, 1), by Newton-Raphson; Q0.31 result."""
    srdhm = sat_rounding_doubling_high_mul
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = wrap_int32(_48_OVER_17 + srdhm(half_denominator, _NEG_32_OVER_17))
    one_q2 = 1 << 29
    for _ in range(3):
        one_minus = wrap_int32(one_q2 - srdhm(half_denominator, x))
        x = wrap_int32(x + saturating_rounding_multiply_by_pot(srdhm(x, one_minus), 2))
    return saturating_rounding_multiply_by_pot(x, 1)


def get_reciprocal(x: np.ndarray, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLM ``GetReciprocal``: (Q0.31 reciprocal scale, num_bits_over_unit) of positive x."""
    x = np.asarray(x, dtype=np.int64)
    headroom_plus_one = count_leading_zeros_u32(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF
    shifted_sum_minus_one = wrap_int32(shifted - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit


# ---------------------------------------------------------------------------------------------
# Quantized activation ranges and float <-> int conversions


def _quantize_value(value: float, scale: float, zero_point: int) -> int:
    """kernel_util ``Quantize``: zp + (int)roundf(value / scale), all in float32."""
    return zero_point + round_half_away_int(np.float32(value) / np.float32(scale))


def activation_range(activation: str, scale: float, zero_point: int,
                     qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> tuple[int, int]:
    """TFLM ``CalculateActivationRangeQuantized`` for a fused activation on the output."""
    if activation == "relu":
        return max(qmin, _quantize_value(0.0, scale, zero_point)), qmax
    if activation == "relu6":
        return (max(qmin, _quantize_value(0.0, scale, zero_point)),
                min(qmax, _quantize_value(6.0, scale, zero_point)))
    if activation == "relu_n1_to_1":
        return (max(qmin, _quantize_value(-1.0, scale, zero_point)),
                min(qmax, _quantize_value(1.0, scale, zero_point)))
    if activation == "none":
        return qmin, qmax
    raise ValueError(f"unknown activation {activation!r}")


def float_activation_range(activation: str) -> tuple[float, float]:
    """TFLite ``CalculateActivationRange`` (float clamps); (-inf, inf) for none."""
    return {"none": (-np.inf, np.inf), "relu": (0.0, np.inf), "relu6": (0.0, 6.0),
            "relu_n1_to_1": (-1.0, 1.0)}[activation]


def quantize_float(x: np.ndarray, scale: float, zero_point: int, qmin: int = INT8_MIN,
                   qmax: int = INT8_MAX) -> np.ndarray:
    """TFLM ``AffineQuantize``: clamp(round(x / float(scale)) + zp), division in float32."""
    q = round_half_away(np.asarray(x, dtype=np.float32) / np.float32(scale))
    q = np.clip(q.astype(np.float64), INT32_MIN, INT32_MAX)   # C's cast is UB beyond int32
    q = np.nan_to_num(q, nan=0.0).astype(np.int64) + zero_point
    return np.clip(q, qmin, qmax)


def dequantize(q: np.ndarray, scale: np.ndarray | float,
               zero_point: np.ndarray | int) -> np.ndarray:
    """TFLM ``Dequantize``: float(double(scale) * (q - zp))."""
    d = np.asarray(scale, dtype=np.float64) * (np.asarray(q, dtype=np.int64) - zero_point)
    return d.astype(np.float32)


def saturate(x: np.ndarray, lo: int, hi: int, dtype: str | np.dtype) -> np.ndarray:
    """Clamp to [lo, hi] and narrow to ``dtype``."""
    return np.clip(x, lo, hi).astype(dtype)
