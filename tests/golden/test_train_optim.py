"""Updates and optimizer state: QAS, rounding, saturation, momentum, master weights, channel
subsets, accumulation, Adam, step counter and schedules; pe_logf and the loss tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.golden import numerics as nx
from codegen.golden import train_loss as tl
from codegen.golden import train_numerics as tn
from codegen.golden import train_optim as to

F32 = np.float32
ALL = to.Channels(None, 0)


# -- pe_logf and tables ----------------------------------------------------------------------------

def test_pe_logf_is_close_to_math_log():
    rng = np.random.default_rng(0)
    xs = np.concatenate([
        np.exp(rng.uniform(-80, 80, 3000)).astype(np.float32),
        rng.uniform(0.5, 2.0, 3000).astype(np.float32),
        np.array([1.0, 2.0, 0.5, math.sqrt(2), math.sqrt(0.5), 1.4142135, 1.4142137, 256.0,
                  1e-45, 1e-40, 1.1754944e-38, 3.4e38], np.float32)])
    worst = 0.0
    for x in xs:
        got = float(tn.pe_logf(x))
        want = math.log(float(x))
        worst = max(worst, abs(got - want) / max(abs(want), 1.0))
        assert tn.pe_logf(x).dtype == np.float32
    assert worst < 3e-7                                       # ~2.5 float32 ulps
    assert tn.pe_logf(F32(1.0)) == F32(0.0)
    with pytest.raises(ValueError):
        tn.pe_logf(F32(0.0))


def test_pe_logf_sequence_is_deterministic_and_documented():
    # transcription of the docstring's C with struct bit casts
    import struct

    def c_logf(x: float) -> float:
        x = F32(x)
        b = struct.unpack("<I", struct.pack("<f", x))[0]
        k = 0
        if b < 0x00800000:
            x = F32(x * F32(8388608.0))
            b = struct.unpack("<I", struct.pack("<f", x))[0]
            k = -23
        k += (b >> 23) - 127
        m = b & 0x7FFFFF
        if m >= 0x3504F3:
            f, k = F32(struct.unpack("<f", struct.pack("<I", m | 0x3F000000))[0]), k + 1
        else:
            f = F32(struct.unpack("<f", struct.pack("<I", m | 0x3F800000))[0])
        t = F32((f - F32(1)) / (f + F32(1)))
        t2 = F32(t * t)
        a = F32(t2 / F32(9))
        for c in (1 / 7, 1 / 5, 1 / 3):
            a = F32(t2 * F32(F32(c) + a))
        a = F32(F32(1) + a)
        r = F32(F32(F32(2) * t) * a)
        kf = F32(k)
        return F32(F32(kf * tn.LN2_HI) + F32(r + F32(kf * tn.LN2_LO)))

    rng = np.random.default_rng(1)
    for x in np.exp(rng.uniform(-90, 88, 500)).astype(np.float32):
        assert tn.pe_logf(x) == c_logf(x)


def test_loss_tables():
    t = tl.exp_table(0.1)
    assert t.dtype == np.float32 and t.shape == (256,) and t[255] == F32(1.0)
    assert t[0] == F32(math.exp(float(F32(0.1)) * -255))
    n = tl.neglog_table()
    assert n[256 - 1] == F32(-math.log(255 / 256)) and n[0] == F32(-math.log(0.5 / 256))
    assert n[128] == F32(math.log(2))


# -- fp32 SGD ----------------------------------------------------------------------------------------

def test_sgd_fp32_qas_moves_the_real_weight_by_lr_times_g():
    rng = np.random.default_rng(2)
    w = rng.integers(-100, 101, (6, 3, 3, 2)).astype(np.int8)
    s_w = (rng.random(6) * 0.02 + 0.005).astype(np.float32)
    g = (rng.standard_normal(w.shape) * 0.3).astype(np.float32)
    lr = 0.05
    new = to.sgd_update_f32(w, g, (1.0 / s_w).astype(np.float32), ALL, lr=lr)["param"]
    assert new.dtype == np.int8
    real_before = w * s_w[:, None, None, None].astype(np.float64)
    real_after = new * s_w[:, None, None, None].astype(np.float64)
    moved = real_after - (real_before - lr * g)
    assert np.all(np.abs(moved) <= s_w[:, None, None, None] * 0.5 * (1 + 1e-5))
    # biases: qas = 1/(s_x s_w), the int32 bias moves by lr*g/(s_x s_w) quanta
    s_x = F32(0.04)
    b = rng.integers(-5000, 5000, 6).astype(np.int32)
    gb = rng.standard_normal(6).astype(np.float32)
    qas = (1.0 / (float(s_x) * s_w.astype(np.float64))).astype(np.float32)
    nb = to.sgd_update_f32(b, gb, qas, ALL, lr=lr)["param"]
    scale = float(s_x) * s_w.astype(np.float64)
    assert nb.dtype == np.int32
    assert np.all(np.abs(nb * scale - (b * scale - lr * gb)) <= 0.5 * scale * (1 + 1e-5))


def test_sgd_fp32_exact_sequence_rounding_and_saturation():
    w = np.array([3, 3, -3, 120, -120, 0], np.int8)
    g = np.array([0.5, -0.5, 0.5, -100.0, 100.0, 0.49999997], np.float32)
    new = to.sgd_update_f32(w, g, np.ones(1, np.float32), to.Channels(None, 0), lr=1.0)["param"]
    # 2.5 -> 3 (half away), 3.5 -> 4, -3.5 -> -4, saturation at +-127, 0.49999997 -> 0
    assert new.tolist() == [3, 4, -4, 127, -127, 0]
    b = np.array([nx.INT32_MAX - 5, nx.INT32_MIN + 5, 7], np.int32)
    gb = np.array([-1e12, 1e12, np.nan], np.float32)
    nb = to.sgd_update_f32(b, gb, np.ones(1, np.float32), ALL, lr=1.0)["param"]
    assert nb.tolist() == [nx.INT32_MAX, nx.INT32_MIN, 7]        # NaN step -> 0 (documented)


def test_sgd_fp32_bias_update_is_an_exact_integer_difference():
    # float32(b) is inexact beyond 2**24: b - round(u) in int64 keeps every bias exact
    b = np.array([2**24 + 1, -(2**30) - 3, 2**31 - 2, 1000, 1000, -1000], np.int32)
    u = np.array([0.0, 0.0, -7.0, 2.5, 0.49999997, -2.5], np.float32)
    nb = to.sgd_update_f32(b, u, np.ones(1, np.float32), ALL, lr=1.0)["param"]
    assert nb.tolist() == [2**24 + 1, -(2**30) - 3, nx.INT32_MAX, 997, 1000, -997]
    assert to.round_step_i64(np.array([1e20, -1e20, np.inf, np.nan], np.float32)).tolist() \
        == [2**32, -(2**32), 2**32, 0]


def test_sgd_fp32_momentum_master_and_channels():
    rng = np.random.default_rng(3)
    w = rng.integers(-50, 50, (4, 5)).astype(np.int8)
    ch = to.Channels((1, 3), 0)
    qas = np.array([10.0, 20.0], np.float32)
    buf = np.zeros((2, 5), np.float32)
    master = w[[1, 3]].astype(np.float32)
    p = w
    for step in range(4):
        g = rng.standard_normal((2, 5)).astype(np.float32)
        want_buf = F32(0.9) * buf + g
        u = (F32(0.01) * want_buf) * qas[:, None]
        out = to.sgd_update_f32(p, g, qas, ch, lr=0.01, momentum=0.9, buf=buf, master=master)
        assert np.array_equal(out["buf1"], want_buf)
        assert np.array_equal(out["master"], master - u)
        buf, master = out["buf1"], out["master"]
        assert np.array_equal(out["param"][[0, 2]], w[[0, 2]])   # untouched channels
        assert np.array_equal(out["param"][[1, 3]], tn.round_sat_f32(master, -127, 127))
        p = out["param"]


def test_master_weights_accumulate_sub_lsb_updates():
    w = np.zeros(3, np.int8)
    master = np.zeros(3, np.float32)
    g = np.full(3, -0.1, np.float32)                     # u = -0.1 quanta per step
    for _ in range(6):
        out = to.sgd_update_f32(w, g, np.ones(1, np.float32), ALL, lr=1.0, master=master)
        w, master = out["param"], out["master"]
    assert w.tolist() == [1, 1, 1]                        # 0.6 rounds to 1
    w2 = np.zeros(3, np.int8)
    for _ in range(6):                                    # without master: lost to rounding
        w2 = to.sgd_update_f32(w2, g, np.ones(1, np.float32), ALL, lr=1.0)["param"]
    assert w2.tolist() == [0, 0, 0]


def test_gradient_accumulation():
    w = np.zeros(2, np.int8)
    acc = np.zeros(2, np.float32)
    g = np.array([0.4, -0.3], np.float32)
    for t in range(3):
        out = to.sgd_update_f32(w, g, np.ones(1, np.float32), ALL, lr=1.0, accum=acc,
                                step=np.array([t], np.int32), accumulate=3)
        acc = out["accum"]
        if t < 2:
            assert "param" not in out and np.array_equal(acc, g * (t + 1))
        else:
            assert np.array_equal(acc, np.zeros(2, np.float32))
            total = (g + g) + g
            assert out["param"].tolist() == tn.round_sat_f32(-total, -127, 127).tolist()


def test_adam_fp32_sequence_state_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    n = 8
    w = np.zeros(n, np.int8)
    master = np.zeros(n, np.float32)
    m = np.zeros(n, np.float32)
    v = np.zeros(n, np.float32)
    pows = np.ones(2, np.float32)
    ref = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([ref], lr=0.1, betas=(0.9, 0.999), eps=1e-8)
    for t in range(5):
        g = rng.standard_normal(n).astype(np.float32)
        out = to.adam_update_f32(w, g, np.ones(1, np.float32), ALL, lr=0.1, beta1=0.9,
                                 beta2=0.999, eps=1e-8, m=m, v=v, pows=pows, master=master)
        b1, b2 = F32(0.9), F32(0.999)
        want_m = b1 * m + (F32(1) - b1) * g
        want_v = b2 * v + (F32(1) - b2) * (g * g)
        assert np.array_equal(out["buf1"], want_m) and np.array_equal(out["buf2"], want_v)
        assert "pows" not in out                                  # shared: step_counter's
        m, v, w, master = out["buf1"], out["buf2"], out["param"], out["master"]
        pows = to.step_counter(np.array([t], np.int32), None, pows, beta1=0.9,
                               beta2=0.999)["pows"]
        ref.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        assert np.allclose(master, ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    want = np.ones(2, np.float32)
    for _ in range(5):
        want = want * np.array([0.9, 0.999], np.float32)
    assert np.array_equal(pows, want)


# -- step counter and schedules ------------------------------------------------------------------

def test_step_counter_step_schedule_and_accumulate():
    step, lr = np.array([0], np.int32), np.array([0.1], np.float32)
    lrs = []
    for _ in range(12):
        out = to.step_counter(step, lr, None, accumulate=2, schedule="step", lr=0.1, gamma=0.5,
                              step_size=2)
        step, lr = out["step"], out.get("lr", lr)
        lrs.append(float(lr[0]))
    assert step.tolist() == [12]
    # updates happen every 2 steps; lr halves every 2 updates (running product, float32)
    assert np.allclose(lrs, [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025,
                             0.0125], rtol=1e-6)
    assert lr.dtype == np.float32 and lr[0] == (F32(0.1) * F32(0.5)) * F32(0.5) * F32(0.5)


def test_warmup_schedule():
    lr = np.array([F32(0.2) * F32(1) / F32(4)], np.float32)
    step = np.array([0], np.int32)
    seen = [float(lr[0])]
    for _ in range(6):
        out = to.step_counter(step, lr, None, schedule="warmup", lr=0.2, warmup_steps=4)
        step, lr = out["step"], out["lr"]
        seen.append(float(lr[0]))
    want = [float((F32(0.2) * F32(min(u + 1, 4))) / F32(4)) for u in range(7)]
    assert seen == want


def _cosine_sequence(lr: float, total: int, warmup: int, min_lr: float, n: int) -> list:
    """lr_t after u = 0 .. n-1 updates, run through step_counter from the initial value."""
    lr_t = np.array([to.cosine_lr(0, lr, total, warmup, min_lr)], np.float32)
    step, seen = np.array([0], np.int32), [lr_t[0]]
    for _ in range(n - 1):
        out = to.step_counter(step, lr_t, None, schedule="cosine", lr=lr, total_steps=total,
                              warmup_steps=warmup, min_lr=min_lr)
        step, lr_t = out["step"], out["lr"]
        assert lr_t.dtype == np.float32
        seen.append(lr_t[0])
    return seen


@pytest.mark.parametrize(("lr", "total", "warmup", "min_lr"),
                         [(0.1, 100, 10, 0.001), (0.05, 100, 0, 0.0), (0.01, 1, 0, 0.001),
                          (0.2, 7, 6, 0.2), (1e-3, 5000, 250, 1e-5)])
def test_cosine_schedule_follows_float64_cos(lr, total, warmup, min_lr):
    """The float32 cosine schedule (no libm) against math.cos in float64: within 1e-6
    relative at every update; the warmup ramp first; then non-increasing from exactly lr (at
    u = W) to exactly min_lr (at u = T and after)."""
    seen = _cosine_sequence(lr, total, warmup, min_lr, total + 20)
    tp = max(total - warmup, 1)
    for u, got in enumerate(seen):
        assert got == to.cosine_lr(u, lr, total, warmup, min_lr)
        if u < warmup:
            assert got == (F32(lr) * F32(u + 1)) / F32(warmup)        # the warmup formula
            continue
        p = min(u - warmup, tp) / tp
        want = min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))
        assert abs(float(got) - want) <= 1e-6 * want or got == want == 0.0, (u, got, want)
    decay = seen[warmup:]
    assert decay[0] == F32(lr)
    assert all(a >= b for a, b in itertools.pairwise(decay))
    assert all(v == F32(min_lr) for v in seen[total:])
    assert seen[total - 1] > F32(min_lr) or lr == min_lr


def test_cosine_without_warmup_starts_at_lr_and_accumulates():
    assert to.cosine_lr(0, 0.05, 30) == F32(0.05)
    assert to.cosine_lr(30, 0.05, 30) == 0.0 and to.cosine_lr(10**6, 0.05, 30, 0, 0.01) == F32(0.01)
    step, lr = np.array([0], np.int32), np.array([F32(0.05)], np.float32)
    for t in range(12):                   # accumulate 3: lr moves on every third step only
        out = to.step_counter(step, lr, None, accumulate=3, schedule="cosine", lr=0.05,
                              total_steps=4)
        assert ("lr" in out) == ((t + 1) % 3 == 0)
        step, lr = out["step"], out.get("lr", lr)
        if "lr" in out:
            assert lr[0] == to.cosine_lr((t + 1) // 3, 0.05, 4)
    assert lr[0] == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 90, 1000, 20001, 2**31 - 1])
def test_cosine_halves_polynomial_accuracy(n):
    """cosine_halves(k, n): ((1 + cos(pi p))/2, (1 - cos(pi p))/2) for p = k/n with float32
    +, -, *, / only: each within 4e-7 relative of float64 cos^2(pi p/2) and sin^2(pi p/2)
    (references free of cancellation), exact at both ends, summing to 1 within 1 ulp."""
    ks = range(n + 1) if n <= 20001 else [
        *range(4), *range(n // 2 - 2, n // 2 + 3), *range(n - 3, n + 1),
        *(int(k) for k in np.linspace(0, n, 5001))]
    worst = 0.0
    for k in ks:
        a, b = to.cosine_halves(k, n)
        assert isinstance(a, np.float32) and isinstance(b, np.float32)
        h = math.pi * k / n / 2
        for got, want in ((a, math.cos(h) ** 2), (b, math.sin(h) ** 2)):
            if want > 1e-30:
                worst = max(worst, abs(float(got) - want) / want)
        assert abs(float(a) + float(b) - 1.0) <= 2.0**-23
    assert worst <= 4e-7, worst
    assert to.cosine_halves(0, n) == (1.0, 0.0) and to.cosine_halves(n, n) == (0.0, 1.0)


# -- int8 SGD ------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**20), 2**20), st.integers(-20, -2), st.floats(1e-4, 0.1),
       st.floats(0.003, 0.05), st.floats(0.002, 0.1))
def test_sgd_int8_qas_step_is_lr_times_g(acc, e, lr, s_w, s_x):
    s_w, s_x = float(F32(s_w)), float(F32(s_x))
    m, k = nx.quantize_multiplier(lr * s_x / s_w)
    w = np.zeros(1, np.int8)
    new = to.sgd_update_i8(w, np.array([acc]), e, np.array([m]), np.array([k]), ALL)["param"]
    real_grad = acc * 2.0**e * s_x                             # weight gradient's real value
    want = -lr * real_grad / s_w                              # quanta
    # TFLM's double rounding: the high-mul rounds, then the shift by `right` rounds again
    tol = 0.5 + 0.5 * 2.0 ** -max(0, -(k + e)) + 1e-6 * abs(want)
    if abs(want) < 126:
        assert abs(int(new[0]) - want) <= tol
    # biases: real value acc * 2**e, factor lr/(s_x s_w)
    m, k = nx.quantize_multiplier(lr / (s_x * s_w))
    b = np.zeros(1, np.int32)
    nb = to.sgd_update_i8(b, np.array([acc]), e, np.array([m]), np.array([k]), ALL)["param"]
    want = -lr * acc * 2.0**e / (s_x * s_w)
    if abs(acc) * 2.0 ** max(0, k + e) > nx.INT32_MAX:
        return                            # the saturating left shift clips the intermediate
    assert abs(int(nb[0]) - want) <= 0.5 + 0.5 * 2.0 ** -max(0, -(k + e)) + 1e-6 * abs(want)


def test_sgd_int8_saturation_and_tiny_steps():
    m, k = nx.quantize_multiplier(0.5)
    w = np.array([120, -120, 5], np.int8)
    acc = np.array([-1000, 1000, 1])
    new = to.sgd_update_i8(w, acc, 0, np.full(3, m), np.full(3, k), ALL)["param"]
    assert new.tolist() == [127, -127, 4]                    # 5 - round(0.5) = 4
    b = np.array([nx.INT32_MAX - 3, nx.INT32_MIN + 3], np.int32)
    nb = to.sgd_update_i8(b, np.array([-(2**30), 2**30]), 10, np.full(2, m), np.full(2, k),
                          ALL)["param"]
    assert nb.tolist() == [nx.INT32_MAX, nx.INT32_MIN]      # saturating shift, then clamp
    tiny = to.sgd_update_i8(w, np.array([2**30, 5, -5]), -80, np.full(3, m), np.full(3, k),
                            ALL)["param"]
    assert np.array_equal(tiny, w)                           # shifts below -31 round to 0


def _count(out: dict) -> int:
    return int(out["saturated"][0])


def test_fp32_updates_count_saturated_entries():
    zero = np.zeros(1, np.int32)
    w = np.array([3, 120, -120, 127, 0, 5], np.int8)
    g = np.array([0.5, -100.0, 100.0, -0.25, np.nan, 0.0], np.float32)
    out = to.sgd_update_f32(w, g, np.ones(1, np.float32), ALL, lr=1.0, saturated=zero)
    # 2.5 fits; 220 and -220 clip; 127.25 rounds to 127 (in range, not saturated); NaN
    assert out["param"].tolist() == [3, 127, -127, 127, 0, 5] and _count(out) == 3
    b = np.array([nx.INT32_MAX - 5, nx.INT32_MIN + 5, 7, nx.INT32_MIN], np.int32)
    gb = np.array([-5.0, 6.0, np.nan, 0.0], np.float32)       # +5 fits, -6 clips, NaN
    out = to.sgd_update_f32(b, gb, np.ones(1, np.float32), ALL, lr=1.0,
                            saturated=np.array([10], np.int32))
    assert out["param"].tolist() == [nx.INT32_MAX, nx.INT32_MIN, 7, nx.INT32_MIN]
    assert _count(out) == 10 + 2
    # a master far beyond the int8 range keeps counting while the weight stays clamped
    master = np.array([300.0, 1.0], np.float32)
    out = to.sgd_update_f32(np.array([127, 1], np.int8), np.array([-1.0, 0.0], np.float32),
                            np.ones(1, np.float32), ALL, lr=1.0, master=master,
                            saturated=zero)
    assert out["param"].tolist() == [127, 1] and _count(out) == 1
    # the counter itself saturates; no slot, no count; accumulating steps count nothing
    full = np.array([nx.INT32_MAX - 1], np.int32)
    out = to.sgd_update_f32(w, g, np.ones(1, np.float32), ALL, lr=1.0, saturated=full)
    assert _count(out) == nx.INT32_MAX
    assert "saturated" not in to.sgd_update_f32(w, g, np.ones(1, np.float32), ALL, lr=1.0)
    acc = to.sgd_update_f32(w, g, np.ones(1, np.float32), ALL, lr=1.0, accum=np.zeros(6),
                            step=np.zeros(1, np.int32), accumulate=2, saturated=zero)
    assert set(acc) == {"accum"}
    m0 = np.zeros(2, np.float32)
    out = to.adam_update_f32(np.array([127, 0], np.int8), np.array([-1.0, 1e-3], np.float32),
                             np.array([1e6], np.float32), ALL, lr=0.1, beta1=0.9,
                             beta2=0.999, eps=1e-8, m=m0, v=m0, pows=np.ones(2, np.float32),
                             saturated=zero)
    assert out["param"].tolist() == [127, -127] and _count(out) == 2


def test_bias_limit_keeps_the_forward_accumulator_from_wrapping():
    # FC with 64 inputs at zero point -128: |sum w*(x - zp)| <= 64 * 127 * 255
    limit = to.forward_bias_limit(64, -128)
    assert limit == nx.INT32_MAX - 64 * 127 * 255
    assert to.forward_bias_limit(70_000, -128) is None         # products alone can overflow
    assert to.param_limits(np.int32, limit) == (-limit, limit)
    assert to.param_limits(np.int32) == (nx.INT32_MIN, nx.INT32_MAX)
    b = np.array([limit - 5, -limit + 5, 0], np.int32)
    zero = np.zeros(1, np.int32)
    for out in (to.sgd_update_f32(b, np.array([-1e12, 1e12, 1.0], np.float32),
                                  np.ones(1, np.float32), ALL, lr=1.0, saturated=zero,
                                  bias_limit=limit),
                to.sgd_update_i8(b, np.array([-(2**30), 2**30, 0]), 10,
                                 np.full(3, 2**30), np.zeros(3), ALL, saturated=zero,
                                 bias_limit=limit)):
        assert out["param"][:2].tolist() == [limit, -limit] and _count(out) == 2
        # the extreme forward accumulator plus the saturated bias still fits int32
        assert limit + 64 * 127 * 255 <= nx.INT32_MAX
    with pytest.raises(ValueError, match="bias_limit"):
        to.param_limits(np.int32, -1)


def test_int8_updates_count_saturated_entries():
    m, k = nx.quantize_multiplier(0.5)
    zero = np.zeros(1, np.int32)
    w = np.array([120, -120, 5, 0], np.int8)
    acc = np.array([-1000, 1000, 1, 2**30])
    # e = 1: the last step 2**30 * 2 * 0.5 clips in the left shift before anything else
    out = to.sgd_update_i8(w, acc, 1, np.full(4, m), np.full(4, k), ALL, saturated=zero)
    assert out["param"].tolist() == [127, -127, 4, -127] and _count(out) == 3
    # int32 master of a weight: the clamp at +-(127 << F) counts, the weight stays 127
    f = to.MASTER_FRAC_BITS
    out = to.sgd_update_i8(np.array([127, 0], np.int8), np.array([-(2**20), 2]), 0,
                           np.full(2, m), np.full(2, k), ALL, master=np.array([127 << f, 0]),
                           saturated=zero)
    assert out["master"].tolist()[0] == 127 << f and _count(out) == 1
    # momentum buffer saturation
    mq_buf = np.array([nx.INT32_MAX, 0], np.int64)
    out = to.sgd_update_i8(np.array([0, 0], np.int8), np.array([2**22, 0]), 0,
                           np.full(2, m), np.full(2, k), ALL, momentum=0.9, buf=mq_buf,
                           saturated=zero)
    assert out["buf1"].tolist()[0] == nx.INT32_MAX and _count(out) == 1
    # int32 bias with its remainder master: the bias sum clips
    out = to.sgd_update_i8(np.array([nx.INT32_MAX - 1], np.int32), np.array([-(2**28)]), 0,
                           np.full(1, m), np.full(1, k), ALL, master=np.zeros(1),
                           saturated=zero)
    assert out["param"].tolist() == [nx.INT32_MAX] and _count(out) == 1


def test_sgd_int8_momentum_sequence_and_channels():
    rng = np.random.default_rng(5)
    w = rng.integers(-60, 60, (3, 4)).astype(np.int8)
    ch = to.Channels((0, 2), 0)
    mult, shift = nx.quantize_multipliers(np.array([0.004, 0.007]))
    buf = np.zeros((2, 4), np.int32)
    mq = to.momentum_q15(0.9)
    assert mq == 29491
    p = w
    for _ in range(5):
        acc = rng.integers(-3000, 3000, (2, 4))
        e = -2
        out = to.sgd_update_i8(p, acc, e, mult, shift, ch, momentum=0.9, buf=buf)
        d8 = tn.mul_by_multiplier_sat(acc, mult[:, None], shift[:, None] + e + 8)
        want_buf = np.clip(nx.rounding_divide_by_pot(mq * buf.astype(np.int64), 15) + d8,
                           nx.INT32_MIN, nx.INT32_MAX)
        assert out["buf1"].dtype == np.int32 and np.array_equal(out["buf1"], want_buf)
        want_p = np.clip(p[[0, 2]].astype(np.int64) - nx.rounding_divide_by_pot(want_buf, 8),
                         -127, 127)
        assert np.array_equal(out["param"][[0, 2]], want_p)
        assert np.array_equal(out["param"][1], w[1])
        buf, p = out["buf1"], out["param"]


def test_sgd_int8_momentum_reaches_the_geometric_steady_state():
    m, k = nx.quantize_multiplier(0.01)
    buf = np.zeros(1, np.int32)
    w = np.zeros(1, np.int8)
    for _ in range(200):
        out = to.sgd_update_i8(w, np.array([-1000]), 0, np.array([m]), np.array([k]), ALL,
                               momentum=0.5, buf=buf)
        buf, w = out["buf1"], out["param"]
    # one step moves -10 quanta (p -= delta, g < 0 raises p); with momentum 0.5 the buffer
    # settles at -20 quanta (in 2**-8 units)
    assert abs(int(buf[0]) + 20 * 256) <= 2 and int(out["param"][0]) == 127
