"""The MCUNet training race: pockengine vs TinyEngine, one training step on a Cortex-M7.

TinyEngine's tiny-training example trains MCUNet-5FPS (128x128x3, 10 classes) with its "49kb"
sparse update on a Cortex-M7; ``../shared/models/mcunet_49kb.json`` holds the network, the
scheme and TinyEngine's measured instructions (-O3, fpv5-d16): 121.08 M per step = 63.33 M
forward + 57.75 M backward (its updates run inside the backward: fused into the
weight-gradient kernels, bias updates between the layers), 2.82 instructions per forward MAC
and 5.82 per backward MAC. This script builds the same network and scheme in pockengine
(``tests/mcunet.py``: random int8 weights, the 49kb spec, fp32 backward, plain SGD, batch 1),
compiles the training firmware for the board with a few random samples embedded, builds it
and runs it on the board's emulator, and prints per training step: forward, loss, backward,
update and whole-step instructions, instructions per inference, instructions per MAC (MACs of
the graphs, which equal the table's), and the SRAM and flash of the linked image — next to
TinyEngine's figures and the targets of the issue (a step in at most 60 M instructions with
fp32 backward, the forward in at most 32 M).

    python -m tests.benchmark_race [--board mps2-an500] [--backend auto|ref|arm|cmsis-nn]
                                   [--stream auto|off] [--steps 1] [--ops N] [--json]

``--backend`` and ``--stream`` (the stream stage: ``auto``, the default, streams the frozen
chains of convolutions whose intermediates set the arena in row bands; ``off`` =
``compile --no-stream``; docs/memory.md) take comma-separated lists (one row each). A
per-call profiling build of the same project gives, per layer kind (pointwise, depthwise, k x k conv, FC, their input and
weight gradients, updates, the rest), instructions per MAC next to the bound (MACs/2 for the
int8 forward, where SMLAD does two multiply-accumulates; MACs for the fp32 backward, one
VMLA.F32 each); ``--no-kinds`` skips it; ``--ops N`` lists the N most expensive calls. When the plan does
not fit the board's budget, the row says so with the compiler's numbers, and the firmware is
built once more for a copy of the board file whose budget is the emulated memory (the
board's own file is not changed); the row says that it did.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from codegen.backends import BACKENDS as BACKEND_TABLE
from codegen.board import load_board
from codegen.errors import PockError
from tests.benchmark_cli import log, report, selected
from tests.mcunet import (
    TABLE,
    backward_macs,
    forward_macs,
    grad_op_macs,
    load_table,
    mcunet_graph,
    mcunet_spec_49kb,
    table_missing_reason,
)

DEFAULT_BOARD = "mps2-an500"
# The targets for pockengine on this race, instructions per step, per backward mode.
TARGETS = {"fp32": {"step": 60e6, "forward": 32e6}, "int8": {"step": 45e6}}
BACKWARD_MODES = tuple(TARGETS)
# pipeline.check_device_budget's error: "<model>: needs 612.3 KiB SRAM (...), board B has ..."
BUDGET_ERROR = re.compile(r"needs [\d.]+ KiB (SRAM|flash) .*board \S+ has ")


def tinyengine_row(table: dict[str, Any]) -> dict[str, Any]:
    """TinyEngine's measured step (the table's ``measured_instructions_m7_O3_fpv5d16``) as a
    row: its backward figure includes the loss gradient's tail and every update."""
    m, macs = table["measured_instructions_m7_O3_fpv5d16"], table["macs"]
    ph = m["train_step_by_phase_instrumented"]
    fwd, bwd = ph["forward_layers_0_50"], ph["backward_layers_67_191"]
    return {"engine": "TinyEngine", "board": "Cortex-M7 -O3", "backend": "TinyEngine",
            "backward_mode": "fp32", "fits": True, "forward": fwd,
            "loss": ph["loss_and_dlogits_layers_51_66"], "backward": bwd, "update": None,
            "step": m["train_step"], "infer": m["inference"],
            "macs": {"forward": macs["forward"], "backward_data": macs["backward_data"],
                     "weight_grad": macs["weight_grad"], "backward": macs["backward_total"]},
            "fwd_per_mac": round(fwd / macs["forward"], 3),
            "bwd_per_mac": round(bwd / macs["backward_total"], 3)}


def random_samples(graph, n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` random int8 images with random labels (the benchmarks' data)."""
    rng = np.random.default_rng(seed)
    shape = graph.tensors[graph.inputs[0]].shape[1:]
    classes = graph.tensors[graph.outputs[0]].shape[-1]
    return {"x": rng.integers(-128, 128, (n, *shape)).astype(np.int8),
            "y": rng.integers(0, classes, n)}


def larger_budget_board(board_name: str, work: Path) -> Path:
    """A copy of the board's file (same name, in ``work``) whose budget is the memory its
    emulator models: what a plan that misses the real budget needs to build and run."""
    import yaml

    from codegen.board import boards_dir
    from codegen.safe_yaml import load_yaml_file

    d = load_yaml_file(boards_dir() / f"{board_name}.yaml", "board file")
    d["budget"] = {"sram": d["memory"]["sram"]["size"], "flash": d["memory"]["flash"]["size"]}
    out = work / "boards" / f"{board_name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(d, sort_keys=False))
    return out


def op_kind(tg, op) -> str:
    """The layer kind an op of the training graph counts under in the per-kind table."""
    t = tg.tensors
    if op.type in ("conv2d", "conv2d_grad_input", "conv2d_grad_weight"):
        w = t[op.inputs[1]] if op.type != "conv2d_grad_input" else t[op.inputs[-1]]
        if op.type == "conv2d_grad_weight":
            w = t[op.outputs[0]]
        k = "pointwise conv" if w.shape[1:3] == (1, 1) else f"{w.shape[1]}x{w.shape[2]} conv"
        return k + {"conv2d": "", "conv2d_grad_input": ": input gradient",
                    "conv2d_grad_weight": ": weight gradient"}[op.type]
    names = {"depthwise_conv2d": "depthwise conv",
             "depthwise_conv2d_grad_input": "depthwise conv: input gradient",
             "depthwise_conv2d_grad_weight": "depthwise conv: weight gradient",
             "fully_connected": "fully connected",
             "fully_connected_grad_input": "fully connected: input gradient",
             "fully_connected_grad_weight": "fully connected: weight gradient"}
    if op.type in names:
        return names[op.type]
    if op.type.endswith("_update") or op.type == "step_counter":
        return "updates"
    return "other (adds, pooling, masks, bias gradients, loss)"


def profile_ops(proj, graph, spec) -> list[dict[str, Any]]:
    """Every kernel call of one training step (a per-call profiling build of the same
    project), with its MACs and layer kind, most expensive first."""
    from codegen import pipeline
    from codegen.blocks import reblock
    from codegen.run.device import run_device
    from codegen.summary import op_macs

    tg = pipeline.training_graph(graph, spec)
    blocked = ((proj.manifest.get("memory") or {}).get("stream") or {}).get("train") or {}
    tg = reblock(tg, (blocked.get("update_blocks") or {}).get("updates"))
    by_name = {op.name: op for op in tg.ops}
    macs = {op.name: (op_macs(tg, op) if op.outputs else 0) + grad_op_macs(tg, op)
            for op in tg.ops}
    fw = pipeline.build_project(proj, profile_ops=True, check=False)
    res = run_device(proj, build=fw, profile_ops=True)
    ops = [o for o in res.instructions.get("per_op", []) if o.get("per_step")]
    ops.sort(key=lambda o: -o["per_step"])
    return [{"op": o["op"], "phase": o["phase"], "kernel": o["kernel"], "backend": o["backend"],
             "instructions": o["per_step"], "macs": macs.get(o["op"], 0),
             "kind": op_kind(tg, by_name[o["op"]]) if o["op"] in by_name else "other"}
            for o in ops]


def kinds_table(ops: list[dict[str, Any]], backward: str = "fp32") -> list[dict[str, Any]]:
    """Per layer kind: instructions, MACs, instructions per MAC and the bound: MACs / 2 for the
    int8 forward and the int8 backward (SMLAD does two 16-bit multiply-accumulates), MACs for
    the fp32 backward (one VMLA.F32 per multiply-accumulate on a scalar FPU)."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for o in ops:
        key = (o["phase"] if o["phase"] == "forward" else "backward", o["kind"])
        a = acc.setdefault(key, {"phase": key[0], "kind": key[1], "instructions": 0,
                                 "macs": 0, "calls": 0})
        a["instructions"] += o["instructions"]
        a["macs"] += o["macs"]
        a["calls"] += 1
    rows = sorted(acc.values(), key=lambda a: (a["phase"] != "forward", -a["instructions"]))
    for a in rows:
        a["per_mac"] = round(a["instructions"] / a["macs"], 3) if a["macs"] else None
        a["bound_per_mac"] = (0.5 if a["phase"] == "forward" or backward == "int8" else 1.0) \
            if a["macs"] else None
    return rows


def _compile(graph, spec: str, board: str, backend: str, steps: int, out: Path,
             stream: str = "auto"):
    from codegen import pipeline

    return pipeline.compile_model(graph, board=board, spec=spec, out_dir=out, backend=backend,
                                  data=random_samples(graph, steps, seed=0),
                                  evals=random_samples(graph, 1, seed=1), stream=stream)


def _compile_fitting(graph, spec: str, board_name: str, backend: str, steps: int, work: Path,
                     row: dict[str, Any], stream: str = "auto"):
    """The project for the board; when the plan misses the board's budget, the budget error
    (``row["budget_error"]``) and the project for a copy of the board whose budget is its
    emulated memory (``row["budget_note"]``). PockError when neither compiles."""
    out = work / f"mcunet-{board_name}-{backend}-{stream}"
    try:
        return _compile(graph, spec, board_name, backend, steps, out, stream)
    except PockError as e:
        if not BUDGET_ERROR.search(str(e)):
            raise
        row["budget_error"] = str(e)
    copy = larger_budget_board(board_name, work)
    proj = _compile(graph, spec, str(copy), backend, steps, out, stream)
    big = load_board(str(copy))
    row["budget_note"] = (f"built and run for a temporary copy of {board_name}'s board file "
                          f"with the emulated memory as budget ({_k(big.sram_budget)} SRAM, "
                          f"{_k(big.flash_budget)} flash)")
    return proj


def measure(board_name: str, backend: str, steps: int, work: Path, graph, ops: int = 0,
            kinds: bool = False, backward: str = "fp32", stream: str = "auto"
            ) -> dict[str, Any]:
    """One board x backend x backward mode: compile, build, run; a row of the table."""
    from codegen import pipeline
    from codegen.backends import get_backend
    from codegen.run.device import run_device
    from codegen.targets import emulator_available, toolchain_available

    spec = mcunet_spec_49kb().replace("backward=fp32", f"backward={backward}")
    row: dict[str, Any] = {"engine": "pockengine", "board": board_name, "backend": backend,
                           "spec": spec, "stream": stream}
    board = load_board(board_name)
    for ok, why in (toolchain_available(board), emulator_available(board)):
        if not ok:
            return row | {"skipped": why}
    why = None if backend == "auto" else get_backend(backend).unavailable(board)
    if why is not None:
        return row | {"skipped": why}
    t0 = time.perf_counter()
    try:
        proj = _compile_fitting(graph, spec, board_name, backend, steps, work, row, stream)
    except PockError as e:
        return row | {"fits": False, "error": str(e)}
    fw = pipeline.build_project(proj, check="budget_note" not in row)
    res = run_device(proj, build=fw)
    b, ins, mem = fw.to_json(), res.instructions, proj.manifest["memory"]
    bwd = backward_macs(pipeline.training_graph(graph, spec))
    macs = {"forward": forward_macs(graph), "backward_data": bwd["data"],
            "weight_grad": bwd["weight_grad"], "backward": bwd["total"]}
    row |= {
        "fits": True, "chain": proj.manifest["chain"],
        "backward_mode": proj.manifest["training"]["backward"],
        "budget": {"sram_bytes": board.sram_budget, "flash_bytes": board.flash_budget},
        "flash_bytes": b["flash_bytes"], "sram_bytes": b["sram_bytes"],
        "arena_bytes": mem["arena_bytes"], "params_bytes": mem["params_bytes"],
        "streamed": [c["op"] for c in (mem["stream"]["train"] or {}).get("chains", [])],
        "stack_bytes": b["stack_bytes"], "stack_used_bytes": res.stack_used,
        "unit": ins["unit"], "steps": steps,
        **{k: ins[k] for k in ("forward", "loss", "backward", "update", "step", "infer")},
        "macs": macs,
        "fwd_per_mac": round(ins["forward"] / macs["forward"], 3),
        "bwd_per_mac": round((ins["backward"] + ins["update"]) / macs["backward"], 3),
        "infer_per_mac": round(ins["infer"] / macs["forward"], 3) if ins.get("infer") else None,
        "meets": {k: ins[k] <= v for k, v in TARGETS[backward].items()},
    }
    if ops or kinds:
        profiled = profile_ops(proj, graph, spec)
        row["top_ops"] = profiled[:ops]
        row["kinds"] = kinds_table(profiled, row["backward_mode"])
    return row | {"seconds": round(time.perf_counter() - t0, 1)}


def _m(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def _k(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f}K"


def _per(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _line(r: dict[str, Any]) -> tuple[str, ...]:
    if "skipped" in r or not r.get("fits"):
        return (r["engine"], r["board"], r["backend"], "-",
                "skipped" if "skipped" in r else "does not fit", *[""] * 10)
    board = r["board"] + ("*" if "budget_note" in r else "")
    backend = r["backend"] + (" no-stream" if r.get("stream") == "off" else "")
    return (r["engine"], board, backend, r["backward_mode"],
            _k(r.get("flash_bytes")), _k(r.get("sram_bytes")), _m(r["forward"]),
            _m(r["loss"]), _m(r["backward"]), _m(r["update"]), _m(r["step"]), _m(r["infer"]),
            _per(r["fwd_per_mac"]), _per(r["bwd_per_mac"]), _per(r.get("infer_per_mac")))


def _target_lines(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    modes = [m for m in BACKWARD_MODES
             if any(r.get("backward_mode") == m for r in rows if r["engine"] == "pockengine")]
    out = []
    for m in modes or ["fp32"]:
        t = TARGETS[m]
        fwd = f"<={_m(t['forward'])}" if "forward" in t else ""
        out.append(("target (issue)", "Cortex-M7", "-", m, "", "", fwd, "", "", "",
                    f"<={_m(t['step'])}", "", "", "", ""))
    return out


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    te = next((r for r in rows if r["engine"] == "TinyEngine"), None)
    for r in rows:
        if r["engine"] != "pockengine":
            continue
        where = (f"{r['board']} ({r['backend']}, {r.get('backward_mode') or 'fp32'} backward"
                 + (", no stream)" if r.get("stream") == "off" else ")"))
        if "skipped" in r or not r.get("fits"):
            notes.append(f"{where}: {r.get('skipped') or r.get('error', '')}")
            continue
        if "budget_error" in r:
            notes.append(f"{where}: does not fit the board's budget: {r['budget_error']}; "
                         f"{r['budget_note']}")
        tg = TARGETS[r["backward_mode"]]
        met = ", ".join(f"{k} {_m(r[k])} {'<=' if ok else '>'} {_m(tg[k])}"
                        f" ({'met' if ok else 'missed'})" for k, ok in r["meets"].items())
        vs = ""
        if te is not None:
            vs = (f"; vs TinyEngine: step x{r['step'] / te['step']:.2f}, forward "
                  f"x{r['forward'] / te['forward']:.2f}, backward+update "
                  f"x{(r['backward'] + r['update']) / te['backward']:.2f}")
        notes.append(f"{where}: chain {','.join(r['chain'])}; {met}{vs}; arena "
                     f"{_k(r['arena_bytes'])} + parameters {_k(r['params_bytes'])}, stack "
                     f"used {r['stack_used_bytes']} B; budget {_k(r['budget']['sram_bytes'])} "
                     f"SRAM / {_k(r['budget']['flash_bytes'])} flash; streamed in row bands: "
                     f"{', '.join(r.get('streamed') or []) or 'none'}")
        if r.get("kinds"):
            notes.append(f"    {where}: per layer kind (one training step; bound: MACs/2 "
                         "instructions for the int8 forward and backward, MACs for the fp32 "
                         "backward)")
            notes.append(f"    {'phase':<9}{'kind':<52}{'instr':>9}{'MACs':>12}{'/MAC':>7}"
                         f"{'bound':>7}")
            for k in r["kinds"]:
                notes.append(f"    {k['phase']:<9}{k['kind'][:51]:<52}{_m(k['instructions']):>9}"
                             f"{k['macs']:>12,}{_per(k['per_mac']):>7}"
                             f"{_per(k['bound_per_mac']):>7}")
        for o in r.get("top_ops", []):
            per = f"{o['instructions'] / o['macs']:.2f}/MAC" if o["macs"] else "-"
            notes.append(f"    {_m(o['instructions']):>7}  {o['phase']:<8} {o['op']:<44} "
                         f"{o['backend']}:{o['kernel']} ({o['macs']:,} MACs, {per})")
    return notes


def _macs_note(rows: list[dict[str, Any]]) -> str | None:
    te = next((r for r in rows if r["engine"] == "TinyEngine"), None)
    pe = next((r for r in rows if r["engine"] == "pockengine" and "macs" in r), None)
    if te is None or pe is None:
        return None
    a, b = pe["macs"], te["macs"]

    def same(k: str) -> str:
        return "equal" if a[k] == b[k] else f"differs by {a[k] - b[k]:+,}"

    return (f"MACs (graphs vs table): forward {a['forward']:,} vs {b['forward']:,} "
            f"({same('forward')}); backward {a['backward']:,} = data {a['backward_data']:,} + "
            f"weight gradients {a['weight_grad']:,} vs {b['backward']:,} ({same('backward')})")


def format_table(rows: list[dict[str, Any]]) -> str:
    head = ("engine", "board", "backend", "bwd", "flash", "SRAM", "forward", "loss",
            "backward", "update", "step", "inference", "fwd/MAC", "bwd/MAC", "inf/MAC")
    lines = [head, *(_line(r) for r in rows), *_target_lines(rows)]
    left = 4
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = ["  ".join(str(c).rjust(w) if i >= left else str(c).ljust(w)
                     for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append("")
    out.append("MCUNet-5FPS 128x128x3, 10 classes, TinyEngine's 49kb sparse update; spec:")
    out.append(f"  {mcunet_spec_49kb()}")
    out += textwrap.wrap(
        "forward .. step: instructions per training step "
        "(QEMU plugin; TinyEngine: its measured counts from the table); inference: per "
        "inference; flash, SRAM: the linked image (SRAM = .data + .bss + reserved stack; "
        "flash includes the embedded samples); fwd/MAC: forward instructions per forward MAC; "
        "bwd/MAC: backward + update instructions per backward MAC (TinyEngine's backward "
        "includes its updates); inf/MAC: inference instructions per forward MAC; *: built for "
        "a larger-budget copy of the board (see below); k, M: 10^3, 10^6; K: KiB.", 100,
        break_on_hyphens=False)
    macs = _macs_note(rows)
    if macs:
        out += textwrap.wrap(macs, 100, subsequent_indent="  ")
    for note in _notes(rows):
        out += [note] if note.startswith(" ") else textwrap.wrap(
            note, 100, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(out)


def run(board: str, backends: list[str], steps: int, ops: int = 0, log=print,
        kinds: bool = False, backwards: tuple[str, ...] = ("fp32",),
        streams: tuple[str, ...] = ("auto",)) -> list[dict[str, Any]]:
    """The rows: TinyEngine's, then one per backend and backward mode (skipped rows say
    why)."""
    why = table_missing_reason()
    if why is not None:
        return [{"engine": "pockengine", "board": board, "backend": b, "skipped": why}
                for b in backends]
    rows = [tinyengine_row(load_table(TABLE))]
    graph = mcunet_graph(seed=0)
    with tempfile.TemporaryDirectory(prefix="pe-race-") as tmp:
        for backend in backends:
            for mode, stream in ((m, s) for m in backwards for s in streams):
                row = measure(board, backend, steps, Path(tmp), graph, ops, kinds, mode, stream)
                rows.append(row)
                log(f"  mcunet on {board} ({backend}, {mode} backward, stream {stream}): "
                    + ("skipped" if "skipped" in row else "does not fit" if not row.get("fits")
                       else f"step {row['step']:,} {row['unit']}, forward {row['forward']:,}, "
                            f"backward {row['backward']:,}, {row['seconds']} s"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="MCUNet training step, pockengine vs TinyEngine")
    ap.add_argument("--board", default=DEFAULT_BOARD)
    ap.add_argument("--backend", default="auto",
                    help="backend(s), comma-separated: auto (the board's chain) or "
                         + ", ".join(BACKEND_TABLE))
    ap.add_argument("--steps", type=int, default=1,
                    help="training steps (random samples embedded); figures are per step")
    ap.add_argument("--ops", type=int, default=0,
                    help="also list the N most expensive kernel calls of a step")
    ap.add_argument("--no-kinds", action="store_true",
                    help="skip the per-layer-kind table (its profiling build and run)")
    ap.add_argument("--backward", default="fp32",
                    help="backward mode(s), comma-separated: fp32, int8 (TinyEngine's race "
                         "is fp32; the issue's int8 target is a step of at most 45 M)")
    ap.add_argument("--stream", default="auto",
                    help="stream stage(s), comma-separated: auto (default), off (as compile "
                         "--no-stream)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    backends = selected(ap, args.backend, [*BACKEND_TABLE, "auto"], "backend")
    streams = tuple(selected(ap, args.stream, ["auto", "off"], "stream"))
    backwards = tuple(selected(ap, args.backward, list(BACKWARD_MODES), "backward"))
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    try:
        load_board(args.board)
    except PockError as e:
        ap.error(str(e))
    rows = run(args.board, backends, args.steps, args.ops, log=log, kinds=not args.no_kinds,
               backwards=backwards, streams=streams)
    return report(rows, args.json, format_table)


if __name__ == "__main__":
    sys.exit(main())
