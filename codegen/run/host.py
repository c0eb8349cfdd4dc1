"""Run a generated project's host harness (``main_host.c``) on NumPy data.

Data crosses as raw binary files in a temporary directory: int8 inputs back to back, labels as
int32 little-endian (or int8 targets), the sample order as int32 little-endian; the harness
writes int8 outputs, per-step losses as float32 bits, the exported parameters and the
saturated-update count (``<p>_saturation_count()``) after every step.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..data import sample_order
from ..errors import PockError
from ..render.output import Project, open_project
from ..toolchain import BuildResult, build_project


class HostRunError(PockError):
    """The host binary failed; ``output`` holds what it printed."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output


def _project(project: Any) -> Project:
    if isinstance(project, BuildResult):
        return project.project
    if isinstance(project, Project):
        return project
    return open_project(project)


def _binary(project: Any, sanitize: bool) -> Path:
    """The built harness (building the project first if needed)."""
    if isinstance(project, BuildResult):
        return project.binary
    proj = _project(project)
    return build_project(proj, sanitize=sanitize).binary


def _run(binary: Path, args: list[str]) -> None:
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    proc = subprocess.run([str(binary), *args], check=False, capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        out = (proc.stderr or proc.stdout).strip()
        first = out.splitlines()[0] if out else f"exit status {proc.returncode}"
        raise HostRunError(f"{binary.name} {args[0]} failed: {first}", out)


def _inputs(proj: Project, x: np.ndarray) -> np.ndarray:
    spec = proj.manifest["input"]
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise PockError(f"host input must be int8, got {x.dtype}")
    n_bytes = int(spec["bytes"])
    if x.size % n_bytes:
        raise PockError(f"host input of {x.size} values is not a batch of inputs of "
                        f"{n_bytes} ({spec['shape']})")
    return np.ascontiguousarray(x.reshape(-1, n_bytes))


def run_host_infer(project: Any, x_int8: np.ndarray, *, params: bytes | None = None,
                   sanitize: bool = False) -> np.ndarray:
    """``pe_infer`` on every sample of an int8 batch (axis 0); returns int8 (N, *out_shape).

    ``project``: a Project, its directory or a BuildResult (built first if needed);
    ``params``: exported parameters to import before inferring (``pe_params_import``)."""
    proj = _project(project)
    binary = _binary(project, sanitize)
    x = _inputs(proj, x_int8)
    out_shape = list(proj.manifest["output"]["shape"])[1:]
    with tempfile.TemporaryDirectory(prefix="pe_host_") as tmp:
        t = Path(tmp)
        x.tofile(t / "inputs.bin")
        args = ["infer", str(t / "inputs.bin"), str(len(x)), str(t / "outputs.bin")]
        if params is not None:
            (t / "params.bin").write_bytes(params)
            args.append(str(t / "params.bin"))
        _run(binary, args)
        y = np.fromfile(t / "outputs.bin", dtype=np.int8)
    return y.reshape(len(x), *out_shape)


def _order(order: Any, n: int, epochs: int) -> np.ndarray:
    if order is None:
        return sample_order(n, epochs, shuffle=False)
    if isinstance(order, (int, np.integer)):
        return sample_order(n, epochs, shuffle=True, seed=int(order))
    arr = np.asarray(order, dtype=np.int64)
    if arr.ndim == 2:
        if len(arr) != epochs:
            raise PockError(f"order has {len(arr)} epochs, expected {epochs}")
        return arr.reshape(-1)
    if arr.ndim != 1:
        raise PockError(f"order must be 1-D (one epoch) or 2-D (epochs, steps), got "
                        f"{list(arr.shape)}")
    return np.tile(arr, int(epochs))


def run_host_fit(project: Any, x: np.ndarray, targets: np.ndarray, order: Any = None,
                 epochs: int = 1, *, sanitize: bool = False,
                 params: bytes | None = None) -> dict[str, Any]:
    """Train on the host: one ``pe_train_step`` per step, starting from ``pe_init`` (then
    ``pe_params_import(params)`` when ``params``, exported parameters, are given: training
    starts from them, master weights included, as ``golden.training.import_params``).

    x: int8 inputs (N, ...); targets: class labels (N,) for cross-entropy, int8 targets of
    the output's shape for MSE. order: None (file order each epoch), an int seed (a fresh
    permutation per epoch, as ``golden.training.fit(shuffle=True, seed=...)``), the sample
    indices of one epoch (repeated), or a 2-D (epochs, steps) array. Returns ``{"loss":
    [per step], "epoch_loss": [...], "steps", "params_sha256", "params": bytes,
    "saturated_updates", "saturated_per_step"}`` (as ``golden.training.fit``)."""
    proj = _project(project)
    training = proj.manifest.get("training")
    if training is None:
        raise PockError(f"{proj.dir}: compiled without a training spec")
    binary = _binary(project, sanitize)
    xs = _inputs(proj, x)
    n = len(xs)
    steps = _order(order, n, epochs)
    if steps.size and (steps.min() < 0 or steps.max() >= n):
        raise PockError(f"order refers to samples outside 0..{n - 1}")
    if training["loss"] == "cross_entropy":
        labels = np.asarray(targets).reshape(-1)
        if len(labels) != n:
            raise PockError(f"{n} inputs but {len(labels)} labels")
        classes = int(training["num_classes"])
        if len(labels) and (labels.min() < 0 or labels.max() >= classes):
            raise PockError(f"labels range {int(labels.min())}..{int(labels.max())}, the "
                            f"model has {classes} classes")
        tgt = labels.astype("<i4")
    else:
        tgt = np.asarray(targets)
        if tgt.dtype != np.int8 or tgt.size != n * int(training["target_bytes"]):
            raise PockError(f"MSE targets must be int8, {training['target_bytes']} values per "
                            f"sample, got {tgt.dtype} {list(tgt.shape)}")
        tgt = np.ascontiguousarray(tgt)
    with tempfile.TemporaryDirectory(prefix="pe_host_") as tmp:
        t = Path(tmp)
        xs.tofile(t / "inputs.bin")
        tgt.tofile(t / "targets.bin")
        steps.astype("<i4").tofile(t / "order.bin")
        args = ["fit", str(t / "inputs.bin"), str(t / "targets.bin"), str(t / "order.bin"),
                str(len(steps)), str(t / "losses.bin"), str(t / "params.bin"),
                str(t / "saturated.bin")]
        if params is not None:
            want = int(training["export_bytes"])
            if len(params) != want:
                raise PockError(f"initial parameters of {len(params)} bytes, the project "
                                f"exports {want}")
            (t / "params_in.bin").write_bytes(bytes(params))
            args.append(str(t / "params_in.bin"))
        _run(binary, args)
        bits = np.fromfile(t / "losses.bin", dtype="<u4")
        params = (t / "params.bin").read_bytes()
        counts = np.fromfile(t / "saturated.bin", dtype="<u4").astype(np.int64)
    losses = [float(v) for v in bits.view("<f4").astype(np.float32)]
    per = len(steps) // int(epochs) if epochs else 0
    epoch_loss = []
    for e in range(int(epochs)):
        chunk = losses[e * per:(e + 1) * per]
        epoch_loss.append(float(np.mean(chunk)) if chunk else float("nan"))
    return {"loss": losses, "loss_bits": bits.astype(np.uint32), "epoch_loss": epoch_loss,
            "steps": len(losses), "params_sha256": hashlib.sha256(params).hexdigest(),
            "params": params, **saturation_series(counts)}


def saturation_series(counts: np.ndarray) -> dict[str, Any]:
    """``saturated_updates`` and ``saturated_per_step`` of a run from the cumulative
    ``<p>_saturation_count()`` after each step (counted from ``<p>_init()``, i.e. 0)."""
    counts = np.asarray(counts, np.int64).reshape(-1)
    per_step = np.diff(counts, prepend=0)
    return {"saturated_updates": int(counts[-1]) if counts.size else 0,
            "saturated_per_step": [int(v) for v in per_step]}
