"""`pockengine demo`: the main job on the bundled digits model, end to end as far as it goes.

Import the float ONNX CNN, quantize it (PTQ) with calibration samples, run the int8 model on the
golden engine and write the int8 .tflite; prints what happened and the accuracies.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np


def run_demo(out_dir: Path, calib_samples: int = 100, log=print) -> dict:
    from . import golden, models
    from .data import fit_input
    from .frontend import load_model, save_model
    from .quant import quantize
    from .summary import summarize

    t0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = models.path("digits_cnn.onnx")
    x_train, _ = models.digits("train")
    x_test, y_test = models.digits("test")

    graph = load_model(model_path)
    s = summarize(graph)
    log(f"[1/4] imported {model_path.name}: {len(graph.ops)} ops "
        f"({', '.join(f'{v} {k}' for k, v in s['op_counts'].items())}), {s['macs']:,} MACs, "
        f"{s['param_count']:,} parameters")

    float_logits = golden.run(graph, x_test)[0]
    acc_float = float((float_logits.argmax(1) == y_test).mean())
    log(f"[2/4] float32 golden engine: top-1 {acc_float:.2%} on {len(y_test)} held-back digits")

    qgraph = quantize(graph, x_train[:calib_samples])
    tflite_path = out_dir / "digits_int8.tflite"
    save_model(qgraph, tflite_path)
    qs = summarize(qgraph)
    log(f"[3/4] quantized with {calib_samples} calibration samples -> {tflite_path} "
        f"({tflite_path.stat().st_size:,} bytes, {qs['param_bytes']:,} B constant data)")

    xq = fit_input(qgraph, x_test)
    int8_logits = golden.run(qgraph, xq)[0]
    acc_int8 = float((np.asarray(int8_logits).argmax(1) == y_test).mean())
    log(f"[4/4] int8 golden engine (bit-exact with TFLM): top-1 {acc_int8:.2%} "
        f"({(acc_int8 - acc_float) * 100:+.1f} points vs float)")
    log(f"done in {time.perf_counter() - t0:.1f} s")
    return {"accuracy_float": acc_float, "accuracy_int8": acc_int8, "tflite": str(tflite_path)}


if __name__ == "__main__":
    run_demo(Path(sys.argv[1] if len(sys.argv) > 1 else "pockengine-demo"))
