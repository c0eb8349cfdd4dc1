"""The embed stage (device boards, between lower and render): user data fitted to a project.

``device_data`` fits training and evaluation data to the model (int8 inputs, labels or int8
targets) and fixes the sample order of every step, exactly as ``run_host_fit`` and the golden
``fit`` visit them (``data.sample_order``); ``render.device.data_files`` renders the result into
``<p>_data.c``. ``project_data`` does it for an existing project (what its manifest records)
and ``embed_data`` rewrites that project's data files for ``pockengine sim --data``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..data import TensorSpec, data_arrays, fit_targets, fit_to, sample_order
from ..errors import PockError
from .device import DeviceData, check_data, data_files
from .output import MANIFEST, Project


def device_data(inp: Any, out: Any, loss: str | None, train: Any = None, evals: Any = None,
                *, epochs: int = 1, seed: int = 0, shuffle: bool = True,
                print_outputs: bool = False, dump_params: bool = True) -> Any:
    """A :class:`~codegen.render.device.DeviceData` for a project.

    ``inp`` / ``out``: the model input and output (``codegen.data.TensorSpec``); ``loss``: the
    training loss (None: an inference-only project; eval labels are then optional).
    ``train`` / ``evals``: .npz paths, mappings with ``x``/``y`` or ``(x, y)`` tuples."""
    if epochs < 0:
        raise PockError(f"epochs must be >= 0, got {epochs}")
    empty = np.zeros((0, *inp.shape[1:]), np.int8)
    source: dict[str, Any] = {}
    train_x, train_t = empty, None
    if train is not None:
        if loss is None:
            raise PockError("training data for a model compiled without a training spec "
                            "(add --train)")
        x, y = data_arrays(train, "training data")
        name = str(train) if isinstance(train, (str, Path)) else None
        train_x = fit_to(inp, x, "training data x")
        train_t = fit_targets(out, loss, train_x, y, "training data")
        source["train"] = name
    eval_x, eval_t = empty, None
    if evals is not None:
        x, y = data_arrays(evals, "evaluation data")
        name = str(evals) if isinstance(evals, (str, Path)) else None
        eval_x = fit_to(inp, x, "evaluation data x")
        if loss is not None:
            eval_t = fit_targets(out, loss, eval_x, y, "evaluation data")
        elif y is not None:
            eval_t = fit_targets(out, "cross_entropy", eval_x, y, "evaluation data")
        source["eval"] = name
    n = len(train_x)
    order = sample_order(n, epochs, shuffle=shuffle, seed=seed) if n else np.zeros(0, np.int64)
    return DeviceData(train_x, train_t, eval_x, eval_t, order, epochs=epochs if n else 0,
                      seed=seed if shuffle else None, print_outputs=print_outputs,
                      dump_params=dump_params, source=source)


def project_data(project: Project, train: Any = None, evals: Any = None, *,
                 epochs: int | None = None, seed: int | None = None,
                 shuffle: bool | None = None, print_outputs: bool | None = None) -> Any:
    """``device_data`` for an existing project: its input/output from the manifest; what is not
    given is taken from the project's current data (its source files must still exist)."""
    m = project.manifest
    cur = m.get("device", {}).get("data", {})
    src = cur.get("source", {})
    if train is None and epochs is not None and cur.get("train_samples"):
        train = src.get("train")
        if not train or not Path(train).is_file():
            raise PockError("--epochs needs the training data again (--data): the project "
                            "does not know where its data came from")
    if evals is None and train is not None and cur.get("eval_samples"):
        evals = src.get("eval") if src.get("eval") and Path(src["eval"]).is_file() else None
    training = m.get("training")
    if epochs is not None and train is None:        # nothing to repeat: say so, not "0 steps"
        if training is None:
            raise PockError(f"--epochs {epochs}: {project.dir} was compiled without a training "
                            "spec (inference only); compile with --train and --data to train "
                            "on the device")
        raise PockError(f"--epochs {epochs}: {project.dir} has no training data embedded; "
                        "give it with --data")
    return device_data(
        TensorSpec.from_dict(m["input"]), TensorSpec.from_dict(m["output"]),
        training["loss"] if training else None, train, evals,
        epochs=epochs if epochs is not None else max(1, int(cur.get("epochs") or 1)),
        seed=seed if seed is not None else (cur.get("seed") or 0),
        shuffle=shuffle if shuffle is not None else cur.get("seed", 0) is not None,
        print_outputs=print_outputs if print_outputs is not None
        else bool(cur.get("print_outputs")))


def embed_data(project: Project, data: Any) -> Project:
    """Rewrite the project's data files and manifest for ``data`` (a DeviceData)."""
    m = dict(project.manifest)
    if "device" not in m:
        raise PockError(f"{project.dir}: a {m.get('board')} project has no embedded data "
                        "(compile for a device board)")
    check_data(data, input_bytes=int(m["input"]["bytes"]),
               output_bytes=int(m["output"]["bytes"]), training=m.get("training"))
    banner = banner_of(project)
    for rel, blob in data_files(project.prefix, data, banner).items():
        path = project.dir / rel
        if not path.is_file() or path.read_bytes() != blob:
            path.write_bytes(blob)
    m["device"] = dict(m["device"]) | {"data": data.summary()}
    (project.dir / MANIFEST).write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    return Project(project.dir, m)


def banner_of(project: Project) -> list[str]:
    """The banner lines of the project's generated header (the data files repeat them)."""
    text = (project.dir / f"{project.prefix}_model.h").read_text()
    lines = []
    for ln in text.splitlines()[2:]:
        if not ln.startswith(" * "):
            break
        lines.append(ln[3:])
    return lines
