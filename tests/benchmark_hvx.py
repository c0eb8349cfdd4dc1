"""The hvx backend against the portable kernels on a Hexagon DSP (qemu-hexagon, packets).

Per model (with the trainable set of ``tests.benchmark_boards``, the board's default int8
backward) and backend (``hvx``: the board's default chain, hvx then ref; ``ref``: the
portable C alone), the training firmware is compiled with a few random samples embedded,
built and run: packets per training step by phase (forward, loss, backward, update), per
inference, and their ratio ref / hvx. A per-call profiling build of each project gives, per
layer kind (pointwise / k x k conv, depthwise, FC, their input and weight gradients, updates,
the rest), packets, MACs and packets per MAC for both backends side by side, with the bound
of one vrmpy (128 int8 multiply-accumulates) per packet. The issue's targets are checked on
the KWS fine-tune (a step in at most 6.5 M packets, an inference in at most 1.5 M; conv and
FC kernels at least 10x fewer packets than ref).

    python -m tests.benchmark_hvx [--models digits,kws,vww,ic,ad] [--board hexagon-v67]
                                  [--steps 2] [--json]

Models: the bundled digits CNN and, where ../shared/models has them, the MLPerf Tiny models.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.benchmark_boards import CASES, model_path, random_data
from tests.benchmark_cli import log, report, selected

BACKENDS = ("hvx", "ref")
PHASES = ("forward", "loss", "backward", "update", "step", "infer")
# issue 12: the KWS fine-tune (bias:last3+weight:last2, int8 backward) on hexagon-v67
KWS_TARGETS = {"step": 6.5e6, "infer": 1.5e6}
KERNEL_RATIO = 10.0                  # conv / FC kernels: at least this many times fewer packets
KERNEL_KINDS = ("conv", "fully connected")


def _graph(case, cache: dict):
    from codegen import models as bundled
    from codegen import pipeline

    if case.name not in cache:
        path = model_path(case)
        if path is None:
            return None
        calib = bundled.digits("train")[0][:100] if path.suffix == ".onnx" else None
        cache[case.name] = pipeline.quantize(pipeline.load(path), calib).graph
    return cache[case.name]


def measure(case, board_name: str, backend: str, steps: int, work: Path, cache: dict
            ) -> dict[str, Any]:
    """One model x backend: compile, build, run, profile per call."""
    from codegen import pipeline
    from codegen.board import load_board
    from codegen.run.device import run_device
    from codegen.targets import emulator_available, toolchain_available
    from tests.benchmark_race import kinds_table, profile_ops

    row: dict[str, Any] = {"model": case.name, "board": board_name, "backend": backend,
                           "spec": case.spec}
    board = load_board(board_name)
    for ok, why in (toolchain_available(board), emulator_available(board)):
        if not ok:
            return row | {"skipped": why}
    graph = _graph(case, cache)
    if graph is None:
        return row | {"skipped": f"{case.model} not found"}
    loss = pipeline.resolve_spec(case.spec).loss
    chain = "auto" if backend == "hvx" else backend
    proj = pipeline.compile_model(graph, board=board_name, spec=case.spec,
                                  out_dir=work / f"{case.name}-{backend}", backend=chain,
                                  data=random_data(graph, loss, steps),
                                  evals=random_data(graph, loss, 1, seed=1))
    fw = pipeline.build_project(proj)
    res = run_device(proj, build=fw)
    row |= {"chain": proj.manifest["chain"],
            "backward_mode": proj.manifest["training"]["backward"],
            **{k: res.instructions[k] for k in PHASES}}
    row["kinds"] = kinds_table(profile_ops(proj, graph, case.spec), row["backward_mode"])
    return row


def _k(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else f"{n:.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}x" if a and b else "-"


def format_table(rows: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    by = {(r["model"], r["backend"]): r for r in rows}
    head = ("model", "backend", *PHASES)
    table = [head]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['model']} ({r['backend']}): skipped: {r['skipped']}")
            continue
        table.append((r["model"], r["backend"], *(_k(r[p]) for p in PHASES)))
        ref = by.get((r["model"], "ref"))
        if r["backend"] == "hvx" and ref is not None and "skipped" not in ref:
            table.append(("", "ref / hvx", *(_ratio(ref[p], r[p]) for p in PHASES)))
    widths = [max(len(str(t[i])) for t in table) for i in range(len(head))]
    out = [("packets per training step (int8 backward) and per inference, "
            f"{rows[0]['board'] if rows else ''}:")]
    out += ["  ".join(str(v).rjust(w) for v, w in zip(t, widths)) for t in table]
    out += lines
    out.append("")
    out.append("per layer kind: packets per step (packets per MAC), hvx next to ref; "
               "bound: one vrmpy (128 MACs) per packet, 0.008 packets per MAC")
    kind_rows = [("model", "phase", "layer kind", "MACs", "hvx", "ref", "ref / hvx")]
    for (model, backend), r in by.items():
        ref = by.get((model, "ref"))
        if backend != "hvx" or ref is None or "kinds" not in r or "kinds" not in ref:
            continue
        refk = {(k["phase"], k["kind"]): k for k in ref["kinds"]}
        for k in r["kinds"]:
            rk = refk.get((k["phase"], k["kind"]))
            per = lambda a: f" ({a['per_mac']:.3f})" if a and a.get("per_mac") else ""
            kind_rows.append((model, k["phase"], k["kind"], _k(k["macs"]) if k["macs"] else "-",
                              _k(k["instructions"]) + per(k),
                              (_k(rk["instructions"]) + per(rk)) if rk else "-",
                              _ratio(rk["instructions"], k["instructions"]) if rk else "-"))
    widths = [max(len(str(t[i])) for t in kind_rows) for i in range(len(kind_rows[0]))]
    out += ["  ".join(str(v).ljust(w) for v, w in zip(t, widths)) for t in kind_rows]
    out += _targets(by)
    return "\n".join(out)


def _targets(by: dict) -> list[str]:
    """The issue's targets on the rows measured."""
    out = ["", "targets (issue 12):"]
    kws = by.get(("kws", "hvx"))
    if kws is not None and "skipped" not in kws:
        for k, v in KWS_TARGETS.items():
            out.append(f"  KWS {k} <= {_k(v)} packets: {_k(kws[k])} "
                       f"({'met' if kws[k] <= v else 'missed'})")
    for (model, backend), r in by.items():
        ref = by.get((model, "ref"))
        if backend != "hvx" or ref is None or "kinds" not in r or "kinds" not in ref:
            continue
        refk = {(k["phase"], k["kind"]): k for k in ref["kinds"]}
        for k in r["kinds"]:
            rk = refk.get((k["phase"], k["kind"]))
            if rk is None or not any(s in k["kind"] for s in KERNEL_KINDS) or \
                    "depthwise" in k["kind"]:
                continue
            ratio = rk["instructions"] / max(k["instructions"], 1)
            out.append(f"  {model} {k['phase']} {k['kind']}: {ratio:.1f}x fewer packets than "
                       f"ref ({'met' if ratio >= KERNEL_RATIO else 'missed'}: >= "
                       f"{KERNEL_RATIO:.0f}x)")
    return out


def run(models: list[str], board: str, steps: int) -> list[dict[str, Any]]:
    rows = []
    cache: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            for backend in BACKENDS:
                log(f"  {name} on {board} ({backend})...")
                rows.append(measure(CASES[name], board, backend, steps, Path(tmp), cache))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmark_hvx",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="digits,kws,vww,ic,ad")
    ap.add_argument("--board", default="hexagon-v67")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    models = selected(ap, a.models, CASES, "model")
    return report(run(models, a.board, a.steps), a.json, format_table)


if __name__ == "__main__":
    sys.exit(main())
