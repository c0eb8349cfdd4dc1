"""Data for the integration example, from the digits set bundled with pockengine.

    python3 make_data.py --out out [--samples N]
        digits_cnn.onnx, calib.npz (100 original digits), train.npz (the new domain:
        inverted digits shifted by one pixel, the first N or all)
    python3 make_data.py --out out --samples-for out/model [--samples N]
        samples_1.bin, samples_2.bin: the training digits in the model's int8 input format
        (platform_host.c's APP_SAMPLES), split in two for two "boots" of the application
"""

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from codegen import models
from codegen.data import TensorSpec, fit_to


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--samples", type=int, default=0, help="training samples (0: all)")
    ap.add_argument("--samples-for", metavar="PROJECT", help="write the .bin sample files "
                    "for this generated project")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    xs, ys = models.shifted_digits("train")
    if args.samples:
        xs, ys = xs[:args.samples], ys[:args.samples]
    if args.samples_for is None:
        shutil.copyfile(models.path("digits_cnn.onnx"), out / "digits_cnn.onnx")
        np.savez(out / "calib.npz", x=models.digits("train")[0][:100])
        np.savez(out / "train.npz", x=xs, y=ys)
        print(f"wrote {out}/: digits_cnn.onnx, calib.npz (100), train.npz ({len(xs)})")
        return
    manifest = json.loads((Path(args.samples_for) / "pockengine.json").read_text())
    x8 = fit_to(TensorSpec.from_dict(manifest["input"]), xs, "train.npz")
    half = (len(x8) + 1) // 2
    for k, part in enumerate((slice(0, half), slice(half, None)), start=1):
        # per sample: the int8 input, then the label as a little-endian int32
        rec = np.zeros(len(x8[part]), dtype=[("x", np.int8, x8[0].size), ("y", "<i4")])
        rec["x"], rec["y"] = x8[part].reshape(len(rec), -1), ys[part]
        rec.tofile(out / f"samples_{k}.bin")
    print(f"wrote {out}/samples_1.bin ({half}), samples_2.bin ({len(x8) - half})")


if __name__ == "__main__":
    main()
