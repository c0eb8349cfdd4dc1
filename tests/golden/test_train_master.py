"""Integer master weights (``master_weights: int32``, int8 backward): the sgd_update_i8 recipe
with an int32 master (docs/training.md, int8 updates), and the golden training step with it.

- small updates accumulate in the master and eventually move the int8 weight (they vanish
  without a master), with and without momentum;
- the exact recipe: master = clamp(master - s, +-(127 << F)), w = rdbpot(master, F); int32
  biases keep a sub-quantum remainder;
- saturation of the master, the weight, the bias and the step;
- determinism of whole training steps; state dtype, shape and initial value.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen import models
from codegen.data import fit_input
from codegen.golden import numerics as nx
from codegen.golden import train_numerics as tn
from codegen.golden import train_optim as to
from codegen.golden.training import TrainState, fit, train_step
from codegen.ir.ops import UPDATE_INPUTS

F = to.MASTER_FRAC_BITS
ALL = to.Channels(None, 0)


def unit_multiplier(step_quanta: float, acc: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(M, k) such that an accumulator of ``acc`` at e = 0 moves the parameter by
    ``step_quanta``. (A tiny acc such as 1 with a right shift meets TFLM's double rounding:
    MBQM(-1, M(0.3), k) = -1; real accumulators are large.)"""
    m, k = nx.quantize_multiplier(step_quanta / acc)
    return np.array([m]), np.array([k])


def test_frac_bits_constant():
    assert F == 16
    assert to.WEIGHT_MASTER_MAX == 127 << 16 < 2**23


# -- small updates accumulate ----------------------------------------------------------------------

@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_small_updates_accumulate_in_the_master_and_move_the_weight(momentum):
    m, k = unit_multiplier(0.01)                      # 0.01 quanta per step (acc = -1: +0.01)
    w = np.zeros(3, np.int8)
    master = np.zeros(3, np.int32)                    # w << F
    buf = np.zeros(3, np.int32) if momentum else None
    acc = np.array([-1, 1, 0])
    first_move = None
    for step in range(400):
        out = to.sgd_update_i8(w, acc, 0, m, k, ALL, momentum=momentum, buf=buf, master=master)
        w, master = out["param"], out["master"]
        buf = out.get("buf1")
        assert master.dtype == np.int32 and w.dtype == np.int8
        assert np.array_equal(w, nx.rounding_divide_by_pot(master.astype(np.int64), F))
        if first_move is None and w[0] != 0:
            first_move = step
    # the latent value grows by 0.01 quanta per step (x10 in the momentum steady state)
    per_step = 0.01 / (1 - momentum) if momentum else 0.01
    assert first_move is not None and first_move <= (0.5 / 0.01 if not momentum else 20)
    assert w[0] > 0 and w[1] == -w[0] and w[2] == 0
    expect = 400 * per_step if not momentum else None
    if expect is not None:
        assert abs(master[0] / 2**F - expect) < 0.01 * expect
    # without a master the same steps never move the weight
    w2 = np.zeros(3, np.int8)
    buf2 = np.zeros(3, np.int32) if momentum else None
    for _ in range(400):
        out = to.sgd_update_i8(w2, acc, 0, m, k, ALL, momentum=momentum, buf=buf2)
        w2, buf2 = out["param"], out.get("buf1")
    assert w2.tolist() == [0, 0, 0]


def test_master_resolution_is_2_to_minus_f_quanta():
    # a step of 3 * 2**-F quanta is kept exactly; one of 0.4 * 2**-F rounds to 0
    m, k = unit_multiplier(3 * 2.0**-F, 1000)
    w = np.zeros(1, np.int8)
    master = np.zeros(1, np.int32)
    out = to.sgd_update_i8(w, np.array([-1000]), 0, m, k, ALL, master=master)
    assert out["master"].tolist() == [3]
    m, k = unit_multiplier(0.4 * 2.0**-F, 1000)
    out = to.sgd_update_i8(w, np.array([-1000]), 0, m, k, ALL, master=master)
    assert out["master"].tolist() == [0]


def test_bias_remainder_accumulates_sub_quantum_steps():
    m, k = unit_multiplier(0.3, 1000)
    b = np.array([1000, -(2**20), 7], np.int32)
    r = np.zeros(3, np.int32)
    acc = np.array([-1000, 1000, 0])
    for step in range(1, 51):
        out = to.sgd_update_i8(b, acc, 0, m, k, ALL, master=r)
        b, r = out["param"], out["master"]
        assert b.dtype == np.int32 and r.dtype == np.int32
        assert np.all(np.abs(r) <= 2 ** (F - 1))
        exact = b.astype(np.float64) + r / 2.0**F
        want = np.array([1000 + 0.3 * step, -(2**20) - 0.3 * step, 7])
        assert np.abs(exact - want).max() <= step * 2.0**-F      # one rounding per step
    assert b.tolist() == [1015, -(2**20) - 15, 7]
    b2 = np.array([1000], np.int32)                              # no master: 0.3 rounds to 0
    for _ in range(50):
        b2 = to.sgd_update_i8(b2, np.array([-1000]), 0, m, k, ALL)["param"]
    assert b2.tolist() == [1000]


# -- exact recipe --------------------------------------------------------------------------------

def reference_update(p, acc, e, mult, shift, *, momentum, buf, master, weight: bool):
    """The docstring's recipe written out with Python ints."""
    acc, p = [int(a) for a in acc], [int(a) for a in p]
    new_p, new_buf, new_master = [], [], []
    mq = nx.round_half_away_int(momentum * 32768.0)
    for j in range(len(acc)):
        d = int(tn.mul_by_multiplier_sat(np.array([acc[j]]), int(mult[j]),
                                         int(shift[j]) + e + F)[0])
        if momentum:
            b = int(nx.rounding_divide_by_pot(np.int64(mq * int(buf[j])), 15)) + d
            b = max(nx.INT32_MIN, min(nx.INT32_MAX, b))
            new_buf.append(b)
            s = b
        else:
            s = d
        if weight:
            mm = max(-(127 << F), min(127 << F, int(master[j]) - s))
            new_master.append(mm)
            new_p.append(max(-127, min(127, int(nx.rounding_divide_by_pot(np.int64(mm), F)))))
        else:
            t = max(nx.INT32_MIN, min(nx.INT32_MAX, int(master[j]) - s))
            n = int(nx.rounding_divide_by_pot(np.int64(t), F))
            new_master.append(t - (n << F))
            new_p.append(max(nx.INT32_MIN, min(nx.INT32_MAX, p[j] + n)))
    return new_p, new_buf, new_master


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-(2**24), 2**24), min_size=4, max_size=4),
       st.integers(-24, 4), st.floats(1e-5, 2.0), st.sampled_from([0.0, 0.5, 0.9]),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_recipe_matches_the_docstring(acc, e, factor, momentum, weight, seed):
    rng = np.random.default_rng(seed)
    mult, shift = nx.quantize_multipliers(np.array([factor, factor * 0.7, factor * 1.3,
                                                    factor * 0.01]))
    if weight:
        p = rng.integers(-127, 128, 4).astype(np.int8)
        master = (p.astype(np.int64) << F) + rng.integers(-(2**15), 2**15, 4)
        master = np.clip(master, -(127 << F), 127 << F).astype(np.int32)
    else:
        p = rng.integers(-(2**31), 2**31, 4, dtype=np.int64).astype(np.int32)
        master = rng.integers(-(2**15), 2**15 + 1, 4).astype(np.int32)
    buf = rng.integers(-(2**28), 2**28, 4).astype(np.int32) if momentum else None
    out = to.sgd_update_i8(p, np.array(acc), e, mult, shift, ALL, momentum=momentum, buf=buf,
                           master=master)
    want_p, want_buf, want_master = reference_update(p, acc, e, mult, shift, momentum=momentum,
                                                     buf=buf, master=master, weight=weight)
    assert out["param"].dtype == p.dtype and out["param"].tolist() == want_p
    assert out["master"].dtype == np.int32 and out["master"].tolist() == want_master
    if momentum:
        assert out["buf1"].dtype == np.int32 and out["buf1"].tolist() == want_buf
    else:
        assert "buf1" not in out


def test_channels_only_trained_entries_change():
    rng = np.random.default_rng(7)
    w = rng.integers(-100, 100, (4, 3, 3, 2)).astype(np.int8)
    ch = to.Channels((1, 2), 0)
    master = (w[[1, 2]].astype(np.int64) << F).astype(np.int32)
    mult, shift = nx.quantize_multipliers(np.array([0.002, 0.005]))
    buf = np.zeros((2, 3, 3, 2), np.int32)
    p = w
    for _ in range(20):
        acc = rng.integers(-5000, 5000, (2, 3, 3, 2))
        out = to.sgd_update_i8(p, acc, -3, mult, shift, ch, momentum=0.9, buf=buf,
                               master=master)
        p, buf, master = out["param"], out["buf1"], out["master"]
        assert np.array_equal(p[[0, 3]], w[[0, 3]])
        assert np.array_equal(p[[1, 2]], nx.rounding_divide_by_pot(master.astype(np.int64), F))
    assert not np.array_equal(p[[1, 2]], w[[1, 2]])


# -- saturation ----------------------------------------------------------------------------------

def test_weight_master_saturates_at_the_int8_range_and_comes_back():
    m, k = unit_multiplier(1.0)
    w = np.array([126, -126], np.int8)
    master = np.array([126 << F, -126 << F], np.int32)
    for _ in range(10):                                  # push 10 quanta beyond the range
        out = to.sgd_update_i8(w, np.array([-1, 1]), 0, m, k, ALL, master=master)
        w, master = out["param"], out["master"]
    assert w.tolist() == [127, -127]
    assert master.tolist() == [127 << F, -(127 << F)]   # clamped, no run-away latent value
    out = to.sgd_update_i8(w, np.array([1, -1]), 0, m, k, ALL, master=master)
    assert out["param"].tolist() == [126, -126]          # one step back moves at once


def test_huge_steps_saturate_without_overflow():
    m, k = unit_multiplier(0.9)
    # acc << (k + e + F) saturates the int32 left shift (mbqm_sat), no wrap-around
    w = np.array([0, 0], np.int8)
    master = np.zeros(2, np.int32)
    out = to.sgd_update_i8(w, np.array([-(2**30), 2**30]), 20, m, k, ALL, master=master)
    assert out["param"].tolist() == [127, -127]
    assert out["master"].tolist() == [127 << F, -(127 << F)]
    # int32 biases: bias saturates at int32, the remainder stays bounded
    b = np.array([nx.INT32_MAX - 2, nx.INT32_MIN + 2], np.int32)
    r = np.array([2**15, -(2**15)], np.int32)
    out = to.sgd_update_i8(b, np.array([-(2**30), 2**30]), 20, m, k, ALL, master=r)
    assert out["param"].tolist() == [nx.INT32_MAX, nx.INT32_MIN]
    assert np.all(np.abs(out["master"].astype(np.int64)) <= 2 ** (F - 1))
    # momentum buffer saturates at int32 too
    buf = np.array([nx.INT32_MIN, nx.INT32_MAX], np.int32)
    out = to.sgd_update_i8(w, np.array([-(2**30), 2**30]), 20, m, k, ALL, momentum=0.9,
                           buf=buf, master=master)
    assert out["buf1"].tolist() == [nx.INT32_MIN, nx.INT32_MAX]
    assert out["param"].tolist() == [127, -127]


def test_momentum_decay_dead_band_is_at_most_4_units():
    # documented: rdbpot(mq * buf, 15) rounds to nearest, so |buf| <= 4 is a fixed point
    m, k = unit_multiplier(1.0)
    buf = np.array([1000, -1000, 4, 5], np.int32)
    w = np.zeros(4, np.int8)
    master = np.zeros(4, np.int32)
    for _ in range(200):
        out = to.sgd_update_i8(w, np.zeros(4, np.int64), 0, m, k, ALL, momentum=0.9, buf=buf,
                               master=master)
        buf, master, w = out["buf1"], out["master"], out["param"]
    assert np.all(np.abs(buf) <= 4) and buf[2] == 4 and buf[3] == 4


# -- the golden training step with int32 masters --------------------------------------------------

@pytest.fixture(scope="module")
def digits():
    from codegen.frontend import load_model
    from codegen.quant import quantize

    g = load_model(models.path("digits_cnn.onnx"))
    x_train, y_train = models.digits("train")
    q = quantize(g, x_train[:100])
    return q, fit_input(q, x_train), y_train


def _graph(q, short):
    from codegen.train import build_training_graph
    from codegen.train.spec import load_spec

    return build_training_graph(q, load_spec(short))


SHORT = "bias:all+weight:last2@0.5,opt=sgd,lr=0.001,momentum=0.9,backward=int8"


def test_state_dtype_shape_and_initial_value(digits):
    q, _, _ = digits
    g = _graph(q, SHORT + ",master_weights=int32")
    ups = [op for op in g.ops if op.type == "sgd_update"]
    assert ups
    for op in ups:
        slot = dict(zip(UPDATE_INPUTS, op.inputs))
        master, grad, param = (g.tensors[slot[k]] for k in ("master", "grad", "param"))
        assert master.dtype == "int32" and master.shape == grad.shape
        assert op.attrs["master_frac_bits"] == F and slot["master"] in op.attrs["updates"]
        if param.dtype == "int8":
            ch = op.attrs["channels"]
            w = param.data if ch is None else np.take(param.data, list(ch), axis=0)
            assert np.array_equal(master.data, w.astype(np.int64) << F)
        else:
            assert not master.data.any()
    meta = g.metadata["training"]
    assert meta["master_weights"] == "int32"
    assert sum(1 for s in meta["state"] if s["kind"] == "master") == len(ups)
    g0 = _graph(q, SHORT)
    assert all(not dict(zip(UPDATE_INPUTS, op.inputs))["master"] for op in g0.ops
               if op.type == "sgd_update")


def test_training_steps_are_deterministic_and_keep_the_invariant(digits):
    q, x, y = digits
    g = _graph(q, SHORT + ",master_weights=int32")
    states = []
    for _ in range(2):
        st_ = TrainState.from_graph(g)
        res = fit(g, st_, x[:40], y[:40], epochs=1, shuffle=True, seed=3)
        states.append((st_, res))
    (a, ra), (b, rb) = states
    assert ra["params_sha256"] == rb["params_sha256"] and ra["loss"] == rb["loss"]
    for name in a.values:
        assert np.array_equal(a[name], b[name]), name
    # every int8 weight equals its master rounded
    for op in g.ops:
        if op.type != "sgd_update":
            continue
        slot = dict(zip(UPDATE_INPUTS, op.inputs))
        if g.tensors[slot["param"]].dtype != "int8":
            continue
        ch = op.attrs["channels"]
        w = a[slot["param"]] if ch is None else np.take(a[slot["param"]], list(ch), axis=0)
        assert np.array_equal(w, nx.rounding_divide_by_pot(a[slot["master"]].astype(np.int64),
                                                           F))
        assert not np.array_equal(a[slot["master"]], g.tensors[slot["master"]].data)


def test_master_moves_weights_that_plain_int8_updates_leave_alone(digits):
    q, x, y = digits
    moved = {}
    for master in ("none", "int32"):
        g = _graph(q, SHORT + f",master_weights={master}")
        st_ = TrainState.from_graph(g)
        for i in range(30):
            train_step(g, st_, x[i], y[i])
        fc = [op for op in g.ops if op.type == "sgd_update" and op.attrs["kind"] == "weight"]
        moved[master] = sum(int(np.count_nonzero(st_[op.inputs[0]] != g.tensors[op.inputs[0]].data))
                            for op in fc)
    assert moved["int32"] > moved["none"]
