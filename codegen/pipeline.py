"""The compiler's stages, listed in one place, each a function of the previous stage's value.

    load ─► quantize ─► training_graph ─► plan ─► lower ─► [embed] ─► render ─► write
         ─► build ─► run

``compile_model`` runs load .. write and returns a :class:`~codegen.render.output.Project`;
``build_project`` compiles it with the board's toolchain (host: make + gcc/clang; boards: make +
the board's cross compiler, checked against the board's budget); ``run_host_infer`` /
``run_host_fit`` run the host binary, ``run_device`` a board's firmware on its emulator. For
a device board, ``embed`` fits the training/evaluation data to the model and fixes the sample
order; the firmware carries them in flash. Every stage can be called (and tested) alone;
``ir.verify`` may run between any two.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PockError
from .ir import Graph
from .memplan import MemoryPlan, plan_memory
from .render import Lowered, LoweredGraph, RenderedProject, SourceInfo, render_project
from .render.output import Project, check_out_dir, open_project, write_project
from .run.device import run_device
from .run.host import run_host_fit, run_host_infer
from .toolchain import BuildResult, build_project

BOARDS = ("host",)      # built in: needs no board file
BACKENDS = ("auto", "ref")


@dataclass(frozen=True, eq=False)
class Source:
    """A model as loaded: its graph, a name and the sha256 of its bytes (for the banner)."""

    graph: Graph
    name: str
    sha256: str
    calib_sha256: str | None = None


# -- stages ---------------------------------------------------------------------------------------
def load(model: str | Path | Graph) -> Source:
    """Stage 1: a model file (.tflite / .onnx) or an IR graph."""
    if isinstance(model, Graph):
        return Source(model, model.name, graph_digest(model))
    from .frontend import load_model

    graph = load_model(model)
    return Source(graph, Path(model).name, hashlib.sha256(Path(model).read_bytes()).hexdigest())


def quantize(source: Source, calib: np.ndarray | str | Path | None) -> Source:
    """Stage 2: post-training quantization of a float model (int8 models pass through)."""
    g = source.graph
    if g.tensors[g.inputs[0]].dtype != "float32":
        return source
    if calib is None:
        raise PockError(f"{source.name}: a float model needs calibration data (--calib) to be "
                        "quantized")
    from .data import fit_input, load_npz
    from .quant import quantize as ptq

    x = load_npz(calib)[0] if isinstance(calib, (str, Path)) else np.asarray(calib)
    x = fit_input(g, x, "calibration data")
    if len(x) == 0:
        raise PockError("calibration data: no samples")
    digest = hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
    return Source(ptq(g, x), source.name, source.sha256, digest)


def resolve_spec(spec: Any, board: Any = None) -> Any:
    """The TrainSpec of ``spec`` (TrainSpec, YAML path or short form, or None); a board's
    default backward mode applies when the spec does not choose one (integer-only cores:
    int8)."""
    if spec is None:
        return None
    from .train.spec import TrainSpec, load_spec

    s = spec if isinstance(spec, TrainSpec) else load_spec(spec)
    return s.with_default_backward(board.default_backward) if board is not None else s


def training_graph(graph: Graph, spec: Any) -> Graph | None:
    """Stage 3: the training graph for a spec (TrainSpec, YAML path or short form), or None."""
    if spec is None:
        return None
    from .train import build_training_graph

    return build_training_graph(graph, resolve_spec(spec))


def plan(graph: Graph) -> MemoryPlan:
    """Stage 4: schedule + memory plan (arena, parameter and constant pools)."""
    p = plan_memory(graph)
    p.verify()
    return p


def lower(graph: Graph, memory_plan: MemoryPlan, backend: str = "ref") -> LoweredGraph:
    """Stage 5: one kernel call record per op, in the plan's schedule order."""
    from .backends import kernel_call

    if backend not in BACKENDS:
        raise PockError(f"backend {backend!r} is not available for the host (choose from "
                        f"{', '.join(BACKENDS)})")
    calls = tuple(kernel_call(graph, op) for op in memory_plan.schedule.ops)
    return LoweredGraph(graph, memory_plan, calls)


def embed(graph: Graph, spec: Any, data: Any = None, evals: Any = None, *, epochs: int = 1,
          seed: int = 0, shuffle: bool = True, print_outputs: bool = False) -> Any:
    """Device stage: training and evaluation data fitted to the model (int8 inputs, labels or
    int8 targets) with the sample order of every step (a ``render.device.DeviceData``)."""
    from .data import TensorSpec
    from .run.device import device_data

    return device_data(TensorSpec.of(graph), TensorSpec.of(graph, graph.outputs[0]),
                       spec.loss if spec is not None else None, data, evals, epochs=epochs,
                       seed=seed, shuffle=shuffle, print_outputs=print_outputs)


def render(lowered: Lowered, source: Source, *, prefix: str = "pe",
           board: Any = "host", data: Any = None) -> RenderedProject:
    """Stage 6: the project's files, in memory (deterministic). ``board``: a name or a
    ``codegen.board.Board``; a device board's project embeds ``data`` (a DeviceData)."""
    spec = None
    if lowered.train is not None:
        spec = str(lowered.train.graph.metadata["training"].get("source") or "spec")
    if isinstance(board, str):
        board = None if board == "host" else resolve_board(board)
    name = "host" if board is None else board.name
    info = SourceInfo(source.name, source.sha256, spec, source.calib_sha256, name)
    return render_project(lowered, info, prefix=prefix, board=board, data=data)


write = write_project            # Stage 7: files -> directory (refuses foreign directories)
build = build_project            # Stage 8: toolchain (host: make)

STAGES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("load", load), ("quantize", quantize), ("training_graph", training_graph),
    ("plan", plan), ("lower", lower), ("embed", embed),
    ("render", render), ("write", write), ("build", build), ("run", run_host_infer),
    ("run_device", run_device),
)


# -- the whole compile ----------------------------------------------------------------------------
def compile_model(model: str | Path | Graph, *, board: str = "host", spec: Any = None,
                  calib: np.ndarray | str | Path | None = None, out_dir: str | Path,
                  prefix: str = "pe", backend: str = "ref", force: bool = False,
                  data: Any = None, evals: Any = None, epochs: int = 1, seed: int = 0,
                  shuffle: bool = True, print_outputs: bool = False) -> Project:
    """Model (float models are quantized first with ``calib``) -> C project in ``out_dir``.

    With a training ``spec`` the training graph is planned and lowered too (``pe_train_step``);
    ``pe_infer`` runs the forward graph, planned separately into the same arena.

    For a device ``board`` (anything but ``host``) the project is firmware: the board's default
    backward mode applies when the spec does not choose one; ``data`` / ``evals`` (.npz paths,
    mappings with x/y, or (x, y) tuples) are fitted to the model (int8) and embedded in flash
    with the sample order of ``epochs`` epochs (``seed``, ``shuffle``: as ``fit``); the SRAM
    and flash the firmware will need are checked against the board's budget."""
    from .render.names import check_prefix

    b = resolve_board(board)
    device = b is not None and b.arch != "host"
    check_prefix(prefix)
    check_out_dir(out_dir, force)
    source = quantize(load(model), calib)
    spec = resolve_spec(spec, b if device else None)
    tg = training_graph(source.graph, spec)
    backend_name = "ref" if backend == "auto" else backend
    infer = lower(source.graph, plan(source.graph), backend_name)
    train = lower(tg, plan(tg), backend_name) if tg is not None else None
    dev_data = None
    if device:
        dev_data = embed(source.graph, spec, data, evals, epochs=epochs, seed=seed,
                         shuffle=shuffle, print_outputs=print_outputs)
        check_device_budget(b, infer, train, dev_data)
    elif b is not None:
        from .memplan import check_budget

        if data is not None or evals is not None:
            raise PockError("--data/--eval embed data in firmware; the host project reads its "
                            "data at run time (pockengine fit --engine host)")
        for lg in (infer, train):
            if lg is not None:
                check_budget(lg.plan, b.sram_budget, b.flash_budget, board=board)
    rendered = render(Lowered(infer, train, backend_name), source, prefix=prefix,
                      board=b if device else "host", data=dev_data)
    return write(rendered, out_dir, force=force)


# what the device harness keeps in RAM besides its output buffer (SHA-256 state...), bytes
HARNESS_RAM_BYTES = 512


def check_device_budget(board: Any, infer: LoweredGraph, train: LoweredGraph | None,
                        data: Any) -> None:
    """Before any C is compiled: the firmware's SRAM (arena + parameters + stack + harness
    buffers) and flash (constants + parameter images + embedded data) against the board's
    budget; a one-line PockError with the numbers and a hint when it cannot fit."""
    from .board import format_size
    from .toolchain.device import FLASH_HINT, SRAM_HINT

    name = infer.graph.name
    arena = max(infer.plan.arena_bytes, train.plan.arena_bytes if train else 0)
    params = train.plan.params_bytes if train else 0
    g = infer.graph
    harness = g.tensors[g.outputs[0]].nbytes + HARNESS_RAM_BYTES
    sram = arena + params + board.stack + harness
    if sram > board.sram_budget:
        raise PockError(f"{name}: needs {sram / 1024:.1f} KiB SRAM (arena {arena / 1024:.1f} "
                        f"KiB + parameters {params / 1024:.1f} KiB + stack "
                        f"{board.stack / 1024:.1f} KiB + harness {harness / 1024:.1f} KiB), "
                        f"board {board.name} has {format_size(board.sram_budget)}; "
                        + SRAM_HINT)
    consts = max(infer.plan.constant_bytes, train.plan.flash_bytes if train else 0)
    flash = consts + data.summary()["flash_bytes"]
    if flash > board.flash_budget:
        raise PockError(f"{name}: needs {flash / 1024:.1f} KiB flash (constants and parameter "
                        f"images {consts / 1024:.1f} KiB + embedded data "
                        f"{(flash - consts) / 1024:.1f} KiB, before code), board {board.name} "
                        f"has {format_size(board.flash_budget)}; " + FLASH_HINT)


def resolve_board(board: str) -> Any:
    """The board record (codegen.board) of a catalogue board (``host`` included), or None for
    the built-in host target when the catalogue has no host file (no budget)."""
    from .board import load_board

    try:
        return load_board(board)
    except PockError:
        if board in BOARDS:
            return None
        raise


def graph_digest(graph: Graph) -> str:
    """sha256 of a graph's content (names, shapes, quantization, data, ops, attributes)."""
    h = hashlib.sha256()

    def put(obj: Any) -> None:
        h.update(json.dumps(obj, sort_keys=True, default=_jsonable).encode())

    put([graph.name, graph.inputs, graph.outputs])
    for name in sorted(graph.tensors):
        t = graph.tensors[name]
        q = t.quant
        put([name, t.shape, t.dtype, t.role.value,
             None if q is None else [q.scale.tobytes().hex(), q.zero_point.tobytes().hex(),
                                     q.axis]])
        if t.data is not None:
            h.update(np.ascontiguousarray(t.data).tobytes())
    for op in graph.ops:
        put([op.type, op.name, op.inputs, op.outputs, sorted(op.attrs.items())])
    return h.hexdigest()


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return repr(v)


__all__ = [
    "BACKENDS",
    "BOARDS",
    "STAGES",
    "BuildResult",
    "Project",
    "Source",
    "build",
    "build_project",
    "check_device_budget",
    "compile_model",
    "embed",
    "graph_digest",
    "load",
    "lower",
    "open_project",
    "plan",
    "quantize",
    "render",
    "resolve_board",
    "resolve_spec",
    "run_device",
    "run_host_fit",
    "run_host_infer",
    "training_graph",
    "write",
]
