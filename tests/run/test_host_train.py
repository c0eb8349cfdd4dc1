"""Host C training equals the golden training step, bit for bit: per-step losses (float32 bits)
and params_sha256 after >= 100 steps on the digits CNN, both backward modes, SGD / momentum /
Adam; the same under ASan + UBSan; exported parameters round-trip through pe_params_import."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.data import fit_input
from codegen.golden.training import TrainState, fit, predict
from codegen.models import digits
from codegen.pipeline import build_project, compile_model, run_host_fit, run_host_infer
from codegen.train import build_training_graph
from codegen.train.spec import TrainSpec, load_spec, spec_from_dict
from tests.render.helpers import need

STEPS = 120
SEED = 5

# (spec, sanitize): every optimizer in both modes (Adam is fp32 only); two under ASan+UBSan;
# a cosine schedule (YAML only) whose warmup, decay and floor all fall within the STEPS updates.
CONFIGS = {
    "fp32-sgd": ("all,opt=sgd,lr=0.02,backward=fp32", False),
    "fp32-momentum": ("bias:all+weight:last2,opt=momentum,lr=0.02,momentum=0.9,backward=fp32",
                      True),
    "fp32-adam": ("bias:all+weight:last2@0.5,opt=adam,lr=0.002,backward=fp32", False),
    "int8-sgd": ("all,opt=sgd,lr=0.02,backward=int8", False),
    "int8-momentum": ("bias:all+weight:last3,opt=momentum,lr=0.02,momentum=0.9,backward=int8",
                      True),
    "fp32-cosine": (spec_from_dict({
        "trainable": [{"layers": "all", "params": "bias"},
                      {"layers": "last 2", "params": "weight"}],
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
        "schedule": {"name": "cosine", "total_steps": 100, "warmup_steps": 10,
                     "min_lr": 0.001},
        "backward": "fp32"}, "cosine.yaml"), False),
}


@pytest.fixture(scope="module")
def digits_data(request):
    from tests.render.helpers import digits_int8

    graph = digits_int8()
    x, y = digits("train")
    return graph, fit_input(graph, x[:STEPS], "x"), y[:STEPS].astype(np.int64)


def _golden(graph, spec, x, y):
    tg = build_training_graph(graph, spec if isinstance(spec, TrainSpec) else load_spec(spec))
    state = TrainState.from_graph(tg)
    res = fit(tg, state, x, y, epochs=1, shuffle=True, seed=SEED)
    return tg, state, res


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_host_training_bit_exact(tmp_path, digits_data, config):
    need("make")
    spec, sanitize = CONFIGS[config]
    graph, x, y = digits_data
    tg, state, gold = _golden(graph, spec, x, y)
    proj = compile_model(graph, spec=spec, out_dir=tmp_path / "proj")
    assert proj.has_training
    build = build_project(proj, sanitize=sanitize)
    host = run_host_fit(build, x, y, order=SEED, epochs=1)
    assert host["steps"] == len(gold["loss"]) == STEPS
    gold_bits = np.asarray(gold["loss"], dtype=np.float32).view(np.uint32)
    bad = np.flatnonzero(host["loss_bits"] != gold_bits)
    assert bad.size == 0, (f"{config}: {bad.size} of {STEPS} losses differ, first at step "
                           f"{bad[0]}: host {host['loss'][bad[0]]!r} golden "
                           f"{gold['loss'][bad[0]]!r}")
    assert host["params_sha256"] == gold["params_sha256"] == state.params_sha256()
    assert host["saturated_per_step"] == gold["saturated_per_step"]
    assert host["saturated_updates"] == gold["saturated_updates"]
    assert len(host["params"]) == proj.manifest["training"]["export_bytes"]
    if not sanitize:
        # the exported parameters load back (pe_params_import) and infer as the golden model
        xe = fit_input(graph, digits("test")[0][:30], "x")
        y_host = run_host_infer(build, xe, params=host["params"])
        assert np.array_equal(y_host, predict(tg, state, xe))
        # pe_infer of a training project starts from the initial parameters (pe_init)
        fresh = predict(tg, TrainState.from_graph(tg), xe)
        assert np.array_equal(run_host_infer(build, xe), fresh)


# Shared models under ASan + UBSan: a few steps of the code-generation benchmark's trainable
# set (tests/benchmark_codegen.py; MSE for the autoencoder), backward modes alternating so that
# both kernel families run on real layer shapes.
SANITIZED_STEPS = 3
SANITIZED_SPECS = {
    "ad01_int8.tflite": "bias:all+weight:last2,opt=sgd,lr=0.001,loss=mse,backward=fp32",
    "kws_ref_model.tflite": "bias:all+weight:last2,opt=sgd,lr=0.001,backward=int8",
    "kws_ref_model_float32.tflite": "bias:all+weight:last2,opt=sgd,lr=0.001,backward=fp32",
    "pretrainedResnet_quant.tflite": "bias:all+weight:last2,opt=sgd,lr=0.001,backward=int8",
    "vww_96_int8.tflite": "bias:all+weight:last2,opt=sgd,lr=0.001,backward=fp32",
}


@pytest.mark.parametrize("name", sorted(SANITIZED_SPECS))
def test_shared_model_training_sanitized(tmp_path, name):
    """The training project of every shared model builds and runs under ASan + UBSan and
    equals the golden model: losses (float32 bits), params_sha256, saturation per step, and
    inference with the exported parameters."""
    from tests.render.helpers import SHARED_MODELS, random_int8, shared_graph

    assert set(SANITIZED_SPECS) == set(SHARED_MODELS)
    need("make")
    graph = shared_graph(name)
    spec = load_spec(SANITIZED_SPECS[name])
    x = random_int8(graph, SANITIZED_STEPS, seed=21)
    if spec.loss == "mse":
        targets = x.reshape(len(x), -1)
    else:
        classes = graph.tensors[graph.outputs[0]].shape[-1]
        targets = np.random.default_rng(22).integers(0, classes, SANITIZED_STEPS)
    tg = build_training_graph(graph, spec)
    state = TrainState.from_graph(tg)
    gold = fit(tg, state, x, targets, epochs=1, shuffle=False)
    build = build_project(compile_model(graph, spec=spec, out_dir=tmp_path / "p"),
                          sanitize=True)
    host = run_host_fit(build, x, targets, order=None, epochs=1)
    assert np.array_equal(host["loss_bits"],
                          np.asarray(gold["loss"], np.float32).view(np.uint32)), name
    assert host["params_sha256"] == gold["params_sha256"]
    assert host["saturated_per_step"] == gold["saturated_per_step"]
    xe = random_int8(graph, 2, seed=23)
    assert np.array_equal(run_host_infer(build, xe, params=host["params"]),
                          predict(tg, state, xe))


def test_host_training_mse(tmp_path):
    """pe_train_step_target (MSE) on the anomaly-detection autoencoder."""
    from codegen.frontend import load_model
    from tests.render.helpers import model_path, random_int8

    graph = load_model(model_path("ad01_int8.tflite"))
    spec = "bias:last2,loss=mse,opt=sgd,lr=0.001,backward=fp32"
    x = random_int8(graph, 40, seed=9)
    targets = x.reshape(len(x), -1)
    tg = build_training_graph(graph, load_spec(spec))
    state = TrainState.from_graph(tg)
    gold = fit(tg, state, x, targets, epochs=3, shuffle=False)
    build = build_project(compile_model(graph, spec=spec, out_dir=tmp_path / "ad"))
    host = run_host_fit(build, x, targets, order=None, epochs=3)
    assert np.array_equal(host["loss_bits"], np.asarray(gold["loss"], np.float32).view(np.uint32))
    assert host["params_sha256"] == gold["params_sha256"]
    assert host["epoch_loss"] == gold["epoch_loss"]
    assert host["saturated_per_step"] == gold["saturated_per_step"]


def test_fit_engine_host_matches_golden(tmp_path):
    """fit_model(engine="host") gives the JSON fields of the golden engine, bit for bit."""
    from codegen.fit import fit_model
    from codegen.models import path

    x, y = digits("train")
    xe, ye = digits("test")
    train = {"x": x[:60], "y": y[:60]}
    evals = {"x": xe[:40], "y": ye[:40]}
    spec = "bias:all+weight:last1,opt=momentum,lr=0.05,backward=fp32"
    kw = {"epochs": 2, "calib": x[:100], "seed": 1}
    gold = fit_model(path("digits_cnn.onnx"), spec, train, evals, engine="golden", **kw)
    seen = []
    host = fit_model(path("digits_cnn.onnx"), spec, train, evals, engine="host",
                     progress=lambda e, k, loss: seen.append((e, k)), **kw)
    for key in ("loss", "epoch_loss", "params_sha256", "accuracy_before", "accuracy_after",
                "steps", "saturated_updates", "saturated_per_step"):
        assert host[key] == gold[key], key
    assert host["engine"] == "host" and len(seen) == host["steps"] == 120
    assert host.state.params_sha256() == gold["params_sha256"]
