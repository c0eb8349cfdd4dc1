"""Calibration: run the float graph on sample inputs (golden model) and record value ranges."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data import check_finite
from ..errors import PockError
from ..golden import prepare
from ..ir import Graph

CalibData = np.ndarray | list[np.ndarray] | dict[str, np.ndarray]


@dataclass
class Ranges:
    """Observed [min, max] per float tensor over all calibration samples."""

    lo: dict[str, float] = field(default_factory=dict)
    hi: dict[str, float] = field(default_factory=dict)
    samples: int = 0

    def observe(self, name: str, values: np.ndarray) -> None:
        v = np.asarray(values)
        if v.size == 0:
            return
        lo, hi = float(np.min(v)), float(np.max(v))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise PockError(f"calibration produced non-finite values in tensor {name!r}")
        self.lo[name] = min(lo, self.lo.get(name, lo))
        self.hi[name] = max(hi, self.hi.get(name, hi))

    def get(self, name: str) -> tuple[float, float] | None:
        if name not in self.lo:
            return None
        return self.lo[name], self.hi[name]


def calibration_batches(graph: Graph, calib: CalibData) -> list[np.ndarray]:
    """Check calibration data against the graph inputs; return one float32 array per input.

    ``calib`` is an array (N, ...) for a one-input graph, or a list (or a dict by input name)
    with one such array per graph input. A single sample without the batch axis, or a list of
    samples for a one-input graph, is accepted too.
    """
    if isinstance(calib, dict):
        unknown = sorted(set(calib) - set(graph.inputs))
        missing = [n for n in graph.inputs if n not in calib]
        if unknown or missing:
            raise PockError(f"calibration data names {sorted(calib)}, the model inputs are "
                            f"{graph.inputs}")
        calib = [calib[n] for n in graph.inputs]
    arrays = list(calib) if isinstance(calib, (list, tuple)) else [calib]
    if len(graph.inputs) == 1 and len(arrays) > 1:
        # a list of individual samples for a one-input model
        try:
            arrays = [np.stack([np.asarray(a) for a in arrays])]
        except ValueError:
            shapes = sorted({tuple(np.shape(a)) for a in arrays})
            raise PockError(f"calibration samples have different shapes {shapes}") from None
    if len(arrays) != len(graph.inputs):
        raise PockError(f"calibration data has {len(arrays)} arrays, the model has "
                        f"{len(graph.inputs)} inputs {graph.inputs}")
    out: list[np.ndarray] = []
    n_samples = None
    for name, a in zip(graph.inputs, arrays):
        t = graph.tensors[name]
        a = np.asarray(a)
        want = tuple(t.shape[1:])
        if a.ndim == len(want) and tuple(a.shape) == want:
            a = a[None]
        if a.ndim != len(t.shape) or tuple(a.shape[1:]) != want:
            hint = ""
            if graph.metadata.get("input_layout") == "NCHW" and len(want) == 3:
                hint = " (the IR input is NHWC; transpose NCHW data with (0, 2, 3, 1))"
            raise PockError(f"calibration data for input {name!r} has shape {list(a.shape)}, "
                            f"expected [N, {', '.join(map(str, want))}]{hint}")
        if a.shape[0] == 0:
            raise PockError(f"calibration data for input {name!r} has no samples")
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            raise PockError(f"calibration data for input {name!r} has dtype {a.dtype}, "
                            "expected float32")
        a = a.astype(np.float32)
        check_finite(a, f"calibration data for input {name!r}")
        if n_samples is not None and a.shape[0] != n_samples:
            raise PockError(f"calibration arrays have different sample counts "
                            f"({n_samples} and {a.shape[0]})")
        n_samples = a.shape[0]
        out.append(a)
    return out


def calibrate(graph: Graph, batches: list[np.ndarray]) -> Ranges:
    """Run the float graph (golden model) over the calibration batches and record every float
    tensor's range. A graph with batch size 1 takes the whole batch at once; otherwise the
    samples are fed in chunks of the graph's batch size."""
    program = prepare(graph)
    ranges = Ranges()
    n = batches[0].shape[0]
    step = graph.tensors[graph.inputs[0]].shape[0] if graph.inputs else 1
    step = n if step == 1 else max(1, step)
    for start in range(0, n, step):
        feeds = {}
        for name, a in zip(graph.inputs, batches):
            chunk = a[start:start + step]
            if chunk.shape[0] < step:          # pad the last chunk (does not change min/max)
                reps = -(-step // chunk.shape[0])
                chunk = np.concatenate([chunk] * reps)[:step]
            feeds[name] = chunk
        with np.errstate(over="ignore", invalid="ignore"):   # observe() names the tensor
            values = program.execute(feeds, keep_all=True)
        for name, v in values.items():
            t = graph.tensors.get(name)
            if t is not None and t.dtype == "float32" and not t.is_const:
                ranges.observe(name, v)
    ranges.samples = n
    return ranges
