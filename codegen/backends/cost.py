"""What a kernel call costs: measured instruction counts, or a static model when there are none.

PockEngine picks the fastest kernel per op by measuring; so does pockengine. A call's *key* is
(board, kernel, its shape and parameter signature) — the numbers a kernel's running time depends
on (dims, strides, padding, offsets, clamp bounds, scratch), not the weight values — hashed.
Measured counts live in a JSON cache in the user's cache directory
(``$POCKENGINE_CACHE_DIR`` or ``$XDG_CACHE_HOME/pockengine`` or ``~/.cache/pockengine``),
``kernel_costs.json``: {key: instructions per call}. ``pipeline.measure_kernel_costs`` fills it
from one profiling build per candidate set (every op on one backend where it can run there).

Measuring is for choices the static model cannot make: an op is measured when some candidate
has no static price or when the two cheapest static prices are within a factor of
:data:`CLOSE` (arm against CMSIS-NN, say); arm's kernels against ref's, five times apart, are
not. Without a measurement (no emulator, ``--no-measure``) the static model prices a call as
``per_mac * MACs + per_element * output elements + per_call`` with factors per (backend, kernel
family, core class) shipped below and refreshed from measurements (``python -m
tests.benchmark_costs`` fits and prints them). Unknown families are not priced (the
chain order decides).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..ir import Graph, Op
from ..summary import op_macs
from .arm import BODIES
from .base import Target
from .kernel_call import (
    ArrayArg,
    ContextArg,
    ExprArg,
    FunctionArg,
    KernelCall,
    ScalarArg,
    Struct,
    StructArg,
    StructArrayArg,
)

CACHE_FILE = "kernel_costs.json"
CLOSE = 1.5            # static prices nearer than this factor: measure to choose

# core class of a target: what the inner loops can use
def core_class(target: Target) -> str:
    f = target.features
    if target.arch == "hexagon":
        return "hexagon"
    if target.arch == "host":
        return "host"
    if "mve" in f:
        return "mve"
    if "dsp" in f:
        return "dsp"
    return "m3"


# (backend, kernel family, core class) -> (instructions per MAC, per output element, per call).
# Families: the kernel name without the "pe_" prefix, its dtype suffix and a backend suffix.
# Fitted by `python -m tests.benchmark_costs` (least squares over the MLPerf Tiny models'
# calls; dsp: mps2-an386, m3: mps2-an385, hexagon: hexagon-v67, packets). A candidate the model
# cannot price leaves the choice to the chain order.
STATIC_FACTORS: dict[tuple[str, str, str], tuple[float, float, float]] = {
    ("arm", "add", "dsp"): (0.0, 17.14, 0.0),
    ("arm", "conv2d", "dsp"): (1.23, 38.27, 0.0),
    ("arm", "depthwise_conv2d", "dsp"): (3.29, 0.37, 54531.53),
    ("arm", "fully_connected", "dsp"): (1.33, 21.21, 390.76),
    ("cmsis-nn", "add", "dsp"): (0.0, 80.85, 3892.5),
    ("cmsis-nn", "avg_pool2d", "dsp"): (0.0, 0.0, 45695.33),
    ("cmsis-nn", "conv2d", "dsp"): (1.88, 57.69, 0.0),
    ("cmsis-nn", "depthwise_conv2d", "dsp"): (8.55, 0.95, 0.0),
    ("cmsis-nn", "fully_connected", "dsp"): (1.88, 49.99, 196.34),
    ("cmsis-nn", "softmax", "dsp"): (0.0, 235.39, 1112.19),
    ("ref", "add", "dsp"): (0.0, 119.36, 37285.5),
    ("ref", "avg_pool2d", "dsp"): (0.0, 0.0, 53161.0),
    ("ref", "conv2d", "dsp"): (6.24, 208.48, 16274.06),
    ("ref", "depthwise_conv2d", "dsp"): (38.41, 4.27, 0.0),
    ("ref", "fully_connected", "dsp"): (7.0, 76.28, 0.0),
    ("ref", "reshape", "dsp"): (0.0, 0.0, 19.0),
    ("ref", "softmax", "dsp"): (0.0, 236.36, 1117.14),
    ("ref", "add", "m3"): (0.0, 119.36, 37287.5),
    ("ref", "avg_pool2d", "m3"): (0.0, 0.0, 53161.0),
    ("ref", "conv2d", "m3"): (6.24, 208.56, 15932.08),
    ("ref", "depthwise_conv2d", "m3"): (36.64, 4.07, 0.0),
    ("ref", "fully_connected", "m3"): (7.0, 76.28, 0.0),
    ("ref", "reshape", "m3"): (0.0, 0.0, 19.0),
    ("ref", "softmax", "m3"): (0.0, 236.64, 1122.86),
    ("hvx", "add", "hexagon"): (0.0, 0.59, 36.0),
    ("hvx", "avg_pool2d", "hexagon"): (0.0, 0.0, 1465.33),
    ("hvx", "conv2d", "hexagon"): (0.06, 5.82, 0.0),
    ("hvx", "depthwise_conv2d", "hexagon"): (0.19, 0.02, 6281.54),
    ("hvx", "fully_connected", "hexagon"): (0.03, 4.64, 72.59),
    ("ref", "add", "hexagon"): (0.0, 68.0, 53.0),
    ("ref", "avg_pool2d", "hexagon"): (0.0, 22.61, 14231.67),
    ("ref", "conv2d", "hexagon"): (1.51, 110.25, 0.0),
    ("ref", "depthwise_conv2d", "hexagon"): (19.95, 2.22, 0.0),
    ("ref", "fully_connected", "hexagon"): (1.5, 32.99, 43.06),
    ("ref", "reshape", "hexagon"): (0.0, 0.0, 9.0),
    ("ref", "softmax", "hexagon"): (0.0, 83.57, 496.76),
}


def kernel_family(call: KernelCall) -> str:
    name = {body: ool for ool, body in BODIES.items()}.get(call.kernel, call.kernel)
    name = name.removeprefix("pe_")
    for suffix in ("_cmsis", "_arm", "_hvx", "_dot", "_small", "_per_channel"):
        name = name.removesuffix(suffix)
    for dtype in ("_s8_s16", "_s8", "_f32"):
        if name.endswith(dtype):
            return name[: -len(dtype)]
    return name


def _signature(value: object) -> object:
    """The parts of an argument a kernel's running time depends on (no array contents)."""
    if isinstance(value, Struct):
        return [value.ctype, [(k, _signature(v)) for k, _, v in value.items()]]
    if isinstance(value, StructArg):
        return _signature(value.value)
    if isinstance(value, StructArrayArg):
        return [_signature(v) for v in value.values]
    if isinstance(value, FunctionArg):
        return ["fn", [[c.kernel, [(n, _signature(a)) for n, a in c.args]] for c in value.cases]]
    if isinstance(value, ExprArg):
        return ["expr", value.expr]
    if isinstance(value, ArrayArg):
        return ["array", value.value.ctype, int(value.value.values.size)]
    if isinstance(value, ScalarArg):
        return ["scalar", value.value]
    if isinstance(value, ContextArg):
        return "ctx"
    if hasattr(value, "values") and hasattr(value, "ctype"):        # ConstArray
        return ["array", value.ctype, int(value.values.size)]
    if isinstance(value, (int, float)):
        return value
    return type(value).__name__


def call_key(call: KernelCall, target: Target) -> str:
    """Stable key of a call's cost on a target: board, kernel and argument signature."""
    sig = [target.name, call.kernel, call.scratch_bytes,
           [(name, _signature(arg)) for name, arg in call.args]]
    return hashlib.sha256(json.dumps(sig, sort_keys=True, default=str).encode()).hexdigest()[:32]


def cache_dir() -> Path:
    given = os.environ.get("POCKENGINE_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "pockengine"


def load_cache(path: Path | None = None) -> dict[str, int]:
    path = path or cache_dir() / CACHE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in data.items()
            if isinstance(v, int) and not isinstance(v, bool)} if isinstance(data, dict) else {}


def save_cache(entries: Mapping[str, int], path: Path | None = None) -> Path:
    """Merge ``entries`` into the cache file (written atomically)."""
    path = path or cache_dir() / CACHE_FILE
    merged = {**load_cache(path), **{k: int(v) for k, v in entries.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged, indent=0, sort_keys=True))
    tmp.replace(path)
    return path


@dataclass
class CostModel:
    """Prices calls on one target: a measured count if there is one, else the static model."""

    graph: Graph
    target: Target
    measured: Mapping[str, int] = field(default_factory=dict)
    use_static: bool = True

    def __call__(self, op: Op, call: KernelCall) -> float | None:
        key = call_key(call, self.target)
        if key in self.measured:
            return float(self.measured[key])
        if not self.use_static:
            return None
        return self.static(op, call)

    def static(self, op: Op, call: KernelCall) -> float | None:
        f = STATIC_FACTORS.get((call.backend, kernel_family(call), core_class(self.target)))
        if f is None:
            return None
        macs = op_macs(self.graph, op) if op.outputs else 0
        elements = self.graph.tensors[op.outputs[0]].size if op.outputs else 0
        return f[0] * macs + f[1] * elements + f[2]

    def decided(self, op: Op, calls: list[KernelCall]) -> bool:
        """Whether the static model alone can choose among ``calls`` (see CLOSE)."""
        prices = [self.static(op, c) for c in calls]
        if any(p is None for p in prices):
            return False
        ranked = sorted(float(p) for p in prices if p is not None)
        return len(ranked) < 2 or ranked[1] >= CLOSE * ranked[0]

    def source(self, op: Op, call: KernelCall) -> str:
        if call_key(call, self.target) in self.measured:
            return "measured"
        return "static" if self.static(op, call) is not None else "none"
