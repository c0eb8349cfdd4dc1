"""A small PyTorch CNN trained on scikit-learn's digits (8x8, 10 classes), shared by tests.

conv+batchnorm+relu, depthwise conv, residual add, average pool, linear — the op mix the
acceptance tests name. Deterministic for a given seed. Data layout helpers convert between the
PyTorch NCHW world and pockengine's NHWC IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class DigitsSplit:
    x_train: np.ndarray   # (N, 1, 8, 8) float32 in [0, 1], NCHW
    y_train: np.ndarray   # (N,) int64
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(seed: int = 0, test_fraction: float = 0.25) -> DigitsSplit:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    n_test = int(len(y) * test_fraction)
    te, tr = idx[:n_test], idx[n_test:]
    return DigitsSplit(x[tr], y[tr], x[te], y[te])


def build_cnn():
    import torch
    from torch import nn

    class DigitsCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
            self.pw = nn.Conv2d(16, 16, 1)
            self.conv2 = nn.Conv2d(16, 24, 3, stride=2, padding=1)
            self.pool = nn.AvgPool2d(4)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            r = torch.relu(self.pw(torch.relu(self.dw(h))))
            h = h + r
            h = torch.relu(self.conv2(h))
            h = self.pool(h).flatten(1)
            return self.fc(h)

    return DigitsCNN()


def train_cnn(split: DigitsSplit, seed: int = 0, epochs: int = 12):
    import torch

    torch.manual_seed(seed)
    model = build_cnn()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.from_numpy(split.x_train)
    y = torch.from_numpy(split.y_train)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
            loss.backward()
            opt.step()
    model.eval()
    return model


def torch_accuracy(model, x: np.ndarray, y: np.ndarray) -> float:
    import torch

    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    return float((pred == y).mean())


def export_onnx(model, path: Path) -> Path:
    import torch

    torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False,
                      opset_version=13, input_names=["input"], output_names=["logits"])
    return path


def nchw_to_nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def write_bundle(out_dir: Path, seed: int = 0) -> None:
    """Regenerate the bundled demo model and data (codegen/models/): digits_cnn.onnx, digits.npz.

    digits.npz holds the whole scikit-learn digits set as NCHW float32 in [0, 1] with labels and
    the split indices used by load_digits_split(seed) (`train_idx`, `test_idx`).
    """
    from sklearn.datasets import load_digits

    out_dir.mkdir(parents=True, exist_ok=True)
    split = load_digits_split(seed)
    model = train_cnn(split, seed)
    export_onnx(model, out_dir / "digits_cnn.onnx")
    d = load_digits()
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(d.target))
    n_test = int(len(d.target) * 0.25)
    np.savez_compressed(out_dir / "digits.npz", images=d.images.astype(np.uint8),
                        y=d.target.astype(np.int64), test_idx=idx[:n_test],
                        train_idx=idx[n_test:])
    print(f"float accuracy on the test split: {torch_accuracy(model, split.x_test, split.y_test):.4f}")


if __name__ == "__main__":
    write_bundle(Path(__file__).resolve().parents[1] / "codegen" / "models")
