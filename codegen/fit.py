"""`pockengine fit`: from a model file to a fine-tuned result in one call.

model (float models are quantized first) -> training graph for the spec -> training on an engine
(golden: the NumPy reference; host and boards come with the code generator) -> evaluation before
and after. The result is the `fit --json` contract of DESIGN.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PockError
from .ir import Graph

ENGINES = ("golden", "host")
DEFAULT_CALIB_SAMPLES = 100


def prepare_model(model: str | Path | Graph, calib: np.ndarray | None,
                  train_x: np.ndarray | None) -> Graph:
    """Load a model; quantize a float one with `calib` (or the first training samples)."""
    from .data import fit_input
    from .frontend import load_model

    graph = model if isinstance(model, Graph) else load_model(model)
    if graph.tensors[graph.inputs[0]].dtype == "float32":
        from .quant import quantize

        samples = calib if calib is not None else train_x
        if samples is None:
            raise PockError("a float model needs calibration data (--calib) to be quantized")
        samples = fit_input(graph, samples, "calibration data")[:DEFAULT_CALIB_SAMPLES
                                                                 if calib is None else None]
        graph = quantize(graph, samples)
    return graph


def _split(data: Mapping[str, np.ndarray] | str | Path, what: str) -> tuple[np.ndarray, Any]:
    if isinstance(data, (str, Path)):
        from .data import load_npz

        return load_npz(data)
    if "x" not in data:
        raise PockError(f"{what}: no array 'x'")
    return np.asarray(data["x"]), None if data.get("y") is None else np.asarray(data["y"])


def _targets(graph: Graph, loss: str, x: np.ndarray, y: Any, what: str) -> np.ndarray:
    """Class labels (cross-entropy) or int8 targets of the output's shape (MSE)."""
    out = graph.tensors[graph.outputs[0]]
    if loss == "cross_entropy":
        if y is None:
            raise PockError(f"{what}: no labels 'y' for the cross_entropy loss")
        y = np.asarray(y)
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
            raise PockError(f"{what}: labels 'y' must be integers of shape [N], got "
                            f"{y.dtype} {list(y.shape)}")
        n_classes = out.shape[-1]
        if len(y) and (y.min() < 0 or y.max() >= n_classes):
            raise PockError(f"{what}: labels range {int(y.min())}..{int(y.max())}, the model "
                            f"has {n_classes} classes")
        return y.astype(np.int64)
    # MSE: explicit targets, or reconstruct the input (autoencoders such as ad01)
    tgt = x if y is None else np.asarray(y)
    if tgt.ndim < 1 or tgt[:1].size != out.size:
        raise PockError(f"{what}: loss mse needs targets shaped like the model output "
                        f"{list(out.shape[1:])} per sample, got {list(tgt.shape)}")
    if tgt.dtype != np.int8:
        q = out.quant
        v = tgt.astype(np.float64).reshape(len(tgt), *out.shape[1:]) / q.s
        tgt = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + q.zp, -128, 127).astype(np.int8)
    if tuple(tgt.shape[1:]) != tuple(out.shape[1:]):
        raise PockError(f"{what}: targets have shape {list(tgt.shape)}, model output "
                        f"{out.name!r} is {list(out.shape)}")
    return tgt


def evaluate(graph: Graph, outputs: np.ndarray, targets: np.ndarray, loss: str) -> dict:
    if loss == "cross_entropy":
        return {"accuracy": float((outputs.reshape(len(outputs), -1).argmax(1) == targets)
                                  .mean()) if len(targets) else None}
    q = graph.tensors[graph.outputs[0]].quant
    diff = (outputs.astype(np.float64) - targets.astype(np.float64)) * q.s
    return {"accuracy": None, "mse": float(np.mean(diff ** 2)) if len(targets) else None}


def tuned_graph(graph: Graph, state: Any) -> Graph:
    """The inference graph with the trained parameter values (for export to .tflite)."""
    g = graph.copy()
    for name in state.parameters:
        if name in g.tensors:
            g.tensors[name] = g.tensors[name].replace(data=state[name])
    return g


def fit_model(model: str | Path | Graph, spec: Any,
              train: Mapping[str, np.ndarray] | str | Path,
              evals: Mapping[str, np.ndarray] | str | Path | None = None, *,
              epochs: int = 1, engine: str = "golden", calib: np.ndarray | None = None,
              seed: int = 0, shuffle: bool = True,
              progress: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Fine-tune `model` on `train` with the training `spec` on `engine`; evaluate on `evals`.

    Samples are visited one per step, in a fresh `numpy.random.default_rng(seed)` permutation
    per epoch (or in file order without `shuffle`) — the same order on every engine.
    """
    from .data import fit_input
    from .golden.training import TrainState, fit, predict
    from .train import build_training_graph
    from .train.spec import TrainSpec, load_spec

    if engine not in ENGINES:
        raise PockError(f"engine {engine!r} is not available (choose from {', '.join(ENGINES)})")
    if epochs < 0:
        raise PockError(f"epochs must be >= 0, got {epochs}")
    t0 = time.perf_counter()
    spec = spec if isinstance(spec, TrainSpec) else load_spec(spec)
    x_tr, y_tr = _split(train, "training data")
    graph = prepare_model(model, calib, x_tr)
    x_tr = fit_input(graph, x_tr, "training data x")
    t_tr = _targets(graph, spec.loss, x_tr, y_tr, "training data")
    if evals is not None:
        x_ev, y_ev = _split(evals, "evaluation data")
        x_ev = fit_input(graph, x_ev, "evaluation data x")
        t_ev = _targets(graph, spec.loss, x_ev, y_ev, "evaluation data")
    tg = build_training_graph(graph, spec)
    state = TrainState.from_graph(tg)
    if engine == "host":
        res, before, after, t1, t2 = _fit_host(graph, spec, tg, state, x_tr, t_tr,
                                               (x_ev, t_ev) if evals is not None else None,
                                               epochs, seed, shuffle, progress)
    else:
        before = evaluate(graph, predict(tg, state, x_ev), t_ev, spec.loss) \
            if evals is not None else {}
        t1 = time.perf_counter()
        res = fit(tg, state, x_tr, t_tr, epochs=epochs, shuffle=shuffle, seed=seed,
                  callback=progress)
        t2 = time.perf_counter()
        after = evaluate(graph, predict(tg, state, x_ev), t_ev, spec.loss) \
            if evals is not None else {}
    out: dict[str, Any] = {
        "engine": engine,
        "model": graph.name,
        "backward": spec.backward,
        "optimizer": spec.optimizer.name,
        "epochs": epochs,
        "steps": res["steps"],
        "train_samples": len(x_tr),
        "eval_samples": len(x_ev) if evals is not None else 0,
        "accuracy_before": before.get("accuracy"),
        "accuracy_after": after.get("accuracy"),
        "loss": res["loss"],
        "epoch_loss": res["epoch_loss"],
        "params_sha256": res["params_sha256"],
        "seconds": {"prepare": t1 - t0, "train": t2 - t1},
    }
    if spec.loss == "mse":
        out["mse_before"], out["mse_after"] = before.get("mse"), after.get("mse")
    out["_state"] = state            # for callers that export the tuned model (not JSON)
    out["_graph"] = graph
    return out


def _fit_host(graph: Graph, spec: Any, tg: Graph, state: Any, x_tr: np.ndarray,
              t_tr: np.ndarray, evals: tuple[np.ndarray, np.ndarray] | None, epochs: int,
              seed: int, shuffle: bool, progress: Callable[[int, int, float], None] | None
              ) -> tuple[dict[str, Any], dict, dict, float, float]:
    """fit on the generated C, built for the host in a temporary directory; the trained
    parameters come back into ``state`` (for export)."""
    import tempfile

    from .pipeline import build_project, compile_model, run_host_fit, run_host_infer

    with tempfile.TemporaryDirectory(prefix="pockengine-fit-") as tmp:
        build = build_project(compile_model(graph, spec=spec, out_dir=Path(tmp) / "host"))
        before = evaluate(graph, run_host_infer(build, evals[0]), evals[1], spec.loss) \
            if evals is not None else {}
        t1 = time.perf_counter()
        res = run_host_fit(build, x_tr, t_tr, order=seed if shuffle else None, epochs=epochs)
        t2 = time.perf_counter()
        after = evaluate(graph, run_host_infer(build, evals[0], params=res["params"]),
                         evals[1], spec.loss) if evals is not None else {}
    if progress is not None:
        n = len(x_tr)
        for k, loss in enumerate(res["loss"]):
            progress(k // n if n else 0, k, loss)
    offset = 0
    for name in state.parameters:            # the exported bytes: parameters in order, LE
        t = tg.tensors[name]
        dt = np.dtype(t.dtype).newbyteorder("<")
        state.set(name, np.frombuffer(res["params"], dt, t.size, offset).reshape(t.shape))
        offset += t.nbytes
    return res, before, after, t1, t2
