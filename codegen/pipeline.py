"""The compiler's stages, listed in one place, each a function of the previous stage's value.

    load ─► quantize ─► training_graph ─► stream ─► lower ─► plan ─► [embed] ─► render
         ─► write ─► build ─► run

``compile_model`` runs load .. write and returns a :class:`~codegen.render.output.Project`;
``build_project`` compiles it with the board's toolchain (host: make + gcc/clang; boards: make +
the board's cross compiler, checked against the board's budget); ``run_host_infer`` /
``run_host_fit`` run the host binary, ``run_device`` a board's firmware on its emulator. For
a device board, ``embed`` fits the training/evaluation data to the model and fixes the sample
order; the firmware carries them in flash. Every stage can be called (and tested) alone;
``ir.verify`` may run between any two. ``stream`` is a graph transformation (frozen chains of
convolutions fused into ops that run in row bands, ``codegen.stream``); ``plan_project`` lowers
and plans a project's graphs with it (only what lowers the arena, by default) and chooses the
band heights.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

import numpy as np

from .backends import Lowering, chain_for, get_backend, lower_graph
from .backends.arm import GENERIC
from .backends.cost import CostModel, call_key, load_cache, save_cache
from .backends.params import MUTABLE, mutable_tensors
from .blocks import block_report, block_updates, blockable
from .board import format_size, is_board_path, load_board
from .data import TensorSpec
from .errors import PockError
from .ir import Graph
from .memplan import MemoryPlan, plan_memory
from .model_store import (  # the model file's stages live with it; re-exported
    Source,
    graph_digest,
    load,
    quantize,
)
from .partial import partial_report, partial_weights, split_partial
from .pool_grads import fuse_pool_grads, pool_grad_report
from .render import Lowered, LoweredGraph, RenderedProject, SourceInfo, render_project
from .render.device import HARNESS_RAM_BYTES  # what the harness keeps in RAM (re-exported)
from .render.embed import device_data
from .render.names import check_prefix
from .render.output import Project, check_out_dir, open_project, write_project
from .report import write_plan_record  # the plan `pockengine report` draws
from .run.device import DEFAULT_TIMEOUT, run_device
from .run.host import run_host_fit, run_host_infer
from .schedule.storage import align_up
from .stream import STREAM_OP, band_options, stream_graph, stream_report, with_bands
from .targets import emulator_available, toolchain_available
from .toolchain import BuildResult, build_project
from .toolchain.device import FLASH_HINT, SRAM_HINT
from .train import build_training_graph
from .train.spec import TrainSpec, load_spec

BOARDS = ("host",)      # built in: needs no board file


def resolve_spec(spec: Any, board: Any = None) -> Any:
    """The TrainSpec of ``spec`` (TrainSpec, YAML path or short form, or None); a board's
    default backward mode applies when the spec does not choose one (integer-only cores:
    int8)."""
    if spec is None:
        return None
    s = spec if isinstance(spec, TrainSpec) else load_spec(spec)
    return s.with_default_backward(board.default_backward) if board is not None else s


def training_graph(graph: Graph, spec: Any) -> Graph | None:
    """Stage 3: the training graph for a spec (TrainSpec, YAML path or short form), or None."""
    if spec is None:
        return None
    return build_training_graph(graph, resolve_spec(spec))


def beside_training(graph: Graph, tg: Graph | None) -> Graph:
    """The inference graph of a project that also trains (``tg``): a copy that knows which of
    its tensors the training step changes, so that no backend bakes them into flash (packed
    weights, kernel sums); ``graph`` itself without training."""
    if tg is None:
        return graph
    g = graph.copy()
    g.metadata[MUTABLE] = sorted(mutable_tensors(tg) & set(graph.tensors))
    return g


def lower(graph: Graph, board: Any = None, backend: str = "auto",
          pins: Mapping[str, str] | None = None, cost: Any = None) -> Lowering:
    """Stage 4: one kernel call record per op, along the board's chain of backends
    (``backend``: auto | ref | cmsis-nn | ...; ``pins``: op name -> backend). The records carry
    the scratch and in-place facts the planner reads."""
    chain = chain_for(board if not isinstance(board, str) else resolve_board(board), backend)
    present = {op.name for op in graph.ops}
    if isinstance(cost, CostModel) and cost.graph is not graph:
        cost = dc_replace(cost, graph=graph)       # priced on this graph's tensors
    return lower_graph(graph, chain.backends, cost=cost, target=chain.target,
                       pins={k: v for k, v in (pins or {}).items() if k in present})


def plan(graph: Graph, lowering: Lowering | None = None) -> MemoryPlan:
    """Stage 5: schedule + memory plan (arena, parameter and constant pools), from the kernel
    records of ``lowering`` (default: the graph lowered for the host, ref kernels)."""
    if lowering is None:
        lowering = lower(graph)
    p = plan_memory(graph, kernels=lowering.calls)
    p.verify()
    return p


def lowered_graph(graph: Graph, lowering: Lowering, memory_plan: MemoryPlan) -> LoweredGraph:
    """The records in the plan's schedule order: what the renderer emits."""
    return LoweredGraph(graph, memory_plan, lowering.in_order(memory_plan.schedule.ops),
                        lowering)


def plan_lowered(graph: Graph, board: Any = None, backend: str = "auto",
                 pins: Mapping[str, str] | None = None, cost: Any = None) -> LoweredGraph:
    """lower + plan of one graph."""
    lowering = lower(graph, board, backend, pins, cost)
    return lowered_graph(graph, lowering, plan(graph, lowering))


STREAM_MODES = ("auto", "on", "off")


def stream(graph: Graph | None, enabled: bool = True, *,
           needed: Collection[str] | None = None, keep: Collection[str] = ()) -> Graph | None:
    """Stage 4, a graph transformation (after the training graph, before lowering): ``graph``
    with its chains of frozen convolutions fused into stream_chain ops that run in bands of
    output rows (``codegen.stream``: ``needed`` and ``keep`` are its options); band heights
    are chosen when the graph is planned (``plan_project``). ``graph`` itself when disabled
    or when it has no such chain."""
    if graph is None or not enabled:
        return graph
    return stream_graph(graph, needed=needed, keep=keep)


def _stage_mode(value: Any, modes: Sequence[str], true: str, what: str) -> str:
    """A memory stage's mode from a mode or a bool (True: ``true``, False: off)."""
    mode = {True: true, False: "off"}.get(value, value) if isinstance(value, bool) else value
    if mode not in modes:
        raise PockError(f"{what} {value!r}: choose from {', '.join(modes)}")
    return mode


def stream_mode(value: Any) -> str:
    """auto | on | off from a mode or a bool (True: on, False: off)."""
    return _stage_mode(value, STREAM_MODES, "on", "stream mode")


def plan_project(graph: Graph, tg: Graph | None, board: Any = None, backend: str = "auto",
                 pins: Mapping[str, str] | None = None, cost: Any = None,
                 streaming: Any = "auto", blocking: Any = "auto", partial: Any = "auto"
                 ) -> tuple[LoweredGraph, LoweredGraph | None]:
    """``_plan_stages`` of the project; with the blocked-update stage on (``blocking``), also
    of the training graph with its classifier heads' backward fused (``codegen.pool_grads``:
    the same bits, one position at a time), kept when that needs less RAM (arena and
    parameters). The training plan's ``stream`` says what was fused (``pooled_backward``)."""
    out = _plan_stages(graph, tg, board, backend, pins, cost, streaming, blocking, partial)
    if tg is None:
        return out
    bmode = block_mode(blocking)
    fused = fuse_pool_grads(tg) if bmode != "off" else tg
    if fused is not tg:
        alt = _plan_stages(graph, fused, board, backend, pins, cost, streaming, blocking,
                           partial)
        assert alt[1] is not None and out[1] is not None
        if _project_ram([alt[0], alt[1]]) < _project_ram([out[0], out[1]]):
            out = alt
    train = out[1]
    assert train is not None
    info = {"mode": bmode, "heads": pool_grad_report(train.graph)}
    return out[0], dc_replace(train, stream={**train.stream, "pooled_backward": info})


def _plan_stages(graph: Graph, tg: Graph | None, board: Any, backend: str,
                 pins: Mapping[str, str] | None, cost: Any, streaming: Any, blocking: Any,
                 partial: Any) -> tuple[LoweredGraph, LoweredGraph | None]:
    """lower + plan of a project's graphs, the inference graph (beside the training graph
    ``tg``) and ``tg``, with the blocked-update stage (``blocking``: auto | off; auto: the
    weight gradients that ``codegen.blocks`` can split are computed and applied in the fewest
    blocks of output channels that give the smallest training arena, none when splitting
    does not lower it; see ``_choose_blocks``), the partial-weight stage (``partial``: auto |
    on | off; auto: the channel-sparse weights ``codegen.partial`` can split keep only their
    trained channels in RAM when that lowers the project's RAM, arena + parameters; on:
    whenever they can; see ``_choose_partial``) and then the stream stage (``streaming``):

    - ``off``: none; ``on``: every chain the pass fuses;
    - ``auto`` (default): only what lowers the project's arena (the larger plan of the two):
      the arena with every chain streamed is the budget, and each graph streams only what the
      ops whose step is over the budget unstreamed need (the pass's ``needed``; every chain
      when that plan misses the budget); nothing when streaming does not lower the arena.
      A chain that would leave a faster backend for ref's kernels (hvx and cmsis-nn have no
      stream_chain kernel) is not fused while the unstreamed plans fit the board's SRAM
      budget: ten times the packets for memory the board has is no gain.

    Band heights: per stream_chain op, among the heights whose row buffers keep its step
    within the budget (from one row up, to the first that does not), the one with the fewest
    rows recomputed (none: they are carried over), then the fewest bytes carried between
    bands and the fewest bands. Pinned ops are never
    fused. Each LoweredGraph's ``stream`` says what it streamed (``stream_info``)."""
    mode = stream_mode(streaming)
    bmode = block_mode(blocking)
    keep = set(pins or {})

    def lp(g: Graph) -> LoweredGraph:
        return plan_lowered(g, board, backend, pins, cost)

    blocked = None
    if tg is not None and bmode != "off":
        blocked = _choose_blocks(tg, lp, keep)
    graphs = [beside_training(graph, tg)] + \
        ([blocked[0].graph if blocked else tg] if tg is not None else [])
    pmode = partial_mode(partial)
    base = [lp(g) for g in graphs]
    whole = base
    if tg is not None and pmode != "off":
        base = _choose_partial(graphs, base, lp, keep, always=pmode == "on")
        graphs = [lg.graph for lg in base]
    full = base

    def streamed() -> list[LoweredGraph]:
        fused = [stream(g, keep=keep) for g in graphs]
        return [b if f is g else lp(f) for f, g, b in zip(fused, graphs, base)]

    if mode != "off":
        full = streamed()
        slow = _demoted(full, base)
        if mode == "auto" and slow and _fits(base, board):
            keep |= slow                          # not worth a slower kernel: fits unstreamed
            full = streamed()
        budget = max(lg.plan.arena_bytes for lg in full)
        if mode == "auto" and budget >= max(lg.plan.arena_bytes for lg in base):
            full = base                           # streaming does not lower the arena
        elif mode == "auto":
            full = [_least_stream(b, f, budget, keep, lp) for b, f in zip(base, full)]
        full = [_choose_bands(lg, budget, lp) for lg in full]
    out = [dc_replace(lg, stream=stream_info(lg, b, mode)) for lg, b in zip(full, base)]
    if tg is not None:
        info = {"mode": bmode, "updates": block_report(out[1].graph),
                "unblocked_arena_bytes": (blocked[1] if blocked else base[1]).plan.arena_bytes}
        parts = {"mode": pmode, "weights": partial_report(out[1].graph),
                 "whole": {"arena_bytes": whole[1].plan.arena_bytes,
                           "params_bytes": whole[1].plan.params_bytes,
                           "ram_bytes": _project_ram(whole)}}
        out[1] = dc_replace(out[1], stream={**out[1].stream, "update_blocks": info,
                                            "partial_weights": parts})
    return out[0], (out[1] if tg is not None else None)


def _project_ram(lgs: Sequence[LoweredGraph]) -> int:
    """The RAM a project's plans need: the larger arena (the two functions share it) and the
    parameters."""
    return max(lg.plan.arena_bytes for lg in lgs) + lgs[-1].plan.params_bytes


PARTIAL_MODES = ("auto", "on", "off")


def partial_mode(value: Any) -> str:
    """auto | on | off from a mode or a bool (True: auto, False: off)."""
    return _stage_mode(value, PARTIAL_MODES, "auto", "partial weights")


def _choose_partial(graphs: Sequence[Graph], base: list[LoweredGraph],
                    lp: Callable[[Graph], LoweredGraph], keep: set[str], always: bool = False
                    ) -> list[LoweredGraph]:
    """The plans with the weights ``codegen.partial`` can split (those no pinned op updates)
    split, when that lowers the project's RAM (``always``: in any case); ``base``
    otherwise."""
    tg = graphs[-1]
    pinned = {op.inputs[0] for op in tg.ops if op.name in keep and op.inputs}
    found = {w: p for w, p in partial_weights(tg).items() if w not in pinned}
    if not found:
        return base
    split = [split_partial(g, found) for g in graphs]
    trial = [b if s is g else lp(s) for s, g, b in zip(split, graphs, base)]
    return trial if always or _project_ram(trial) < _project_ram(base) else base


BLOCK_MODES = ("auto", "off")
BLOCK_COUNTS = (2, 4, 8, 16, 32)


def block_mode(value: Any) -> str:
    """auto | off from a mode or a bool (True: auto, False: off)."""
    return _stage_mode(value, BLOCK_MODES, "auto", "update blocks")


def _choose_blocks(tg: Graph, lp: Callable[[Graph], LoweredGraph], keep: set[str]
                   ) -> tuple[LoweredGraph, LoweredGraph] | None:
    """(the blocked training graph's plan, the unblocked one's), or None when no split lowers
    the arena. Every splittable update (not pinned) in n blocks, for n in BLOCK_COUNTS while
    the arena falls (so the fewest blocks that give the smallest); then each update alone
    back to one block (in order of gradient size, smallest first) where the arena stays the
    same."""
    pairs = [(gw, u) for gw, u in blockable(tg) if not {gw.name, u.name} & keep]
    if not pairs:
        return None
    base = lp(tg)
    best, best_n = base, 1
    for n in BLOCK_COUNTS:                 # more blocks until the arena stops falling
        lg = lp(block_updates(tg, {u.name: n for _, u in pairs}))
        if lg.plan.arena_bytes >= best.plan.arena_bytes:
            break
        best, best_n = lg, n
    if best is base:
        return None
    counts = {u.name: best_n for _, u in pairs}
    for gw, u in sorted(pairs, key=lambda p: tg.tensors[p[0].outputs[0]].nbytes):
        trial = {**counts, u.name: 1}
        lg = lp(block_updates(tg, trial))
        if lg.plan.arena_bytes <= best.plan.arena_bytes:
            best, counts = lg, trial
    return best, base


def _demoted(full: Sequence[LoweredGraph], base: Sequence[LoweredGraph]) -> set[str]:
    """The member ops of the stream_chain ops in ``full`` that ref's kernels would run while
    their ops ran on a faster backend unstreamed (hvx, cmsis-nn: backends without a
    stream_chain kernel of their own)."""
    out: set[str] = set()
    for lg, b in zip(full, base):
        for c in stream_report(lg.graph):
            backend = lg.lowering.choices[c["op"]].call.backend
            members = {b.lowering.choices[n].call.backend for n in c["ops"]
                       if n in b.lowering.choices}
            if backend == "ref" and members - {"ref"}:
                out.update(c["ops"])
    return out


def _fits(base: Sequence[LoweredGraph], board: Any) -> bool:
    """Whether the unstreamed plans fit the board's SRAM budget (arena and parameters; no
    budget on the host)."""
    b = resolve_board(board) if isinstance(board, str) else board
    if b is None or not getattr(b, "budget", None):
        return True
    return max(lg.plan.ram_bytes for lg in base) <= b.sram_budget


def _least_stream(base: LoweredGraph, full: LoweredGraph, budget: int, keep: set[str],
                  lp: Callable[[Graph], LoweredGraph]) -> LoweredGraph:
    """The plan that streams only what the ops over ``budget`` in the unstreamed ``base``
    need, if it keeps to the budget; else ``full`` (every chain streamed)."""
    if full is base:
        return base
    s = base.plan.schedule
    hot = {op.name for op, live in zip(s.ops, s.live_bytes) if live > budget}
    least = stream(base.graph, needed=hot, keep=keep)
    if least is base.graph:
        return base if base.plan.arena_bytes <= budget else full
    lg = lp(least)
    return lg if lg.plan.arena_bytes <= budget else full


def _choose_bands(lg: LoweredGraph, budget: int,
                  lp: Callable[[Graph], LoweredGraph]) -> LoweredGraph:
    """``lg`` with the band height of each stream_chain op chosen (see ``plan_project``): the
    op's kernel record at each height gives its scratch, the schedule the bytes live beside
    it; kept when the new plan stays within ``budget``."""
    g, s = lg.graph, lg.plan.schedule
    step = {op.name: k for k, op in enumerate(s.ops)}
    bands: dict[str, int] = {}
    for op in g.ops:
        if op.type != STREAM_OP:
            continue
        call = lg.lowering.choices[op.name].call
        backend = get_backend(call.backend)
        room = budget - s.live_bytes[step[op.name]] + align_up(call.scratch_bytes, 16)
        best = None
        for p in band_options(g, op):            # taller bands need more: up to the budget
            rec = backend.build(g, op.replace(attrs={**op.attrs, "band_rows": p.band_rows}), 1,
                                lg.lowering.target)
            if rec is None or align_up(rec.scratch_bytes, 16) > room:
                break
            key = (p.recomputed_rows, p.moved_bytes, p.bands)
            best = min(best or (key, p.band_rows), (key, p.band_rows))
        if best is not None and best[1] != op.attrs["band_rows"]:
            bands[op.name] = best[1]
    if not bands:
        return lg
    chosen = lp(with_bands(g, bands))
    return chosen if chosen.plan.arena_bytes <= max(budget, lg.plan.arena_bytes) else lg


def stream_info(lg: LoweredGraph, base: LoweredGraph, mode: str) -> dict[str, Any]:
    """What ``lg`` streams (``plan --json`` / the manifest's ``stream``): the mode, per
    stream_chain op its ops, band height and count, row buffers, the intermediate bytes that
    no longer exist and the kernel that runs it, and the arena and its lower bound with and
    without streaming."""
    chains = stream_report(lg.graph)
    for c in chains:
        call = lg.lowering.choices[c["op"]].call
        c.update(kernel=call.kernel, backend=call.backend, kernel_scratch_bytes=call.scratch_bytes)
    return {"mode": mode, "chains": chains,
            "arena_bytes": lg.plan.arena_bytes, "lower_bound_bytes": lg.plan.lower_bound_bytes,
            "unstreamed": {"arena_bytes": base.plan.arena_bytes,
                           "lower_bound_bytes": base.plan.lower_bound_bytes}}


def embed(graph: Graph, spec: Any, data: Any = None, evals: Any = None, *, epochs: int = 1,
          seed: int = 0, shuffle: bool = True, print_outputs: bool = False) -> Any:
    """Device stage: training and evaluation data fitted to the model (int8 inputs, labels or
    int8 targets) with the sample order of every step (a ``render.device.DeviceData``)."""
    return device_data(TensorSpec.of(graph), TensorSpec.of(graph, graph.outputs[0]),
                       spec.loss if spec is not None else None, data, evals, epochs=epochs,
                       seed=seed, shuffle=shuffle, print_outputs=print_outputs)


def render(lowered: Lowered, source: Source, *, prefix: str = "pe",
           board: Any = "host", data: Any = None, board_file: bytes | None = None,
           stack_measured: int | None = None) -> RenderedProject:
    """Stage 6: the project's files, in memory (deterministic). ``board``: a name or a
    ``codegen.board.Board``; a device board's project embeds ``data`` (a DeviceData) and
    carries ``board_file`` (the YAML of a board that is not in the catalogue);
    ``stack_measured``: the stack high-water mark its ``stack`` was sized from."""
    spec = None
    if lowered.train is not None:
        spec = str(lowered.train.graph.metadata["training"].get("source") or "spec")
    if isinstance(board, str):
        board = None if board == "host" else resolve_board(board)
    name = "host" if board is None else board.name
    info = SourceInfo(source.name, source.sha256, spec, source.calib_sha256, name)
    return render_project(lowered, info, prefix=prefix, board=board, data=data,
                          board_file=board_file, stack_measured=stack_measured)


write = write_project            # Stage 7: files -> directory (refuses foreign directories)
build = build_project            # Stage 8: toolchain (host: make)

STAGES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("load", load), ("quantize", quantize), ("training_graph", training_graph),
    ("stream", stream), ("lower", lower), ("plan", plan), ("embed", embed),
    ("render", render), ("write", write), ("build", build), ("run", run_host_infer),
    ("run_device", run_device),
)


# -- the whole compile ----------------------------------------------------------------------------
# what compile_model's ``progress`` reports, in order
COMPILE_STAGES = ("load", "training graph", "kernel costs", "plan", "render")


def compile_model(model: str | Path | Graph, *, board: str = "host", spec: Any = None,
                  calib: np.ndarray | str | Path | None = None, out_dir: str | Path,
                  prefix: str = "pe", backend: str = "auto", force: bool = False,
                  data: Any = None, evals: Any = None, epochs: int = 1, seed: int = 0,
                  shuffle: bool = True, print_outputs: bool = False,
                  measure: bool = True, specialise: bool = True,
                  stack: int | str | None = None, stream: Any = "auto",
                  progress: Callable[[str], None] | None = None,
                  blocks: Any = "auto", partial: Any = "auto") -> Project:
    """Model (float models are quantized first with ``calib``) -> C project in ``out_dir``.

    With a training ``spec`` the training graph is planned and lowered too (``pe_train_step``);
    ``pe_infer`` runs the forward graph, planned separately into the same arena.

    For a device ``board`` (anything but ``host``) the project is firmware: the board's default
    backward mode applies when the spec does not choose one; ``data`` / ``evals`` (.npz paths,
    mappings with x/y, or (x, y) tuples) are fitted to the model (int8) and embedded in flash
    with the sample order of ``epochs`` epochs (``seed``, ``shuffle``: as ``fit``); the SRAM
    and flash the firmware will need are checked against the board's budget.

    Where the chain offers several kernels for an op, the cheapest is chosen: by instructions
    measured on the board's emulator (``measure``; cached, see ``backends.cost``), else by the
    static cost model; when the choice does not fit the budget, kernels with less scratch are
    tried before giving up (and, when flash is short, the arm backend's out-of-line kernels
    instead of its layer-specialised ones; ``specialise=False`` asks for those from the
    start). ``progress`` is called with the name of each of the COMPILE_STAGES as it
    begins (the CLI's progress bar).

    ``stack`` (device boards): the stack the firmware reserves, in bytes, instead of the
    board's ``stack``; ``"auto"``: measured: the same model and spec compiled with the
    board's stack and one sample, built and run once on the emulator (a training step,
    evaluations, an inference) with the stack painted, and its high-water mark plus
    STACK_MARGIN reserved (the manifest records both: ``device.stack_bytes``,
    ``device.stack_measured_bytes``).

    ``stream``: the stream stage (``plan_project``): ``auto`` (streams the frozen chains of
    convolutions in row bands where that lowers the arena), ``on``, ``off`` (or True/False);
    the manifest's ``memory.stream`` says what was streamed. ``blocks``: the blocked-update
    stage (``plan_project``: ``auto``, ``off``; ``memory.stream.train.update_blocks``).
    ``partial``: the partial-weight stage (``plan_project``: ``auto``, ``on``, ``off``;
    ``memory.stream.train.partial_weights``)."""
    stage = progress or (lambda name: None)
    b = resolve_board(board)
    device = b is not None and b.arch != "host"
    check_prefix(prefix)
    check_out_dir(out_dir, force, training=spec is not None)
    if stack is not None and not device:
        raise PockError(f"--stack {stack}: the stack is reserved by a device board's "
                        "firmware; the host project uses the process's stack")
    if stack is not None and stack != "auto":       # a size: checked before any work
        b = dc_replace(b, stack=check_stack_size(stack, b))
    stage("load")
    source = quantize(load(model), calib)
    stage("training graph")
    streaming = stream_mode(stream)
    spec = resolve_spec(spec, b if device else None)
    measured = None
    if stack == "auto":
        measured = measure_stack(source.graph, b, board, spec, prefix, backend, measure,
                                 streaming, blocks, partial)
        b = dc_replace(b, stack=check_stack_size(reserve_stack(measured), b))
    tg = training_graph(source.graph, spec)
    pins = dict(getattr(spec, "kernels", None) or {})
    check_pins(pins, source.graph, tg)
    chain = chain_for(b, backend)
    stage("kernel costs")
    cost = kernel_costs(source.graph, b, chain, measure=measure,
                        board_file=own_board_file(board) if device else None)
    stage("plan")
    infer, train = plan_project(source.graph, tg, b, backend, pins, cost, streaming, blocks,
                                partial)
    dev_data = None
    if device:
        dev_data = embed(source.graph, spec, data, evals, epochs=epochs, seed=seed,
                         shuffle=shuffle, print_outputs=print_outputs)
    elif data is not None or evals is not None:
        raise PockError("--data/--eval embed data in firmware; the host project reads its "
                        "data at run time (pockengine fit --engine host)")
    if not specialise:                 # the arm backend's out-of-line kernels only
        infer, train = (None if lg is None else _relower_generic(lg) for lg in (infer, train))
    if b is not None:
        infer, train = fit_budget(b, infer, train, dev_data, pins)
    stage("render")
    rendered = render(Lowered(infer, train, backend, chain.names), source, prefix=prefix,
                      board=b if device else "host", data=dev_data,
                      board_file=own_board_file(board) if device else None,
                      stack_measured=measured)
    project = write(rendered, out_dir, force=force)
    write_plan_record(project, infer, train)
    return project


STACK_MARGIN = (256, 4)     # a measured stack reserves high-water + max(256 B, high-water / 4)
MIN_STACK = 512


def reserve_stack(high_water: int) -> int:
    """The stack to reserve for a measured high-water mark (8-byte aligned)."""
    fixed, frac = STACK_MARGIN
    return align_up(max(MIN_STACK, high_water + max(fixed, high_water // frac)), 8)


def check_stack_size(stack: Any, board: Any) -> int:
    """A requested stack size in bytes: a positive multiple of 8, at least MIN_STACK, and
    less than the board's SRAM."""
    try:
        n = int(stack)
    except (TypeError, ValueError):
        raise PockError(f"--stack {stack!r}: give bytes (e.g. 2048) or auto") from None
    if n < MIN_STACK or n % 8 or n >= board.sram_budget:
        raise PockError(f"--stack {n}: must be a multiple of 8 from {MIN_STACK} B up to less "
                        f"than board {board.name}'s SRAM ({board.sram_budget:,} B)")
    return n


def measure_stack(g: Graph, board: Any, board_arg: str, spec: Any, prefix: str, backend: str,
                  measure: bool, streaming: str = "auto", blocks: Any = "auto",
                  partial: Any = "auto") -> int:
    """The stack high-water mark of the firmware of the (int8) graph ``g`` with the resolved
    ``spec`` on ``board``: compiled with the board's own stack and one zero sample (one
    training step, the evaluations before and after, an inference), built and run once on
    the emulator, which reports the deepest use of the painted stack."""
    for ok, why in (toolchain_available(board), emulator_available(board)):
        if not ok:
            raise PockError(f"--stack auto measures the stack on {board.name}'s emulator: {why}")
    x = np.zeros((1, *g.tensors[g.inputs[0]].shape[1:]), np.float32)
    out = g.tensors[g.outputs[0]]
    mse = spec is not None and spec.loss == "mse"
    y = np.zeros((1, *out.shape[1:]), np.float32) if mse else np.zeros(1, np.int64)
    with tempfile.TemporaryDirectory(prefix="pockengine-stack-") as tmp:
        # the probe keeps the board's stack, which may be what does not fit the budget: it
        # runs on a copy of the board whose budget is the memory the emulator models
        probe_board = roomy_board_file(board_arg, board, Path(tmp))
        proj = compile_model(g, board=str(probe_board), spec=spec, out_dir=Path(tmp) / "probe",
                             prefix=prefix, backend=backend, data=(x, y), evals=(x, y),
                             epochs=1, shuffle=False, measure=measure, stream=streaming,
                             blocks=blocks, partial=partial)
        res = run_device(proj, build=build_project(proj), timeout=DEFAULT_TIMEOUT)
    if res.stack_used is None:
        raise PockError(f"--stack auto: the firmware on {board.name} did not report its stack "
                        "use")
    return int(res.stack_used)


def roomy_board_file(board_arg: str, board: Any, work: Path) -> Path:
    """A copy of the board's file (same name) in ``work`` whose budget is the whole memory its
    emulator models (what a probe that misses the real budget needs to build and run)."""
    import yaml  # lazy: --help imports this module

    from .board import boards_dir
    from .safe_yaml import load_yaml_file

    src = Path(board_arg) if is_board_path(board_arg) else boards_dir() / f"{board.name}.yaml"
    d = load_yaml_file(src, "board file")
    mem = d.get("memory") or {}
    if "sram" in mem and "flash" in mem:
        d["budget"] = {"sram": mem["sram"]["size"], "flash": mem["flash"]["size"]}
    out = work / "board" / f"{board.name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(d, sort_keys=False))
    return out


def own_board_file(board: str) -> bytes | None:
    """The bytes of ``--board PATH.yaml`` (a board file of the user's own, which the project
    keeps a copy of, so that ``build`` and ``sim`` find the board later from the project
    alone); None for a catalogue board given by name."""
    return Path(board).read_bytes() if is_board_path(board) else None



def read_constant_bytes(lg: LoweredGraph) -> int:
    """Flash for the constants some kernel call of the plan reads: a record that carries a
    packed copy of a weight (an arm stream) may not pass the weight itself, and the board link
    (--gc-sections) drops a constant nothing reads."""
    used = {t for call in lg.calls for t in call.tensors()}
    return sum(align_up(p.nbytes, lg.plan.alignment)
               for t, p in lg.plan.pool("constant").items() if t in used)


def project_memory(board: Any, infer: LoweredGraph, train: LoweredGraph | None,
                   data: Any = None) -> dict[str, int]:
    """What a project of these plans needs on ``board``: SRAM (the arena, shared by
    ``pe_infer`` and ``pe_train_step``, so the larger plan; parameters; on a device board the
    stack and the harness buffers) and flash (constants and parameter images; the kernels'
    compile-time tables: multipliers, packed weights; embedded data)."""
    g = infer.graph
    device = getattr(board, "arch", "host") != "host"
    out = {"arena": max(infer.plan.arena_bytes, train.plan.arena_bytes if train else 0),
           "params": train.plan.params_bytes if train else 0,
           "stack": board.stack if device else 0,
           "harness": g.tensors[g.outputs[0]].nbytes + HARNESS_RAM_BYTES if device else 0,
           "constants": max(read_constant_bytes(infer),
                            read_constant_bytes(train) + train.plan.param_image_bytes
                            if train else 0),
           "kernel_tables": kernel_table_bytes(infer, train),
           "data": data.summary()["flash_bytes"] if data is not None else 0}
    out["sram"] = out["arena"] + out["params"] + out["stack"] + out["harness"]
    out["flash"] = out["constants"] + out["kernel_tables"] + out["data"]
    return out


def check_device_budget(board: Any, infer: LoweredGraph, train: LoweredGraph | None,
                        data: Any = None) -> dict[str, int]:
    """Before any C is compiled: the project's SRAM (arena + parameters, + stack + harness
    buffers on a device) and flash (constants + parameter images + embedded data) against the
    board's budget; a one-line PockError with the numbers and a hint when it cannot fit.
    ``plan --board`` and ``compile`` both call this, so they agree."""
    name = infer.graph.name
    m = project_memory(board, infer, train, data)
    if m["sram"] > board.sram_budget:
        parts = f"arena {m['arena'] / 1024:.1f} KiB + parameters {m['params'] / 1024:.1f} KiB"
        if m["stack"] or m["harness"]:
            parts += (f" + stack {m['stack'] / 1024:.1f} KiB + harness "
                      f"{m['harness'] / 1024:.1f} KiB")
        hint = SRAM_HINT
        over = m["sram"] - board.sram_budget
        turned_off = _memory_stages_off(infer, train)
        if turned_off:
            # a memory stage was turned off where it would act: say so first
            hint = f"hint: {turned_off}, or " + SRAM_HINT.removeprefix("hint: ")
        elif over <= m["stack"] - MIN_STACK:
            # the stack alone could make up for it: say which transformation would
            hint = (f"hint: {over / 1024:.1f} KiB short, less than the {m['stack'] / 1024:.1f} "
                    "KiB stack the firmware reserves: compile --stack auto reserves the "
                    "measured stack instead (about 1 KiB for the models we measured), or "
                    + SRAM_HINT.removeprefix("hint: "))
        raise PockError(f"{name}: needs {m['sram'] / 1024:.1f} KiB SRAM ({parts}), board "
                        f"{board.name} has {format_size(board.sram_budget)}; " + hint)
    if m["flash"] > board.flash_budget:
        raise PockError(f"{name}: needs {m['flash'] / 1024:.1f} KiB flash (constants and "
                        f"parameter images {m['constants'] / 1024:.1f} KiB + kernel tables "
                        f"{m['kernel_tables'] / 1024:.1f} KiB + embedded data "
                        f"{m['data'] / 1024:.1f} KiB, before code), board {board.name} has "
                        f"{format_size(board.flash_budget)}; " + FLASH_HINT)
    return m


def _memory_stages_off(infer: LoweredGraph, train: LoweredGraph | None) -> str:
    """Which memory transformation was turned off although it has something to act on
    (for the budget error's hint), or ""."""
    fixes = []
    lgs = [infer] + ([train] if train is not None else [])
    blocks = ((train.stream or {}).get("update_blocks") or {}) if train is not None else {}
    if blocks.get("mode") == "off" and blockable(train.graph):
        fixes.append("compile without --no-block-updates computes the weight gradients in "
                     "blocks of output channels")
    if any((lg.stream or {}).get("mode") == "off" and stream_graph(lg.graph) is not lg.graph
           for lg in lgs):
        fixes.append("compile without --no-stream runs frozen chains of convolutions in "
                     "row bands")
    parts = ((train.stream or {}).get("partial_weights") or {}) if train is not None else {}
    if parts.get("mode") == "off" and partial_weights(train.graph):
        fixes.append("compile without --no-partial-weights keeps only the trained channels "
                     "of a partly trained weight in RAM")
    return "; ".join(fixes)


def kernel_costs(graph: Graph, board: Any, chain: Any, *, measure: bool = True,
                 board_file: bytes | None = None) -> Any:
    """The cost model lowering chooses by: None for a one-backend chain; else measured counts
    (from the cache, measured now on the board's emulator when ``measure`` and the static model
    cannot decide some op, see ``cost.CLOSE``) over the static model. ``board_file``: the
    bytes of a board file of one's own (the measuring builds need it to find the board)."""
    if len(chain.backends) < 2:
        return None
    cached = load_cache()
    model = CostModel(graph, chain.target, cached)
    if not measure or board is None or board.arch == "host":
        return model
    lowering = lower_graph(graph, chain.backends, target=chain.target)
    missing = [c for name, ch in lowering.choices.items() if len(ch.candidates) > 1
               and not model.decided(graph.op_by_name(name), list(ch.candidates))
               for c in ch.candidates if call_key(c, chain.target) not in cached]
    if missing:
        model.measured = {**cached, **measure_kernel_costs(graph, board, chain, board_file)}
    return model


def measure_kernel_costs(graph: Graph, board: Any, chain: Any,
                         board_file: bytes | None = None) -> dict[str, int]:
    """Instructions per call of every forward op's kernel, measured on the board's emulator:
    one profiling build per backend of the chain (each op on that backend where it runs there,
    ref elsewhere), one inference each; the counts go into the cache. {} without an emulator."""
    ok, _ = emulator_available(board)
    if not ok:
        return {}
    x = np.zeros((1, *graph.tensors[graph.inputs[0]].shape[1:]), np.int8)
    out: dict[str, int] = {}
    for backend in chain.backends:
        sub = (backend,) if backend.name == "ref" else (backend, chain.backends[-1])
        lowering = lower_graph(graph, sub, target=chain.target)
        with tempfile.TemporaryDirectory(prefix="pockengine-measure-") as tmp:
            infer = lowered_graph(graph, lowering, plan(graph, lowering))
            dev = embed(graph, None, None, (x, None))
            rendered = render(Lowered(infer, None, backend.name, tuple(b.name for b in sub)),
                              load(graph), board=board, data=dev, board_file=board_file)
            proj = write(rendered, Path(tmp) / "p")
            res = run_device(proj, build=build(proj, profile_ops=True), profile_ops=True)
        per_op = {r["op"]: r["per_call"] for r in res.instructions.get("per_op_infer", [])}
        for name, call in lowering.calls.items():
            if per_op.get(name) is not None:
                out[call_key(call, chain.target)] = int(per_op[name])
    if out:
        save_cache(out)
    return out


def kernel_table_bytes(*lowered: LoweredGraph | None) -> int:
    """Bytes of the constant arrays the kernel calls carry (multipliers, shifts, packed
    weights, tables), each distinct array counted once (the renderer emits it once)."""
    seen: dict[bytes, int] = {}
    for lg in lowered:
        for call in (lg.calls if lg is not None else ()):
            for _, arr in call.const_arrays():
                data = np.ascontiguousarray(arr.values).tobytes()
                seen.setdefault(hashlib.sha1(arr.ctype.encode() + data).digest(), len(data))
    return sum(seen.values())


def fit_budget(board: Any, infer: LoweredGraph, train: LoweredGraph | None, data: Any,
               pins: Mapping[str, str]) -> tuple[LoweredGraph, LoweredGraph | None]:
    """The plans if they fit the board; else, when flash is short and the arm backend
    specialised some layers, its out-of-line kernels (no packed weight copies, code shared)
    and new plans; else, while some op has a candidate kernel with less scratch, that kernel
    (the largest scratch first) and new plans; the budget error when nothing more helps."""
    try:
        check_device_budget(board, infer, train, data)
        return infer, train
    except PockError as e:
        error = e
    if " KiB flash " in str(error) and any(
            c.backend == "arm" and c.kernel.startswith("pe_arm_")
            for lg in (infer, train) if lg is not None for c in lg.calls):
        infer, train = (None if lg is None else _relower_generic(lg) for lg in (infer, train))
        try:
            check_device_budget(board, infer, train, data)
            return infer, train
        except PockError as e:
            error = e
    pins = dict(pins)
    least = {name: min(ch.candidates, key=lambda c: c.scratch_bytes).backend
             for lg in (infer, train) if lg is not None
             for name, ch in lg.lowering.choices.items() if name not in pins}
    if any(lg is not None and any(ch.call.backend != least.get(name, ch.call.backend)
                                  for name, ch in lg.lowering.choices.items())
           for lg in (infer, train)):
        # when even the least scratch everywhere does not fit, no swap will: say so now
        # (one plan instead of one per op)
        smallest = [None if lg is None else _replan(lg, {**least, **pins})
                    for lg in (infer, train)]
        try:
            check_device_budget(board, smallest[0], smallest[1], data)
        except PockError as e:
            raise e from None
    while True:
        swaps = sorted(((ch.call.scratch_bytes, name, min(ch.candidates,
                                                          key=lambda c: c.scratch_bytes))
                        for lg in (infer, train) if lg is not None
                        for name, ch in lg.lowering.choices.items() if name not in pins),
                       key=lambda t: (-t[0], t[1]))
        swaps = [(sb, n, c) for sb, n, c in swaps if c.scratch_bytes < sb]
        if not swaps:
            raise error
        _, name, smaller = swaps[0]
        pins[name] = smaller.backend
        infer, train = (None if lg is None else _replan(lg, pins) for lg in (infer, train))
        try:
            check_device_budget(board, infer, train, data)
            return infer, train
        except PockError as e:
            error = e


def _relower_generic(lg: LoweredGraph) -> LoweredGraph:
    """The same lowering with the arm backend's out-of-line kernels (arm.GENERIC)."""
    lw = lg.lowering
    target = dc_replace(lw.target, features=lw.target.features | {GENERIC})
    lowering = lower_graph(lg.graph, lw.backends, pins=lw.pins, cost=lw.cost, target=target)
    return dc_replace(lowered_graph(lg.graph, lowering, plan(lg.graph, lowering)),
                      stream=lg.stream)


def _replan(lg: LoweredGraph, pins: Mapping[str, str]) -> LoweredGraph:
    present = {op.name for op in lg.graph.ops}
    lowering = lg.lowering.with_pins({k: v for k, v in pins.items() if k in present})
    return dc_replace(lowered_graph(lg.graph, lowering, plan(lg.graph, lowering)),
                      stream=lg.stream)


def check_pins(pins: Mapping[str, str], *graphs: Graph | None) -> None:
    """Every pinned op exists in one of the graphs (a one-line error otherwise)."""
    names = {op.name for g in graphs if g is not None for op in g.ops}
    for op_name in pins:
        if op_name not in names:
            close = sorted(n for n in names if n.split("/")[-1] == op_name.split("/")[-1])[:3]
            raise PockError(f"kernels: no op {op_name!r} to pin"
                            + (f" (did you mean {', '.join(close)}?)" if close else ""))


def resolve_board(board: str) -> Any:
    """The board record (codegen.board) of a catalogue board (``host`` included), or None for
    the built-in host target when the catalogue has no host file (no budget)."""
    try:
        return load_board(board)
    except PockError:
        if board in BOARDS:
            return None
        raise


__all__ = [
    "BOARDS",
    "STAGES",
    "BuildResult",
    "Project",
    "Source",
    "build",
    "build_project",
    "check_device_budget",
    "check_pins",
    "compile_model",
    "embed",
    "fit_budget",
    "graph_digest",
    "load",
    "lower",
    "lowered_graph",
    "open_project",
    "plan",
    "plan_lowered",
    "plan_project",
    "project_memory",
    "quantize",
    "render",
    "resolve_board",
    "resolve_spec",
    "run_device",
    "run_host_fit",
    "run_host_infer",
    "stream",
    "training_graph",
    "write",
]
