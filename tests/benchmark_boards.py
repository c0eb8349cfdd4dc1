"""Board benchmark: per model x board x backend, the firmware's memory and instructions.

For every model (with its trainable set), every emulated board and every backend that builds
for it (ref everywhere; arm, and cmsis-nn where CMSIS-NN is checked out, on cores with DSP or
MVE; hvx on the Hexagon boards; auto: the board's default chain, each op on its cheapest candidate), the
training firmware is compiled with a few random samples embedded, built with the board's
toolchain and run on its emulator. Reported: flash, SRAM (arena + parameters + stack reserved;
stack used), the instructions of one training step by phase (forward, loss, backward, update)
and of one inference (Hexagon: packets), instructions per multiply-accumulate of the inference,
and on mps2-an386 the ratio to TFLM + CMSIS-NN (:data:`TFLM_CMSIS_NN`). A configuration that
does not fit the board's budget says by how much.

    python -m tests.benchmark_boards [--models digits,kws,vww,ic,ad] [--boards B1,B2]
                                     [--backends ref,arm,cmsis-nn,hvx,auto] [--steps 2] [--json]

For arm, the flash the layer specialisation costs: the same project with the out-of-line
kernels (``compile_model(specialise=False)``, what a build falls back to when flash is short) is
built too, and a note gives both sizes and the board's budget.

Models: the bundled digits CNN and, where ../shared/models has them, the MLPerf Tiny models.
Boards: every QEMU and Hexagon board whose toolchain and emulator are installed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codegen import models as bundled
from codegen.backends import BACKENDS as BACKEND_TABLE
from codegen.backends import get_backend
from codegen.board import load_board
from codegen.errors import PockError
from codegen.targets import emulator_available, toolchain_available
from tests.benchmark_cli import log, report, selected

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "models"


@dataclass(frozen=True)
class Case:
    name: str
    model: str               # file name (shared) or "bundled:<name>"
    spec: str


CASES = {
    "digits": Case("digits", "bundled:digits_cnn.onnx", "bias:all+weight:last2,opt=sgd,lr=0.01,"
                   "momentum=0.9"),
    "kws": Case("kws", "kws_ref_model.tflite", "bias:last3+weight:last2,opt=sgd,lr=0.02,"
                "momentum=0.9"),
    "vww": Case("vww", "vww_96_int8.tflite", "bias:last8+weight:last4@0.25,opt=sgd,lr=0.05"),
    "ic": Case("ic", "pretrainedResnet_quant.tflite", "bias:last4+weight:last1,opt=sgd,lr=0.01"),
    "ad": Case("ad", "ad01_int8.tflite", "bias:last2,loss=mse,opt=sgd,lr=0.01"),
}
BOARDS = ("mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547",
          "netduinoplus2", "hexagon-v66", "hexagon-v67")
BACKENDS = ("ref", "arm", "cmsis-nn", "hvx")
# Instructions per inference of TFLM built with its pinned CMSIS-NN (-O2) for mps2-an386 under
# QEMU, counted the same way (a TCG plugin): issue 10 of the project's tracker.
TFLM_CMSIS_NN = {"board": "mps2-an386", "source": "issue 10 (TFLM + its pinned CMSIS-NN, -O2, "
                 "mps2-an386 under QEMU)",
                 "infer": {"kws": 7.70e6, "vww": 24.10e6, "ic": 29.86e6, "ad": 0.58e6}}


def model_path(case: Case) -> Path | None:
    if case.model.startswith("bundled:"):
        return bundled.path(case.model.split(":", 1)[1])
    p = SHARED / case.model
    return p if p.is_file() else None


def random_data(graph, loss: str, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = graph.tensors[graph.inputs[0]].shape[1:]
    x = rng.integers(-128, 128, (n, *shape)).astype(np.int8)
    if loss == "mse":
        return {"x": x}
    classes = graph.tensors[graph.outputs[0]].shape[-1]
    return {"x": x, "y": rng.integers(0, classes, n)}


def applies(backend: str, board) -> bool:
    """Whether ``backend`` has kernels for this kind of core (availability aside)."""
    if backend == "auto":
        return True
    b = get_backend(backend)
    features = set(board.features or ())
    return board.arch in b.archs and (not b.needs or bool(features & set(b.needs)))


def measure(case: Case, board_name: str, steps: int, work: Path, graph_cache: dict,
            backend: str = "ref") -> dict:
    """One model x board x backend: compile, build, run; a row of the table."""
    from codegen import pipeline
    from codegen.run.device import run_device
    from codegen.summary import op_macs

    row: dict = {"model": case.name, "board": board_name, "backend": backend,
                 "spec": case.spec}
    board = load_board(board_name)
    for ok, why in (toolchain_available(board), emulator_available(board)):
        if not ok:
            return row | {"skipped": why}
    why = None if backend == "auto" else get_backend(backend).unavailable(board)
    if why is not None:
        return row | {"skipped": why}
    path = model_path(case)
    if path is None:
        return row | {"skipped": f"{case.model} not found in {SHARED}"}
    if case.name not in graph_cache:
        calib = bundled.digits("train")[0][:100] if path.suffix == ".onnx" else None
        graph_cache[case.name] = pipeline.quantize(pipeline.load(path), calib).graph
    graph = graph_cache[case.name]
    loss = pipeline.resolve_spec(case.spec).loss
    t0 = time.perf_counter()
    try:
        proj = pipeline.compile_model(graph, board=board_name, spec=case.spec,
                                      out_dir=work / f"{case.name}-{board_name}-{backend}",
                                      backend=backend,
                                      data=random_data(graph, loss, steps),
                                      evals=random_data(graph, loss, 1, seed=1))
        fw = pipeline.build_project(proj)
    except PockError as e:
        return row | {"fits": False, "error": str(e)}
    res = run_device(proj, build=fw)
    b, ins, mem = fw.to_json(), res.instructions, proj.manifest["memory"]
    generic = None
    if backend == "arm":               # the flash the layer specialisation costs
        plain = pipeline.compile_model(graph, board=board_name, spec=case.spec,
                                       out_dir=work / f"{case.name}-{board_name}-arm-generic",
                                       backend=backend, specialise=False,
                                       data=random_data(graph, loss, steps),
                                       evals=random_data(graph, loss, 1, seed=1))
        generic = pipeline.build_project(plain).to_json()["flash_bytes"]
    macs = sum(op_macs(graph, op) for op in graph.ops)
    tflm = (TFLM_CMSIS_NN["infer"].get(case.name)
            if board_name == TFLM_CMSIS_NN["board"] else None)
    return row | {
        "fits": True, "backward_mode": proj.manifest["training"]["backward"],
        "chain": proj.manifest["chain"], "macs": macs,
        "infer_per_mac": round(ins["infer"] / macs, 3) if macs and ins.get("infer") else None,
        "tflm_cmsis_nn": tflm,
        "vs_tflm_cmsis_nn": round(ins["infer"] / tflm, 4) if tflm and ins.get("infer") else None,
        "flash_bytes": b["flash_bytes"], "sram_bytes": b["sram_bytes"],
        "flash_generic_bytes": generic, "flash_budget_bytes": board.flash_budget,
        "arena_bytes": mem["arena_bytes"], "params_bytes": mem["params_bytes"],
        "stack_bytes": b["stack_bytes"], "stack_used_bytes": res.stack_used,
        "unit": ins["unit"], **{k: ins[k] for k in ("forward", "loss", "backward", "update",
                                                     "step", "infer")},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def format_table(rows: list[dict]) -> str:
    head = ("model", "board", "backend", "bwd", "flash", "SRAM", "arena", "params", "stack",
            "used", "forward", "loss", "backward", "update", "step", "inference", "/MAC",
            "vs TFLM")
    left = 4                                  # left-aligned columns
    lines = [head]
    notes = []
    for r in rows:
        if "skipped" in r or not r.get("fits"):
            why = r.get("skipped") or r.get("error", "")
            lines.append((r["model"], r["board"], r["backend"], "-",
                          "does not fit" if "error" in r else "skipped",
                          *[""] * (len(head) - 5)))
            notes.append(f"{r['model']} on {r['board']} ({r['backend']}): {why}")
            continue
        k = lambda n: f"{n / 1024:.1f}K"
        m = lambda n: f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"
        unit = "" if r["unit"] == "instructions" else " pk"
        per_mac = "" if r["infer_per_mac"] is None else f"{r['infer_per_mac']:.2f}"
        ratio = "" if r["vs_tflm_cmsis_nn"] is None else f"{r['vs_tflm_cmsis_nn']:.3f}"
        lines.append((r["model"], r["board"], r["backend"], r["backward_mode"],
                      k(r["flash_bytes"]), k(r["sram_bytes"]), k(r["arena_bytes"]),
                      k(r["params_bytes"]), k(r["stack_bytes"]), f"{r['stack_used_bytes']}",
                      m(r["forward"]) + unit, m(r["loss"]) + unit, m(r["backward"]) + unit,
                      m(r["update"]) + unit, m(r["step"]) + unit, m(r["infer"]) + unit,
                      per_mac, ratio))
        if r.get("flash_generic_bytes"):
            grow = r["flash_bytes"] - r["flash_generic_bytes"]
            notes.append(f"{r['model']} on {r['board']} (arm): layer-specialised kernels and "
                         f"packed weights {k(r['flash_bytes'])} flash, out-of-line kernels "
                         f"{k(r['flash_generic_bytes'])} ({grow / 1024:+.1f}K); budget "
                         f"{k(r['flash_budget_bytes'])}")
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = ["  ".join(str(c).rjust(w) if i >= left else str(c).ljust(w)
                     for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append("")
    out.append("flash, SRAM: the linked image (SRAM = .data + .bss + reserved stack); used: "
               "measured stack high-water mark (bytes); forward .. step: per training step; "
               "inference: per inference; /MAC: inference instructions per multiply-"
               "accumulate; k, M: 10^3, 10^6; pk: Hexagon packets; instructions counted by the QEMU "
               "plugin")
    tflm = ", ".join(f"{n} {v / 1e6:.2f}M" for n, v in TFLM_CMSIS_NN["infer"].items())
    out.append(f"vs TFLM: inference instructions / TFLM + CMSIS-NN's on "
               f"{TFLM_CMSIS_NN['board']} ({tflm}; {TFLM_CMSIS_NN['source']})")
    out += notes
    return "\n".join(out)


def run(models: list[str], boards: list[str], steps: int, log=print,
        backends: tuple[str, ...] = BACKENDS) -> list[dict]:
    rows = []
    cache: dict = {}
    with tempfile.TemporaryDirectory(prefix="pe-bench-") as tmp:
        for name in models:
            for board in boards:
                for backend in backends:
                    if not applies(backend, load_board(board)):
                        continue
                    row = measure(CASES[name], board, steps, Path(tmp), cache, backend)
                    rows.append(row)
                    log(f"  {name} on {board} ({backend}): "
                        + ("skipped" if "skipped" in row else
                           "does not fit" if not row.get("fits") else
                           f"step {row['step']:,} {row['unit']}, inference "
                           f"{row['infer']:,}, {row['seconds']} s"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="firmware memory and instructions per model x "
                                             "board")
    ap.add_argument("--models", default=",".join(CASES))
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--backends", default=",".join(BACKENDS),
                    help="backends to compare (each where it has kernels for the board)")
    ap.add_argument("--steps", type=int, default=2, help="training steps per run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    models = selected(ap, args.models, CASES, "model")
    backends = tuple(selected(ap, args.backends, [*BACKEND_TABLE, "auto"], "backend"))
    rows = run(models, [b for b in args.boards.split(",") if b], args.steps, log=log,
               backends=backends)
    return report(rows, args.json, format_table)


if __name__ == "__main__":
    sys.exit(main())
