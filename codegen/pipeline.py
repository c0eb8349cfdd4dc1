"""The compiler's stages, listed in one place, each a function of the previous stage's value.

    load ─► quantize ─► training_graph ─► plan ─► lower ─► render ─► write ─► build ─► run

``compile_model`` runs load .. write and returns a :class:`~codegen.render.output.Project`;
``build_project`` compiles it with the board's toolchain (host: make + gcc/clang);
``run_host_infer`` / ``run_host_fit`` run the host binary. Every stage can be called (and
tested) alone; ``ir.verify`` may run between any two.
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
from .run.host import run_host_fit, run_host_infer
from .toolchain import BuildResult, build_project

BOARDS = ("host",)
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


def training_graph(graph: Graph, spec: Any) -> Graph | None:
    """Stage 3: the training graph for a spec (TrainSpec, YAML path or short form), or None."""
    if spec is None:
        return None
    from .train import build_training_graph
    from .train.spec import TrainSpec, load_spec

    return build_training_graph(graph, spec if isinstance(spec, TrainSpec) else load_spec(spec))


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


def render(lowered: Lowered, source: Source, *, prefix: str = "pe",
           board: str = "host") -> RenderedProject:
    """Stage 6: the project's files, in memory (deterministic)."""
    spec = None
    if lowered.train is not None:
        spec = str(lowered.train.graph.metadata["training"].get("source") or "spec")
    info = SourceInfo(source.name, source.sha256, spec, source.calib_sha256, board)
    return render_project(lowered, info, prefix=prefix)


write = write_project            # Stage 7: files -> directory (refuses foreign directories)
build = build_project            # Stage 8: toolchain (host: make)

STAGES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("load", load), ("quantize", quantize), ("training_graph", training_graph),
    ("plan", plan), ("lower", lower), ("render", render), ("write", write),
    ("build", build), ("run", run_host_infer),
)


# -- the whole compile ----------------------------------------------------------------------------
def compile_model(model: str | Path | Graph, *, board: str = "host", spec: Any = None,
                  calib: np.ndarray | str | Path | None = None, out_dir: str | Path,
                  prefix: str = "pe", backend: str = "ref", force: bool = False) -> Project:
    """Model (float models are quantized first with ``calib``) -> C project in ``out_dir``.

    With a training ``spec`` the training graph is planned and lowered too (``pe_train_step``);
    ``pe_infer`` runs the forward graph, planned separately into the same arena.
    """
    from .render.names import check_prefix

    budget = resolve_board(board)
    check_prefix(prefix)
    check_out_dir(out_dir, force)
    source = quantize(load(model), calib)
    tg = training_graph(source.graph, spec)
    backend_name = "ref" if backend == "auto" else backend
    infer = lower(source.graph, plan(source.graph), backend_name)
    train = lower(tg, plan(tg), backend_name) if tg is not None else None
    if budget is not None:
        from .memplan import check_budget

        for lg in (infer, train):
            if lg is not None:
                check_budget(lg.plan, budget.sram_budget, budget.flash_budget, board=board)
    rendered = render(Lowered(infer, train, backend_name), source, prefix=prefix, board=board)
    return write(rendered, out_dir, force=force)


def resolve_board(board: str) -> Any:
    """The board record (codegen.board) of a board this stage can generate for, or None for the
    built-in host target (no budget). Only host targets are generated so far."""
    from .board import load_board

    try:
        b = load_board(board)
    except PockError:
        if board in BOARDS:
            return None
        raise
    if b.arch != "host":
        raise PockError(f"board {board!r} ({b.cpu}): code generation supports only the host "
                        "target so far")
    return b


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
    "compile_model",
    "graph_digest",
    "load",
    "lower",
    "open_project",
    "plan",
    "quantize",
    "render",
    "resolve_board",
    "run_host_fit",
    "run_host_infer",
    "training_graph",
    "write",
]
