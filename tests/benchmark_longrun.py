"""Long-run benchmark: 10,000 training steps at aggressive learning rates on every engine.

The bundled digits CNN (quantized with the first 100 training digits) trains every parameter
(``all``) on 1,000 training digits, one sample per step, for ``--steps`` steps (default
10,000: 10 epochs), with SGD + momentum 0.9 at lr 0.5 and Adam at lr 0.1 in both backward
modes (Adam is fp32 only: its int8 rows say so), with and without master weights, and plain
SGD on the biases at lr 1e6 (the probe of issue 9). Engines:

- ``golden``: the NumPy golden model (int8 mode: also the range of every gradient exponent);
- ``host-asan``: the generated C on the host, built with AddressSanitizer + UBSan
  (``-fno-sanitize-recover``: any finding aborts the run);
- a board (default ``mps2-an386``): the firmware on its emulator, data in flash.

Reported per run: finite losses, saturated updates (total, and the steps that had any),
final loss (mean of the last 100 steps), accuracy on the 348 test digits before/after, and
for C engines whether losses (float32 bits), params_sha256 and the per-step saturation
counts equal the golden run's.

    python -m tests.benchmark_longrun [--steps 10000] [--engines golden,host-asan,mps2-an386]
                                      [--configs NAME,...] [--json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from codegen import models
from codegen.data import fit_input
from codegen.errors import PockError
from tests.benchmark_cli import log, report, selected

TRAIN_SAMPLES = 1000
SEED = 0
# name -> training spec
CONFIGS = {
    "fp32-momentum": "all,opt=momentum,lr=0.5,momentum=0.9,backward=fp32",
    "fp32-momentum-master": "all,opt=momentum,lr=0.5,momentum=0.9,backward=fp32,"
                            "master_weights=fp32",
    "fp32-adam": "all,opt=adam,lr=0.1,backward=fp32",
    "fp32-adam-master": "all,opt=adam,lr=0.1,backward=fp32,master_weights=fp32",
    "int8-momentum": "all,opt=momentum,lr=0.5,momentum=0.9,backward=int8",
    "int8-momentum-master": "all,opt=momentum,lr=0.5,momentum=0.9,backward=int8,"
                            "master_weights=int32",
    "int8-adam": "all,opt=adam,lr=0.1,backward=int8",
    "fp32-bias-sgd-1e6": "bias:all,opt=sgd,lr=1000000,backward=fp32",
    "int8-bias-sgd-1e6": "bias:all,opt=sgd,lr=1000000,backward=int8",
}
ENGINES = ("golden", "host-asan", "mps2-an386")


def setup():
    """(int8 digits CNN, training x/y, eval x/y)."""
    from codegen import pipeline

    x, y = models.digits("train")
    xe, ye = models.digits("test")
    graph = pipeline.quantize(pipeline.load(models.path("digits_cnn.onnx")), x[:100]).graph
    return (graph, fit_input(graph, x[:TRAIN_SAMPLES], "x"), y[:TRAIN_SAMPLES].astype(np.int64),
            fit_input(graph, xe, "x"), ye.astype(np.int64))


def _accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    return float((outputs.reshape(len(outputs), -1).argmax(1) == labels).mean())


def run_golden(graph, spec, x, y, xe, ye, order) -> dict:
    """The golden run, step by step (int8 mode: the gradient exponents' range too)."""
    from codegen.golden.training import TrainState, predict, saturation_count
    from codegen.train import build_training_graph

    tg = build_training_graph(graph, spec)
    state = TrainState.from_graph(tg)
    prog = state.program(tg)
    exps = [n for op in tg.ops for n in op.outputs if n.endswith("_exp")]
    before = _accuracy(predict(tg, state, xe), ye)
    losses: list[float] = []
    per_step: list[int] = []
    lo, hi = 2**31, -(2**31)
    count = 0
    for i in order:
        env = prog.run(state, prog.feeds(x[i], y[i]), keep_all=bool(exps))
        losses.append(float(env[prog.loss_tensor].reshape(-1)[0]))
        now = saturation_count(tg, state)
        per_step.append(now - count)
        count = now
        for n in exps:
            e = int(env[n].reshape(-1)[0])
            lo, hi = min(lo, e), max(hi, e)
    return {"loss": losses, "saturated_per_step": per_step, "saturated_updates": count,
            "params_sha256": state.params_sha256(), "accuracy_before": before,
            "accuracy_after": _accuracy(predict(tg, state, xe), ye),
            "exponents": [lo, hi] if exps and order.size else None}


def run_host_asan(graph, spec, x, y, xe, ye, order, work: Path) -> dict:
    from codegen.pipeline import build_project, compile_model, run_host_fit, run_host_infer

    build = build_project(compile_model(graph, spec=spec, out_dir=work), sanitize=True)
    before = _accuracy(run_host_infer(build, xe), ye)
    res = run_host_fit(build, x, y, order=order, epochs=1)
    res["accuracy_before"] = before
    res["accuracy_after"] = _accuracy(run_host_infer(build, xe, params=res["params"]), ye)
    return res


def run_board(board: str, graph, spec, x, y, xe, ye, epochs: int, work: Path) -> dict:
    from codegen.fit import fit_model

    return fit_model(graph, spec, {"x": x, "y": y}, {"x": xe, "y": ye}, epochs=epochs,
                     seed=SEED, engine=board, keep_dir=work, timeout=7200)


def measure(name: str, engine: str, steps: int, data, work: Path, golden: dict) -> dict:
    from codegen.run.host import sample_order
    from codegen.train.spec import load_spec

    graph, x, y, xe, ye = data
    spec = load_spec(CONFIGS[name])
    row = {"config": name, "engine": engine, "mode": spec.backward,
           "optimizer": spec.optimizer.name + ("+momentum" if spec.optimizer.momentum else ""),
           "lr": spec.optimizer.lr, "master": spec.master_weights, "steps": steps}
    if spec.optimizer.name == "adam" and spec.backward == "int8":
        return row | {"skipped": "Adam needs backward fp32 (no integer-only Adam)"}
    epochs = -(-steps // len(x))
    order = sample_order(len(x), epochs, shuffle=True, seed=SEED)[:steps]
    t0 = time.perf_counter()
    try:
        if engine == "golden":
            res = run_golden(graph, spec, x, y, xe, ye, order)
        elif engine == "host-asan":
            res = run_host_asan(graph, CONFIGS[name], x, y, xe, ye, order, work / name)
        else:
            if steps % len(x):
                return row | {"skipped": f"boards run whole epochs ({steps} steps is not a "
                                         f"multiple of {len(x)})"}
            res = run_board(engine, graph, CONFIGS[name], x, y, xe, ye, epochs,
                            work / f"{name}-{engine}")
    except PockError as e:
        return row | {"error": str(e).splitlines()[0]}
    losses = np.asarray(res["loss"], np.float32)
    row |= {"finite": bool(np.all(np.isfinite(losses))),
            "saturated_updates": int(res["saturated_updates"]),
            "saturated_steps": int(np.count_nonzero(res["saturated_per_step"])),
            "final_loss": float(np.mean(losses[-100:])),
            "accuracy_before": res["accuracy_before"], "accuracy_after": res["accuracy_after"],
            "exponents": res.get("exponents"), "seconds": round(time.perf_counter() - t0, 1)}
    if engine == "golden":
        golden[name] = res
    elif name in golden:
        g = golden[name]
        row["equals_golden"] = bool(
            np.array_equal(losses.view(np.uint32), np.asarray(g["loss"], np.float32)
                           .view(np.uint32))
            and res["params_sha256"] == g["params_sha256"]
            and list(res["saturated_per_step"]) == list(g["saturated_per_step"]))
    return row


def format_table(rows: list[dict]) -> str:
    head = ("engine", "mode", "optimizer", "lr", "master", "steps", "finite", "saturated",
            "sat. steps", "final loss", "accuracy", "= golden", "exp range", "s")
    lines = [head]
    notes: dict[str, list[str]] = {}
    for r in rows:
        base = (r["engine"], r["mode"], r["optimizer"], f"{r['lr']:g}", r["master"],
                f"{r['steps']:,}")
        if "finite" not in r:
            lines.append(base + ("-",) * 8)
            notes.setdefault(f"{r['config']}: {r.get('skipped') or r['error']}",
                             []).append(r["engine"])
            continue
        eq = r.get("equals_golden")
        lines.append(base + (
            "yes" if r["finite"] else "NO", f"{r['saturated_updates']:,}",
            f"{r['saturated_steps']:,}", f"{r['final_loss']:.3f}",
            f"{r['accuracy_before']:.1%} -> {r['accuracy_after']:.1%}",
            "-" if eq is None else "yes" if eq else "NO",
            "-" if not r.get("exponents") else f"[{r['exponents'][0]}, {r['exponents'][1]}]",
            f"{r['seconds']:.0f}"))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) if i < 5 else str(c).rjust(w)
                     for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out += ["", ("saturated: parameter updates that clamped a value (per entry and step); "
                 "sat. steps: steps with any; final loss: mean of the last 100 steps; "
                 "accuracy: 348 test digits before -> after; = golden: losses (float32 bits), "
                 "params_sha256 and saturation per step equal the golden run; exp range: "
                 "int8-mode gradient exponents seen (golden); host-asan: built with "
                 "-fsanitize=address,undefined")]
    return "\n".join(out + [f"{why} ({', '.join(engines)})" for why, engines in notes.items()])


def run(configs: list[str], engines: list[str], steps: int, log=print) -> list[dict]:
    data = setup()
    rows: list[dict] = []
    golden: dict = {}
    with tempfile.TemporaryDirectory(prefix="pe-longrun-") as tmp:
        for name in configs:
            for engine in engines:
                row = measure(name, engine, steps, data, Path(tmp), golden)
                rows.append(row)
                log(f"  {name} on {engine}: " + (
                    row.get("skipped") or row.get("error") or
                    f"finite {row['finite']}, {row['saturated_updates']:,} saturated, "
                    f"loss {row['final_loss']:.3f}, {row['seconds']} s"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="long runs at aggressive learning rates")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    configs = selected(ap, args.configs, CONFIGS, "config")
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    rows = run(configs, [e for e in args.engines.split(",") if e], args.steps, log=log)
    return report(rows, args.json, format_table)


if __name__ == "__main__":
    sys.exit(main())
