"""The valid inputs the campaign mutates, built once per campaign into a directory.

Models: the bundled digits CNN (ONNX float, its QDQ quantization when onnxruntime is
installed, int8 and float .tflite), three small hand-built ONNX models and the MLPerf Tiny
models of ``../shared/models`` when present. Each model gets a data file that fits it (a few
samples, labels in range) and a record in ``seeds.json``: sample shape, classes, loss, dtype,
and whether it is small enough for the slower verbs (fit, compile).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "models"
SHARED_MODELS = ("kws_ref_model.tflite", "ad01_int8.tflite", "pretrainedResnet_quant.tflite",
                 "kws_ref_model_float32.tflite", "vww_96_int8.tflite")
SMALL = {"digits_int8.tflite", "digits_float.tflite", "digits_cnn.onnx", "digits_qdq.onnx",
         "kws_ref_model.tflite", "pad_conv_pool.onnx", "dw_bn_gap.onnx", "matmul_concat.onnx"}


def _record(graph: Any, path: Path) -> dict[str, Any]:
    from codegen.data import TensorSpec

    inp = TensorSpec.of(graph)
    out = TensorSpec.of(graph, graph.outputs[0])
    mse = tuple(out.shape) == tuple(inp.shape)
    return {"file": str(path), "shape": list(inp.shape[1:]), "classes": int(out.shape[-1]),
            "loss": "mse" if mse else "cross_entropy", "dtype": inp.dtype,
            "onnx": path.suffix == ".onnx", "small": path.name in SMALL}


def build_seeds(out: Path) -> dict[str, Any]:
    """Write the seed models and data into ``out``; returns (and writes) the index."""
    from codegen.data import fit_input
    from codegen.frontend import load_model, save_model
    from codegen.models import digits, path
    from codegen.quant import quantize
    from tests.fuzz.onnx_mut import small_models

    out.mkdir(parents=True, exist_ok=True)
    models: dict[str, Path] = {}
    shutil.copy(path("digits_cnn.onnx"), out / "digits_cnn.onnx")
    models["digits_cnn.onnx"] = out / "digits_cnn.onnx"
    x_train = digits("train")[0][:100]
    g = load_model(path("digits_cnn.onnx"))
    save_model(quantize(g, fit_input(g, x_train, "calibration")), out / "digits_int8.tflite")
    models["digits_int8.tflite"] = out / "digits_int8.tflite"
    save_model(g, out / "digits_float.tflite")
    models["digits_float.tflite"] = out / "digits_float.tflite"
    try:
        from tests.frontend.onnx_helpers import quantize_qdq

        nchw = np.ascontiguousarray(x_train[:32].transpose(0, 3, 1, 2))
        (out / "digits_qdq.onnx").write_bytes(
            quantize_qdq(path("digits_cnn.onnx").read_bytes(), nchw))
        models["digits_qdq.onnx"] = out / "digits_qdq.onnx"
    except ImportError:
        pass
    for name, blob in small_models().items():
        (out / f"{name}.onnx").write_bytes(blob)
        models[f"{name}.onnx"] = out / f"{name}.onnx"
    for name in SHARED_MODELS:
        if (SHARED / name).is_file():
            models[name] = SHARED / name
    index: dict[str, Any] = {"models": {}}
    rng = np.random.default_rng(0)
    for name, p in models.items():
        rec = _record(load_model(p), p)
        shape = tuple(rec["shape"])
        if name.startswith("digits"):
            x = digits("train")[0][:4]
        else:
            x = rng.random((4, *shape), dtype=np.float32)
        y = rng.integers(0, rec["classes"], size=len(x))
        data = out / f"{Path(name).stem}_data.npz"
        np.savez(data, x=x.astype(np.float32), y=y)
        np.save(out / f"{Path(name).stem}_x.npy", x[:2].astype(np.float32))
        rec["data"], rec["npy"] = str(data), str(out / f"{Path(name).stem}_x.npy")
        index["models"][name] = rec
    import yaml

    from codegen.board import boards_dir

    index["boards"] = [yaml.safe_load(p.read_text()) for p in sorted(boards_dir().glob("*.yaml"))]
    (out / "seeds.json").write_text(json.dumps(index, indent=1))
    return index


def load_seeds(out: Path) -> dict[str, Any]:
    return json.loads((out / "seeds.json").read_text())
