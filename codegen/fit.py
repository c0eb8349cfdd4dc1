"""`pockengine fit`: from a model file to a fine-tuned result in one call.

model (float models are quantized first) -> training graph for the spec -> training on an engine
(golden: the NumPy reference; host and boards come with the code generator) -> evaluation before
and after. The result is the `fit --json` contract of DESIGN.md, plus ``saturated_updates`` (parameter updates that
clamped a value during the run) and ``saturated_per_step`` on every engine.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .board import list_boards, load_board
from .data import TensorSpec, data_arrays, fit_input, fit_targets
from .errors import PockError
from .golden.training import TrainState, fit, params_from_bytes, predict
from .ir import Graph
from .model_store import load, quantize
from .pipeline import (
    block_mode,
    build_project,
    compile_model,
    partial_mode,
    resolve_spec,
    run_device,
    run_host_fit,
    run_host_infer,
    stream,
    stream_mode,
)
from .report import save_run_record
from .run.device import DEFAULT_TIMEOUT
from .run.summary import result_json
from .targets import EmulatorUnavailable
from .train import build_training_graph

ENGINES = ("golden", "host")       # and every device board of the catalogue
DEFAULT_CALIB_SAMPLES = 100


def prepare_model(model: str | Path | Graph, calib: np.ndarray | None,
                  train_x: np.ndarray | None) -> Graph:
    """Load a model; quantize a float one with `calib` (or the first DEFAULT_CALIB_SAMPLES
    training samples): the pipeline's load and quantize stages."""
    samples = calib if calib is not None or train_x is None else \
        np.asarray(train_x)[:DEFAULT_CALIB_SAMPLES]
    if isinstance(model, Graph) and model.tensors[model.inputs[0]].dtype != "float32":
        return model                       # int8 already: nothing to load or quantize
    return quantize(load(model), samples).graph


def targets_for(graph: Graph, loss: str, x: np.ndarray, y: Any, what: str) -> np.ndarray:
    """Class labels (cross-entropy) or int8 targets of the output's shape (MSE)."""
    return fit_targets(TensorSpec.of(graph, graph.outputs[0]), loss, x, y, what)


def evaluate(graph: Graph, outputs: np.ndarray, targets: np.ndarray, loss: str) -> dict:
    if loss == "cross_entropy":
        return {"accuracy": float((outputs.reshape(len(outputs), -1).argmax(1) == targets)
                                  .mean()) if len(targets) else None}
    q = graph.tensors[graph.outputs[0]].quant
    diff = (outputs.astype(np.float64) - targets.astype(np.float64)) * q.s
    return {"accuracy": None, "mse": float(np.mean(diff ** 2)) if len(targets) else None}


def tuned_graph(graph: Graph, state: Any) -> Graph:
    """The inference graph with the trained parameter values (for export to .tflite or
    .onnx)."""
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
              progress: Callable[[int, int, float], None] | None = None,
              profile_ops: bool = False, timeout: float | None = None,
              keep_dir: str | Path | None = None, board: str | None = None,
              backend: str = "auto", measure: bool = True,
              check_graph: Callable[[Graph], None] | None = None,
              stream: Any = "auto", blocks: Any = "auto", partial: Any = "auto"
              ) -> dict[str, Any]:
    """Fine-tune `model` on `train` with the training `spec` on `engine`; evaluate on `evals`.

    Samples are visited one per step, in a fresh `numpy.random.default_rng(seed)` permutation
    per epoch (or in file order without `shuffle`) — the same order on every engine.

    `engine`: ``golden`` (NumPy), ``host`` (the generated C, built for the host) or a board of
    the catalogue: the firmware is compiled with the data embedded, built with the board's
    toolchain and run on its emulator (its default backward mode applies when the spec does
    not choose one); the result then also has ``instructions`` per phase (per step, totals;
    ``profile_ops``: per kernel call), ``memory`` (flash, SRAM, budget) and the measured
    stack. ``keep_dir``: build the firmware there instead of a temporary directory.
    ``board``: apply this board's defaults (its backward mode when the spec does not choose
    one) on any engine, e.g. to reproduce a board's run on the golden model.
    ``backend``: the kernel backend chain of the generated C (host and boards; ``auto``: the
    board's default). Every chain computes the same bits; the golden engine ignores it.
    ``check_graph``: called with the (quantized) model before any training, e.g. to refuse
    early a model the requested export format cannot hold.
    ``stream``: the stream stage (``pipeline.plan_project``: auto | on | off) of the generated
    C; the golden engine runs every chain the pass fuses as one stream_chain op unless it is
    ``off``. Streaming never changes a result: the same losses and parameters either way.
    ``blocks``: the blocked-update stage of the generated C (auto | off; the golden engine
    runs every update whole): the same bits either way too. ``partial``: the partial-weight
    stage of the generated C (auto | on | off; docs/memory.md): the same bits either way.
    """
    target = _engine_board(engine)
    if board is not None:
        defaults = load_board(board)
        if target is not None and defaults.name != target.name:
            raise PockError(f"--board {defaults.name} and --engine {target.name} disagree")
    else:
        defaults = target
    if epochs < 0:
        raise PockError(f"epochs must be >= 0, got {epochs}")
    t0 = time.perf_counter()
    spec = resolve_spec(spec, defaults)          # the board's backward mode, if the spec has none
    x_tr, y_tr = data_arrays(train, "training data")
    graph = prepare_model(model, calib, x_tr)
    if check_graph is not None:
        check_graph(graph)
    x_tr = fit_input(graph, x_tr, "training data x")
    t_tr = targets_for(graph, spec.loss, x_tr, y_tr, "training data")
    ev = None
    if evals is not None:
        x_ev, y_ev = data_arrays(evals, "evaluation data")
        x_ev = fit_input(graph, x_ev, "evaluation data x")
        ev = (x_ev, targets_for(graph, spec.loss, x_ev, y_ev, "evaluation data"))
    tg = build_training_graph(graph, spec)
    streaming = stream_mode(stream)
    job = FitJob(graph, spec, tg, TrainState.from_graph(tg), x_tr, t_tr, ev, epochs, seed,
                 shuffle, progress, backend, streaming, block_mode(blocks),
                 partial_mode(partial))
    if target is not None:
        run = _run_board(job, target, profile_ops=profile_ops, timeout=timeout,
                         keep_dir=keep_dir, measure=measure, board_arg=engine)
    elif engine == "host":
        run = _run_host(job)
    else:
        run = _run_golden(job)
    res, before, after = run.result, run.before, run.after
    out: dict[str, Any] = {
        "engine": engine,
        "model": graph.name,
        "backward": spec.backward,
        "optimizer": spec.optimizer.name,
        "epochs": epochs,
        "steps": res["steps"],
        "train_samples": len(x_tr),
        "eval_samples": len(ev[0]) if ev is not None else 0,
        "accuracy_before": before.get("accuracy"),
        "accuracy_after": after.get("accuracy"),
        "loss": res["loss"],
        "epoch_loss": res["epoch_loss"],
        "params_sha256": res["params_sha256"],
        "saturated_updates": res["saturated_updates"],
        "saturated_per_step": res["saturated_per_step"],
        "seconds": {"prepare": run.started - t0, "train": run.train_seconds},
        **run.extra,
    }
    if spec.loss == "mse":
        out["mse_before"], out["mse_after"] = before.get("mse"), after.get("mse")
    return FitResult(out, graph, job.state)


class FitResult(dict):
    """The result of ``fit_model``: the ``fit --json`` contract (a dict of JSON values), and,
    as attributes that are not part of it, the quantized ``graph`` and the trained ``state``
    (``tuned_graph(r.graph, r.state)`` is the fine-tuned model)."""

    def __init__(self, summary: Mapping[str, Any], graph: Graph, state: Any):
        super().__init__(summary)
        self.graph = graph
        self.state = state


@dataclass
class FitJob:
    """What every engine is given: the model, its training graph and the state it trains,
    the fitted data (``evals``: (x, targets) or None) and the run's settings."""

    graph: Graph
    spec: Any
    tg: Graph
    state: Any
    x: np.ndarray
    targets: np.ndarray
    evals: tuple[np.ndarray, np.ndarray] | None
    epochs: int
    seed: int
    shuffle: bool
    progress: Callable[[int, int, float], None] | None
    backend: str = "auto"
    stream: str = "auto"              # the stream stage (pipeline.plan_project)
    blocks: str = "auto"              # the blocked-update stage (pipeline.plan_project)
    partial: str = "auto"             # the partial-weight stage (pipeline.plan_project)

    def evaluate(self, outputs: np.ndarray) -> dict:
        assert self.evals is not None
        return evaluate(self.graph, outputs, self.evals[1], self.spec.loss)

    def report_step(self, k: int, loss: float) -> None:
        """``progress`` for step ``k`` (its epoch from the number of samples)."""
        if self.progress is not None:
            n = len(self.x)
            self.progress(k // n if n else 0, k, loss)

    def report_losses(self, losses: Sequence[float], start: int = 0) -> None:
        """``progress`` for the steps from ``start`` on (engines that report at the end)."""
        for k in range(start, len(losses)):
            self.report_step(k, losses[k])

    def load_params(self, blob: bytes) -> None:
        """The trained parameters an engine exported (in order, little-endian) into state."""
        self.state.load(params_from_bytes(self.tg, blob))


@dataclass
class EngineRun:
    """What an engine gives back: the training result (loss, steps, epoch_loss,
    params_sha256, saturated_*), the evaluations before and after, when training started and
    how long it took, and engine facts for the JSON (instructions, memory...)."""

    result: dict[str, Any]
    before: dict
    after: dict
    started: float
    train_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


def _run_golden(job: FitJob) -> EngineRun:
    """fit on the NumPy golden model (every chain the stream pass fuses streamed, unless the
    job's stream mode is off: the same bits either way)."""
    tg = stream(job.tg, job.stream != "off")
    before = job.evaluate(predict(tg, job.state, job.evals[0])) if job.evals else {}
    t1 = time.perf_counter()
    res = fit(tg, job.state, job.x, job.targets, epochs=job.epochs, shuffle=job.shuffle,
              seed=job.seed, callback=job.progress)
    t2 = time.perf_counter()
    after = job.evaluate(predict(tg, job.state, job.evals[0])) if job.evals else {}
    return EngineRun(res, before, after, t1, t2 - t1)


def _run_host(job: FitJob) -> EngineRun:
    """fit on the generated C, built for the host in a temporary directory; the trained
    parameters come back into the job's state (for export)."""
    with tempfile.TemporaryDirectory(prefix="pockengine-fit-") as tmp:
        build = build_project(compile_model(job.graph, spec=job.spec,
                                            out_dir=Path(tmp) / "host", backend=job.backend,
                                            stream=job.stream, blocks=job.blocks,
                                            partial=job.partial))
        before = job.evaluate(run_host_infer(build, job.evals[0])) if job.evals else {}
        t1 = time.perf_counter()
        res = run_host_fit(build, job.x, job.targets, order=job.seed if job.shuffle else None,
                           epochs=job.epochs)
        t2 = time.perf_counter()
        after = job.evaluate(run_host_infer(build, job.evals[0], params=res["params"])) \
            if job.evals else {}
    job.report_losses(res["loss"])
    job.load_params(res["params"])
    return EngineRun(res, before, after, t1, t2 - t1)


def _engine_board(engine: str) -> Any:
    """None for golden/host, else the device board ``engine`` names (PockError otherwise)."""
    if engine in ENGINES:
        return None
    try:
        board = load_board(engine)
    except PockError:
        names = [b.name for b in list_boards() if b.arch != "host"]
        raise PockError(f"engine {engine!r} is not available (choose from "
                        f"{', '.join(ENGINES + tuple(names))})") from None
    return None if board.arch == "host" else board


def _run_board(job: FitJob, board: Any, *, profile_ops: bool, timeout: float | None,
               keep_dir: str | Path | None, measure: bool = True,
               board_arg: str | None = None) -> EngineRun:
    """fit on a board's emulator: compile with the data embedded, build, run, read back.
    ``board_arg``: the board as given (a name, or the path of a board file of one's own)."""
    with tempfile.TemporaryDirectory(prefix="pockengine-fit-") as tmp:
        out = Path(keep_dir) if keep_dir is not None else Path(tmp) / board.name
        proj = compile_model(job.graph, board=board_arg or board.name, spec=job.spec,
                             out_dir=out, data=(job.x, job.targets), evals=job.evals,
                             epochs=job.epochs, seed=job.seed, shuffle=job.shuffle,
                             force=keep_dir is not None, backend=job.backend, measure=measure,
                             stream=job.stream, blocks=job.blocks,
                             partial=job.partial)
        fw = build_project(proj, profile_ops=profile_ops)
        t1 = time.perf_counter()
        live = [0]                  # steps already handed to ``progress`` while running

        def on_line(line: str) -> None:
            """``progress`` as the firmware reports each step's loss (in order)."""
            f = line.split()
            if len(f) < 3 or f[0] != "@pe:loss":
                return
            try:
                k, bits = int(f[1]), int(f[2], 16)
            except ValueError:
                return
            if k == live[0]:
                job.report_step(k, float(np.array([bits], np.uint32).view(np.float32)[0]))
                live[0] += 1

        try:
            dev = run_device(proj, build=fw, timeout=timeout or DEFAULT_TIMEOUT,
                             profile_ops=profile_ops,
                             on_line=on_line if job.progress is not None else None)
        except EmulatorUnavailable as e:
            if keep_dir is not None:
                raise
            raise EmulatorUnavailable(f"{str(e).split('; scripts written')[0]} (fit --keep DIR "
                                      "keeps the firmware and its emulator scripts)") from None
        t2 = time.perf_counter()
        summary = result_json(proj, dev)
        if keep_dir is not None:            # the kept project: pockengine report shows the run
            save_run_record(proj, summary | {"memory": fw.to_json()})
    losses = dev.loss
    job.report_losses(losses, live[0])
    if dev.params is not None:
        job.load_params(dev.params)
    epochs = job.epochs
    per = len(losses) // epochs if epochs else 0
    res = {"loss": losses, "steps": len(losses),
           "epoch_loss": [float(np.mean(losses[e * per:(e + 1) * per])) if per else
                          float("nan") for e in range(epochs)],
           "params_sha256": dev.params_sha256 or hashlib.sha256(b"").hexdigest(),
           **dev.saturation()}
    before = {"accuracy": summary["accuracy_before"], "mse": summary.get("mse_before")}
    after = {"accuracy": summary["accuracy_after"], "mse": summary.get("mse_after")}
    extra = {"board": board.name, "instructions": summary["instructions"],
             "memory": {k: fw.to_json()[k] for k in ("flash_bytes", "sram_bytes",
                                                     "stack_bytes", "budget", "fits")}
             | {"stack_used_bytes": dev.stack_used},
             "firmware": str(fw.elf) if keep_dir is not None else None}
    return EngineRun(res, before, after, t1, t2 - t1, extra)
