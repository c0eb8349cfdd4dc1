"""Learnable synthetic images for the VWW sparse-update example.

96 x 96 RGB images with smooth random colour waves as background; class 1 images also carry a
high-frequency stripe texture at a random angle and frequency, class 0 images do not. The
person detector's features respond to the texture, but its classifier was trained for
something else: fine-tuning a sparse set of its last layers learns the new task.

Writes OUT/train.npz, OUT/eval.npz (float32 in [0, 1], labels 0/1; pockengine quantizes them
with the model's input scale) and OUT/small.npz (a few samples, for a board with 1 MiB of
flash: 27 KiB per embedded image).

    python3 make_data.py [--out out] [--train 32] [--eval 16] [--small 8]
"""

import argparse
from pathlib import Path

import numpy as np


def samples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:96, 0:96] / 95.0
    xs, ys = [], []
    for i in range(n):
        label = i % 2
        img = np.zeros((96, 96, 3))
        for ch in range(3):
            for _ in range(3):
                fx, fy = rng.uniform(0.5, 3, 2)
                phase = rng.uniform(0, 2 * np.pi)
                img[..., ch] += rng.uniform(0.05, 0.15) * np.sin(
                    2 * np.pi * (fx * xx + fy * yy) + phase)
        img += rng.uniform(0.3, 0.6, 3)
        if label:
            f, th = rng.uniform(8, 14), rng.uniform(0, np.pi)
            img += 0.3 * np.sin(2 * np.pi * f * (np.cos(th) * xx + np.sin(th) * yy))[..., None]
        xs.append(np.clip(img + rng.normal(0, 0.03, img.shape), 0, 1))
        ys.append(label)
    return np.asarray(xs, np.float32), np.asarray(ys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--train", type=int, default=32)
    ap.add_argument("--eval", type=int, default=16)
    ap.add_argument("--small", type=int, default=8)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    x, y = samples(args.train, seed=1)
    xe, ye = samples(args.eval, seed=2)
    np.savez(out / "train.npz", x=x, y=y)
    np.savez(out / "eval.npz", x=xe, y=ye)
    np.savez(out / "small.npz", x=x[:args.small], y=y[:args.small])
    print(f"wrote {out}/train.npz ({len(y)}), eval.npz ({len(ye)}), small.npz ({args.small}): "
          "96x96 RGB, striped (1) or not (0)")


if __name__ == "__main__":
    main()
