"""``pockengine report DIR -o report.html``: one self-contained HTML page about a project.

What the page shows, and where it comes from:

- the memory plan of ``pe_train_step`` and ``pe_infer`` (arena buffers as rectangles over
  schedule steps x arena offsets, the live-bytes profile over them): ``DIR/pe_plan.json``, the
  plan record that ``compile`` writes beside the manifest (``plan --json``'s plan of each
  graph, with every kernel call's MACs and operand bytes);
- the per-op table (op, kernel, backend, MACs, bytes, scratch, instructions where measured:
  per step from a ``sim --profile-ops`` run, else per call from the kernel measurements the
  compile made to choose between backends): the plan record and the manifest;
- SRAM and flash against the board's budget: the firmware image that ``sim`` ran, else the
  image in ``DIR/build`` when it is newer than the sources, else the compile-time estimate;
- the loss curve, accuracy (or MSE) before/after, instructions per phase: ``DIR/pe_run.json``,
  which ``sim`` writes (the result it prints with ``--json``, and the digest of the manifest
  it ran, so that a run older than the last compile is not shown as this project's).

The page has no external resources (inline CSS, SVG and a little JavaScript to sort tables;
its Content-Security-Policy forbids loading anything) and is rendered with Jinja2 from
``templates/report.html.j2`` with autoescaping: model-given names are text, never markup.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from . import __version__
from .errors import PockError, PockWarning, plural
from .render.device import HARNESS_RAM_BYTES
from .render.output import MANIFEST, Project, open_project
from .resources import data_dir
from .summary import kernel_macs
from .targets.size import size_report

PLAN_RECORD = "pe_plan.json"
RUN_RECORD = "pe_run.json"

KIND_COLORS = {"input": "#4e79a7", "output": "#f28e2b", "activation": "#76b7b2",
               "gradient": "#e15759", "mask": "#b07aa1", "scratch": "#9c755f"}
PHASE_COLORS = {"forward": "#4e79a7", "loss": "#f28e2b", "backward": "#e15759",
                "update": "#59a14f"}
MEMORY_COLORS = ("#4e79a7", "#59a14f", "#edc948", "#b07aa1", "#9c755f", "#bab0ac")

# drawing sizes (SVG user units)
WIDTH = 1000
LEFT, RIGHT = 78, 16
PLAN_TOP, PLAN_H = 12, 300
LOSS_TOP, LOSS_H = 12, 220
MAX_LOSS_POINTS = 2000


# -- records written beside the manifest ----------------------------------------------------------
def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _write_if_changed(path: Path, text: str) -> None:
    data = text.encode()
    if path.is_file() and path.read_bytes() == data:
        return                      # keep the timestamp (incremental builds, ELF freshness)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def graph_record(lowered: Any) -> dict[str, Any]:
    """The plan of one lowered graph as ``plan --json`` gives it, and per kernel call (in the
    order of the generated code): op, type, kernel, backend, MACs, operand bytes (inputs read
    and outputs written) and scratch."""
    g = lowered.graph
    ops = {op.name: op for op in g.ops}
    calls = []
    for c in lowered.calls:
        op = ops.get(c.op)
        names = [t for t in (*op.inputs, *op.outputs) if t] if op is not None else []
        calls.append({"op": c.op, "type": op.type if op is not None else "",
                      "kernel": c.kernel, "backend": c.backend,
                      "macs": kernel_macs(g, op) if op is not None else 0,
                      "bytes": int(sum(g.tensors[t].nbytes for t in names)),
                      "scratch_bytes": int(c.scratch_bytes)})
    return lowered.plan.to_json() | {"calls": calls, "stream": lowered.stream}


def write_plan_record(project: Project, infer: Any, train: Any = None) -> Path:
    """``DIR/pe_plan.json``: the memory plans and kernel calls of the project's graphs (what
    ``report`` draws); rewritten by every compile, untouched when unchanged."""
    m = project.manifest
    record = {"generator": "pockengine", "version": __version__,
              "model_sha256": m.get("model", {}).get("sha256"),
              "graphs": {"infer": graph_record(infer),
                         "train": graph_record(train) if train is not None else None}}
    path = project.dir / PLAN_RECORD
    _write_if_changed(path, json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
    return path


def save_run_record(project: Project, result: dict[str, Any]) -> Path | None:
    """``DIR/pe_run.json``: a firmware run's result (``sim --json``'s object) and the digest of
    the manifest it ran with. A project directory that cannot be written is a warning: the run
    itself succeeded."""
    path = project.dir / RUN_RECORD
    record = dict(result) | {"manifest_sha256": _digest(project.dir / MANIFEST)}
    try:
        _write_if_changed(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        warnings.warn(f"{path}: cannot save the run for pockengine report "
                      f"({e.strerror or e})", PockWarning, stacklevel=2)
        return None
    return path


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise PockError(f"{path}: unreadable ({getattr(e, 'strerror', None) or e})") from None


def load_plan(project: Project) -> tuple[dict[str, Any] | None, str | None]:
    """The plan record when it belongs to the current compile, else (None, why)."""
    path = project.dir / PLAN_RECORD
    rec = _read_json(path)
    if rec is None:
        return None, (f"no {PLAN_RECORD} in the project (compiled by an older pockengine?): "
                      "compile again to see the memory plan")
    m = project.manifest
    graphs = rec.get("graphs") if isinstance(rec, dict) else None
    if not isinstance(graphs, dict) or not isinstance(graphs.get("infer"), dict):
        raise PockError(f"{path}: not a pockengine plan record")
    train = graphs.get("train")
    arena_ok = graphs["infer"].get("arena_bytes") == m.get("memory", {}).get("infer_arena_bytes")
    if train is not None and m.get("training"):
        arena_ok = arena_ok and train.get("arena_bytes") == m["training"].get("arena_bytes")
    if rec.get("model_sha256") != m.get("model", {}).get("sha256") or not arena_ok \
            or (train is None) != (m.get("training") is None):
        return None, f"{PLAN_RECORD} is from another compile: compile again to see the plan"
    return rec, None


def load_run(project: Project) -> tuple[dict[str, Any] | None, str | None]:
    """The run record when it ran the current project, else (None, why)."""
    path = project.dir / RUN_RECORD
    rec = _read_json(path)
    if rec is None:
        if "device" in project.manifest:
            return None, f"not run yet: pockengine sim {project.dir} adds the run here"
        return None, None
    if not isinstance(rec, dict) or not isinstance(rec.get("loss"), list):
        raise PockError(f"{path}: not a pockengine run record")
    if rec.get("manifest_sha256") != _digest(project.dir / MANIFEST):
        return None, (f"{RUN_RECORD} is of an earlier compile of this directory; run "
                      f"pockengine sim {project.dir} again to see this one's")
    return rec, None


# -- formatting -----------------------------------------------------------------------------------
def size(n: float | None) -> str:
    if n is None:
        return "-"
    n = int(n)
    if abs(n) < 1024:
        return f"{n:,} B"
    if abs(n) < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.2f} MiB"


def num(n: Any) -> str:
    if n is None:
        return "-"
    if isinstance(n, float):
        return f"{n:,.4g}" if not n.is_integer() else f"{int(n):,}"
    return f"{n:,}"


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _ticks(top: float, count: int = 4) -> list[float]:
    """Round tick values from 0 to about ``top``."""
    if top <= 0 or not math.isfinite(top):
        return [0.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [k * step for k in range(int(top / step + 1e-9) + 1)]


# -- the memory plan picture ----------------------------------------------------------------------
def _short(name: str) -> str:
    return "/".join(name.split(";", 1)[0].split("/")[-2:])[:32]


def plan_picture(plan: dict[str, Any], phases: Sequence[str] | None = None) -> dict[str, Any]:
    """Rectangles (arena buffers: steps first..last x offset..offset+size), the live-bytes
    profile, axes, and (training) a strip of each step's phase."""
    steps = plan.get("steps") or []
    n = max(1, len(steps))
    plot_w = WIDTH - LEFT - RIGHT
    xs = plot_w / n
    buffers = plan["pools"]["arena"]["buffers"]
    top = max([plan.get("arena_bytes") or 0, plan.get("lower_bound_bytes") or 0, 1]
              + [b["offset"] + b["size"] for b in buffers])
    ys = PLAN_H / top
    y0 = PLAN_TOP + PLAN_H
    rects = []
    for b in buffers:
        h = b["size"] * ys
        w = (b["last"] - b["first"] + 1) * xs
        shares = b["tensors"][1:]
        tip = (f"{b['name']} [{b['kind']}]: {b['nbytes']:,} B at offset {b['offset']:,}.."
               f"{b['offset'] + b['size']:,}, steps {b['first']}..{b['last']}"
               + (f"; shares its bytes with {', '.join(shares)}" if shares else ""))
        rects.append({"x": LEFT + b["first"] * xs, "y": y0 - (b["offset"] + b["size"]) * ys,
                      "w": w, "h": max(h, 0.5), "fill": KIND_COLORS.get(b["kind"], "#cccccc"),
                      "tip": tip, "label": _short(b["name"]) if h >= 11 and w >= 70 else ""})
    live = []
    for k, s in enumerate(steps):
        y = y0 - s["live_bytes"] * ys
        live += [(LEFT + k * xs, y), (LEFT + (k + 1) * xs, y)]
    yticks = [{"y": y0 - v * ys, "label": size(v)} for v in _ticks(top)]
    every = max(1, math.ceil(n / 12))
    xticks = [{"x": LEFT + (k + 0.5) * xs, "label": str(k)} for k in range(0, len(steps), every)]
    strip = []
    if phases:
        for k, ph in enumerate(phases[:len(steps)]):
            strip.append({"x": LEFT + k * xs, "w": xs, "fill": PHASE_COLORS.get(ph, "#cccccc"),
                          "tip": f"step {k}: {steps[k]['op']} ({ph})"})
    height = y0 + (44 if strip else 30)
    return {"width": WIDTH, "height": height, "left": LEFT, "top": PLAN_TOP, "plot_w": plot_w,
            "plot_h": PLAN_H, "y0": y0, "rects": rects, "xticks": xticks, "yticks": yticks,
            "live": _points(live), "strip": strip, "strip_y": y0 + 24,
            "kinds": sorted({b["kind"] for b in buffers},
                            key=lambda k: (list(KIND_COLORS).index(k) if k in KIND_COLORS
                                           else len(KIND_COLORS), k))}


def _points(pts: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.2f},{y:.2f}" for x, y in pts)


# -- the loss curve -------------------------------------------------------------------------------
def loss_picture(losses: Sequence[float], epochs: int) -> dict[str, Any] | None:
    """The loss per step (buckets of means past MAX_LOSS_POINTS), its running mean and the
    epoch boundaries; non-finite losses break the line (and are counted)."""
    vals = [float(v) if v is not None else math.nan for v in losses]
    finite = [v for v in vals if math.isfinite(v)]
    if not finite:
        return None
    n = len(vals)
    plot_w = WIDTH - LEFT - RIGHT
    lo, hi = min(0.0, min(finite)), max(finite)
    hi = hi if hi > lo else lo + 1.0
    ys = LOSS_H / (hi - lo)
    y0 = LOSS_TOP + LOSS_H
    x_of = (lambda k: LEFT + plot_w * k / max(1, n - 1))
    bucket = max(1, math.ceil(n / MAX_LOSS_POINTS))
    segments: list[list[tuple[float, float]]] = [[]]
    for start in range(0, n, bucket):
        chunk = vals[start:start + bucket]
        if not all(math.isfinite(v) for v in chunk):
            if segments[-1]:
                segments.append([])
            continue
        segments[-1].append((x_of(start + (len(chunk) - 1) / 2), y0 - (sum(chunk) / len(chunk)
                                                                        - lo) * ys))
    window = n // 25                # no running mean of short runs: the steps are the line
    smooth: list[tuple[float, float]] = []
    acc: list[float] = []
    for k, v in enumerate(vals):
        if math.isfinite(v):
            acc.append(v)
        if len(acc) > max(1, window):
            acc.pop(0)
        if window > 1 and acc and (k % bucket == 0 or k == n - 1):
            smooth.append((x_of(k), y0 - (sum(acc) / len(acc) - lo) * ys))
    per = n // epochs if epochs and n % epochs == 0 else 0
    bounds = [{"x": x_of(e * per - 0.5), "label": f"epoch {e + 1}"}
              for e in range(1, epochs)] if per else []
    every = max(1, math.ceil(n / 10))
    return {"width": WIDTH, "height": y0 + 34, "left": LEFT, "top": LOSS_TOP, "plot_w": plot_w,
            "plot_h": LOSS_H, "y0": y0, "lines": [_points(s) for s in segments if len(s) > 1],
            "dots": [{"x": s[0][0], "y": s[0][1]} for s in segments if len(s) == 1],
            "smooth": _points(smooth) if len(smooth) > 1 else "", "window": window,
            "bounds": bounds, "nonfinite": n - len(finite),
            "yticks": [{"y": y0 - v * ys, "label": f"{lo + v:.4g}"} for v in _ticks(hi - lo)],
            "xticks": [{"x": x_of(k), "label": str(k)} for k in range(0, n, every)],
            "first": finite[0], "last": finite[-1], "min": min(finite)}


# -- memory against the budget --------------------------------------------------------------------
def _elf_sizes(project: Project) -> tuple[dict[str, int], Path] | None:
    """Sizes of the firmware in DIR/build when it is newer than every generated file."""
    elf = project.binary()
    try:
        t = elf.stat().st_mtime
        newest = max((project.dir / f).stat().st_mtime for f in project.manifest["files"]
                     if (project.dir / f).is_file())
    except (OSError, ValueError, KeyError):
        return None
    if t < newest:
        return None
    try:
        rep = size_report(elf)
    except Exception:  # noqa: BLE001 - not an ELF we can read: fall back to the estimate
        return None
    return {"flash_bytes": rep.flash_bytes, "sram_bytes": rep.sram_total_bytes,
            "sram_static_bytes": rep.sram_bytes, "stack_bytes": rep.stack_bytes}, elf


def memory_section(project: Project, run: dict[str, Any] | None) -> dict[str, Any]:
    """SRAM and flash, part by part, against the board's budget (None on the host)."""
    m = project.manifest
    mem = m.get("memory", {})
    dev = m.get("device")
    arena, params = int(mem.get("arena_bytes", 0)), int(mem.get("params_bytes", 0))
    consts, images = int(mem.get("constant_bytes", 0)), int(mem.get("param_image_bytes", 0))
    if dev is None:
        sram = [("arena", arena), ("parameters", params)]
        flash = [("constants", consts), ("parameter images", images)]
        return _memory(sram, flash, None, "the memory plan (a host project: no board budget; "
                       "code is not counted)", None)
    budget = dev.get("budget", {})
    data_flash = int(dev.get("data", {}).get("flash_bytes", 0))
    measured, source = None, None
    if run is not None and isinstance(run.get("memory"), dict):
        measured = run["memory"]
        source = "the firmware image that sim ran (measured)"
    else:
        found = _elf_sizes(project)
        if found is not None:
            measured, elf = found
            source = f"the firmware image {elf.relative_to(project.dir)} (measured)"
    if measured is not None:
        static = int(measured.get("sram_static_bytes", arena + params))
        stack = int(measured.get("stack_bytes", 0))
        flash_total = int(measured["flash_bytes"])
        sram = [("arena", arena), ("parameters", params),
                ("other .data/.bss", max(0, static - arena - params)), ("stack", stack)]
        flash = [("code and constants", max(0, flash_total - data_flash)),
                 ("embedded data", data_flash)]
        used = run.get("stack_used_bytes") if run is not None else None
        return _memory(sram, flash, budget, source, used)
    harness = int(m.get("output", {}).get("bytes", 0)) + HARNESS_RAM_BYTES
    sram = [("arena", arena), ("parameters", params), ("stack", int(dev.get("stack_bytes", 0))),
            ("harness buffers", harness)]
    flash = [("constants", consts), ("parameter images", images), ("embedded data", data_flash)]
    return _memory(sram, flash, budget, "the compile-time estimate (code not counted: "
                   "pockengine build or sim measures the image)", None)


def _memory(sram: list[tuple[str, int]], flash: list[tuple[str, int]],
            budget: dict[str, int] | None, source: str, stack_used: int | None
            ) -> dict[str, Any]:
    rows = []
    for name, parts, key in (("SRAM", sram, "sram_bytes"), ("flash", flash, "flash_bytes")):
        total = sum(v for _, v in parts)
        cap = (budget or {}).get(key)
        rows.append(_memory_bar(name, parts, total, cap))
    return {"rows": rows, "source": source, "stack_used": stack_used,
            "has_budget": budget is not None, "width": WIDTH}


def _memory_bar(name: str, parts: list[tuple[str, int]], total: int, cap: int | None
                ) -> dict[str, Any]:
    plot_w = WIDTH - 2 * 8
    scale = plot_w / max(total, cap or 0, 1)
    x = 8.0
    segs = []
    for i, (label, v) in enumerate(parts):
        w = v * scale
        segs.append({"label": label, "bytes": v, "x": x, "w": w,
                     "fill": MEMORY_COLORS[i % len(MEMORY_COLORS)],
                     "share": (v / cap) if cap else None,
                     "tip": f"{label}: {v:,} B" + (f" ({v / cap:.1%} of the budget)"
                                                   if cap else "")})
        x += w
    return {"name": name, "segments": segs, "total": total, "budget": cap,
            "fits": cap is None or total <= cap, "share": (total / cap) if cap else None,
            "budget_x": 8 + cap * scale if cap else None}


# -- the per-op tables ----------------------------------------------------------------------------
def op_tables(project: Project, plan: dict[str, Any] | None, run: dict[str, Any] | None
              ) -> list[dict[str, Any]]:
    m = project.manifest
    ins = (run or {}).get("instructions") or {}
    unit = ins.get("unit", "instructions")
    tables = []
    training = m.get("training")
    graphs = (plan or {}).get("graphs") or {}
    for name, key, man_ops, run_ops, per in (
            ("pe_train_step", "train", (training or {}).get("ops"), ins.get("per_op"),
             "per_step"),
            ("pe_infer", "infer", m.get("ops"), ins.get("per_op_infer"), "per_call")):
        if man_ops is None:
            continue
        calls = (graphs.get(key) or {}).get("calls") or []
        rows = []
        for k, op in enumerate(man_ops):
            c = calls[k] if k < len(calls) and calls[k]["op"] == op["op"] else {}
            measured, source = None, ""
            r = run_ops[k] if run_ops and k < len(run_ops) else None
            if r is not None and r.get("op") == op["op"] and r.get(per) is not None:
                measured = r[per]
                source = "run, per step" if per == "per_step" else "run, per call"
            elif op.get("cost_source") == "measured" and op.get("instructions") is not None:
                measured, source = op["instructions"], "kernel measurement, per call"
            rows.append({"index": k, "op": op["op"], "type": c.get("type", ""),
                         "phase": op.get("phase", ""), "kernel": op["kernel"],
                         "backend": op.get("backend", "ref"), "macs": c.get("macs"),
                         "bytes": c.get("bytes"), "scratch": op.get("scratch_bytes"),
                         "instructions": measured, "source": source})
        total_ins = sum(r["instructions"] for r in rows if r["source"].startswith("run")) \
            if any(r["source"].startswith("run") for r in rows) else None
        tables.append({"name": name, "id": key, "rows": rows, "training": key == "train",
                       "unit": unit, "macs": sum(r["macs"] or 0 for r in rows),
                       "measured": sum(1 for r in rows if r["instructions"] is not None),
                       "run_total": total_ins})
    return tables


# -- the whole page -------------------------------------------------------------------------------
def _run_section(run: dict[str, Any]) -> dict[str, Any]:
    ins = run.get("instructions") or {}
    phases = [{"name": p, "value": ins.get(p), "fill": PHASE_COLORS[p]}
              for p in ("forward", "loss", "backward", "update") if ins.get(p) is not None]
    step = ins.get("step") or sum(p["value"] for p in phases) or 0
    x = 8.0
    for p in phases:
        p["w"] = (WIDTH - 16) * p["value"] / step if step else 0
        p["x"] = x
        x += p["w"]
    sat = run.get("saturated_updates")
    return {"board": run.get("board"), "steps": run.get("steps", len(run["loss"])),
            "epochs": run.get("epochs") or 0, "train_samples": run.get("train_samples"),
            "eval_samples": run.get("eval_samples"),
            "accuracy_before": run.get("accuracy_before"),
            "accuracy_after": run.get("accuracy_after"),
            "mse_before": run.get("mse_before"), "mse_after": run.get("mse_after"),
            "loss": loss_picture(run["loss"], int(run.get("epochs") or 0)),
            "unit": ins.get("unit", "instructions"), "phases": phases, "step": ins.get("step"),
            "infer": ins.get("infer"), "params_sha256": run.get("params_sha256"),
            "saturated": sat, "stack_used": run.get("stack_used_bytes"), "width": WIDTH}


def report_context(directory: str | Path) -> dict[str, Any]:
    """Everything the template shows, as plain data."""
    project = open_project(directory)
    m = project.manifest
    plan, plan_note = load_plan(project)
    run, run_note = load_run(project)
    notes = [n for n in (plan_note, run_note) if n]
    training = m.get("training")
    pictures = []
    if plan is not None:
        graphs = plan["graphs"]
        if graphs.get("train") is not None:
            phases = [op.get("phase", "") for op in (training or {}).get("ops", [])]
            pictures.append(("pe_train_step", "train", graphs["train"], phases))
        pictures.append(("pe_infer", "infer", graphs["infer"], None))
    plans = []
    for name, key, g, phases in pictures:
        plans.append({"name": name, "id": key, "arena": g["arena_bytes"],
                      "lower_bound": g["lower_bound_bytes"], "steps": len(g["steps"]),
                      "buffers": len(g["pools"]["arena"]["buffers"]),
                      "algorithm": g.get("algorithm"), "method": g.get("schedule_method"),
                      "alignment": g.get("alignment"),
                      "picture": plan_picture(g, phases)})
    dev = m.get("device") or {}
    data = dev.get("data") or {}
    return {
        "title": f"{m.get('model', {}).get('name', 'model')} on {m.get('board')}",
        "version": __version__,
        "project": {"dir": str(project.dir), "board": m.get("board"), "prefix": m.get("prefix"),
                    "backend": m.get("backend"), "chain": ", ".join(m.get("chain") or []),
                    "model": m.get("model", {}).get("name"),
                    "model_sha256": m.get("model", {}).get("sha256"),
                    "cpu": dev.get("cpu"), "emulator": dev.get("emulator"),
                    "generator_version": m.get("version")},
        "training": None if training is None else {
            "spec": training.get("spec"), "loss": training.get("loss"),
            "backward": training.get("backward"), "optimizer": training.get("optimizer"),
            "parameters": len(training.get("parameters") or []),
            "export_bytes": training.get("export_bytes")},
        "data": data or None,
        "memory": memory_section(project, run),
        "plans": plans,
        "kind_colors": KIND_COLORS, "phase_colors": PHASE_COLORS,
        "tables": op_tables(project, plan, run),
        "run": _run_section(run) if run is not None else None,
        "notes": notes,
    }


@cache
def _environment() -> Any:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             undefined=jinja2.StrictUndefined, autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(size=size, num=num, pct=pct, plural=plural,
                       f2=lambda v: f"{v:.2f}")
    return env


def render_report(directory: str | Path) -> str:
    return _environment().get_template("report.html.j2").render(**report_context(directory))


def write_report(directory: str | Path, out: Path) -> dict[str, Any]:
    """Render the report of ``directory`` into ``out``; what it holds (for ``--json``)."""
    ctx = report_context(directory)
    html = _environment().get_template("report.html.j2").render(**ctx)
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        raise PockError(f"{out}: cannot write ({e.strerror or e})") from None
    return {"output": str(out), "project": ctx["project"]["dir"], "bytes": len(html.encode()),
            "plan": bool(ctx["plans"]), "run": ctx["run"] is not None,
            "ops": sum(len(t["rows"]) for t in ctx["tables"]), "notes": ctx["notes"]}
