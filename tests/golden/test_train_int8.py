"""int8 (integer-only) training kernels: primitives, properties, tracking of the fp32 kernels.

The integer kernels' results, dequantised (q * 2**e), must follow the fp32 kernels on random
data (cosine similarity > 0.99) and be exactly reproducible; the integer helpers are checked
against big-integer references with hypothesis.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.errors import ModelError
from codegen.golden import numerics as nx
from codegen.golden import train_conv as tc
from codegen.golden import train_grads as tg
from codegen.golden import train_loss as tl
from codegen.golden import train_numerics as tn

F32 = np.float32
SAME3, VALID = (1, 1, 1, 1), (0, 0, 0, 0)
INT32 = st.integers(nx.INT32_MIN, nx.INT32_MAX)


def cos(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def value(g) -> np.ndarray:
    q, e = g
    assert q.dtype == np.int8 and np.abs(q.astype(np.int64)).max(initial=0) <= 127
    return q.astype(np.float64) * 2.0 ** e


def grad8(rng, shape, e=-9):
    return rng.integers(-127, 128, shape).astype(np.int8), e


def f32_of(g) -> np.ndarray:
    return (g[0].astype(np.float64) * 2.0 ** g[1]).astype(np.float32)


def act(rng, shape):
    return rng.integers(-128, 128, shape).astype(np.int8), F32(0.05), int(rng.integers(-20, 21))


def weight(rng, shape, n):
    return (rng.integers(-127, 128, shape).astype(np.int8),
            (rng.random(n) * 0.02 + 0.005).astype(np.float32))


def check_repro(fn, *args):
    """Run twice on copies: identical results, inputs untouched."""
    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    r1 = fn(*args)
    r2 = fn(*copies)
    for a, c in zip(args, copies):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, c)
    q1, e1 = r1
    q2, e2 = r2
    assert np.array_equal(q1, q2) and e1 == e2 and q1.dtype == q2.dtype
    return r1


# -- primitives ----------------------------------------------------------------------------------

def test_normalise_examples():
    q, e = tn.normalise(np.array([0, 0]), 5)
    assert q.tolist() == [0, 0] and e == 5
    q, e = tn.normalise(np.array([127, -127, 3]), -4)
    assert q.tolist() == [127, -127, 3] and e == -4              # already int8: identity
    q, e = tn.normalise(np.array([128, -3]), 0)
    assert q.tolist() == [64, -2] and e == 1                     # -1.5 rounds away from zero
    q, e = tn.normalise(np.array([255, 1]), 0)
    assert q.tolist() == [127, 1] and e == 1                     # 127.5 -> 128 -> clamp 127
    q, e = tn.normalise(np.array([nx.INT32_MIN, 1]), 0)
    assert q.tolist() == [-64, 0] and e == 25                    # |INT32_MIN| = 2**31


@settings(max_examples=300, deadline=None)
@given(st.lists(INT32, min_size=1, max_size=20), st.integers(-60, 60))
def test_normalise_properties(values, e):
    t = np.array(values, dtype=np.int64)
    q, e2 = tn.normalise(t, e)
    r = e2 - e
    m = int(np.abs(t).max())
    assert q.dtype == np.int8 and np.abs(q.astype(np.int64)).max() <= 127
    assert r == max(0, m.bit_length() - 7)
    if r == 0:
        assert np.array_equal(q, t)                               # exact when it fits
    else:
        assert int(np.abs(q.astype(np.int64)).max()) >= 64        # uses the int8 range
        err = np.abs(q.astype(np.int64) * 2**r - t)
        assert np.all((err <= 2 ** (r - 1)) | (np.abs(q) == 127))
    # rounding half away from zero, bit-exactly as gemmlowp's RoundingDivideByPOT
    for v, qv in zip(values, q.tolist()):
        exact = abs(v) / 2**r
        want = int(exact) + (1 if exact - int(exact) >= 0.5 else 0)
        assert qv == max(-127, min(127, want if v >= 0 else -want))


@settings(max_examples=300, deadline=None)
@given(st.lists(INT32, min_size=1, max_size=12), st.floats(1e-6, 1e3), st.integers(-40, 40))
def test_rescale_approximates_the_real_product(values, factor, e):
    acc = np.array(values, dtype=np.int64)
    m, k = tn.static_factor(factor)
    q, e2 = tn.rescale(acc, e, m, k)
    real = acc.astype(np.float64) * (m * 2.0 ** (k - 31)) * 2.0 ** e
    got = q.astype(np.float64) * 2.0 ** e2
    top = float(np.abs(real).max())
    if top == 0:
        assert not q.any()
        return
    # every element within ~1 int8 step (rounding twice, plus the clamp at 127)
    assert np.all(np.abs(got - real) <= 1.01 * 2.0 ** e2 + 1e-9 * top)
    assert int(np.abs(q.astype(np.int64)).max()) >= 63


def _ref_mbqm_sat(x: int, m: int, shift: int) -> int:
    """Big-integer transcription of mul_by_multiplier_sat's C."""
    left = max(shift, 0)
    v = max(nx.INT32_MIN, min(nx.INT32_MAX, x * 2 ** min(left, 32)))
    if v == m == nx.INT32_MIN:
        v = nx.INT32_MAX
    else:
        ab = v * m
        nudge = 2**30 if ab >= 0 else 1 - 2**30
        s = ab + nudge
        v = abs(s) // 2**31 * (1 if s >= 0 else -1)                # C truncating division
    right = max(-shift, 0)
    if right > 31:
        return 0
    mask = (1 << right) - 1
    rem = v & mask
    thr = (mask >> 1) + (1 if v < 0 else 0)
    return (v >> right) + (1 if rem > thr else 0)


@settings(max_examples=400, deadline=None)
@given(INT32, st.integers(2**30, 2**31 - 1), st.integers(-70, 40))
def test_mul_by_multiplier_sat_matches_reference(x, m, shift):
    got = int(tn.mul_by_multiplier_sat(np.array([x]), m, shift)[0])
    assert got == _ref_mbqm_sat(x, m, shift)
    if 0 >= shift >= -31:
        assert got == int(nx.multiply_by_quantized_multiplier(np.array([x]), m, shift)[0])


@settings(max_examples=200, deadline=None)
@given(st.integers(-127, 127), st.integers(-50, 20))
def test_shift_exp(q, s):
    got = int(tn.shift_exp(np.array([q]), s)[0])
    if s >= 0:
        assert got == q * 2**s
    else:
        exact = abs(q) / 2 ** -s
        want = int(exact) + (1 if exact - int(exact) >= 0.5 else 0)
        assert got == (want if q >= 0 else -want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-127, 127), min_size=1, max_size=8), st.integers(-40, 10),
       st.lists(st.integers(-127, 127), min_size=8, max_size=8), st.integers(-40, 10))
def test_grad_add_i8_approximates_the_sum(a, e1, b, e2):
    qa = np.array(a, np.int8)
    qb = np.array(b[:len(a)], np.int8)
    q, e = tg.grad_add_i8(qa, e1, qb, e2)
    want = qa * 2.0 ** e1 + qb * 2.0 ** e2
    got = q * 2.0 ** e
    small = 2.0 ** (max(e1, e2) - 16)                    # alignment rounding of the smaller
    assert np.all(np.abs(got - want) <= 1.01 * 2.0 ** e + small)
    assert np.array_equal(tg.grad_add_i8(qa, e1, qb, e2)[0], q)


def test_grad_add_i8_ignores_an_all_zero_input():
    q = np.array([3, -100, 64], np.int8)
    z = np.zeros(3, np.int8)
    assert tg.grad_add_i8(q, -40, z, 10)[1] == -40                 # not swamped by e = 10
    assert np.array_equal(tg.grad_add_i8(z, 10, q, -40)[0], q)
    q2, e = tg.grad_add_i8(q, -3, q, -3)
    assert e == -2 and np.array_equal(q2, q)                        # q+q at one exponent up


def test_bounds_are_checked():
    with pytest.raises(ModelError):
        tc.weight_grad_bound(70_000)
    tc.weight_grad_bound(66_000)
    with pytest.raises(ModelError):
        tc.input_grad_prescale(np.array([0.01], np.float32), 1, 140_000)
    m, k, b, _, _ = tc.input_grad_prescale(np.array([0.01, 0.005], np.float32), 2, 9 * 64)
    assert 9 * 64 * 128 * 127 * 2**b <= nx.INT32_MAX < 9 * 64 * 128 * 127 * 2 ** (b + 1)
    assert b == 7 and k.tolist() == [1, 0] and m[0] == 2**30 and m[1] == 2**30
    assert tc.input_grad_prescale(np.array([0.01], np.float32), 1, 9 * 512)[2] == 4
    assert tc.input_grad_prescale(np.array([0.01], np.float32), 1, 9)[2] == 8
    assert tg.avg_pool_recip_bits((2, 2)) == 16 and tg.avg_pool_recip_bits((64, 64)) == 12


# -- kernels track fp32 --------------------------------------------------------------------------

CONV = [((1, 7, 6, 3), 4, (3, 3), (1, 1), (1, 1), SAME3),
        ((1, 9, 8, 4), 6, (3, 3), (2, 2), (1, 1), (0, 1, 0, 1)),
        ((1, 8, 8, 4), 5, (3, 3), (1, 2), (2, 1), (2, 1, 0, 2)),
        ((1, 6, 6, 16), 32, (1, 1), (1, 1), (1, 1), VALID)]


@pytest.mark.parametrize("case", CONV, ids=[str(i) for i in range(len(CONV))])
def test_conv2d_int8_tracks_fp32(case):
    x_shape, o, k, stride, dil, pad = case
    rng = np.random.default_rng(x_shape[1] * 7 + o)
    x_q, s_x, zp = act(rng, x_shape)
    w_q, s_w = weight(rng, (o,) + k + (x_shape[3],), o)
    from codegen.ir import conv_out_size
    oh = conv_out_size(x_shape[1], k[0], stride[0], dil[0], pad[0], pad[1])
    ow = conv_out_size(x_shape[2], k[1], stride[1], dil[1], pad[2], pad[3])
    dy = grad8(rng, (1, oh, ow, o))
    dx = check_repro(lambda d, w: tc.conv2d_grad_input_i8(d, dy[1], w, s_w, x_shape, stride,
                                                           dil, pad), dy[0], w_q)
    ref = tc.conv2d_grad_input_f32(f32_of(dy), w_q, s_w, x_shape, stride, dil, pad)
    assert cos(value(dx), ref) > 0.999
    acc, e = tc.conv2d_grad_weight_i8(x_q, zp, dy[0], dy[1], w_q.shape, stride, dil, pad)
    ref_w = tc.conv2d_grad_weight_f32(x_q, zp, s_x, f32_of(dy), w_q.shape, stride, dil, pad)
    assert acc.dtype == np.int64 and e == dy[1]
    assert np.allclose(acc * 2.0 ** e * float(s_x), ref_w, rtol=1e-5, atol=1e-6)
    accs, _ = tc.conv2d_grad_weight_i8(x_q, zp, dy[0], dy[1], w_q.shape, stride, dil, pad,
                                       (1, 3))
    assert np.array_equal(accs, acc[[1, 3]])
    bias, eb = tc.bias_grad_i8(*dy)
    assert eb == dy[1] and np.array_equal(bias, dy[0].astype(np.int64).sum(axis=(0, 1, 2)))


@pytest.mark.parametrize("mult,stride,pad", [(1, (1, 1), SAME3), (2, (2, 2), (0, 1, 1, 1)),
                                             (3, (1, 2), VALID)])
def test_depthwise_int8_tracks_fp32(mult, stride, pad):
    rng = np.random.default_rng(mult)
    x_shape, c = (1, 8, 7, 3), 3
    o = c * mult
    x_q, s_x, zp = act(rng, x_shape)
    w_q, s_w = weight(rng, (1, 3, 3, o), o)
    from codegen.ir import conv_out_size
    oh = conv_out_size(8, 3, stride[0], 1, pad[0], pad[1])
    ow = conv_out_size(7, 3, stride[1], 1, pad[2], pad[3])
    dy = grad8(rng, (1, oh, ow, o), -5)
    dx = check_repro(lambda d: tc.depthwise_conv2d_grad_input_i8(d, dy[1], w_q, s_w, x_shape,
                                                                  mult, stride, (1, 1), pad),
                     dy[0])
    ref = tc.depthwise_conv2d_grad_input_f32(f32_of(dy), w_q, s_w, x_shape, mult, stride,
                                             (1, 1), pad)
    assert cos(value(dx), ref) > 0.999
    acc, e = tc.depthwise_conv2d_grad_weight_i8(x_q, zp, dy[0], dy[1], w_q.shape, mult, stride,
                                                (1, 1), pad)
    ref_w = tc.depthwise_conv2d_grad_weight_f32(x_q, zp, s_x, f32_of(dy), w_q.shape, mult,
                                                stride, (1, 1), pad)
    assert np.allclose(acc * 2.0 ** e * float(s_x), ref_w, rtol=1e-5, atol=1e-6)


def test_fully_connected_int8_tracks_fp32():
    rng = np.random.default_rng(3)
    x_q, s_x, zp = act(rng, (1, 2, 2, 8))
    w_q, s_w = weight(rng, (10, 32), 10)
    dy = grad8(rng, (1, 10), -8)
    dx = check_repro(lambda d: tc.fully_connected_grad_input_i8(d, dy[1], w_q, s_w,
                                                                 (1, 2, 2, 8)), dy[0])
    assert dx[0].shape == (1, 2, 2, 8)
    assert cos(value(dx), tc.fully_connected_grad_input_f32(f32_of(dy), w_q, s_w,
                                                            (1, 2, 2, 8))) > 0.999
    acc, e = tc.fully_connected_grad_weight_i8(x_q, zp, dy[0], dy[1], (2, 5))
    ref = tc.fully_connected_grad_weight_f32(x_q, zp, s_x, f32_of(dy), (2, 5))
    assert np.allclose(acc * 2.0 ** e * float(s_x), ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("flt,stride,pad", [((2, 2), (2, 2), VALID), ((3, 3), (2, 2), SAME3),
                                            ((3, 3), (1, 1), (1, 1, 1, 1)),
                                            ((3, 2), (2, 1), (0, 1, 1, 0))])
def test_pooling_int8_tracks_fp32(flt, stride, pad):
    rng = np.random.default_rng(flt[0] * 10 + stride[0])
    x_shape = (1, 7, 6, 3)
    from codegen.ir import conv_out_size
    oh = conv_out_size(7, flt[0], stride[0], 1, pad[0], pad[1])
    ow = conv_out_size(6, flt[1], stride[1], 1, pad[2], pad[3])
    dy = grad8(rng, (1, oh, ow, 3), -6)
    dx = check_repro(lambda d: tg.avg_pool2d_grad_i8(d, dy[1], x_shape, flt, stride, pad),
                     dy[0])
    assert cos(value(dx), tg.avg_pool2d_grad_f32(f32_of(dy), x_shape, flt, stride, pad)) > 0.999
    x_q = rng.integers(-128, 128, x_shape).astype(np.int8)
    dxm = check_repro(lambda d: tg.max_pool2d_grad_i8(d, dy[1], x_q, flt, stride, pad), dy[0])
    ref = tg.max_pool2d_grad_f32(f32_of(dy), x_q, flt, stride, pad)
    assert cos(value(dxm), ref) > 0.999
    if stride[0] >= flt[0] and stride[1] >= flt[1]:
        assert np.array_equal(value(dxm), ref)                      # no overlap: exact


@pytest.mark.parametrize("sa,sb", [((1, 4, 4, 3), (1, 1, 1, 3)), ((1, 4, 5, 3), (1, 4, 1, 3)),
                                   ((1, 4, 4, 3), (3,)), ((1, 2, 3, 4), (1, 2, 3, 4))])
def test_add_mul_int8_track_fp32(sa, sb):
    rng = np.random.default_rng(len(sb))
    out = np.broadcast_shapes(sa, sb)
    dy = grad8(rng, out, -3)
    a_q, s_a, zp_a = act(rng, sa)
    b_q, s_b, zp_b = act(rng, sb)
    for shape in (sa, sb):
        g = check_repro(lambda d, s=shape: tg.add_grad_i8(d, dy[1], s), dy[0])
        assert cos(value(g), tg.add_grad_f32(f32_of(dy), shape)) > 0.999
    g = check_repro(lambda d: tg.mul_grad_i8(d, dy[1], b_q, s_b, zp_b, sa), dy[0])
    assert cos(value(g), tg.mul_grad_f32(f32_of(dy), b_q, s_b, zp_b, sa)) > 0.999
    g = check_repro(lambda d: tg.mul_grad_i8(d, dy[1], a_q, s_a, zp_a, sb), dy[0])
    assert cos(value(g), tg.mul_grad_f32(f32_of(dy), a_q, s_a, zp_a, sb)) > 0.999


def test_shape_ops_int8():
    rng = np.random.default_rng(4)
    dy = grad8(rng, (1, 2, 2, 3), -4)
    g = check_repro(lambda d: tg.mean_grad_i8(d, dy[1], (1, 4, 6, 3), (1, 2), True), dy[0][:, :1,
                                                                                         :1])
    ref = tg.mean_grad_f32(f32_of((dy[0][:, :1, :1], dy[1])), (1, 4, 6, 3), (1, 2), True)
    assert g[0].shape == (1, 4, 6, 3) and cos(value(g), ref) > 0.999
    assert np.allclose(value(g), ref, rtol=0.02, atol=2.0 ** g[1])
    # pad / concat / reshape: exact data movement, exponent unchanged
    assert np.array_equal(tg.pad_grad(dy[0], ((0, 0), (1, 0), (0, 1), (0, 0))), dy[0][:, 1:, :1])
    assert np.array_equal(tg.concat_grad(dy[0], 3, 1, 2), dy[0][..., 1:3])
    assert tg.reshape_grad(dy[0], (1, 12)).dtype == np.int8
    mask = rng.random((1, 2, 2, 3)) > 0.5
    q, e = tg.mask_grad_i8(dy[0], dy[1], mask)
    assert e == dy[1] and np.array_equal(q, np.where(mask, dy[0], 0))


@pytest.mark.parametrize("classes,beta", [(10, 1.0), (16, 0.5)])
def test_softmax_int8_tracks_fp32(classes, beta):
    rng = np.random.default_rng(classes)
    x_q, s_x, zp = act(rng, (1, classes))
    y_q = tl._int8_softmax(float(s_x) * 4, zp, classes, beta)(x_q)
    dy = grad8(rng, (1, classes), -7)
    g = check_repro(lambda d: tg.softmax_grad_i8(d, dy[1], y_q, F32(1 / 256), -128, beta), dy[0])
    ref = tg.softmax_grad_f32(f32_of(dy), y_q, F32(1 / 256), -128, beta)
    assert cos(value(g), ref) > 0.99


@pytest.mark.parametrize("classes,label,beta", [(10, 3, 1.0), (2, 1, 1.0), (12, 0, 0.5)])
def test_cross_entropy_int8_tracks_fp32(classes, label, beta):
    rng = np.random.default_rng(classes)
    q, s, zp = act(rng, (1, classes))
    q[0, label] = 127                 # the label is likely enough for int8 p to resolve it
    s = F32(0.1)
    loss8, g = tl.softmax_cross_entropy_i8(q, label, tl.neglog_table(), s, zp, beta)
    q2, e2 = tl.softmax_cross_entropy_i8(q, label, tl.neglog_table(), s, zp, beta)[1]
    assert np.array_equal(q2, g[0]) and e2 == g[1]
    loss32, d = tl.softmax_cross_entropy_f32(q, label, tl.exp_table(s, beta), s, beta)
    assert cos(value(g), d) > 0.9999                 # Q16 probabilities, 7 significant bits
    assert np.abs(g[0]).max() >= 64                   # normalised: full int8 resolution
    assert abs(float(loss8) - float(loss32)) < 0.05 + 0.02 * float(loss32)
    assert loss8.dtype == np.float32


def test_cross_entropy_int8_gradient_is_p_minus_onehot():
    q = np.array([[60, 0, 0]], np.int8)                        # p ~ (0.995, 0.0025, 0.0025)
    sm16 = tl._int8_softmax(0.1, 0, 3, 1.0, bits=16)
    u = sm16(q).astype(np.int64).reshape(-1) + 32768           # Q16 probabilities
    assert u[0] > 65000 and u[1] == u[2] and u.sum() in range(65530, 65542)
    assert abs(u[1] - 65536 * np.exp(-6) / (1 + 2 * np.exp(-6))) < 2   # 1/256 would give 0 or 1
    _, (g, e) = tl.softmax_cross_entropy_i8(q, 0, tl.neglog_table(), F32(0.1), 0)
    d = u - np.array([65536, 0, 0])                            # (p - onehot) * 2**16
    want_q, want_e = tn.normalise(d, -16)
    assert e == want_e and g.tolist() == [want_q.tolist()]
    assert g[0, 0] < 0 and g[0, 1] > 0 and g[0, 1] == g[0, 2]  # tiny p still resolved
    assert abs(value((g, e)).sum()) <= 2.0 ** (e + 1)          # sums to ~0: no common mode
    _, (g, e) = tl.softmax_cross_entropy_i8(q, 1, tl.neglog_table(), F32(0.1), 0)
    want = (u - np.array([0, 65536, 0])) / 65536.0
    assert e == -7 and np.abs(value((g, e)).reshape(-1) - want).max() <= 2.0 ** -7
    q = np.array([[100, -100, -100]], np.int8)                 # p = (1, 0, 0) even in Q16
    _, (g, e) = tl.softmax_cross_entropy_i8(q, 1, tl.neglog_table(), F32(0.1), 0)
    assert value((g, e)).tolist() == [[1.0, -1.0, 0.0]] and e == -6   # +-1 exactly (+-64)


def test_cross_entropy_int8_loss_index_and_beta():
    q = np.array([[20, 10, -5, 0]], np.int8)
    table = tl.neglog_table()
    sm16 = tl._int8_softmax(0.1, 0, 4, 1.0, bits=16)
    u = sm16(q).astype(np.int64).reshape(-1) + 32768
    for label in range(4):
        loss, _ = tl.softmax_cross_entropy_i8(q, label, table, F32(0.1), 0)
        k = min(int(nx.rounding_divide_by_pot(u[label], 8)), 255)
        assert loss == table[k]
    # beta != 1: rescale of d by quantize_multiplier(beta)
    sm = tl._int8_softmax(0.1, 0, 4, 0.5, bits=16)
    u = sm(q).astype(np.int64).reshape(-1) + 32768
    d = u.copy()
    d[2] -= 65536
    _, (g, e) = tl.softmax_cross_entropy_i8(q, 2, table, F32(0.1), 0, 0.5)
    want = tn.rescale(d, -16, *tn.static_factor(0.5))
    assert np.array_equal(g.reshape(-1), want[0]) and e == want[1]


def test_mse_int8_tracks_fp32():
    rng = np.random.default_rng(9)
    y = rng.integers(-128, 128, (1, 20)).astype(np.int8)
    t = rng.integers(-128, 128, (1, 20)).astype(np.int8)
    loss8, g = tl.mse_loss_i8(y, t, F32(0.05))
    loss32, d = tl.mse_loss_f32(y, t, F32(0.05))
    assert abs(float(loss8) - float(loss32)) <= 1e-6 * float(loss32)
    assert cos(value(g), d) > 0.9999


def test_int8_bias_and_weight_grad_dtypes_and_exactness():
    rng = np.random.default_rng(1)
    dy = grad8(rng, (1, 3, 3, 4), -11)
    acc, e = tc.bias_grad_i8(*dy)
    assert e == -11 and acc.tolist() == dy[0].astype(np.int64).sum(axis=(0, 1, 2)).tolist()
