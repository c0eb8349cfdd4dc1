"""Shared pieces of the firmware tests: the digits fine-tune setup, CLI runs, skips."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from codegen import models
from codegen.ir import Graph

ROOT = Path(__file__).resolve().parents[2]
SHARED_MODELS = ROOT.parent / "shared" / "models"

# The acceptance configuration: the bundled digits CNN, quantized with the first 100 training
# digits; all biases + the last two layers' weights, SGD with momentum; a small slice of data
# so that all boards together stay within the CI budget.
SPEC = "bias:all+weight:last2,opt=sgd,lr=0.01,momentum=0.9"
TRAIN_SAMPLES = 24
EVAL_SAMPLES = 24
EPOCHS = 2
SEED = 3


@cache
def digits_graph() -> Graph:
    """The bundled float ONNX digits CNN, quantized like the acceptance tests require."""
    from codegen import pipeline

    x, _ = models.digits("train")
    return pipeline.quantize(pipeline.load(models.path("digits_cnn.onnx")), x[:100]).graph


def digits_data() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    x, y = models.digits("train")
    xe, ye = models.digits("test")
    return ({"x": x[100:100 + TRAIN_SAMPLES], "y": y[100:100 + TRAIN_SAMPLES]},
            {"x": xe[:EVAL_SAMPLES], "y": ye[:EVAL_SAMPLES]})


def write_npz(directory: Path) -> tuple[Path, Path, Path]:
    """train.npz, eval.npz and calib.npz (the 100 calibration digits) in ``directory``."""
    train, evals = digits_data()
    x, _ = models.digits("train")
    paths = directory / "train.npz", directory / "eval.npz", directory / "calib.npz"
    np.savez(paths[0], **train)
    np.savez(paths[1], **evals)
    np.savez(paths[2], x=x[:100])
    return paths


def pockengine(*args: str, timeout: float = 600, cwd: Path | None = None
               ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codegen", *map(str, args)], check=False,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT)


def pockengine_json(*args: str) -> dict:
    r = pockengine(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def shared_model(name: str) -> Path:
    p = SHARED_MODELS / name
    if not p.is_file():
        pytest.skip(f"shared model {p} is not available")
    return p
