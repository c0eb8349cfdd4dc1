"""Portable C training kernels (runtime_c/kernels/pe_train_kernels.h) vs the golden training
kernels, bit for bit (raw bytes, float32 included).

- every training op in both backward modes on random single-op graphs (train_cases.py), run
  through the records of codegen.backends.train_args;
- the float and integer helpers (pe_logf, sqrt, rounding, saturating multipliers, rescale)
  against codegen.golden;
- whole training steps on the bundled digits CNN (SGD, momentum, Adam, master weights,
  schedules, accumulation, channel subsets, MSE; fp32 and int8 backward): the training graph
  run op by op in C from the same initial state as codegen.golden.training, every tensor of
  every step compared, parameters and optimizer state after every step;
- the records against the header's prototypes; in-place use; clang and Cortex-M3 (soft
  float) builds; the kernels on emulated Cortex-M4F, Cortex-M3 and Hexagon v67 cores (QEMU, no
  C library), bit-exact there too; an AddressSanitizer + UBSan run in a subprocess.

The kernels come from the session's gcc -O2 UBSan library (conftest.py), compiled once.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codegen.backends import TRAIN_CALL_BUILDERS, kernel_call
from codegen.errors import ModelError
from codegen.golden import train_conv as tc
from codegen.golden import train_numerics as tn
from codegen.golden import train_optim as to
from codegen.golden.numerics import INT32_MAX, INT32_MIN, quantize_multiplier
from codegen.golden.train_kernels import build_train_kernel
from codegen.ir import QuantParams
from codegen.ir.ops import TRAINING_OP_SPECS, UPDATE_INPUTS

from .c_runner import (
    INCLUDES,
    KERNELS_DIR,
    STRICT_FLAGS,
    RefKernels,
    build_library,
    have,
    sanitizer_flags,
)
from .train_cases import FP32_ONLY, MODES, TRAIN_CASES, step_counter_case
from .train_runner import (
    c_array,
    check_train_case,
    digits_setup,
    run_training,
    same_bytes,
    training_graph,
)
from .train_target import HEXAGON_BUILTINS, TARGETS, TOOLS, build_and_run, render_cases

N_CASES = 1000                  # random cases per op and mode
N_STEPS = 50                    # training steps per spec
N_TARGET_CASES = 30             # cases per op and mode on each emulated target
ROOT = Path(__file__).resolve().parents[2]
TRAIN_KERNELS = set(re.findall(r"^void\s+(pe_\w+)\s*\(",
                               (KERNELS_DIR / "pe_train_kernels.h").read_text(), re.MULTILINE))
TRAIN_SOURCES = sorted(p for p in (KERNELS_DIR / "ref").glob("*.c")
                       if TRAIN_KERNELS & set(re.findall(r"^void\s+(pe_\w+)\s*\(",
                                                         p.read_text(), re.MULTILINE)))

OP_MODES = [(op, mode) for op in sorted(TRAIN_CASES) for mode in MODES
            if not (op in FP32_ONLY and mode == "int8")]


# -- per-op random cases -------------------------------------------------------------------------
@pytest.mark.parametrize(("op_type", "mode"), OP_MODES,
                         ids=[f"{o}-{m}" for o, m in OP_MODES])
def test_train_op_matches_golden(ref_lib: RefKernels, op_type: str, mode: str) -> None:
    rng = np.random.default_rng(2024)
    bad_cases, tensors, first = 0, 0, None
    for i in range(N_CASES):
        graph, inputs = TRAIN_CASES[op_type](rng, mode)
        bad, n, diff = check_train_case(ref_lib, graph, inputs)
        tensors += n
        if bad:
            bad_cases += 1
            first = first or (i, diff, graph.ops[0].attrs)
    assert tensors >= N_CASES
    assert bad_cases == 0, (f"{op_type} ({mode}): {bad_cases} of {N_CASES} cases differ from "
                            f"the golden model ({tensors} tensors compared); first: {first}")


def test_every_training_op_has_cases_and_a_record() -> None:
    assert set(TRAIN_CASES) == set(TRAINING_OP_SPECS) == set(TRAIN_CALL_BUILDERS)


def test_cases_cover_the_parameter_space() -> None:
    """What the kernels must be general in is reached by the random cases."""
    seen: dict[str, set] = {k: set() for k in ("stride", "dilation", "groups", "mult", "pad",
                                               "channels", "batch", "beta", "momentum",
                                               "master", "accumulate", "lr_slot", "schedule",
                                               "zero_grad", "bias", "axis3")}
    for op_type in ("conv2d_grad_input", "conv2d_grad_weight", "depthwise_conv2d_grad_input",
                    "depthwise_conv2d_grad_weight"):
        rng = np.random.default_rng(2024)
        for _ in range(300):
            g, vals = TRAIN_CASES[op_type](rng, "int8")
            a = g.ops[0].attrs
            seen["stride"].update(a["stride"])
            seen["dilation"].update(a["dilation"])
            top, bottom, left, right = a["padding"]
            seen["pad"].add("asym" if (top, left) != (bottom, right) else
                            "none" if top == left == 0 else "sym")
            seen["mult"].add(a.get("depth_multiplier", 0))
            if op_type.startswith("conv2d"):
                x = g.tensors[g.ops[0].outputs[0] if "input" in op_type else "x"]
                w = g.tensors["w"] if "input" in op_type else g.tensors[g.ops[0].outputs[0]]
                seen["groups"].add(x.shape[3] // w.shape[3])
            if "weight" in op_type:
                seen["channels"].add(a["channels"] is None)
            seen["batch"].add(g.tensors[g.ops[0].inputs[0]].shape[0])
            seen["zero_grad"].add(not np.any(vals[0]) if "input" in op_type else False)
    for mode in MODES:
        rng = np.random.default_rng(2024)
        for _ in range(300):
            g, _ = TRAIN_CASES["softmax_cross_entropy"](rng, mode)
            seen["beta"].add(g.ops[0].attrs["beta"] == 1.0)
            for kind in ("sgd_update", "adam_update"):
                case = TRAIN_CASES[kind](rng, mode)
                if case is None:
                    continue
                g, _ = case
                a, slots = g.ops[0].attrs, dict(zip(UPDATE_INPUTS, g.ops[0].inputs))
                seen["momentum"].add((kind, mode, a.get("momentum", 0.0) > 0))
                seen["master"].add((mode, bool(slots["master"])))
                seen["accumulate"].add(a["accumulate"] > 1)
                seen["lr_slot"].add(bool(slots["lr"]))
                seen["bias"].add(g.tensors[slots["param"]].dtype)
                seen["axis3"].add(a["channel_axis"])
                seen["channels"].add(a["channels"] is None)
            g, _ = TRAIN_CASES["step_counter"](rng, mode)
            seen["schedule"].add(g.ops[0].attrs["schedule"])
    assert {1, 2, 3} <= seen["stride"] and {1, 2} <= seen["dilation"]
    assert {1, 2, 3} <= seen["groups"] and {1, 2, 3} <= seen["mult"]
    assert seen["pad"] == {"asym", "none", "sym"} and seen["batch"] == {1, 2}
    assert seen["channels"] == {True, False} and seen["zero_grad"] == {True, False}
    assert seen["beta"] == {True, False}
    assert {("sgd_update", m, True) for m in MODES} <= seen["momentum"]
    assert {("sgd_update", m, False) for m in MODES} <= seen["momentum"]
    assert seen["master"] == {(m, b) for m in MODES for b in (True, False)}
    assert seen["accumulate"] == {True, False} and seen["lr_slot"] == {True, False}
    assert seen["bias"] == {"int8", "int32"} and seen["axis3"] == {0, 3}
    assert seen["schedule"] == {"constant", "step", "warmup", "cosine"}


def test_update_cases_reach_saturation() -> None:
    """The random update cases (compared with C above, counter included) saturate in some
    cases and not in others, and some push the counter itself to INT32_MAX."""
    for kind, mode in (("sgd_update", "fp32"), ("sgd_update", "int8"), ("adam_update", "fp32")):
        rng = np.random.default_rng(2024)
        seen = {"none": 0, "counted": 0, "counter_full": 0}
        for _ in range(300):
            case = TRAIN_CASES[kind](rng, mode)
            assert case is not None
            g, vals = case
            slots = dict(zip(UPDATE_INPUTS, g.ops[0].inputs))
            if not slots["saturated"]:
                continue
            before = int(vals[UPDATE_INPUTS.index("saturated")][0])
            new = build_train_kernel(g, g.ops[0]).run(list(vals))
            after = int(new.get(slots["saturated"], [before])[0])
            assert before <= after <= INT32_MAX
            seen["counted" if after > before else "none"] += 1
            seen["counter_full"] += after == INT32_MAX and before < INT32_MAX
        assert min(seen.values()) > 0, (kind, mode, seen)


def test_adam_has_no_int8_kernel() -> None:
    g, _ = TRAIN_CASES["adam_update"](np.random.default_rng(0), "fp32")
    op = g.ops[0]
    op8 = op.replace(attrs={**op.attrs, "mode": "int8"})
    g.ops[0] = op8
    with pytest.raises(ModelError, match="needs backward fp32"):
        kernel_call(g, op8)


# -- numeric helpers -----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def train_primitives(build_root: Path) -> ctypes.CDLL:
    out = build_root / "train_primitives"
    out.mkdir()
    harness = Path(__file__).with_name("train_primitives_harness.c")
    lib = out / "libtrainprimitives.so"
    flags = sanitizer_flags("gcc", "undefined", out)
    subprocess.run(["gcc", *STRICT_FLAGS, "-O2", "-fPIC", "-shared", *flags, *INCLUDES,
                    str(harness), "-o", str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def _call(lib: ctypes.CDLL, fn: str, *args) -> None:
    conv = []
    for a in args:
        if isinstance(a, np.ndarray):
            assert a.flags.c_contiguous
            conv.append(a.ctypes.data_as(ctypes.c_void_p))
        else:
            conv.append(ctypes.c_int32(int(a)))
    getattr(lib, fn)(*conv)


def _float_samples(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random bit patterns of positive floats (every exponent, subnormals included), plus
    edges."""
    bits = rng.integers(1, 0x7F800000, size=n, dtype=np.int64).astype(np.uint32)
    edges = np.array([1, 2, 0x007FFFFF, 0x00800000, 0x00800001, 0x3F800000, 0x3F7FFFFF,
                      0x3F3504F3, 0x3F3504F2, 0x3FB504F3, 0x7F7FFFFF, 0x40000000, 0x4B000000],
                     np.uint32)
    return np.concatenate([edges, bits]).view(np.float32)


def test_pe_logf_matches_golden(train_primitives: ctypes.CDLL) -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([_float_samples(rng, 20_000),
                        (1.0 + rng.random(20_000) * 300).astype(np.float32)])
    out = np.zeros_like(x)
    _call(train_primitives, "t_logf", x.size, x, out)
    want = np.array([tn.pe_logf(v) for v in x], np.float32)
    assert out.tobytes() == want.tobytes()


def test_pe_sqrtf_is_ieee_correctly_rounded(train_primitives: ctypes.CDLL) -> None:
    """pe_sqrtf (integer digit recurrence, no libm) == numpy's float32 sqrt (IEEE) on 2M
    random positive floats of every exponent, the edges, +-0, +inf and NaN."""
    rng = np.random.default_rng(8)
    x = _float_samples(rng, 2_000_000)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf], np.float32)])
    out = np.zeros_like(x)
    _call(train_primitives, "t_sqrtf", x.size, x, out)
    assert out.tobytes() == np.sqrt(x).tobytes()
    special = np.array([np.nan, -1.0, -np.inf], np.float32)
    out = np.zeros_like(special)
    _call(train_primitives, "t_sqrtf", special.size, special, out)
    assert np.all(np.isnan(out))


def test_rounding_matches_golden(train_primitives: ctypes.CDLL) -> None:
    rng = np.random.default_rng(9)
    halves = (np.arange(-600, 600) * 0.5).astype(np.float32)
    near = np.array([0.49999997, -0.49999997, 0.5, -0.5, 8388607.5, -8388607.5, 8388608.0,
                     2.0**31, -2.0**31, 2.0**31 - 128, 3e9, -3e9, 5e9, -5e9, 4294967296.0,
                     -4294967296.0, np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    wide = (rng.standard_normal(50_000) * 10.0 ** rng.uniform(-3, 11, 50_000)).astype(np.float32)
    x = np.concatenate([halves, near, wide])
    out = np.zeros_like(x)
    _call(train_primitives, "t_roundf", x.size, x, out)
    finite = np.isfinite(x)
    assert out[finite].tobytes() == tn.nx.round_half_away(x[finite]).astype(np.float32).tobytes()
    for lo, hi in ((-127, 127), (INT32_MIN, INT32_MAX)):
        got = np.zeros(x.size, np.int32)
        _call(train_primitives, "t_round_sat", x.size, x, lo, hi, got)
        with np.errstate(invalid="ignore"):
            assert np.array_equal(got, tn.round_sat_f32(x, lo, hi))
        flag = np.zeros(x.size, np.int32)
        _call(train_primitives, "t_round_sat_flag", x.size, x, lo, hi, got, flag)
        want = tn.round_saturates(x, lo, hi)
        with np.errstate(invalid="ignore"):
            assert np.array_equal(got, tn.round_sat_f32(x, lo, hi))
        assert np.array_equal(flag, want.astype(np.int32))
        assert 0 < np.count_nonzero(want) < x.size             # both outcomes reached
        # a value rounding to exactly lo or hi is not saturated; one quantum beyond is
        edge = np.array([lo, hi, float(lo) - 1.0, float(hi) + 1.0], np.float32)
        assert tn.round_saturates(edge, lo, hi).tolist() == (
            [False, False, True, True] if hi == 127 else [False, True, False, True])
    steps = np.zeros(x.size, np.int64)
    _call(train_primitives, "t_round_step", x.size, x, steps)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(steps, to.round_step_i64(x))


def test_integer_helpers_match_golden(train_primitives: ctypes.CDLL) -> None:
    rng = np.random.default_rng(10)
    n = 200_000
    x = np.concatenate([[INT32_MIN, INT32_MAX, 0, -1, 1],
                        rng.integers(INT32_MIN, INT32_MAX, size=n // 2, endpoint=True),
                        rng.integers(-(1 << 16), 1 << 16, size=n - n // 2 - 5)]).astype(np.int32)
    ms = [quantize_multiplier(float(d)) for d in 2.0 ** rng.uniform(-30, 10, size=500)]
    idx = rng.integers(0, len(ms), size=n)
    m = np.array([ms[i][0] for i in idx], np.int32)
    s = np.array([ms[i][1] for i in idx], np.int64) + rng.integers(-60, 60, size=n)
    out = np.zeros(n, np.int32)
    _call(train_primitives, "t_mbqm_sat", n, x, m, s, out)
    assert np.array_equal(out, tn.mul_by_multiplier_sat(x, m, s))
    _call(train_primitives, "t_shl_saturates", n, x, s, out)
    want = tn.shl_saturates(x, s)
    assert np.array_equal(out, want.astype(np.int32))
    assert 0 < np.count_nonzero(want) < n
    q = rng.integers(-127, 128, size=n).astype(np.int32)
    sh = rng.integers(-40, 17, size=n).astype(np.int32)
    _call(train_primitives, "t_shift_exp", n, q, sh, out)
    want = np.array([tn.shift_exp(np.array([a]), int(b))[0] for a, b in zip(q[:5000], sh[:5000])])
    assert np.array_equal(out[:5000], want)
    for _ in range(300):
        size = int(rng.integers(1, 50))
        bits = int(rng.integers(0, 32))
        acc = rng.integers(-(2**bits), 2**bits, size=size, endpoint=False).astype(np.int32)
        if rng.random() < 0.05:
            acc[0] = INT32_MIN
        e = int(rng.integers(-30, 30))
        q8 = np.zeros(size, np.int8)
        got_e = train_primitives.t_rescale(ctypes.c_int32(size),
                                           acc.ctypes.data_as(ctypes.c_void_p),
                                           ctypes.c_int32(e), ctypes.c_int32(0),
                                           ctypes.c_int32(0), ctypes.c_int32(0),
                                           q8.ctypes.data_as(ctypes.c_void_p))
        wq, we = tn.normalise(acc, e)
        assert np.array_equal(q8, wq) and got_e == we
        mm, kk = quantize_multiplier(float(10.0 ** rng.uniform(-6, 3)))
        got_e = train_primitives.t_rescale(ctypes.c_int32(size),
                                           acc.ctypes.data_as(ctypes.c_void_p),
                                           ctypes.c_int32(e), ctypes.c_int32(1),
                                           ctypes.c_int32(mm), ctypes.c_int32(kk),
                                           q8.ctypes.data_as(ctypes.c_void_p))
        wq, we = tn.rescale(acc, e, mm, kk)
        assert np.array_equal(q8, wq) and got_e == we


# -- whole training steps ------------------------------------------------------------------------
STEP_SPECS = {
    "sgd-fp32": "all,opt=sgd,lr=0.01",
    "sgd-int8": "all,opt=sgd,lr=0.01,backward=int8",
    "momentum-fp32": "bias:all+weight:last2,opt=sgd,lr=0.01,momentum=0.9",
    "momentum-int8": "bias:all+weight:last2,opt=sgd,lr=0.01,momentum=0.9,backward=int8",
    "adam-fp32": "all,opt=adam,lr=0.001",
    "master-fp32": "all,opt=sgd,lr=0.01,master_weights=fp32",
    "master-int8": "all,opt=sgd,lr=0.01,momentum=0.9,master_weights=int32,backward=int8",
    "channels-int8": "weight:all@0.25+bias:last2,opt=sgd,lr=0.02,backward=int8",
    "adam-accumulate-step": {"trainable": [{"layers": "all", "params": "both",
                                            "channels": 0.5}],
                             "optimizer": {"name": "adam", "lr": 0.002},
                             "schedule": {"name": "step", "step_size": 2, "gamma": 0.7},
                             "accumulate": 3, "master_weights": "fp32"},
    "momentum-warmup-mse": {"trainable": [{"layers": "last 3", "params": "both"}],
                            "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.8},
                            "schedule": {"name": "warmup", "warmup_steps": 5},
                            "loss": "mse", "accumulate": 2},
    "momentum-cosine-warmup": {"trainable": [{"layers": "last 2", "params": "both"}],
                               "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
                               "schedule": {"name": "cosine", "total_steps": 30,
                                            "warmup_steps": 5, "min_lr": 0.002}},
    "adam-cosine-accumulate": {"trainable": [{"layers": "all", "params": "both"}],
                               "optimizer": {"name": "adam", "lr": 0.002},
                               "schedule": {"name": "cosine", "total_steps": 12},
                               "accumulate": 2},
    "mse-int8": {"trainable": [{"layers": "last 2", "params": "both"}], "loss": "mse",
                 "optimizer": {"name": "sgd", "lr": 0.05}, "backward": "int8"},
}


@pytest.fixture(scope="module")
def digits():
    return digits_setup()


@pytest.mark.parametrize("name", sorted(STEP_SPECS))
def test_training_steps_match_golden(ref_lib: RefKernels, digits, name: str) -> None:
    q, xs, ys = digits
    report = run_training(ref_lib, q, STEP_SPECS[name], xs, ys, N_STEPS)
    assert report["steps"] == N_STEPS
    assert report["mismatches"] == 0, (f"{name}: {report['mismatches']} of "
                                       f"{report['compared']} tensors differ; first: "
                                       f"{report['first']}")
    losses = np.array(report["losses"], np.float32)
    assert losses[:, 0].tobytes() == losses[:, 1].tobytes()
    assert np.all(np.isfinite(losses)) and len(set(losses[:, 0].tolist())) > 1


@pytest.mark.parametrize(("total", "warmup", "min_lr", "accumulate"),
                         [(100, 10, 0.001, 1), (1, 0, 0.0, 1), (7, 3, 0.01, 2), (50, 0, 0.0, 3),
                          (2**31 - 1, 2**31 - 2, 0.001, 1)])
def test_cosine_schedule_sequence_matches_golden(ref_lib: RefKernels, total: int, warmup: int,
                                                 min_lr: float, accumulate: int) -> None:
    """pe_step_counter_f32 through a whole cosine schedule (warmup, decay, after the end),
    step by step from the builder's initial lr_t: the same bytes as the golden kernel, and the
    lr after u updates is train_optim.cosine_lr(u)."""
    lr = 0.05
    attrs = {"accumulate": accumulate, "schedule": "cosine", "lr": lr, "warmup_steps": warmup,
             "total_steps": total, "min_lr": min_lr}
    lr_t = to.cosine_lr(0, lr, total, warmup, min_lr)
    steps = list(range((min(total, 120) + 3) * accumulate))
    if total > 2**20:                      # the end of the int32 range: step t <= 2^31 - 2
        steps = [*range(3), *range(total - 4, total)]
    for t in steps:
        graph, inputs = step_counter_case(t, lr_t, attrs)
        new = to.step_counter(inputs[0].copy(), inputs[1].copy(), None, **attrs)
        bad, n, diff = check_train_case(ref_lib, graph, inputs)
        assert n == 2 and bad == 0, (t, diff)
        if (t + 1) % accumulate == 0:
            assert new["lr"][0] == to.cosine_lr((t + 1) // accumulate, lr, total, warmup, min_lr)
            lr_t = new["lr"][0]
        else:
            assert "lr" not in new
    assert lr_t == np.float32(min_lr)          # the last step is past total_steps


# -- the interface ---------------------------------------------------------------------------------
def _train_prototypes() -> dict[str, list[tuple[str, str]]]:
    text = (KERNELS_DIR / "pe_train_kernels.h").read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    protos = {}
    for name, params in re.findall(r"void\s+(pe_\w+)\s*\(([^)]*)\)\s*;", text):
        out = []
        for p in params.split(","):
            m = re.match(r"(.*?)(\w+)$", " ".join(p.split()))
            assert m, p
            out.append((m.group(1).replace(" ", ""), m.group(2)))
        protos[name] = out
    return protos


def test_records_match_train_header(digits) -> None:
    protos = _train_prototypes()
    calls = []
    for build in TRAIN_CASES.values():
        for mode in MODES:
            rng = np.random.default_rng(11)
            for _ in range(60):
                case = build(rng, mode)
                if case is not None:
                    calls.append(kernel_call(case[0], case[0].ops[0]))
    q, _, _ = digits
    for spec in STEP_SPECS.values():
        g = training_graph(q, spec)
        calls.extend(kernel_call(g, op) for op in g.ops if op.type in TRAIN_CALL_BUILDERS)
    used = set()
    for call in calls:
        assert call.kernel in protos, f"{call.kernel} is not declared in pe_train_kernels.h"
        got = [(arg.ctype.replace(" ", ""), name) for name, arg in call.args]
        assert got == protos[call.kernel], f"{call.kernel}: record {got} != header"
        assert call.scratch_bytes == 0
        used.add(call.kernel)
    assert used == set(protos), f"never called: {sorted(set(protos) - used)}"


def test_record_contents_for_an_int8_conv_grad_input() -> None:
    """Compile-time numbers only: the golden prescale constants and the top/left padding."""
    rng = np.random.default_rng(12)
    g, _ = TRAIN_CASES["conv2d_grad_input"](rng, "int8")
    op = g.ops[0]
    call = kernel_call(g, op)
    assert call.kernel == "pe_conv2d_grad_input_s8"
    quant = call.arg("quant").value.values
    w = g.tensors["w"]
    o, kh, kw, ci = w.shape
    groups = g.tensors["dx"].shape[3] // ci
    m, k, b, m_ref, k_ref = tc.input_grad_prescale(w.quant.scale, o, kh * kw * (o // groups))
    assert np.array_equal(quant["multiplier"].values, m)
    assert np.array_equal(quant["shift"].values, k)
    assert (quant["prescale_shift"], quant["output_multiplier"], quant["output_shift"]) == \
        (b, m_ref, k_ref)
    pad = call.arg("params").value.values["padding"].values
    assert (pad["h"], pad["w"]) == (op.attrs["padding"][0], op.attrs["padding"][2])
    assert call.tensors() == ("dy", "dy_exp", "w", "dx", "dx_exp")


def test_bad_training_ops_raise_model_error() -> None:
    g, _ = TRAIN_CASES["softmax_grad"](np.random.default_rng(0), "int8")
    t = g.tensors["y"]
    g.tensors["y"] = t.replace(quant=QuantParams(np.float32(0.01), 0))
    with pytest.raises(ModelError, match="1/256"):
        kernel_call(g, g.ops[0])
    g, _ = TRAIN_CASES["mask_grad"](np.random.default_rng(0), "fp32")
    with pytest.raises(ModelError, match="batch 1"):
        kernel_call(g, g.ops[0], batch=2)


# -- other compilers, Cortex-M3, sanitizers ---------------------------------------------------------
def test_clang_builds_training_kernels_and_matches(build_root: Path) -> None:
    if not have("clang"):
        pytest.skip("clang is not installed")
    out = build_root / "clang_train"
    out.mkdir()
    lib = RefKernels(build_library("clang", out, ["-O2", "-Wconversion", "-Wshadow"]))
    for op_type, mode in OP_MODES:
        rng = np.random.default_rng(77)
        for _ in range(40):
            assert check_train_case(lib, *TRAIN_CASES[op_type](rng, mode))[0] == 0, op_type


def test_cortex_m3_soft_float_build(build_root: Path) -> None:
    """The training kernels build for a Cortex-M3 (no FPU: float arithmetic is soft-float
    calls) and reference nothing but the compiler's helpers; the int8-mode files (_s8.c) do
    no float arithmetic at all. (Cortex-M4F, Cortex-M0 and Hexagon v67 builds of every ref
    source, these included, are test_ref_forward.py::test_cross_compiles_without_libc.)"""
    if not have("arm-none-eabi-gcc") or not have("arm-none-eabi-nm"):
        pytest.skip("arm-none-eabi-gcc is not installed")
    out = build_root / "cortex_m3"
    out.mkdir()
    objs = []
    for src in TRAIN_SOURCES:
        obj = out / (src.stem + ".o")
        subprocess.run(["arm-none-eabi-gcc", *STRICT_FLAGS, "-O2", "-Wconversion",
                        "-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft", "-ffreestanding",
                        *INCLUDES, "-c", str(src), "-o", str(obj)], check=True,
                       capture_output=True, text=True)
        objs.append(obj)
    nm = subprocess.run(["arm-none-eabi-nm", "-u", *map(str, objs)], check=True,
                        capture_output=True, text=True).stdout
    undefined = {line.split()[-1] for line in nm.splitlines() if line.strip().startswith("U")}
    defined = set(subprocess.run(["arm-none-eabi-nm", "--defined-only", *map(str, objs)],
                                 check=True, capture_output=True, text=True).stdout.split())
    assert {u for u in undefined - defined if not u.startswith("__aeabi_")} == set()
    for obj in objs:
        if obj.stem.endswith("_s8"):
            syms = subprocess.run(["arm-none-eabi-nm", "-u", str(obj)], check=True,
                                  capture_output=True, text=True).stdout
            floats = re.findall(r"__aeabi_(?:[fd]\w+|\w*2[fd]\b)", syms)
            assert not floats, f"{obj.name} uses float arithmetic: {floats}"
    assert len(objs) == 26


def test_asan_ubsan_subprocess(build_root: Path) -> None:
    """The training cases and three training runs under AddressSanitizer + UBSan."""
    if not have("gcc"):
        pytest.skip("gcc is not installed")
    out = build_root / "gcc_asan_train"
    out.mkdir()
    flags = sanitizer_flags("gcc", "address,undefined", out)
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], check=False,
                             capture_output=True, text=True).stdout.strip()
    if not flags or not os.path.isabs(libasan):
        pytest.skip("gcc cannot build AddressSanitizer shared objects here")
    lib = build_library("gcc", out, ["-O1", *flags])
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "tests.kernels.asan_train_check", str(lib),
                           "60", "8"], check=False, env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "with mismatches" in proc.stdout and " 0 mismatches" in proc.stdout


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("op_type", "alias"), [("mask_grad", ("dy", "dx")),
                                                ("grad_add", ("g1", "g")),
                                                ("grad_add", ("g2", "g")),
                                                ("reshape_grad", ("dy", "dx"))])
def test_in_place_kernels(ref_lib: RefKernels, op_type: str, alias: tuple[str, str],
                          mode: str) -> None:
    """The ops the planner may run in place (codegen.schedule INPLACE_OPS / ALIAS_OPS) give
    the golden result when the output buffer is the input buffer."""
    rng = np.random.default_rng(13)
    for _ in range(200):
        graph, inputs = TRAIN_CASES[op_type](rng, mode)
        op = graph.ops[0]
        golden = build_train_kernel(graph, op).run(list(inputs))
        values = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, v)
                  for n, v in zip(op.inputs, inputs) if n}
        src, dst = alias
        shared = values[src].reshape(graph.tensors[dst].shape)
        values[dst] = shared
        for name in op.outputs:
            if name != dst:
                values[name] = np.zeros(graph.tensors[name].shape, graph.tensors[name].dtype)
        ref_lib.call(kernel_call(graph, op), values)
        for name, want in zip(op.outputs, golden):
            t = graph.tensors[name]
            assert same_bytes(values[name], c_array(t.dtype, t.shape, want)), (op_type, name)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_kernels_bit_exact_on_emulated_targets(build_root: Path, target: str) -> None:
    """The training kernels compiled for a Cortex-M4F (FPv4 hard float), a Cortex-M3 (soft
    float, libgcc) and Hexagon v67 (clang, the project's runtime helpers for division) give the
    golden bytes under QEMU (mps2-an386, mps2-an385, qemu-hexagon): a freestanding image per
    target (no C library) runs cases of every op in both modes and prints a hash of every byte
    each kernel wrote."""
    kind = TARGETS[target][0]
    for tool in TOOLS[kind]:
        if not have(tool):
            pytest.skip(f"{tool} is not installed")
    if kind == "hexagon" and not HEXAGON_BUILTINS.is_file():
        pytest.skip(f"{HEXAGON_BUILTINS} (Hexagon runtime helpers) is missing")
    cases, labels = [], []
    for op_type, mode in OP_MODES:
        rng = np.random.default_rng(99)
        for _ in range(N_TARGET_CASES):
            cases.append(TRAIN_CASES[op_type](rng, mode))
            labels.append(f"{op_type}-{mode}")
    cosine = {"accumulate": 1, "schedule": "cosine", "lr": 0.05, "warmup_steps": 4,
              "total_steps": 30, "min_lr": 0.002}
    for t in range(33):                    # a whole cosine schedule: warmup, decay, past the end
        cases.append(step_counter_case(t, 0.0, cosine))
        labels.append("step_counter-cosine")
    src, want = render_cases(cases)
    got = build_and_run(src, build_root / f"qemu_{target}", target, TRAIN_SOURCES)
    assert len(got) == len(want), f"{target}: {len(got)} of {len(want)} cases reported"
    bad = sorted({labels[i] for i, (g, w) in enumerate(zip(got, want)) if g != w})
    assert not bad, f"{target}: results differ from the golden model in {bad}"
