"""Importing parameters makes the master weights follow them (``<p>_params_import``,
SET_PARAMS, ``golden.training.import_params``): training after an import starts from the
imported values exactly as a build compiled with those parameters would (same trained
channels), on the golden model and in the generated C, bit for bit; momentum, step and
saturation counters are kept."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import codegen.train.build as train_build
from codegen.data import fit_input
from codegen.fit import tuned_graph
from codegen.golden.train_optim import MASTER_FRAC_BITS, master_init
from codegen.golden.training import (
    TrainState,
    fit,
    import_params,
    master_copies,
    params_from_bytes,
)
from codegen.ir.ops import UPDATE_INPUTS
from codegen.models import digits
from codegen.pipeline import build_project, compile_model, run_host_fit
from codegen.train import build_training_graph, load_spec
from codegen.train.spec import resolve
from tests.render.helpers import digits_int8, need

FP32 = "bias:all+weight:last2,opt=sgd,lr=0.002,momentum=0.9,master_weights=fp32"
# a channel subset on four layers, the depthwise one (channel axis 3) among them
FP32_CHANNELS = "bias:all+weight:last4@0.5,opt=sgd,lr=0.002,momentum=0.9,master_weights=fp32"
INT8 = ("bias:all+weight:last3@0.5,opt=sgd,lr=0.02,momentum=0.9,backward=int8,"
        "master_weights=int32")
# spec, the lr of the run that makes the imported parameters P, sanitize (ASan + UBSan)
CONFIGS = {
    "fp32-master": (FP32, "0.05", False),
    "fp32-master-channels": (FP32_CHANNELS, "0.05", True),
    "int8-master": (INT8, "0.1", True),
}
STEPS = 12


@pytest.fixture(scope="module")
def data():
    graph = digits_int8()
    x, y = digits("train")
    return graph, fit_input(graph, x[:2 * STEPS], "x"), y[:2 * STEPS].astype(np.int64)


def _with_lr(spec: str, lr: str) -> str:
    return ",".join(f"lr={lr}" if part.startswith("lr=") else part for part in spec.split(","))


def _imported(graph, spec: str, pre_lr: str, x, y):
    """P: the parameters after training the same trainable set with a larger lr on other
    samples (they differ from the compiled ones), and the state of that run."""
    pre = build_training_graph(graph, load_spec(_with_lr(spec, pre_lr)))
    state = TrainState.from_graph(pre)
    fit(pre, state, x[STEPS:], y[STEPS:])
    return state.params_bytes(), state


def _as_compiled(graph, spec: str, state: TrainState, monkeypatch):
    """The training graph of the model compiled with the parameters of ``state``, training the
    channels the original build trains (the selection by L1 norm could pick others from the
    new weights; an import never changes the compiled channels)."""
    layers = resolve(load_spec(spec), graph)
    with monkeypatch.context() as m:
        m.setattr(train_build, "resolve", lambda s, g: layers)
        return build_training_graph(tuned_graph(graph, state), load_spec(spec))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_training_after_an_import_starts_from_it(tmp_path, data, config, monkeypatch):
    need("make")
    spec, pre_lr, sanitize = CONFIGS[config]
    graph, x, y = data
    xs, ys = x[:STEPS], y[:STEPS]
    tg = build_training_graph(graph, load_spec(spec))
    assert master_copies(tg)
    params, pre_state = _imported(graph, spec, pre_lr, x, y)
    assert params != TrainState.from_graph(tg).params_bytes()

    # golden: init, import, train
    state = TrainState.from_graph(tg)
    import_params(tg, state, params)
    assert state.params_bytes() == params
    gold = fit(tg, state, xs, ys)

    # as if compiled with these parameters
    tg2 = _as_compiled(graph, spec, pre_state, monkeypatch)
    as_built = fit(tg2, TrainState.from_graph(tg2), xs, ys)
    assert gold["params_sha256"] == as_built["params_sha256"]
    assert gold["loss"] == as_built["loss"]

    # the import matters: training without it, or with the parameters but stale masters
    # (what <p>_params_import did before), ends elsewhere
    plain = fit(tg, TrainState.from_graph(tg), xs, ys)
    stale = TrainState.from_graph(tg)
    stale.load(params_from_bytes(tg, params))
    stale_res = fit(tg, stale, xs, ys)
    assert gold["params_sha256"] != plain["params_sha256"]
    assert gold["params_sha256"] != stale_res["params_sha256"]

    # the generated C: pe_init, pe_params_import, pe_train_step
    proj = compile_model(graph, spec=spec, out_dir=tmp_path / "p", measure=False)
    built = build_project(proj, sanitize=sanitize)
    host = run_host_fit(built, xs, ys, order=None, params=params)
    assert host["params_sha256"] == gold["params_sha256"]
    assert np.array_equal(host["loss_bits"], np.asarray(gold["loss"], np.float32).view(np.uint32))
    assert host["saturated_per_step"] == gold["saturated_per_step"]
    assert run_host_fit(built, xs, ys, order=None)["params_sha256"] == plain["params_sha256"]
    if not sanitize:       # the harness's own form: no saturation file ("-"), then PARAMS_IN
        t = tmp_path
        xs.tofile(t / "x.bin")
        ys.astype("<i4").tofile(t / "y.bin")
        np.arange(STEPS, dtype="<i4").tofile(t / "order.bin")
        (t / "in.bin").write_bytes(params)
        subprocess.run([str(built.binary), "fit", str(t / "x.bin"), str(t / "y.bin"),
                        str(t / "order.bin"), str(STEPS), str(t / "losses.bin"),
                        str(t / "out.bin"), "-", str(t / "in.bin")], check=True, cwd=t)
        assert (t / "out.bin").read_bytes() == host["params"]
        assert not (t / "-").exists()


def test_import_keeps_the_optimizer_state(data):
    """Momentum, step counter and saturation counters are kept; masters follow the import;
    only the parameters given (by name) move their masters."""
    spec = CONFIGS["int8-master"][0]
    graph, x, y = data
    tg = build_training_graph(graph, load_spec(spec))
    state = TrainState.from_graph(tg)
    fit(tg, state, x[:4], y[:4])
    params, _ = _imported(graph, spec, "0.1", x, y)
    masters = {m.master for m in master_copies(tg)}
    kept = {n: state[n].copy() for n in state.values
            if n not in masters and n not in state.parameters}
    assert any(np.any(v) for v in kept.values())          # momentum has moved
    import_params(tg, state, params)
    for n, v in kept.items():
        assert np.array_equal(state[n], v), n
    for op in tg.ops:
        if op.type != "sgd_update":
            continue
        slot = dict(zip(UPDATE_INPUTS, op.inputs))
        param = tg.tensors[slot["param"]]
        want = master_init(state[param.name], "int32", op.attrs["kind"], op.attrs["channels"],
                           op.attrs["channel_axis"])
        assert np.array_equal(state[slot["master"]], want)
        if param.dtype == "int32":
            assert not want.any()                        # a bias's remainder starts at 0
    # by name: the other parameters and their masters stay as they are
    first, *_ = state.parameters
    other = {m.master: state[m.master].copy() for m in master_copies(tg) if m.param != first}
    new = state[first].copy()
    new.reshape(-1)[0] = 7
    import_params(tg, state, {first: new})
    assert all(np.array_equal(state[n], v) for n, v in other.items())


@pytest.mark.parametrize("short", [
    "bias:all+weight:last4@0.5,opt=momentum,master_weights=fp32",
    "bias:last2+weight:last4@0.5,backward=int8,master_weights=int32,opt=momentum",
])
def test_builder_initialises_masters_with_the_one_formula(short):
    tg = build_training_graph(digits_int8(), load_spec(short))
    copies = master_copies(tg)
    assert {c.kind for c in copies} == {"weight", "bias"}
    assert any(c.channels is not None for c in copies)
    for c in copies:
        want = master_init(tg.tensors[c.param].data, c.dtype, c.kind, c.channels, c.axis)
        got = tg.tensors[c.master].data
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_master_init_rules():
    w = np.arange(-6, 6, dtype=np.int8).reshape(3, 2, 2)       # channel axis 1
    f = master_init(w, "float32", "weight", (1,), 1)
    assert f.dtype == np.float32 and np.array_equal(f, w[:, 1:2, :].astype(np.float32))
    i = master_init(w, "int32", "weight", None, 0)
    assert i.dtype == np.int32 and np.array_equal(i, w.astype(np.int64) * 2 ** MASTER_FRAC_BITS)
    b = np.array([-35148, 3, 2**31 - 1], np.int32)
    assert np.array_equal(master_init(b, "float32", "bias", None, 0), b.astype(np.float32))
    z = master_init(b, "int32", "bias", (0, 2), 0)
    assert z.dtype == np.int32 and z.shape == (2,) and not z.any()


def test_a_blob_of_the_wrong_size_is_refused():
    from codegen.errors import PockError

    tg = build_training_graph(digits_int8(), load_spec(CONFIGS["fp32-master"][0]))
    state = TrainState.from_graph(tg)
    with pytest.raises(PockError, match="bytes"):
        import_params(tg, state, state.params_bytes()[:-1])
