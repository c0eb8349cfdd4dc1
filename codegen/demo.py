"""`pockengine demo`: the main job on the bundled digits model, end to end.

Import the float ONNX CNN, quantize it (PTQ) and check the int8 model on the golden engine; then
give it a new domain (inverted, shifted digits) on which it does poorly, compile the training
firmware for mps2-an386 (Cortex-M4F) with the data in flash, build it with arm-none-eabi-gcc and
let it fine-tune itself under QEMU: progress, accuracy before/after, loss, instructions per
step and memory use. Without the cross toolchain or QEMU the training runs on the generated C
on the host instead (and says so).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from . import golden, models
from .board import format_size, load_board
from .data import fit_input
from .fit import fit_model
from .frontend import load_model, save_model
from .pipeline import build_project, compile_model, run_device
from .quant import quantize
from .run.summary import loss_progress, result_json
from .summary import summarize
from .targets import emulator_available, toolchain_available

DEMO_BOARD = "mps2-an386"
DEMO_SPEC = "bias:all+weight:last2,opt=sgd,lr=0.002,momentum=0.9,master_weights=fp32"
DEMO_EPOCHS = 2


def run_demo(out_dir: Path, calib_samples: int = 100, log: Callable[[str], None] = print, *,
             board: str = DEMO_BOARD, epochs: int = DEMO_EPOCHS,
             train_samples: int | None = None) -> dict:
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = models.path("digits_cnn.onnx")
    x_train, _ = models.digits("train")
    x_test, y_test = models.digits("test")

    graph = load_model(model_path)
    s = summarize(graph)
    log(f"[1/6] imported {model_path.name}: {len(graph.ops)} ops "
        f"({', '.join(f'{v} {k}' for k, v in s['op_counts'].items())}), {s['macs']:,} MACs, "
        f"{s['param_count']:,} parameters")

    qgraph = quantize(graph, x_train[:calib_samples])
    tflite_path = out_dir / "digits_int8.tflite"
    save_model(qgraph, tflite_path)
    acc_float = float((golden.run(graph, x_test)[0].argmax(1) == y_test).mean())
    acc_int8 = float((np.asarray(golden.run(qgraph, fit_input(qgraph, x_test))[0]).argmax(1)
                      == y_test).mean())
    log(f"[2/6] quantized with {calib_samples} calibration samples -> {tflite_path}; "
        f"int8 golden engine (bit-exact with TFLM): top-1 {acc_int8:.2%} on {len(y_test)} "
        f"held-back digits (float32 {acc_float:.2%})")

    xs, ys = models.shifted_digits("train")
    xe, ye = models.shifted_digits("test")
    if train_samples is not None:
        xs, ys = xs[:train_samples], ys[:train_samples]
    train_npz, eval_npz = out_dir / "shifted_train.npz", out_dir / "shifted_eval.npz"
    np.savez(train_npz, x=xs, y=ys)
    np.savez(eval_npz, x=xe, y=ye)
    log(f"[3/6] a new domain: inverted digits shifted by one pixel ({len(xs)} training, "
        f"{len(xe)} evaluation samples -> {train_npz.name}, {eval_npz.name}); fine-tune "
        f"{DEMO_SPEC.split(',')[0]} with {', '.join(DEMO_SPEC.split(',')[1:])}")

    result = _train_on_board(qgraph, board, train_npz, eval_npz, epochs, out_dir, log)
    if result is None:
        result = _train_on_host(qgraph, train_npz, eval_npz, epochs, log)
    result.update({"accuracy_float": acc_float, "accuracy_int8": acc_int8,
                   "tflite": str(tflite_path)})
    log(f"done in {time.perf_counter() - t0:.1f} s")
    return result


def _train_on_board(qgraph, board_name: str, train_npz: Path, eval_npz: Path, epochs: int,
                    out_dir: Path, log: Callable[[str], None]) -> dict | None:
    board = load_board(board_name)
    for ok, why in (toolchain_available(board), emulator_available(board)):
        if not ok:
            log(f"[4/6] cannot train on {board.name} here: {why}; training the generated C "
                "on this machine instead")
            return None
    proj_dir = out_dir / f"firmware-{board.name}"
    proj = compile_model(qgraph, board=board.name, spec=DEMO_SPEC, out_dir=proj_dir,
                         data=train_npz, evals=eval_npz, epochs=epochs, force=True)
    m = proj.manifest
    mem, tr, data = m["memory"], m["training"], m["device"]["data"]
    log(f"[4/6] compiled the training firmware for {board.name} ({board.cpu}, {tr['backward']} "
        f"backward) -> {proj_dir}: {tr['steps']} kernel calls per step, arena "
        f"{mem['arena_bytes']:,} B, parameters + optimizer state {mem['params_bytes']:,} B, "
        f"{data['steps']} steps of data in flash ({data['flash_bytes']:,} B)")
    fw = build_project(proj)
    b = fw.to_json()
    log(f"[5/6] built {fw.elf.name} with {fw.cc}: flash {b['flash_bytes']:,} B of "
        f"{format_size(board.flash_budget)}, SRAM {b['sram_bytes']:,} B of "
        f"{format_size(board.sram_budget)} (arena + parameters "
        f"{b['arena_bytes'] + b['params_bytes']:,} B, stack {b['stack_bytes']:,} B)")
    log(f"[6/6] training in place under QEMU ({board.run['machine']}), "
        f"{data['epochs']} epochs x {data['train_samples']} samples:")
    res = run_device(proj, build=fw, on_line=loss_progress(
        data["steps"], data["epochs"], lambda s: log(s)))
    summary = result_json(proj, res)
    ins = summary["instructions"]
    log(f"  accuracy on the shifted eval digits: before {summary['accuracy_before']:.2%} -> "
        f"after {summary['accuracy_after']:.2%} (computed on the device)")
    log(f"  loss: first epoch mean {np.mean(summary['loss'][:len(summary['loss']) // epochs]):.4f}"
        f" -> last epoch mean {np.mean(summary['loss'][-(len(summary['loss']) // epochs):]):.4f}")
    log(f"  instructions per training step: forward {ins['forward']:,}, backward "
        f"{ins['backward']:,}, update {ins['update']:,} (whole step {ins['step']:,}); per "
        f"inference {ins['infer']:,}")
    log(f"  memory: SRAM {b['sram_bytes']:,} B (stack used {summary['stack_used_bytes']:,} of "
        f"{b['stack_bytes']:,} B), flash {b['flash_bytes']:,} B; fine-tuned params_sha256 "
        f"{summary['params_sha256'][:16]}...")
    log(f"  again: pockengine sim {proj_dir} [--epochs N] [--profile-ops]")
    return {"board": board.name, "project": str(proj_dir), **summary,
            "memory": {k: b[k] for k in ("flash_bytes", "sram_bytes", "stack_bytes")}}


def _train_on_host(qgraph, train_npz: Path, eval_npz: Path, epochs: int,
                   log: Callable[[str], None]) -> dict:
    log("[5/6] building the generated C for the host")
    r = fit_model(qgraph, DEMO_SPEC, train_npz, eval_npz, epochs=epochs, engine="host")
    log(f"[6/6] trained on the host: accuracy before {r['accuracy_before']:.2%} -> after "
        f"{r['accuracy_after']:.2%}; params_sha256 {r['params_sha256'][:16]}...")
    return {"board": "host", **{k: v for k, v in r.items() if not k.startswith("_")}}


if __name__ == "__main__":
    run_demo(Path(sys.argv[1] if len(sys.argv) > 1 else "pockengine-demo"))
