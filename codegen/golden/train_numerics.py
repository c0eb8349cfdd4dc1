"""Arithmetic shared by the training kernels: float32 sequencing, pe_logf, integer gradients.

Everything the C kernels must reproduce bit for bit is here, written so that each line maps to
one C statement. Two families:

float32 (``backward: fp32``)
    IEEE single precision, one rounding per operation, no FMA. NumPy float32 arrays and
    ``np.float32`` scalars give exactly that; float32 *reductions* are done with
    :func:`seq_sum_axis` / ``train_conv.seq_add`` (sequential, in the documented order), never
    ``np.sum``/``np.dot``, which reorder.

integer (``backward: int8``)
    A gradient is an int8 array ``q`` (values in [-127, 127]) with one int32 exponent ``e``
    for the whole tensor: value = ``q * 2**e``. Weight and bias gradients stay int32
    accumulators with an exponent. Integer arithmetic here runs on int64 arrays holding int32
    quantities (the C's ``int32_t``); every recipe states its int32 bound.

The integer primitives used by the kernels (C spelling in brackets):

``bitlen(m)``  [``m ? 32 - __builtin_clz(m) : 0``] number of significant bits of an unsigned.

``max_abs(t)`` [``uint32_t``: max over ``t < 0 ? 0u - (uint32_t)t : (uint32_t)t``].

``normalise(t, e)``: int32 ``t`` at exponent ``e`` -> int8 at a new exponent::

    r = max(0, bitlen(max_abs(t)) - 7)
    q = clamp(rounding_divide_by_pot(t, r), -127, 127)
    return q, e + r

``rescale(acc, e, M, k)``: int32 ``acc`` at exponent ``e`` times a static real factor
``S = M * 2**(k - 31)`` (``(M, k) = quantize_multiplier(S)``, computed at compile time) -> int8::

    l = max(0, 30 - bitlen(max_abs(acc)))        # headroom: |acc << l| < 2**30 (or acc large)
    t = sat_rounding_doubling_high_mul(acc << l, M)
    return normalise(t, e - l + k)

An all-zero ``acc`` gives ``q = 0`` and exponent ``e - 30 + k`` (deterministic, harmless).
"""

from __future__ import annotations

import struct

import numpy as np

from . import numerics as nx

F32 = np.float32
INT32_MIN, INT32_MAX = nx.INT32_MIN, nx.INT32_MAX
GRAD_MAX = 127                       # int8 gradients are symmetric: [-127, 127]

# ---------------------------------------------------------------------------------------------
# float32


def f32(x) -> np.ndarray:
    """An array (or scalar) as float32."""
    return np.asarray(x, dtype=np.float32)


def seq_sum_axis(a: np.ndarray, axis: int) -> np.ndarray:
    """Sequential float32 sum over ``axis`` in ascending index order, from +0.0."""
    a = np.moveaxis(np.asarray(a, dtype=np.float32), axis, 0)
    acc = np.zeros(a.shape[1:], dtype=np.float32)
    for i in range(a.shape[0]):
        acc = acc + a[i]
    return acc


def seq_sum_axes(a: np.ndarray, axes: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    """Sequential float32 sum over several axes, positions taken in row-major order of ``axes``.

    The reduced positions are visited in ascending lexicographic order of their indices on
    ``axes`` (sorted), i.e. the C loop nest ``for a0 { for a1 { ... acc += x } }``.
    """
    a = np.asarray(a, dtype=np.float32)
    axes = tuple(sorted(int(ax) for ax in axes))
    if not axes:
        return a.copy() + F32(0.0)
    keep = [d for i, d in enumerate(a.shape) if i not in axes]
    moved = np.moveaxis(a, axes, tuple(range(len(axes)))).reshape((-1,) + tuple(keep))
    out = seq_sum_axis(moved, 0)
    if keepdims:
        out = out.reshape(tuple(1 if i in axes else d for i, d in enumerate(a.shape)))
    return out


def dequantize_f32(q: np.ndarray, scale, zero_point=0) -> np.ndarray:
    """``float32(q - zp) * s`` (one float32 multiply), the backward's dequantization."""
    d = np.asarray(q, dtype=np.int64) - np.asarray(zero_point, dtype=np.int64)
    return d.astype(np.float32) * f32(scale)


# pe_logf ---------------------------------------------------------------------------------------
LN2_HI = F32(struct.unpack("<f", struct.pack("<I", 0x3F317180))[0])   # 6.9313812256e-01
LN2_LO = F32(struct.unpack("<f", struct.pack("<I", 0x3717F7D1))[0])   # 9.0580006145e-06
_C3, _C5, _C7 = F32(1.0 / 3.0), F32(1.0 / 5.0), F32(1.0 / 7.0)
_SQRT2_MANT = 0x3504F3               # mantissa bits of float32(sqrt(2)) = 0x3FB504F3


def pe_logf(x: float | np.floating) -> np.float32:
    """The deterministic float32 natural log of the loss (x > 0 finite). C sequence::

        uint32_t b = bits(x); int k = 0;
        if (b < 0x00800000u) { x = x * 8388608.0f; b = bits(x); k = -23; }   /* subnormal */
        k += (int)(b >> 23) - 127;
        uint32_t m = b & 0x007FFFFFu;
        float f;
        if (m >= 0x3504F3u) { f = from_bits(m | 0x3F000000u); k += 1; }      /* [sqrt2/2, 1) */
        else                { f = from_bits(m | 0x3F800000u); }              /* [1, sqrt2)   */
        float t = (f - 1.0f) / (f + 1.0f);
        float t2 = t * t;
        float a = t2 / 9.0f;
        a = C7 + a;  a = t2 * a;            /* C7 = (float)(1/7.) */
        a = C5 + a;  a = t2 * a;            /* C5 = (float)(1/5.) */
        a = C3 + a;  a = t2 * a;            /* C3 = (float)(1/3.) */
        a = 1.0f + a;
        float r = (2.0f * t) * a;
        float kf = (float)k;
        return kf * LN2_HI + (r + kf * LN2_LO);   /* LN2_HI 0x3F317180, LN2_LO 0x3717F7D1 */

    Non-positive, infinite or NaN inputs are outside the contract (the loss sum is >= 1).
    """
    x = F32(x)
    if not (x > 0 and np.isfinite(x)):
        raise ValueError(f"pe_logf needs a positive finite float32, got {x!r}")
    b = int(x.view(np.uint32))
    k = 0
    if b < 0x00800000:
        x = x * F32(8388608.0)
        b = int(x.view(np.uint32))
        k = -23
    k += (b >> 23) - 127
    m = b & 0x007FFFFF
    if m >= _SQRT2_MANT:
        f = np.uint32(m | 0x3F000000).view(np.float32)
        k += 1
    else:
        f = np.uint32(m | 0x3F800000).view(np.float32)
    one = F32(1.0)
    t = (f - one) / (f + one)
    t2 = t * t
    a = t2 / F32(9.0)
    a = _C7 + a
    a = t2 * a
    a = _C5 + a
    a = t2 * a
    a = _C3 + a
    a = t2 * a
    a = one + a
    r = (F32(2.0) * t) * a
    kf = F32(k)
    return F32(kf * LN2_HI + (r + kf * LN2_LO))


# float -> integer ------------------------------------------------------------------------------

def round_sat_f32(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``sat(round_half_away(x))`` of float32 values into [lo, hi] as int64. C::

        float r = roundf(x);                       /* half away from zero */
        out = r >= (float)hi ? hi : r <= (float)lo ? lo : (T)r;   /* NaN -> 0 */

    For int32 targets ``(float)INT32_MAX`` is 2**31, so ``r >= 2**31`` saturates.
    """
    x = np.asarray(x, dtype=np.float32)
    r = nx.round_half_away(x).astype(np.float64)       # exact: float32 values are float64s
    r = np.where(np.isnan(r), 0.0, np.clip(r, lo, hi))
    return r.astype(np.int64)


def round_saturates(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Where :func:`round_sat_f32` saturates: x is NaN or ``round_half_away(x)`` lies outside
    [lo, hi] (a value rounding to exactly lo or hi is not saturated). C::

        if (x != x) saturated = 1;
        else { r = roundf(x);
               saturated = r >= 2147483648.0f || r < -2147483648.0f
                           || (int32_t)r > hi || (int32_t)r < lo; }
    """
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):                  # inf - inf inside round_half_away
        r = nx.round_half_away(x).astype(np.float64)
    return np.isnan(r) | (r > hi) | (r < lo)


# ---------------------------------------------------------------------------------------------
# integer


def bitlen(m: int) -> int:
    """Significant bits of a non-negative integer (0 for 0)."""
    return int(m).bit_length()


def max_abs(t: np.ndarray) -> int:
    """max |t| over an int32 array, as an exact Python int (0 for an empty array)."""
    t = np.asarray(t, dtype=np.int64)
    return int(np.abs(t).max(initial=0))


def normalise(t: np.ndarray, e: int) -> tuple[np.ndarray, int]:
    """int32 ``t`` at exponent ``e`` -> (int8 q, exponent) with one dynamic per-tensor scale."""
    t = np.asarray(t, dtype=np.int64)
    r = max(0, bitlen(max_abs(t)) - 7)
    q = np.clip(nx.rounding_divide_by_pot(t, r), -GRAD_MAX, GRAD_MAX).astype(np.int8)
    return q, int(e) + r


def rescale(acc: np.ndarray, e: int, multiplier: int, shift: int) -> tuple[np.ndarray, int]:
    """int32 ``acc`` at exponent ``e`` times ``multiplier * 2**(shift - 31)`` -> int8 gradient."""
    acc = np.asarray(acc, dtype=np.int64)
    l_ = max(0, 30 - bitlen(max_abs(acc)))
    t = nx.sat_rounding_doubling_high_mul(acc << l_, multiplier)
    return normalise(t, int(e) - l_ + int(shift))


def static_factor(real: float) -> tuple[int, int]:
    """(M, k) with real ~= M * 2**(k - 31): TFLM ``QuantizeMultiplier`` of a float64 factor."""
    return nx.quantize_multiplier(float(real))


def shl_saturates(x: np.ndarray, shift) -> np.ndarray:
    """Where the saturating left shift of :func:`mul_by_multiplier_sat` clips: shift > 0 and
    ``x * 2**min(shift, 32)`` outside int32 (``pe_sat_shl_s32``'s two saturating branches)."""
    x = np.asarray(x, dtype=np.int64)
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), x.shape)
    v = x << np.minimum(np.maximum(shift, 0), 32)
    return (shift > 0) & ((v > INT32_MAX) | (v < INT32_MIN))


def shift_exp(q: np.ndarray, s: int) -> np.ndarray:
    """``q * 2**s`` for s >= 0, ``rounding_divide_by_pot(q, -s)`` for s < 0 (0 beyond 31)."""
    q = np.asarray(q, dtype=np.int64)
    if s >= 0:
        return q << s
    if -s > 31:
        return np.zeros_like(q)
    return nx.rounding_divide_by_pot(q, -s)


def mul_by_multiplier_sat(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """``multiply_by_quantized_multiplier`` with a *saturating* left shift and any shift. C::

        int32_t v = shift > 0 ? sat_shl(x, shift) : x;     /* saturate to int32, no wrap */
        v = sat_rounding_doubling_high_mul(v, M);
        int right = shift > 0 ? 0 : -shift;
        return right > 31 ? 0 : rounding_divide_by_pot(v, right);

    ``multiplier``/``shift`` broadcast against ``x``. A right shift of 32 or more rounds every
    int32 to 0, which is exactly what the formula gives.
    """
    x = np.asarray(x, dtype=np.int64)
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), x.shape)
    left = np.minimum(np.maximum(shift, 0), 32)
    v = np.clip(x << left, INT32_MIN, INT32_MAX)
    v = nx.sat_rounding_doubling_high_mul(v, multiplier)
    right = np.maximum(-shift, 0)
    out = nx.rounding_divide_by_pot(v, np.minimum(right, 62))
    return np.where(right > 31, 0, out)
