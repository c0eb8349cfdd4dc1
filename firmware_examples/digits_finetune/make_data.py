"""Data for the digits fine-tune example, from the digits set bundled with pockengine.

Writes into OUT (default: out/):
  digits_cnn.onnx   the pretrained float CNN (8x8 digits, conv + depthwise + residual + FC)
  calib.npz         100 original training digits: calibration for post-training quantization
  train.npz         the new domain to learn: inverted digits shifted by one pixel (x, y)
  eval.npz          held-back digits in the same new domain

    python3 make_data.py [--out out] [--samples N]      (N: first N training digits; 0 = all)
"""

import argparse
import shutil
from pathlib import Path

import numpy as np

from codegen import models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--samples", type=int, default=0, help="training samples (0: all)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(models.path("digits_cnn.onnx"), out / "digits_cnn.onnx")
    x, _ = models.digits("train")
    np.savez(out / "calib.npz", x=x[:100])
    xs, ys = models.shifted_digits("train")
    if args.samples:
        xs, ys = xs[:args.samples], ys[:args.samples]
    xe, ye = models.shifted_digits("test")
    np.savez(out / "train.npz", x=xs, y=ys)
    np.savez(out / "eval.npz", x=xe, y=ye)
    print(f"wrote {out}/: digits_cnn.onnx, calib.npz (100), train.npz ({len(xs)} shifted "
          f"digits), eval.npz ({len(xe)})")


if __name__ == "__main__":
    main()
