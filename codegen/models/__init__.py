"""Models and data that ship with pockengine (for the demo, examples and first steps).

- ``digits_cnn.onnx``: a float PyTorch CNN (conv+BN+ReLU, depthwise, residual add, average pool,
  linear) trained on scikit-learn's 8x8 digits; regenerate with ``python -m tests.digits_cnn``.
- ``digits.npz``: the digits set (uint8 images 0..16, labels) with the train/test split indices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def path(name: str) -> Path:
    p = HERE / name
    if not p.is_file():
        raise FileNotFoundError(f"bundled file {name!r} missing from {HERE}")
    return p


def digits(split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """(x NHWC float32 in [0, 1], y int64) of the bundled digits 'train' or 'test' split."""
    with np.load(path("digits.npz")) as z:
        idx = z[f"{split}_idx"]
        x = (z["images"][idx].astype(np.float32) / 16.0)[..., None]
        return x, z["y"][idx]
