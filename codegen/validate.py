"""``pockengine validate MODEL --engine E``: the golden model and an engine on the same inputs.

The golden model is bit-exact with TFLite Micro's reference kernels; an engine (the generated
C on the host, or the firmware on a board's emulator) is validated when its outputs equal the
golden model's bit for bit. ``compare`` gives the numbers a user checks: bit-exact or not, the
largest absolute difference, how many values and samples differ, and top-1 agreement (the
index of each sample's largest output).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import PockError, plural
from .ir import Graph


def random_inputs(graph: Graph, n: int, seed: int) -> np.ndarray:
    """``n`` inputs for ``graph`` from ``seed``: uniform int8 for an int8 model, standard
    normal float32 for a float one (in the model's own layout)."""
    t = graph.tensors[graph.inputs[0]]
    rng = np.random.default_rng(seed)
    shape = (n, *t.shape[1:])
    if t.dtype == "int8":
        return rng.integers(-128, 128, size=shape, dtype=np.int8)
    if t.dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    raise PockError(f"input {t.name!r} is {t.dtype}: give inputs with --input")


def compare(ref: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """The golden outputs ``ref`` against an engine's ``y`` (samples on axis 0)."""
    ref, y = np.asarray(ref), np.asarray(y)
    n = len(ref)
    out: dict[str, Any] = {"samples": n, "output_shape": list(ref.shape[1:]),
                           "output_dtype": str(ref.dtype)}
    if ref.shape != y.shape:
        return out | {"bit_exact": False, "max_abs_diff": None, "mismatched_values": None,
                      "identical_samples": 0, "top1_agree": None, "top1_agreement": None,
                      "engine_shape": list(y.shape[1:]), "engine_dtype": str(y.dtype)}
    a = ref.reshape(n, -1)
    b = y.reshape(n, -1)
    if ref.dtype.kind in "iub" and y.dtype.kind in "iub":
        diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
        max_diff: Any = int(diff.max()) if diff.size else 0
        same = a == b
    else:
        af, bf = a.astype(np.float64), b.astype(np.float64)
        same = (af == bf) | (np.isnan(af) & np.isnan(bf))
        diff = np.where(same, 0.0, np.abs(af - bf))
        max_diff = float(diff.max()) if diff.size else 0.0
    bit_exact = ref.dtype == y.dtype and bool(same.all()) and (
        ref.dtype.kind not in "fc" or ref.tobytes() == y.tobytes())
    agree = int((a.argmax(axis=1) == b.argmax(axis=1)).sum()) if a.shape[1] else n
    return out | {"bit_exact": bit_exact, "max_abs_diff": max_diff,
                  "mismatched_values": int((~same).sum()),
                  "identical_samples": int(same.all(axis=1).sum()),
                  "top1_agree": agree, "top1_agreement": agree / n if n else None}


def format_validation(r: dict[str, Any]) -> str:
    """The small table ``validate`` prints."""
    n = r["samples"]
    source = f"inputs from {r['input']}" if r.get("input") else \
        f"random inputs (seed {r['seed']})"
    chain = f" ({', '.join(r['chain'])})" if r.get("chain") else ""
    head = (f"{r['model']}: engine {r['engine']}{chain} against the golden model on "
            f"{plural(n, 'sample')}, {source}")
    if r["max_abs_diff"] is None:
        shapes = (f"{r['output_shape']} {r['output_dtype']} vs {r['engine_shape']} "
                  f"{r['engine_dtype']}")
        rows = [("bit-exact", f"no: the outputs differ in shape ({shapes})"),
                ("samples", str(n))]
    else:
        exact = "yes" if r["bit_exact"] else (
            f"no ({r['mismatched_values']:,} of {n * int(np.prod(r['output_shape'])):,} "
            f"values differ; {r['identical_samples']} of {n} samples identical)")
        top1 = f"{r['top1_agree']}/{n} ({r['top1_agreement']:.1%})"
        rows = [("bit-exact", exact), ("max |diff|", f"{r['max_abs_diff']:g}"),
                ("top-1 agreement", top1), ("samples", str(n))]
    ins = r.get("instructions") or {}
    if ins.get("infer"):
        rows.append((f"{ins['unit']}/inference", f"{ins['infer']:,}"))
    width = max(len(k) for k, _ in rows)
    return "\n".join([head] + [f"  {k:<{width}}  {v}" for k, v in rows])
