"""Helpers for comparing the golden model with the tflite-micro interpreter."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

MODELS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "models"


def model_path(name: str) -> Path:
    path = MODELS_DIR / name
    if not path.is_file():
        pytest.skip(f"shared model {path} is not available")
    return path


def tflm_runtime():
    return pytest.importorskip("tflite_micro.python.tflite_micro.runtime",
                               reason="tflite-micro (PyPI tflite-micro) is not installed")


class Tflm:
    """One tflite-micro interpreter, invoked once per sample."""

    def __init__(self, model: bytes, preserve_all: bool = False):
        runtime = tflm_runtime()
        config = (runtime.InterpreterConfig.kPreserveAllTensors if preserve_all
                  else runtime.InterpreterConfig.kAllocationRecording)
        self.interp = runtime.Interpreter.from_bytes(
            model, arena_size=max(len(model) * 10, 1 << 21), intrepreter_config=config)

    def invoke(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        for i, x in enumerate(inputs):
            self.interp.set_input(np.ascontiguousarray(x), i)
        self.interp.invoke()
        return np.array(self.interp.get_output(0))

    def tensor(self, index: int) -> np.ndarray:
        return np.array(self.interp.GetTensor(index, 0)["tensor_data"])

    def run_samples(self, samples: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
        """Output 0 for each sample (a sample is one array per model input)."""
        return [self.invoke(s) for s in samples]
