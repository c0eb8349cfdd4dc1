"""The model a project was compiled from, kept with the project, so that ``pockengine pull``
(and anything else that needs the original model only to rebuild the graph) works without the
model file and its calibration data.

- ``compile`` writes the graph the C code was generated from (the int8 graph, after
  post-training quantization of a float model) as ``DIR/model.tflite`` with the TFLite writer,
  and records it in the manifest (``pockengine.json``, key ``model_file``: ``path``, ``format``,
  ``sha256`` of the file, ``graph_sha256`` = ``graph_digest`` of the graph (below, also
  ``pipeline.graph_digest``), its ``name`` and the layout ``metadata`` a .tflite file does not
  carry). The TFLite writer and
  reader round-trip a graph exactly (tensor and op names, data, quantization); compile checks
  it for every model (the digest of the graph read back must equal the original's). A graph
  the TFLite writer cannot express, or does not give back, is not stored: ``model_file`` then
  has ``path`` null and the ``reason``, and pull needs ``--model`` as before.
- Building the serial firmware (``serial.firmware.build_serial_firmware``, which ``sim DIR
  --uart`` runs) copies the file into a local cache keyed by the firmware's model hash (the
  hash a device reports in INFO: sha256 of the generated ``<prefix>_model.h``, ``_model.c``
  and ``_weights.c``): ``<cache>/models/<hash>.tflite`` with the record beside it
  (``<hash>.json``); ``<cache>`` is ``$POCKENGINE_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/pockengine``, else ``~/.cache/pockengine`` (as the kernel cost cache).
- ``pull`` without ``--model`` takes the model of ``--project DIR``, else of the current
  directory when it is the device's project, else the cache's entry for the device's model
  hash (``serial.session.original_graph``). Every stored file is checked on loading: its
  sha256 and the digest of the graph it gives.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .data import fit_input, load_npz
from .errors import ModelError, PockError
from .ir import Graph

MODEL_FILE = "model.tflite"
CACHE_SUBDIR = "models"
# what the graph's metadata holds beyond the .tflite file and later stages read (the layout an
# ONNX model's data comes in: data.TensorSpec.nchw)
KEPT_METADATA = ("source_format", "input_layout", "input_layouts", "output_layouts")


def model_file(graph: Graph) -> tuple[bytes | None, dict[str, Any]]:
    """The bytes of ``DIR/model.tflite`` for ``graph`` and its manifest record; (None, a
    record with the reason) when the TFLite form cannot hold the graph exactly."""
    from .frontend import read_tflite, write_tflite  # lazy: --help imports this module

    metadata = {k: graph.metadata[k] for k in KEPT_METADATA if k in graph.metadata}
    try:
        json.dumps(metadata)
    except (TypeError, ValueError):
        metadata = {}
    try:
        data = write_tflite(graph)
        back = _restore(read_tflite(data, MODEL_FILE), graph.name, metadata)
    except ModelError as e:
        return None, {"path": None, "reason": f"no TFLite form: {e}"}
    digest = graph_digest(graph)
    if graph_digest(back) != digest:
        return None, {"path": None, "reason": "the TFLite form does not give the graph back "
                                              "exactly"}
    return data, {"path": MODEL_FILE, "format": "tflite",
                  "sha256": hashlib.sha256(data).hexdigest(), "graph_sha256": digest,
                  "name": graph.name, "metadata": metadata}


def _restore(graph: Graph, name: Any, metadata: Any) -> Graph:
    if isinstance(name, str):
        graph.name = name
    if isinstance(metadata, dict):
        graph.metadata.update({k: v for k, v in metadata.items() if k in KEPT_METADATA})
    return graph


def load_model_file(path: Path, record: Any, where: str) -> Graph:
    """The graph of a stored model file, checked against its record (``where``: what to name
    in errors, e.g. the project directory)."""
    from .frontend import read_tflite  # lazy: --help imports this module

    if not isinstance(record, dict) or record.get("format") != "tflite":
        raise PockError(f"{where}: no stored model (compile it again with this pockengine)")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PockError(f"{path}: cannot read the stored model ({e.strerror or e})") from None
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
        raise PockError(f"{path}: the stored model was changed after compile (sha256 differs "
                        f"from {where}'s record)")
    graph = _restore(read_tflite(data, str(path)), record.get("name"), record.get("metadata"))
    if graph_digest(graph) != record.get("graph_sha256"):
        raise PockError(f"{path}: the stored model does not give the graph {where} was "
                        "compiled from (graph digest differs)")
    return graph


def project_model(project: Any) -> Graph:
    """The graph a project was compiled from (``DIR/model.tflite``, checked), or a one-line
    PockError saying why there is none."""
    record = project.manifest.get("model_file")
    if not isinstance(record, dict):
        raise PockError(f"{project.dir}: the project keeps no model (compiled by an older "
                        "pockengine: compile it again, or give --model)")
    rel = record.get("path")
    if rel is None:
        raise PockError(f"{project.dir}: the project keeps no model "
                        f"({record.get('reason', 'not stored')}); give --model")
    if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise PockError(f"{project.dir}: the manifest names the model file {rel!r}")
    return load_model_file(project.dir / rel, record, str(project.dir))


# -- the cache keyed by model hash -------------------------------------------------------------
def cache_dir() -> Path:
    from .backends.cost import cache_dir as root  # lazy: --help imports this module

    return root() / CACHE_SUBDIR


def cache_model(project: Any, model_hash: bytes) -> Path | None:
    """Copy the project's stored model into the cache under ``model_hash`` (the firmware's);
    best effort: None when the project keeps no model or the cache cannot be written."""
    record = project.manifest.get("model_file")
    if not isinstance(record, dict) or not isinstance(record.get("path"), str):
        return None
    try:
        data = (project.dir / record["path"]).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
        return None
    entry = dict(record, path=f"{model_hash.hex()}.tflite", model=project.manifest.get("model"),
                 project=str(Path(project.dir).resolve()))
    d = cache_dir()
    target = d / entry["path"]
    try:
        d.mkdir(parents=True, exist_ok=True)
        for path, blob in ((target, data),
                           (d / f"{model_hash.hex()}.json",
                            (json.dumps(entry, indent=1, sort_keys=True) + "\n").encode())):
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_bytes(blob)
            os.replace(tmp, path)
    except OSError:
        return None
    return target


def cached_model(model_hash: bytes) -> tuple[Graph, dict[str, Any]] | None:
    """The cache's graph for a firmware's model hash and its record, or None when the cache has
    no entry (a PockError when the entry is there but damaged)."""
    d = cache_dir()
    meta = d / f"{model_hash.hex()}.json"
    if not meta.is_file():
        return None
    try:
        record = json.loads(meta.read_text())
    except (OSError, ValueError):
        raise PockError(f"{meta}: damaged cache entry (remove it)") from None
    if not isinstance(record, dict) or record.get("path") != f"{model_hash.hex()}.tflite":
        raise PockError(f"{meta}: damaged cache entry (remove it)")
    return load_model_file(d / record["path"], record, f"cache entry {meta}"), record


def graph_digest(graph: Graph) -> str:
    """sha256 of a graph's content (names, shapes, quantization, data, ops, attributes)."""
    h = hashlib.sha256()

    def put(obj: Any) -> None:
        h.update(json.dumps(obj, sort_keys=True, default=_jsonable).encode())

    put([graph.name, graph.inputs, graph.outputs])
    for name in sorted(graph.tensors):
        t = graph.tensors[name]
        q = t.quant
        put([name, t.shape, t.dtype, t.role.value,
             None if q is None else [q.scale.tobytes().hex(), q.zero_point.tobytes().hex(),
                                     q.axis]])
        if t.data is not None:
            h.update(np.ascontiguousarray(t.data).tobytes())
    for op in graph.ops:
        put([op.type, op.name, op.inputs, op.outputs, sorted(op.attrs.items())])
    return h.hexdigest()


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return repr(v)


# -- the first stages: a model as loaded (``pipeline.load``, ``pipeline.quantize``) -----------
@dataclass(frozen=True, eq=False)
class Source:
    """A model as loaded: its graph, a name and the sha256 of its bytes (for the banner)."""

    graph: Graph
    name: str
    sha256: str
    calib_sha256: str | None = None


def load(model: str | Path | Graph) -> Source:
    """Stage 1 (``pipeline.load``): a model file (.tflite / .onnx) or an IR graph."""
    if isinstance(model, Graph):
        return Source(model, model.name, graph_digest(model))
    from .frontend import load_model  # lazy: --help imports this module

    graph = load_model(model)
    return Source(graph, Path(model).name, hashlib.sha256(Path(model).read_bytes()).hexdigest())


def quantize(source: Source, calib: np.ndarray | str | Path | None) -> Source:
    """Stage 2 (``pipeline.quantize``): post-training quantization of a float model (int8
    models pass through)."""
    g = source.graph
    if g.tensors[g.inputs[0]].dtype != "float32":
        return source
    if calib is None:
        raise PockError(f"{source.name}: a float model needs calibration data (--calib) to be "
                        "quantized")
    from .quant import quantize as ptq  # lazy: --help imports this module

    x = load_npz(calib)[0] if isinstance(calib, (str, Path)) else np.asarray(calib)
    x = fit_input(g, x, "calibration data")
    if len(x) == 0:
        raise PockError("calibration data: no samples")
    digest = hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
    return Source(ptq(g, x), source.name, source.sha256, digest)
