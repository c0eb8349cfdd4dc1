"""Fixtures for the quantizer tests: the bundled pretrained digits CNN."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

MODELS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "models"


@dataclass
class TrainedDigits:
    split: object              # tests.digits_cnn.DigitsSplit (NCHW)
    onnx_bytes: bytes
    float_accuracy: float      # onnxruntime float accuracy on the test split


@pytest.fixture(scope="session")
def trained_digits() -> TrainedDigits:
    """The bundled pretrained digits CNN: a file, so the same model on every machine (a model
    retrained here would differ from CPU to CPU, and with it every accuracy downstream)."""
    pytest.importorskip("onnxruntime")
    import codegen.models as bundled
    from tests.digits_cnn import DigitsSplit
    from tests.frontend.onnx_helpers import run_ort

    def nchw(x):
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))

    (x_tr, y_tr), (x_te, y_te) = bundled.digits("train"), bundled.digits("test")
    split = DigitsSplit(nchw(x_tr), y_tr, nchw(x_te), y_te)
    data = bundled.path("digits_cnn.onnx").read_bytes()
    acc = float((run_ort(data, split.x_test)[0].argmax(1) == y_te).mean())
    return TrainedDigits(split, data, acc)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
