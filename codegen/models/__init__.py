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
    with np.load(path("digits.npz"), allow_pickle=False) as z:
        idx = z[f"{split}_idx"]
        x = (z["images"][idx].astype(np.float32) / 16.0)[..., None]
        return x, z["y"][idx]


def shift_digits(x: np.ndarray) -> np.ndarray:
    """A new domain for fine-tuning demos: inverted intensities and a one-pixel shift right and
    down (NHWC in [0, 1]; the new border is background, 1 after inversion). The pretrained CNN
    does poorly on it; fine-tuning the biases and the last layers recovers most accuracy
    (``python -m tests.transfer`` measures it, NCHW)."""
    inv = 1.0 - np.asarray(x, dtype=np.float32)
    out = np.ones_like(inv)
    out[:, 1:, 1:, :] = inv[:, :-1, :-1, :]
    return out


def shifted_digits(split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """``digits(split)`` in the shifted domain of :func:`shift_digits`."""
    x, y = digits(split)
    return shift_digits(x), y
