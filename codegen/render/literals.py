"""C literals for generated code: exact integers and floats (hex), arrays as rows of text.

Floats are written as C99 hexadecimal literals of their float32 value (``0x1.8p-3f``): exact,
independent of the compiler's decimal conversion, and deterministic. Infinities use the
project's ``<P>_INF`` macro (no <math.h> needed). Headers a user's code includes take
``c_float_decimal`` instead: C++ has hexadecimal floats only from C++17, so there a decimal
literal of at most 9 significant digits that rounds back to exactly the same float32.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
VALUES_PER_ROW = {"int8_t": 20, "uint8_t": 20, "int16_t": 16, "int32_t": 10, "float": 6}
_RANGES = {"int8_t": (-128, 127), "uint8_t": (0, 255), "int16_t": (-32768, 32767),
           "int32_t": (INT32_MIN, (1 << 31) - 1)}


def c_int(value: int, ctype: str = "int32_t") -> str:
    v = int(value)
    lo, hi = _RANGES.get(ctype, _RANGES["int32_t"])
    if not lo <= v <= hi:
        raise ValueError(f"{v} does not fit {ctype}")
    if v == INT32_MIN:
        return "(-2147483647 - 1)"
    return str(v)


def c_float(value: float, inf: str) -> str:
    """The float32 value of ``value`` as an exact C literal (``inf``: the infinity macro)."""
    f = float(np.float32(value))
    if math.isnan(f):
        raise ValueError("NaN in a generated constant")
    if math.isinf(f):
        return inf if f > 0 else f"(-{inf})"
    h = float.hex(f)                             # e.g. '0x1.8000000000000p-3'
    mant, exp = h.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}f"


def c_float_decimal(value: float) -> str:
    """The float32 value of ``value`` as the shortest decimal literal (``0.00390625f``, at most
    9 significant digits, always with a '.' or an exponent) that a correctly rounding compiler
    turns back into exactly that float32: valid C99 and C++98 alike. Checked exactly (with
    fractions: no double rounding through float64)."""
    f32 = np.float32(value)
    f = float(f32)
    if not math.isfinite(f):
        raise ValueError(f"no decimal literal for {f}")
    for digits in range(1, 10):
        text = f"{f:.{digits}g}"
        if _nearest_float32(text) == f:
            break
    else:                                     # 9 digits always suffice for float32
        raise ValueError(f"{f!r} has no 9-digit decimal form")
    if not any(c in text for c in ".e"):
        text += ".0"
    return f"{text}f"


_FLOAT32_OVERFLOW = 2**128 - 2**103           # float32 max + half its last step


def _nearest_float32(text: str) -> float:
    """The float32 nearest to the decimal ``text`` (ties to even), as a compiler reads it."""
    from fractions import Fraction  # lazy: --help imports this module

    exact = Fraction(text)
    if abs(exact) >= _FLOAT32_OVERFLOW:        # rounds to infinity (ties: to even, inf)
        return math.copysign(math.inf, exact)
    below = np.float32(float(exact))           # within one float32 step of the exact value
    with np.errstate(over="ignore"):          # a neighbour of float32 max is infinite
        cands = {float(below), float(np.nextafter(below, np.float32(np.inf))),
                 float(np.nextafter(below, np.float32(-np.inf)))}
    cands = [c for c in cands if math.isfinite(c)]

    def key(c: float) -> tuple[Fraction, int]:
        return abs(Fraction(c) - exact), int(np.float32(c).view(np.uint32)) & 1

    return min(cands, key=key)


def array_rows(values: np.ndarray, ctype: str, inf: str) -> list[str]:
    """Comma-separated rows of an array initialiser (every row but the last ends in ',')."""
    flat = np.asarray(values).reshape(-1)
    if ctype == "float":                     # each distinct value written once
        bits = flat.astype(np.float32).view(np.uint32)
        distinct, where = np.unique(bits, return_inverse=True)
        texts = [c_float(v, inf) for v in distinct.view(np.float32).tolist()]
        items = [texts[i] for i in where.reshape(-1).tolist()]
    elif ctype in _RANGES:
        lo, hi = _RANGES[ctype]
        ints = flat.astype(np.int64)
        if ints.size and (ints.min() < lo or ints.max() > hi):
            raise ValueError(f"array values outside {ctype}")
        items = [str(v) for v in ints.tolist()]
        if ctype == "int32_t":
            items = ["(-2147483647 - 1)" if v == str(INT32_MIN) else v for v in items]
    else:
        raise ValueError(f"no C literal for element type {ctype!r}")
    per = VALUES_PER_ROW[ctype]
    rows = [", ".join(items[i:i + per]) for i in range(0, len(items), per)]
    return [r + "," for r in rows[:-1]] + rows[-1:]
