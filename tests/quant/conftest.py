"""Fixtures for the quantizer tests: a trained digits CNN (trained once per session)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

MODELS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "models"


@dataclass
class TrainedDigits:
    split: object              # tests.digits_cnn.DigitsSplit (NCHW)
    model: object              # the PyTorch model (eval mode)
    onnx_bytes: bytes
    float_accuracy: float      # PyTorch float accuracy on the test split


@pytest.fixture(scope="session")
def trained_digits(tmp_path_factory) -> TrainedDigits:
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from tests.digits_cnn import export_onnx, load_digits_split, torch_accuracy, train_cnn

    split = load_digits_split(seed=0)
    model = train_cnn(split, seed=0)
    with warnings.catch_warnings():          # torch's legacy-exporter deprecation notices
        warnings.simplefilter("ignore", DeprecationWarning)
        path = export_onnx(model, tmp_path_factory.mktemp("digits") / "digits_cnn.onnx")
    acc = torch_accuracy(model, split.x_test, split.y_test)
    return TrainedDigits(split, model, path.read_bytes(), acc)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
