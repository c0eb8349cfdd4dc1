"""Benchmark of `pockengine search`: the found trainable set against the hand-made baselines
that fit the same budget, on two tasks at two budgets each where the full update does not fit.

    python -m tests.benchmark_search [--tasks kws,digits] [--seeds 3] [--epochs 3]

Tasks: the KWS synthetic-keywords task of firmware_examples/kws_finetune (the shared MLPerf
Tiny KWS model, mps2-an386) and the digits transfer task (the bundled digits CNN meets
inverted, shifted digits; tests/transfer.py). The search runs once per budget (seed 0; the
second budget reuses the cached contribution analysis); then the winner and every baseline
are fine-tuned on all of TRAIN with ``--seeds`` sample orders and evaluated on EVAL, which
the search never saw. Printed: budget, the full update's SRAM, the search's time, and per set
its SRAM (the planner's exact figure for the board) and EVAL accuracy (mean and range over the
seeds). Batch-1 SGD on a few hundred samples moves by several points with the sample order
alone: compare means.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KWS_MODEL = ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"


def kws_task():
    spec = importlib.util.spec_from_file_location(
        "kws_make_data", ROOT / "firmware_examples" / "kws_finetune" / "make_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x, y = mod.samples(20, seed=1)
    xe, ye = mod.samples(10, seed=2)
    return {"name": "KWS keywords", "model": KWS_MODEL, "train": {"x": x, "y": y},
            "eval": {"x": xe, "y": ye},
            "budgets": (("128KiB", None), ("100KiB", None), ("128KiB", 2_000_000)), "lr": 0.01}


def digits_task():
    import codegen.models as bundled

    x, y = bundled.digits("train")
    xe, ye = bundled.digits("test")
    return {"name": "digits transfer", "model": bundled.path("digits_cnn.onnx"),
            "calib": x[:100], "train": {"x": bundled.shift_digits(x), "y": y},
            "eval": {"x": bundled.shift_digits(xe), "y": ye},
            "budgets": (("48KiB", None), ("32KiB", None)), "lr": 0.002}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="kws,digits")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--board", default="mps2-an386")
    args = ap.parse_args(argv)

    from codegen.board import load_board
    from codegen.fit import prepare_model
    from codegen.search import (
        Budget,
        Candidate,
        FineTunes,
        Planner,
        candidate_spec,
        default_base,
        parse_size,
        run_search,
    )

    board = load_board(args.board)
    makers = {"kws": kws_task, "digits": digits_task}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        for name in args.tasks.split(","):
            if name == "kws" and not KWS_MODEL.is_file():
                print(f"skip kws: {KWS_MODEL} is missing", file=sys.stderr)
                continue
            task = makers[name]()
            graph = prepare_model(task["model"], task.get("calib"), task["train"]["x"])
            full_steps = args.epochs * len(task["train"]["x"])
            base = default_base("fp32", full_steps)
            base = replace(base, optimizer=replace(base.optimizer, lr=task["lr"]))
            from codegen.train.spec import parametric_layers

            L = len(parametric_layers(graph))
            full = Candidate(bias=L, weights=tuple((i, 1.0) for i in range(L)))
            full_sram = Planner(graph, board).footprint(candidate_spec(base, full))["sram"]
            for b, latency in task["budgets"]:
                budget = Budget(sram=parse_size(b, "budget"), flash=board.flash_budget,
                                latency=latency, board=board)
                if latency:
                    b = f"{b}, {latency / 1e6:g}M instr."
                t0 = time.perf_counter()
                r = run_search(graph, task["train"], task["eval"], budget, base=base,
                               epochs=args.epochs, cache=cache, verify=False,
                               progress=lambda n, d, t, w=f"{task['name']} {b}":
                               print(f"\r  {w}: fine-tune {d}/{t}", end="", file=sys.stderr))
                seconds = time.perf_counter() - t0
                print(file=sys.stderr)
                sets = [("found", r.json["spec"], r.json["sram_bytes"])]
                sets += [(x["name"], x["spec"], x["sram_bytes"]) for x in r.json["baselines"]]
                accs: dict[str, list[float]] = {}
                for seed in range(args.seeds):
                    ft = FineTunes(graph, base, task["train"], task["eval"],
                                   epochs=args.epochs, engine="host", seed=seed,
                                   backend="auto", jobs=2, cache=cache, what="bench",
                                   full_steps=full_steps)
                    cands = [Candidate.parse(s) for _, s, _ in sets]
                    for k, v in ft.run(cands).items():
                        accs.setdefault(k, []).append(v)
                rows.append((task["name"], b, full_sram, seconds, r.json,
                             [(label, spec, sram, accs[spec]) for label, spec, sram in sets]))

    print(f"\n{'task':16} {'budget':>20} {'full update':>12} {'search':>8}  set            "
          f"{'SRAM B':>9}  {'EVAL acc (mean, min..max)':26} spec")
    for task, b, full_sram, seconds, j, sets in rows:
        ft = j["fine_tunes"]
        first = True
        for label, spec, sram, acc in sets:
            lead = (f"{task:16} {b:>20} {full_sram:>12,} {seconds:>7.0f}s" if first else
                    " " * 59)
            a = np.array(acc)
            print(f"{lead}  {label:14} {sram:>9,}  {a.mean():7.2%} ({a.min():.1%}.."
                  f"{a.max():.1%})     {spec}")
            first = False
        lk = j["linked"]
        print(f"{'':59}  contribution analysis: {ft['analysis']} fine-tunes, "
              f"{ft['analysis_cached']} cached; found set: "
              + (f"linked {lk['sram_bytes']:,} B SRAM, {lk['flash_bytes']:,} B flash"
                 if lk else "not linked (no toolchain)")
              + f", {j['instructions_per_step']:,} instructions per step (cost model)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
