"""codegen.golden.numerics against straightforward pure-Python integer references."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.golden import numerics as nx

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
int32s = st.integers(INT32_MIN, INT32_MAX)


# -- pure-Python references (written from the C text, integers only) -------------------------
def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def ref_srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return trunc_div(ab + nudge, 1 << 31)


def ref_round_half_away(x: Fraction) -> int:
    r = math.floor(abs(x) + Fraction(1, 2))
    return r if x >= 0 else -r


def ref_rdbp(x: int, e: int) -> int:
    return ref_round_half_away(Fraction(x, 1 << e))


def wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def ref_mbqm(x: int, m: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rdbp(ref_srdhm(wrap32(x * (1 << left)), m), right)


def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    if d == 0:
        return 0, 0
    f = Fraction(d)
    shift = 0
    while abs(f) >= 1:
        f /= 2
        shift += 1
    while abs(f) < Fraction(1, 2):
        f *= 2
        shift -= 1
    m = ref_round_half_away(f * 2**31)
    if abs(m) == 2**31:
        m //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return m, shift


# -- rounding ----------------------------------------------------------------------------------
def test_round_half_away_ties_and_near_ties() -> None:
    xs = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 1.4999999, 0.0,
                   -0.0, 8388609.0], dtype=np.float32)
    want = [1, -1, 2, -2, 3, -3, 0, 0, 1, 0, 0, 8388609]
    assert nx.round_half_away(xs).astype(int).tolist() == want
    assert nx.round_half_away(np.float64(0.49999999999999994)) == 0.0
    assert nx.round_half_away_int(2.5) == 3 and round(2.5) == 2     # not Python's round


@given(st.floats(-1e9, 1e9, allow_nan=False, width=32))
def test_round_half_away_matches_rational(x: float) -> None:
    assert int(nx.round_half_away(np.float32(x))) == ref_round_half_away(Fraction(x))


# -- quantize_multiplier -------------------------------------------------------------------------
@pytest.mark.parametrize("d, expected", [
    (0.0, (0, 0)),
    (1.0, (1 << 30, 1)),
    (0.5, (1 << 30, 0)),
    (0.75, (3 << 29, 0)),
    (-0.75, (-(3 << 29), 0)),
    (1 - 2.0**-40, (1 << 30, 1)),            # q * 2**31 rounds up to 2**31: fix-up
    (0.5 + 2.0**-32, ((1 << 30) + 1, 0)),    # exact tie: away from zero (Python round: even)
    (2.0**-32, (1 << 30, -31)),              # smallest kept
    (2.0**-33, (0, 0)),                      # shift -32: flushed to zero
    (0.99 * 2.0**-32, (0, 0)),
    (2.0**-31 * 0.75, (3 << 29, -31)),
    (1e6, (2048000000, 20)),
])
def test_quantize_multiplier_edge_cases(d: float, expected: tuple[int, int]) -> None:
    assert nx.quantize_multiplier(d) == expected
    assert ref_quantize_multiplier(d) == expected


@given(st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_subnormal=True))
def test_quantize_multiplier_matches_reference(d: float) -> None:
    assert nx.quantize_multiplier(d) == ref_quantize_multiplier(d)


@given(st.floats(min_value=2.0**-30, max_value=100.0))
def test_quantize_multiplier_represents_value(d: float) -> None:
    m, shift = nx.quantize_multiplier(d)
    assert 2**30 <= m < 2**31
    assert abs(m * 2.0 ** (shift - 31) - d) <= d * 2.0**-30


def test_quantize_multipliers_vectorised() -> None:
    ds = np.array([0.0, 0.3, 1.7, 2.0**-40, 1 - 2.0**-40])
    m, s = nx.quantize_multipliers(ds)
    assert m.dtype == np.int64 and s.dtype == np.int64
    assert list(zip(m.tolist(), s.tolist())) == [nx.quantize_multiplier(d) for d in ds]


# -- saturating rounding doubling high mul ------------------------------------------------------
def test_srdhm_int32_min_case() -> None:
    assert nx.sat_rounding_doubling_high_mul(np.array([INT32_MIN]), INT32_MIN)[0] == INT32_MAX
    assert nx.sat_rounding_doubling_high_mul(np.array([INT32_MIN]), INT32_MAX)[0] == \
        ref_srdhm(INT32_MIN, INT32_MAX) == -INT32_MAX
    assert nx.sat_rounding_doubling_high_mul(np.array([INT32_MAX]), INT32_MAX)[0] == \
        ref_srdhm(INT32_MAX, INT32_MAX)


@pytest.mark.parametrize("a, b", [(1 << 30, 1), (-(1 << 30), 1), (1, 1 << 30), (-1, 1 << 30),
                                  (3, 1 << 29), (-3, 1 << 29), (0, INT32_MIN), (-1, INT32_MIN)])
def test_srdhm_rounding_ties(a: int, b: int) -> None:
    assert nx.sat_rounding_doubling_high_mul(np.array([a]), b)[0] == ref_srdhm(a, b)


@settings(max_examples=300)
@given(st.lists(st.tuples(int32s, int32s), min_size=1, max_size=50))
def test_srdhm_matches_reference(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    got = nx.sat_rounding_doubling_high_mul(a, b)
    assert got.tolist() == [ref_srdhm(x, y) for x, y in pairs]


# -- rounding divide by power of two -------------------------------------------------------------
@pytest.mark.parametrize("x, e, want", [(3, 1, 2), (-3, 1, -2), (5, 2, 1), (-5, 2, -1),
                                        (6, 2, 2), (-6, 2, -2), (7, 2, 2), (-7, 2, -2),
                                        (-1, 1, -1), (1, 1, 1), (-1, 2, 0), (12345, 0, 12345),
                                        (INT32_MIN, 31, -1), (INT32_MAX, 31, 1)])
def test_rdbp_sign_handling(x: int, e: int, want: int) -> None:
    assert nx.rounding_divide_by_pot(np.array([x]), e)[0] == want == ref_rdbp(x, e)


@settings(max_examples=300)
@given(int32s, st.integers(0, 31))
def test_rdbp_matches_reference(x: int, e: int) -> None:
    assert nx.rounding_divide_by_pot(np.array([x]), e)[0] == ref_rdbp(x, e)
    assert nx.rounding_divide_by_pot(np.array([x]), np.array([e]))[0] == ref_rdbp(x, e)


# -- multiply by quantized multiplier -----------------------------------------------------------
multipliers = st.one_of(st.just(0), st.integers(1 << 30, INT32_MAX))


@settings(max_examples=400)
@given(int32s, multipliers, st.integers(-31, 7))
def test_mbqm_matches_reference(x: int, m: int, shift: int) -> None:
    assert nx.multiply_by_quantized_multiplier(np.array([x]), m, shift)[0] == \
        ref_mbqm(x, m, shift)


@given(st.integers(-(2**24), 2**24), st.floats(2.0**-20, 4.0))
def test_mbqm_approximates_real_product(x: int, real: float) -> None:
    m, shift = nx.quantize_multiplier(real)
    got = int(nx.multiply_by_quantized_multiplier(np.array([x]), m, shift)[0])
    assert abs(got - x * real) <= 1.0 + abs(x * real) * 2.0**-29


def test_mbqm_per_channel_broadcast() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-(2**20), 2**20, size=(3, 5, 4))
    m = rng.integers(1 << 30, 1 << 31, size=4)
    s = np.array([-12, -3, 0, 2])
    got = nx.multiply_by_quantized_multiplier(x, m, s)
    want = np.vectorize(ref_mbqm)(x, m, s)
    assert np.array_equal(got, want)


def test_multiply_greater_than_one() -> None:
    x = np.array([-255, -7, 0, 3])
    m, shift = nx.quantize_multiplier(0.1 * 2**26)
    got = nx.multiply_by_quantized_multiplier_greater_than_one(x, m, shift)
    assert got.tolist() == [ref_srdhm(wrap32(v << shift), m) for v in x.tolist()]


# -- gemmlowp fixed point -----------------------------------------------------------------------
def test_exp_on_negative_values_accuracy() -> None:
    a = -np.unique(np.concatenate([np.arange(0, 1 << 16), np.random.default_rng(0).integers(
        0, 31 << 26, 20000)]))
    got = nx.exp_on_negative_values(a, 5) / 2.0**31
    want = np.exp(a / 2.0**26)
    assert np.max(np.abs(got - want)) < 5e-7
    assert nx.exp_on_negative_values(np.array([0]), 5)[0] == INT32_MAX


def test_one_over_one_plus_x_accuracy() -> None:
    a = np.linspace(0, INT32_MAX, 10001).astype(np.int64)
    got = nx.one_over_one_plus_x_for_x_in_0_1(a) / 2.0**31
    assert np.max(np.abs(got - 1 / (1 + a / 2.0**31))) < 1e-8


def test_get_reciprocal() -> None:
    x = np.array([1 << 19, 3 << 19, 12345678, 2**31 - 1])
    scale, bits = nx.get_reciprocal(x, 12)
    value = x / 2.0**19                          # Q12.19
    recon = scale / 2.0**31 * 2.0**-bits.astype(float)
    np.testing.assert_allclose(recon, 1 / value, rtol=1e-8)


def test_saturating_rounding_multiply_by_pot() -> None:
    x = np.array([INT32_MAX, 1 << 28, (1 << 28) - 1, -(1 << 28), -(1 << 28) - 5, 5, -5])
    got = nx.saturating_rounding_multiply_by_pot(x, 3)
    assert got.tolist() == [INT32_MAX, INT32_MAX, ((1 << 28) - 1) * 8, -(1 << 31), INT32_MIN,
                            40, -40]
    assert nx.saturating_rounding_multiply_by_pot(x, -2).tolist() == \
        [ref_rdbp(v, 2) for v in x.tolist()]


def test_count_leading_zeros() -> None:
    x = np.array([0, 1, 2, 3, 1 << 19, INT32_MAX, -1, INT32_MIN])
    assert nx.count_leading_zeros_u32(x).tolist() == [32, 31, 30, 30, 12, 1, 0, 0]


# -- activation clamps and conversions ----------------------------------------------------------
def test_activation_ranges() -> None:
    assert nx.activation_range("none", 0.1, 5) == (-128, 127)
    assert nx.activation_range("relu", 0.1, 5) == (5, 127)
    assert nx.activation_range("relu", 0.1, -128) == (-128, 127)
    assert nx.activation_range("relu6", 0.05, -10) == (-10, 110)
    assert nx.activation_range("relu6", 0.01, 0) == (0, 127)
    assert nx.activation_range("relu_n1_to_1", 0.1, 0) == (-10, 10)
    # 6 / s rounds to 16.5 in float32 (-> 17) but to 16.4999995 in double (-> 16).
    s = float(np.float32(0.3636363744735718))
    assert nx.activation_range("relu6", s, -128) == (-128, -128 + 17)


def test_quantize_float_rounding_and_saturation() -> None:
    x = np.array([0.125, -0.125, 0.375, 1e10, -1e10, np.nan, 0.0], dtype=np.float32)
    assert nx.quantize_float(x, 0.25, 3).tolist() == [4, 2, 5, 127, -128, 3, 3]


def test_dequantize() -> None:
    out = nx.dequantize(np.array([-128, 0, 127], dtype=np.int8), np.float32(0.1), -3)
    assert out.dtype == np.float32
    assert out.tolist() == [np.float32(np.float64(np.float32(0.1)) * v) for v in (-125, 3, 130)]


def test_wrap_int32() -> None:
    assert nx.wrap_int32(np.array([2**31, -(2**31) - 1, 5, 2**32 + 7])).tolist() == \
        [INT32_MIN, INT32_MAX, 5, 7]
