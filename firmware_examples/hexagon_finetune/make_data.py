"""Data for the Hexagon fine-tune example: the bundled digits CNN and shifted digits.

Writes OUT/digits_cnn.onnx, OUT/calib.npz (100 original digits), OUT/train.npz and
OUT/eval.npz (inverted digits shifted by one pixel).

    python3 make_data.py [--out out] [--samples N]
"""

import argparse
import shutil
from pathlib import Path

import numpy as np

from codegen import models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--samples", type=int, default=400)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(models.path("digits_cnn.onnx"), out / "digits_cnn.onnx")
    np.savez(out / "calib.npz", x=models.digits("train")[0][:100])
    x, y = models.shifted_digits("train")
    xe, ye = models.shifted_digits("test")
    np.savez(out / "train.npz", x=x[:args.samples], y=y[:args.samples])
    np.savez(out / "eval.npz", x=xe, y=ye)
    print(f"wrote {out}/: digits_cnn.onnx, calib.npz, train.npz ({min(args.samples, len(x))}), "
          f"eval.npz ({len(xe)})")


if __name__ == "__main__":
    main()
