"""What ``pockengine train / eval / pull`` do over a serial link.

- ``train_over_serial``: streams the samples in the order ``fit`` and the embedded-data firmware
  use (``data.sample_order``: a ``default_rng(seed)`` permutation per epoch), sample k as
  TRAIN sequence number k (1-based). The device applies a sample only right after the previous
  one, exactly once; a run is named by a run id (a CRC of the data, labels and order), so a
  second ``train`` with the same data and seed resumes where the device is, and one with other
  data is refused instead of mixed in. A checkpoint is requested every ``checkpoint_every``
  samples and at the end; after a power cut the device restores its newest checkpoint, TRAIN
  answers "sequence gap", and streaming rewinds to the device's last applied sample.
- ``eval_over_serial``: EVAL in batches that fit the device's frames; accuracy (labels) or MSE
  (targets) from the per-sample results.
- ``pull_model``: GET_PARAMS (CRC-checked snapshot), DESCRIBE (which tensors they are, which
  model and calibration the firmware was compiled from), the original model with the learned
  values written back, saved through ``codegen.frontend`` (.tflite, or a QDQ ONNX model for an
  ``.onnx`` output). The original model is ``--model`` (checked against the sha256 the
  firmware carries), else the one its project keeps (``--project DIR``, the current directory,
  or the local cache keyed by the device's model hash: ``codegen/model_store.py``).
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..data import TensorSpec, fit_targets, fit_to, load_npz, sample_order
from ..errors import PockError
from ..frontend import export_model
from ..model_store import cache_dir, cached_model, load, project_model, quantize
from ..render.output import open_project, read_manifest
from . import protocol as P
from .client import Device, DeviceError
from .firmware import model_hash

DEFAULT_CHECKPOINT_EVERY = 64


# -- data ---------------------------------------------------------------------------------------
def device_tensors(desc: dict[str, Any] | None) -> tuple[Any, Any]:
    """(input, output) TensorSpecs from a device description, or (None, None)."""
    if not desc or "input" not in desc or "output" not in desc:
        return None, None
    return TensorSpec.from_dict(desc["input"]), TensorSpec.from_dict(desc["output"])


def prepare_data(info: P.Info, desc: dict[str, Any] | None, data: Any, what: str,
                 loss: str | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Samples for the device: int8 inputs (N, input_bytes) and labels (N,) or int8 targets
    (N, output bytes), fitted with the device's input quantization when it describes it."""
    if isinstance(data, (str, Path)):
        x, y = load_npz(data)
        name = str(data)
    else:
        x, y = data
        name = what
    inp, out = device_tensors(desc)
    if inp is not None:
        x = fit_to(inp, x, f"{name} x")
        t = None
        if y is not None or loss == "mse":
            t = fit_targets(out, loss or "cross_entropy", x, y, name)
    else:
        x = np.asarray(x)
        if x.dtype != np.int8 or x[0].size != info.input_bytes:
            raise PockError(f"{name}: the device describes no input quantization; give int8 "
                            f"samples of {info.input_bytes} values (got {x.dtype} "
                            f"{list(x.shape)})")
        t = None if y is None else np.asarray(y)
    x = np.ascontiguousarray(x.reshape(len(x), -1))
    if x.shape[1] != info.input_bytes:
        raise PockError(f"{name}: samples of {x.shape[1]} values, the device's model input has "
                        f"{info.input_bytes}")
    if t is not None and t.dtype == np.int8:
        t = np.ascontiguousarray(t.reshape(len(t), -1))
    return x, t


def run_id_of(x: np.ndarray, t: np.ndarray | None, order: np.ndarray) -> int:
    """A nonzero 32-bit name of a training run: its samples, labels and order."""
    h = hashlib.sha256()
    for a in (x, t, order):
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
    return int.from_bytes(h.digest()[:4], "little") or 1


def _label_and_target(t: np.ndarray | None, i: int, mse: bool) -> tuple[int, bytes]:
    if t is None:
        raise PockError("training data has no labels ('y')")
    if mse:
        return 0, t[i].tobytes()
    return int(t[i]), b""


# -- train --------------------------------------------------------------------------------------
def train_over_serial(dev: Device, data: Any, *, epochs: int = 1, seed: int = 0,
                      shuffle: bool = True, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
                      predict: bool = True, restart: bool = False,
                      progress: Callable[[int, int, dict[str, Any]], None] | None = None
                      ) -> dict[str, Any]:
    """Stream a data set to the device (see the module docstring). ``progress(done, total,
    fields)`` is called after every sample. Returns the summary (``params_sha256`` of the
    device's exported parameters, per-step ``loss``, link counters, ...)."""
    if epochs < 0:
        raise PockError(f"--epochs must be >= 0, got {epochs}")
    info = dev.info()
    if not info.training:
        raise PockError(f"{dev.port}: the firmware was compiled without a training spec")
    desc = dev.describe() if info.describe_bytes else None
    mse = info.loss == "mse"
    x, t = prepare_data(info, desc, data, "training data", info.loss)
    if not mse and t is not None and len(t) and (t.min() < 0 or t.max() >= info.num_classes):
        raise PockError(f"training labels range {int(t.min())}..{int(t.max())}, the device's "
                        f"model has {info.num_classes} classes")
    order = sample_order(len(x), epochs, shuffle=shuffle, seed=seed) if len(x) \
        else np.zeros(0, np.int64)
    total = len(order)
    run = run_id_of(x, t, order)
    if restart:
        dev.reset(factory=True)
        info = dev.info()
    if info.last_seq > 0 and info.run_id != run:
        raise PockError(f"{dev.port}: the device has trained {info.last_seq} samples of another "
                        "run (other data, seed or epochs); pass --restart to start over from "
                        "the initial parameters")
    if info.last_seq > total:
        raise PockError(f"{dev.port}: the device has applied {info.last_seq} samples, this run "
                        f"has {total}")
    pos = resumed = info.last_seq
    losses = [math.nan] * total
    recent: deque[float] = deque(maxlen=100)
    hits: deque[int] = deque(maxlen=100)
    correct = predicted = rewinds = 0
    every = max(1, int(checkpoint_every))
    while pos < total:
        seq = pos + 1
        i = int(order[pos])
        label, target = _label_and_target(t, i, mse)
        status, r = dev.train(run, seq, x[i].tobytes(), label, target, predict=predict,
                              checkpoint=info.storage and (seq % every == 0 or seq == total))
        if status == P.ST_OK:
            losses[pos] = r.loss
            recent.append(r.loss)
            if predict and r.prediction >= 0 and not mse:
                hit = int(r.prediction == label)
                hits.append(hit)
                correct += hit
                predicted += 1
            pos = seq
        elif status == P.ST_DUPLICATE and r.sample_seq == seq == r.last_seq:
            # applied already: its answer was lost and the request sent again (a smaller
            # frame on a noisy link); the device kept its loss
            if not math.isnan(r.loss):
                losses[pos] = r.loss
                recent.append(r.loss)
            pos = seq
        elif status in (P.ST_DUPLICATE, P.ST_SEQ_GAP):
            if r.last_seq < pos:
                rewinds += 1            # the device restarted from an older checkpoint
            pos = min(r.last_seq, total)
        else:                           # run mismatch: someone else trains this device
            raise PockError(f"{dev.port}: the device switched to another training run "
                            f"(run id 0x{r.run_id:08x}) while sample {seq} was being sent")
        if progress is not None:
            fields: dict[str, Any] = {"loss": float(np.mean(recent)) if recent else None}
            if hits:
                fields["acc"] = f"{np.mean(hits):.1%}"
            progress(pos, total, fields)
    ckpt = None
    if info.storage and total:
        ckpt = dev.checkpoint()
    params = dev.get_params()
    stats = dev.stats()
    return {
        "port": dev.port, "board": info.board, "samples": len(x), "epochs": epochs,
        "steps": total, "resumed_from": resumed, "applied": total - resumed,
        "rewinds": rewinds, "run_id": f"{run:08x}",
        "loss": [None if math.isnan(v) else v for v in losses],
        "online_accuracy": correct / predicted if predicted else None,
        "params_sha256": hashlib.sha256(params).hexdigest(), "params_bytes": len(params),
        "checkpoint_generation": ckpt.generation if ckpt is not None else None,
        "link": dev.link_report(), "device": dict(stats.values),
        "_params": params,
    }


# -- eval ---------------------------------------------------------------------------------------
def eval_over_serial(dev: Device, data: Any,
                     progress: Callable[[int, int, dict[str, Any]], None] | None = None
                     ) -> dict[str, Any]:
    """Evaluate the device's current parameters on a data set (EVAL batches)."""
    info = dev.info()
    desc = dev.describe() if info.describe_bytes else None
    # an inference-only firmware has no loss: labels unless the data carries int8 targets
    loss = info.loss or ("mse" if _int8_targets(data) else "cross_entropy")
    x, t = prepare_data(info, desc, data, "evaluation data", loss)
    if t is None:
        raise PockError("evaluation data has no labels or targets ('y')")
    targets = t.dtype == np.int8 and t.ndim == 2
    rec = info.input_bytes + info.output_bytes if targets else 4 + info.input_bytes
    # a batch is one EVAL request: in one frame, or staged in pieces (PUT) where the device
    # has room; its results come back in PARTs if the link needs small frames
    room = max(dev.max_body, info.stage_bytes - 1)
    per = min(255, (room - 4) // rec, (dev.max_body - 20 - info.output_bytes) // 4)
    if per < 1:
        raise PockError(f"{dev.port}: one evaluation record ({rec} bytes) does not fit the "
                        f"device's frames ({dev.max_body} bytes)")
    results: list[int] = []
    device_totals = None
    n = len(x)
    for start in range(0, n, per):
        idx = range(start, min(n, start + per))
        records = [P.eval_record(x[i].tobytes(), 0 if targets else int(t[i]),
                                 t[i].tobytes() if targets else None) for i in idx]
        r = dev.eval(records, reset=start == 0, targets=targets)
        results += list(r.results)
        device_totals = r
        if progress is not None:
            done = len(results)
            fields = {}
            if not targets:
                fields["acc"] = f"{np.mean(np.asarray(results) == t[:done]):.1%}"
            progress(done, n, fields)
    res = np.asarray(results, dtype=np.int64)
    out: dict[str, Any] = {"port": dev.port, "board": info.board, "samples": n,
                           "device_total": device_totals.total if device_totals else 0,
                           "link": dev.link_report()}
    if targets:
        sq = int(res.sum())
        out["squared_error"] = sq
        _, ospec = device_tensors(desc)
        if ospec is not None and ospec.scale is not None and n:
            out["mse"] = sq * float(ospec.scale) ** 2 / (n * info.output_bytes)
        else:
            out["mse_int8"] = sq / (n * info.output_bytes) if n else None
        out["accuracy"] = None
    else:
        correct = int((res == t).sum())
        out.update({"correct": correct, "accuracy": correct / n if n else None,
                    "device_correct": device_totals.correct if device_totals else 0,
                    "predictions": res.tolist()})
    return out


def _int8_targets(data: Any) -> bool:
    if isinstance(data, (str, Path)):
        data = load_npz(data)
    y = data[1]
    return y is not None and np.asarray(y).dtype == np.int8 and np.asarray(y).ndim > 1


# -- pull ---------------------------------------------------------------------------------------
def tuned_from_params(graph: Any, names: list[str], params: bytes) -> Any:
    """``graph`` with the exported parameter bytes (``names`` in export order, little-endian)
    written into its tensors."""
    g = graph.copy()
    offset = 0
    for name in names:
        if name not in g.tensors:
            raise PockError(f"the device's parameter {name!r} is not a tensor of the model")
        t = g.tensors[name]
        dt = np.dtype(t.dtype).newbyteorder("<")
        n = int(np.prod(t.shape)) * dt.itemsize
        if offset + n > len(params):
            raise PockError(f"the device exported {len(params)} bytes, the model's parameters "
                            f"need more (at {name!r})")
        value = np.frombuffer(params, dt, n // dt.itemsize, offset).reshape(t.shape)
        g.tensors[name] = t.replace(data=value.astype(np.dtype(t.dtype)))
        offset += n
    if offset != len(params):
        raise PockError(f"the device exported {len(params)} bytes, the model's "
                        f"{len(names)} parameters are {offset}")
    return g


def original_graph(desc: dict[str, Any], model: str | Path | None,
                   calib: str | Path | None, *, model_hash: bytes | None = None,
                   project: str | Path | None = None) -> Any:
    """The graph the firmware was compiled from: the model file (checked against the hash
    the firmware carries), quantized with ``calib`` if it is a float model; without ``model``,
    the model a project keeps (``project``, else the current directory when it is the
    project of the firmware's ``model_hash``, else the local cache's entry for that hash; see
    ``codegen/model_store.py``), else the file the device names, if it is here."""
    return resolve_graph(desc, model, calib, model_hash=model_hash, project=project)[0]


def resolve_graph(desc: dict[str, Any], model: str | Path | None, calib: str | Path | None,
                  *, model_hash: bytes | None = None, project: str | Path | None = None
                  ) -> tuple[Any, dict[str, Any]]:
    """``original_graph`` and where the graph came from (``{"from": "model" | "project" |
    "cache" | "file", "path": ...}``)."""
    m = desc.get("model") or {}
    if model is not None and project is not None:
        raise PockError("give the original model (--model) or its project (--project), "
                        "not both")
    if model is None:
        stored = stored_graph(m, model_hash, project)
        if stored is not None:
            return stored
        name = m.get("name")
        if name and Path(name).is_file():
            model = Path(name)
            where = {"from": "file", "path": str(model)}
        else:
            tail = f", model hash {model_hash.hex()[:16]}..." if model_hash else ""
            raise PockError(f"give the original model with --model or the project it was "
                            f"compiled into with --project (the device was compiled from "
                            f"{name or 'an unnamed model'}, sha256 "
                            f"{str(m.get('sha256'))[:16]}...{tail}; neither the current "
                            "directory nor the local cache has it)")
    else:
        where = {"from": "model", "path": str(model)}
    src = load(model)
    if m.get("sha256") and src.sha256 != m["sha256"]:
        raise PockError(f"{model}: not the model the device was compiled from (sha256 "
                        f"{src.sha256[:16]}..., the device's is {m['sha256'][:16]}... of "
                        f"{m.get('name') or 'an unnamed model'})")
    g = src.graph
    if g.tensors[g.inputs[0]].dtype == "float32":
        if calib is None:
            raise PockError(f"{model} is a float model: give the calibration data it was "
                            "compiled with (--calib) so it quantizes the same way")
        q = quantize(src, calib)
        want = m.get("calibration_sha256")
        if want and q.calib_sha256 != want:
            raise PockError(f"{calib}: not the calibration data the device's model was "
                            "quantized with (hash differs)")
        g = q.graph
    return g, where


def _project_hash(project: Any) -> bytes | None:
    try:
        return model_hash(project)
    except OSError:
        return None


def _same_model(m: dict[str, Any], recorded: Any, where: str) -> None:
    """The device's DESCRIBE model (name, sha256, calibration) against a stored record's."""
    if not isinstance(recorded, dict):
        return
    for key in ("sha256", "calibration_sha256"):
        if m.get(key) and recorded.get(key) and m[key] != recorded[key]:
            raise PockError(f"{where}: compiled from another model than the device's firmware "
                            f"({key.split('_')[0]} {str(recorded[key])[:16]}..., the "
                            f"device's is {str(m[key])[:16]}...)")


def stored_graph(m: dict[str, Any], model_hash: bytes | None, project: str | Path | None
                 ) -> tuple[Any, dict[str, Any]] | None:
    """The graph a project or the local cache keeps for the device (``m``: its DESCRIBE
    model record; ``model_hash``: its INFO model hash), with where it came from; None when
    there is none (no ``project`` given, the current directory is not the device's project
    and the cache has no entry for the hash)."""
    if project is not None:
        proj = open_project(project)
        have = _project_hash(proj)
        if model_hash is not None and have != model_hash:
            raise PockError(f"{proj.dir}: not the project of the device's firmware (model "
                            f"hash {have.hex()[:16] + '...' if have else 'unknown'}, the "
                            f"device's is {model_hash.hex()[:16]}...; compiled again since?)")
        _same_model(m, proj.manifest.get("model"), str(proj.dir))
        return project_model(proj), {"from": "project", "path": str(proj.dir)}
    if model_hash is None:
        return None
    here = Path.cwd()
    if read_manifest(here) is not None:
        proj = open_project(here)
        if _project_hash(proj) == model_hash and isinstance(
                (proj.manifest.get("model_file") or {}).get("path"), str):
            _same_model(m, proj.manifest.get("model"), str(proj.dir))
            return project_model(proj), {"from": "project", "path": str(proj.dir)}
    hit = cached_model(model_hash)
    if hit is None:
        return None
    graph, record = hit
    _same_model(m, record.get("model"), f"cache entry {model_hash.hex()}")
    return graph, {"from": "cache", "path": str(cache_dir() / record["path"])}


def pull_model(dev: Device, output: str | Path, *, model: str | Path | None = None,
               calib: str | Path | None = None, project: str | Path | None = None
               ) -> dict[str, Any]:
    """Write the device's learned parameters into the original model, saved as ``output``
    (``.onnx``: a QDQ ONNX model, else .tflite). The original model: ``model`` (with ``calib``
    for a float one), else the model ``project`` keeps, else see ``original_graph``."""
    info = dev.info()
    if not info.training or info.export_bytes == 0:
        raise PockError(f"{dev.port}: the firmware has no trainable parameters to pull")
    desc = dev.describe() if info.describe_bytes else None
    if not desc or not (desc.get("training") or {}).get("parameters"):
        raise DeviceError(f"{dev.port}: the firmware does not describe its parameters "
                          "(DESCRIBE is empty); it was not built by pockengine's serial "
                          "firmware")
    graph, source = resolve_graph(desc, model, calib, model_hash=info.model_hash,
                                  project=project)
    params = dev.get_params()
    tuned = tuned_from_params(graph, list(desc["training"]["parameters"]), params)
    out = Path(output)
    fmt = export_model(tuned, out)
    return {"port": dev.port, "board": info.board, "output": str(out), "format": fmt,
            "model_from": source["from"], "model_path": source["path"],
            "params_sha256": hashlib.sha256(params).hexdigest(), "params_bytes": len(params),
            "parameters": list(desc["training"]["parameters"]), "steps": info.steps,
            "last_seq": info.last_seq, "link": dev.link_report()}
