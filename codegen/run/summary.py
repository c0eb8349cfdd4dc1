"""What a firmware run reported, for people and programs: the ``sim --json`` record
(``result_json``), the text ``sim`` and the demo print (``format_result``) and the progress
lines while the firmware trains (``loss_progress``). Running and parsing are
``codegen.run.device``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..board import format_size
from ..errors import plural
from ..render.output import Project
from ..train.report import saturation_line
from .device import DeviceResult


def result_json(project: Project, res: DeviceResult) -> dict[str, Any]:
    """The JSON of ``pockengine sim`` (and the device part of ``fit --engine BOARD``)."""
    data = project.manifest["device"]["data"]
    out: dict[str, Any] = {
        "board": res.board, "project": str(project.dir),
        "train_samples": data["train_samples"], "eval_samples": data["eval_samples"],
        "epochs": data["epochs"], "steps": len(res.loss_bits),
        "accuracy_before": res.accuracy("before"), "accuracy_after": res.accuracy("after"),
        "loss": res.loss, "params_sha256": res.params_sha256, **res.saturation(),
        "instructions": res.instructions, "stack_used_bytes": res.stack_used,
    }
    if res.eval_kind == "mse":
        q = float(project.manifest["output"]["scale"])
        n_out = int(project.manifest["output"]["bytes"])
        for which, ev in (("before", res.eval_before), ("after", res.eval_after)):
            out[f"mse_{which}"] = (ev[0] * q * q / (ev[1] * n_out)
                                   if ev is not None and ev[1] else None)
    return out


def format_result(summary: dict[str, Any], build: dict[str, Any] | None = None,
                  epoch_lines: bool = True) -> str:
    """A human-readable report of a firmware run (``pockengine sim``, the demo)."""
    lines = []
    acc = lambda v: "-" if v is None else f"{v:.2%}"
    n, steps, epochs = summary["train_samples"], summary["steps"], summary["epochs"]
    lines.append(f"board {summary['board']}: {plural(steps, 'training step')} "
                 f"({plural(epochs, 'epoch')} of {plural(n, 'sample')}), "
                 f"{plural(summary['eval_samples'], 'evaluation sample')}")
    losses = summary["loss"]
    if epoch_lines and steps and epochs:
        per = steps // epochs
        for e in range(epochs):
            chunk = losses[e * per:(e + 1) * per]
            lines.append(f"  epoch {e + 1}/{epochs}: mean loss {np.mean(chunk):.4f} "
                         f"(first {chunk[0]:.4f}, last {chunk[-1]:.4f})")
    if steps:
        lines.append(saturation_line(summary["saturated_updates"],
                                     summary["saturated_per_step"]))
    if summary.get("accuracy_before") is not None:
        lines.append(f"accuracy on the eval split: before {acc(summary['accuracy_before'])} -> "
                     f"after {acc(summary['accuracy_after'])}")
    elif summary.get("mse_before") is not None:
        lines.append(f"eval MSE: before {summary['mse_before']:.6g} -> after "
                     f"{summary['mse_after']:.6g}")
    ins = summary.get("instructions") or {}
    if ins:
        unit = ins["unit"]
        if steps:
            lines.append(f"{unit} per training step: forward {ins['forward']:,} + loss "
                         f"{ins['loss']:,} + backward {ins['backward']:,} + update "
                         f"{ins['update']:,} (whole step {ins['step']:,})")
        if ins.get("infer"):
            lines.append(f"{unit} per inference: {ins['infer']:,}")
        for op in ins.get("per_op", []):
            if op["per_step"] is not None:
                lines.append(f"  op {op['index']:>3} {op['phase']:<8} "
                             f"{op.get('backend', 'ref') + ':' + op['kernel']:<44} "
                             f"{op['per_step']:>12,}  {op['op']}")
        for op in ins.get("per_op_infer", []):
            if op["per_call"] is not None:
                lines.append(f"  infer {op['index']:>3} "
                             f"{op.get('backend', 'ref') + ':' + op['kernel']:<44} "
                             f"{op['per_call']:>12,}  {op['op']}")
    if build is not None:
        b = build["budget"]
        stack = summary.get("stack_used_bytes")
        lines.append(f"memory: flash {build['flash_bytes']:,} B of {format_size(b['flash_bytes'])}"
                     f", SRAM {build['sram_bytes']:,} B of {format_size(b['sram_bytes'])} "
                     f"(arena {build['arena_bytes']:,} B + parameters "
                     f"{build['params_bytes']:,} B + stack {build['stack_bytes']:,} B"
                     + (f", {stack:,} B of it used" if stack is not None else "") + ")")
    if summary.get("params_sha256"):
        lines.append(f"params_sha256 {summary['params_sha256']}")
    return "\n".join(lines)


def loss_progress(steps: int, epochs: int, log: Callable[[str], None], *,
                  reports: int = 10) -> Callable[[str], None]:
    """An ``on_line`` callback that logs training progress from the firmware's loss lines:
    about ``reports`` lines over the run, each with the mean loss since the last one."""
    every = max(1, -(-steps // max(1, reports)))
    per_epoch = max(1, steps // max(1, epochs))
    window: list[float] = []

    def on_line(line: str) -> None:
        if not line.startswith("@pe:loss "):
            return
        f = line.split()
        try:
            k, bits = int(f[1]), int(f[2], 16)
        except (IndexError, ValueError):
            return
        window.append(float(np.array([bits], np.uint32).view(np.float32)[0]))
        if (k + 1) % every == 0 or k + 1 == steps:
            log(f"  epoch {k // per_epoch + 1}/{epochs}, step {k + 1:>{len(str(steps))}}/"
                f"{steps}: mean loss {np.mean(window):.4f}")
            window.clear()

    return on_line
