"""Learnable synthetic keyword features for the KWS fine-tune example.

The MLPerf Tiny keyword spotter takes 49 x 10 MFCC-like features (49 frames of 10
coefficients). Here each of 12 new "keywords" is a fixed pattern of three formant-like bumps
in the time x coefficient plane; a sample is its keyword's pattern, shifted by up to 3 frames,
plus noise. The pretrained model has never seen these patterns (about chance level); training
its biases and last layers learns them.

Writes OUT/train.npz and OUT/eval.npz (float32 features in the model's input range, labels;
pockengine quantizes them with the model's input scale).

    python3 make_data.py [--out out] [--per-class 20] [--eval-per-class 10]
"""

import argparse
from pathlib import Path

import numpy as np

CLASSES = 12
FRAMES, COEFFS = 49, 10


def patterns(seed: int = 2024) -> np.ndarray:
    """One (49, 10) pattern per keyword: a floor of -60 and three Gaussian bumps."""
    rng = np.random.default_rng(seed)
    t = np.arange(FRAMES)[:, None]
    c = np.arange(COEFFS)[None, :]
    out = []
    for _ in range(CLASSES):
        img = np.full((FRAMES, COEFFS), -60.0)
        for _ in range(3):
            t0, c0 = rng.uniform(5, 44), rng.uniform(0, 9)
            st, sc = rng.uniform(3, 8), rng.uniform(1, 3)
            img += rng.uniform(30, 70) * np.exp(-((t - t0) ** 2) / (2 * st ** 2)
                                                - ((c - c0) ** 2) / (2 * sc ** 2))
        out.append(img)
    return np.asarray(out)


def samples(per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for k, pattern in enumerate(patterns()):
        for _ in range(per_class):
            img = np.roll(pattern, rng.integers(-3, 4), axis=0)
            xs.append(np.clip(img + rng.normal(0, 6, img.shape), -120, 25))
            ys.append(k)
    order = rng.permutation(len(ys))
    return np.asarray(xs, np.float32)[order, :, :, None], np.asarray(ys)[order]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--per-class", type=int, default=20)
    ap.add_argument("--eval-per-class", type=int, default=10)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    x, y = samples(args.per_class, seed=1)
    xe, ye = samples(args.eval_per_class, seed=2)
    np.savez(out / "train.npz", x=x, y=y)
    np.savez(out / "eval.npz", x=xe, y=ye)
    print(f"wrote {out}/train.npz ({len(y)} samples) and eval.npz ({len(ye)}): "
          f"{CLASSES} synthetic keywords, features {FRAMES}x{COEFFS}")


if __name__ == "__main__":
    main()
