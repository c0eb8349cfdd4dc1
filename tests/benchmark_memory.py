"""Training memory on the boards: the SRAM of a training firmware, part by part.

Per model, trainable set and board, without and with the memory stages (the stream stage:
frozen chains of convolutions run in row bands, ``compile --no-stream``; the blocked-update
stage: weight gradients computed and applied in blocks of output channels, ``compile
--no-block-updates``, which also turns off the fused classifier-head backward; the
partial-weight stage: only the trained channels of a weight in RAM,
``compile --no-partial-weights``; each where it lowers the arena or RAM, docs/memory.md): the arena the planner placed and the schedule's lower bound (the
bound for this op granularity: streaming moves it), the inference graph's arena (the project's
arena is the larger of the two), the parameters with their optimizer state, the stack the
firmware reserves (the board's 8 KiB, and with ``compile --stack auto``: the measured
high-water mark + margin) and the linked image's SRAM (``build --json`` ``sram_bytes``: .data +
.bss + reserved stack) both ways, and what was streamed. Everything comes from compiling,
linking and running the firmware on the board's emulator; no numbers are hard-coded.

    python -m tests.benchmark_memory [--rows mcunet,kws,vww,ad01,digits]
                                     [--modes off,stream,blocks,whole,auto] [--json]

The shared models live in ../shared/models (skipped when absent); MCUNet-5FPS with TinyEngine's
"49kb" scheme is rebuilt from its layer table, MobileNetV2-w0.35 at 128x128 (torchvision's
layers and channel rounding, 10 classes, random weights) from a generated one, with the
issue's scheme: biases of the last 20 layers, the classifier, a quarter of the last two
expansions (tests/mcunet.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "models"

# (key, model, spec, board): the model is a file name in ../shared/models, "mcunet" or "digits"
ROWS = {
    "mcunet": ("mcunet", None, "mps2-an500"),
    "mbv2": ("mbv2", None, "mps2-an500"),
    "kws": ("kws_ref_model.tflite", "bias:last3+weight:last2", "mps2-an500"),
    "vww": ("vww_96_int8.tflite", "weight:last4", "mps2-an500"),
    "ad01": ("ad01_int8.tflite", "bias:all+weight:last2,loss=mse", "mps2-an500"),
    "digits": ("digits", ("bias:all+weight:last2,opt=sgd,lr=0.002,momentum=0.9,"
               "master_weights=fp32"), "mps2-an386"),
}


def _model(name: str, spec: str | None) -> tuple[Any, Any, Any]:
    """(model, spec, calibration inputs or None)."""
    if name == "mcunet":
        from tests.mcunet import mcunet_graph, mcunet_spec_49kb

        return mcunet_graph(seed=0), mcunet_spec_49kb(), None
    if name == "mbv2":
        from tests.mcunet import mbv2_graph, mbv2_spec

        return mbv2_graph(seed=0), mbv2_spec(), None
    if name == "digits":
        from codegen import models

        x, _ = models.digits("train")
        return models.path("digits_cnn.onnx"), spec, x[:100]
    path = SHARED / name
    if not path.is_file():
        return None, None, None
    return path, spec, None


# memory modes: (stream stage, blocked-update stage, partial-weight stage) of compile
MODES = {"off": ("off", "off", "off"), "stream": ("auto", "off", "off"),
         "blocks": ("off", "auto", "off"), "whole": ("auto", "auto", "off"),
         "auto": ("auto", "auto", "auto")}


def measure(key: str, work: Path, mode: str = "auto") -> dict[str, Any] | None:
    from codegen.pipeline import build_project, compile_model

    name, spec, board = ROWS[key]
    model, spec, calib = _model(name, spec)
    if model is None:
        return None
    stream, blocks, partial = MODES[mode]
    row: dict[str, Any] = {"model": key, "board": board, "stream": mode}
    for how in ("default", "auto"):
        proj = compile_model(model, board=board, spec=spec, calib=calib,
                             out_dir=work / f"{key}-{mode}-{how}", force=True,
                             stack=None if how == "default" else "auto", stream=stream,
                             blocks=blocks, partial=partial)
        b = build_project(proj).to_json()
        graphs = json.loads((proj.dir / "pe_plan.json").read_text())["graphs"]
        plan = graphs["train"]
        row.update({"arena": b["arena_bytes"], "train_arena": plan["arena_bytes"],
                    "lower_bound": plan["lower_bound_bytes"],
                    "infer_arena": graphs["infer"]["arena_bytes"],
                    "params": b["params_bytes"],
                    "other": b["sram_static_bytes"] - b["arena_bytes"] - b["params_bytes"],
                    f"stack_{how}": b["stack_bytes"], f"sram_{how}": b["sram_bytes"]})
        if how == "auto":
            row["stack_measured"] = proj.manifest["device"]["stack_measured_bytes"]
            st = proj.manifest["memory"]["stream"]
            row["streamed"] = {g: [c["op"] for c in (st[g] or {}).get("chains", [])]
                               for g in ("train", "infer")}
            row["blocked"] = [f"{u['param']} in {u['blocks']} blocks of "
                              f"{u['block_bytes']:,} B ({u['gradient_bytes']:,} B whole)"
                              for u in ((st["train"] or {}).get("update_blocks") or {})
                              .get("updates", [])]
            row["fused"] = [f"{h['layer']} ({h['gradient_bytes']:,} B of gradient never whole)"
                            for h in ((st["train"] or {}).get("pooled_backward") or {})
                            .get("heads", [])]
            row["partial"] = [f"{w['weight']} {w['channels']}/{w['total_channels']} channels "
                              f"in RAM ({w['flash_bytes']:,} B in flash)"
                              for w in ((st["train"] or {}).get("partial_weights") or {})
                              .get("weights", [])]
    return row


def format_table(rows: list[dict[str, Any]]) -> str:
    head = ("model", "board", "mode", "arena", "train arena", "lower bound", "infer arena",
            "params+state", "other", "stack", "stack auto (used)", "SRAM", "SRAM auto")
    body = [(r["model"], r["board"], r.get("stream", "auto"), f"{r['arena']:,}",
             f"{r.get('train_arena', r['arena']):,}", f"{r['lower_bound']:,}",
             f"{r.get('infer_arena', 0):,}", f"{r['params']:,}", f"{r['other']:,}",
             f"{r['stack_default']:,}", f"{r['stack_auto']:,} ({r['stack_measured']:,})",
             f"{r['sram_default']:,}", f"{r['sram_auto']:,}") for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) if i < 3 else v.rjust(w)
                       for i, (v, w) in enumerate(zip(line, widths)))
             for line in [head, *body]]
    for r in rows:
        for graph, ops in (r.get("streamed") or {}).items():
            if ops:
                lines.append(f"  {r['model']} ({r['stream']}) streams in {graph}: "
                             + ", ".join(ops))
        if r.get("blocked"):
            lines.append(f"  {r['model']} ({r['stream']}) updates " + "; ".join(r["blocked"]))
        if r.get("fused"):
            lines.append(f"  {r['model']} ({r['stream']}) head backward fused: "
                         + "; ".join(r["fused"]))
        if r.get("partial"):
            lines.append(f"  {r['model']} ({r['stream']}) partial weights: "
                         + "; ".join(r["partial"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=",".join(ROWS), help="which rows (default: all)")
    ap.add_argument("--modes", "--stream", default="off,stream,auto",
                    help="memory modes to compile with, one row each: off (compile "
                    "--no-stream --no-block-updates --no-partial-weights), stream "
                    "(--no-block-updates --no-partial-weights), blocks (--no-stream "
                    "--no-partial-weights), whole (--no-partial-weights), auto (the default "
                    "of compile); default: off,stream,auto")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pockengine-memory-") as tmp:
        for key in args.rows.split(","):
            if key not in ROWS:
                print(f"unknown row {key!r}: choose from {', '.join(ROWS)}", file=sys.stderr)
                return 2
            for stream in args.modes.split(","):
                if stream not in MODES:
                    print(f"unknown mode {stream!r}: choose from {', '.join(MODES)}",
                          file=sys.stderr)
                    return 2
                r = measure(key, Path(tmp), stream)
                if r is None:
                    print(f"{key}: ../shared/models/{ROWS[key][0]} is not here; skipped",
                          file=sys.stderr)
                    break
                print(f"{key} ({stream}): SRAM {r['sram_default']:,} -> "
                      f"{r['sram_auto']:,} B", file=sys.stderr, flush=True)
                rows.append(r)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("bytes; mode = the memory stages (off: compile --no-stream --no-block-updates "
          "--no-partial-weights; stream: streaming only; blocks: blocked updates only; whole: "
          "both, weights whole; auto: all three); arena = the project's "
          "(the larger of the training and inference plans); lower bound = the training "
          "schedule's; SRAM = the linked image (.data + .bss + reserved stack); other = the "
          "harness, libc and runtime data; stack auto = compile --stack auto (measured "
          "high-water mark in parentheses)")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
