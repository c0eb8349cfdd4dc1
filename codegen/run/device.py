"""Run a board project's firmware on the board's emulator and read what it reports.

The firmware (templates/main_device.c.j2) trains on the data embedded in flash and prints one
``@pe:`` line per fact: accuracy before/after, every step's loss as float32 bits (and the
saturated-update count after it), the exported
parameters and their SHA-256 (computed on the device, runtime_c/runtime/pe_sha256.c). The
instruction-count plugin (codegen/targets/profile.py) reports the phases the firmware marks:
``init``, ``step`` (and inside it ``forward``, ``loss``, ``backward``, ``update``), ``eval``,
``infer``; with ``profile_ops`` one phase per kernel call of the training step.

The data a firmware trains on is embedded before it is built: ``codegen.render.embed``; what
a run reported is turned into JSON, text and progress lines by ``codegen.run.summary``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import PockError
from ..render.device import FIRST_OP_PHASE
from ..render.output import Project, open_project
from ..targets import run_on_emulator
from ..toolchain.device import FirmwareBuild, build_firmware
from .host import saturation_series

DEFAULT_TIMEOUT = 600.0
PHASES = ("forward", "loss", "backward", "update")


class DeviceRunError(PockError):
    """The firmware failed, faulted or timed out; ``output`` holds what it printed."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output


# -- running --------------------------------------------------------------------------------------
@dataclass
class DeviceResult:
    """What a firmware run reported (see the module docstring)."""

    board: str
    loss_bits: np.ndarray
    saturated: np.ndarray                       # <p>_saturation_count() after each step
    eval_before: tuple[int, int] | None
    eval_after: tuple[int, int] | None
    eval_kind: str                              # accuracy | mse | none
    params: bytes | None
    params_sha256: str | None
    outputs: dict[int, bytes]
    instructions: dict[str, Any]
    stack_used: int | None
    run: Any = field(repr=False)

    @property
    def loss(self) -> list[float]:
        return [float(v) for v in self.loss_bits.view(np.float32)]

    def saturation(self) -> dict[str, Any]:
        """``saturated_updates`` and ``saturated_per_step`` (as ``fit`` reports them)."""
        return saturation_series(self.saturated)

    def accuracy(self, which: str) -> float | None:
        ev = self.eval_before if which == "before" else self.eval_after
        if ev is None or self.eval_kind != "accuracy" or ev[1] == 0:
            return None
        return ev[0] / ev[1]


def run_device(project: Any, *, timeout: float = DEFAULT_TIMEOUT, profile: bool = True,
               profile_ops: bool = False, build: Any = None,
               on_line: Callable[[str], None] | None = None) -> DeviceResult:
    """Build (if needed) and run a board project's firmware on its emulator. ``on_line``: gets
    every line the firmware prints, as it prints it (progress)."""
    if isinstance(build, FirmwareBuild):
        fw = build
    else:
        proj = project if isinstance(project, Project) else open_project(project)
        fw = build_firmware(proj, profile_ops=profile_ops)
    proj = fw.project
    board = proj.board_record()
    result = run_on_emulator(board, fw.elf, timeout=timeout, profile=profile,
                             on_line=on_line)
    return parse_run(proj, board, result, profile_ops=profile_ops)


def parse_run(project: Project, board: Any, result: Any, *, profile_ops: bool = False
              ) -> DeviceResult:
    """The @pe: lines of a run, checked (failures, timeouts and faults raise)."""
    text = result.stdout
    tail = "\n".join(text.strip().splitlines()[-5:])
    errors = [ln[len("@pe:error "):] for ln in text.splitlines() if ln.startswith("@pe:error ")]
    if errors:
        raise DeviceRunError(f"{board.name}: firmware failed: {errors[0]}", text)
    if result.timed_out:
        raise DeviceRunError(f"{board.name}: the firmware did not finish in time (timeout; "
                             f"last output: {tail[-200:]!r})", text)
    if result.fault:
        raise DeviceRunError(f"{board.name}: CPU fault: {result.fault}", text)
    if result.exit_code != 0:
        raise DeviceRunError(f"{board.name}: firmware exited with status {result.exit_code} "
                             f"({(result.stderr or tail).strip()[-200:]!r})", text)
    losses: dict[int, int] = {}
    saturated: dict[int, int] = {}
    evals: dict[str, tuple[int, int]] = {}
    params: dict[int, bytes] = {}
    outputs: dict[int, bytes] = {}
    sha = None
    begun = False
    for line in text.splitlines():
        f = line.split()
        if not f or not f[0].startswith("@pe:"):
            continue
        try:
            tag = f[0][4:]
            if tag == "begin":
                begun = True
            elif tag == "loss":
                losses[int(f[1])] = int(f[2], 16)
                saturated[int(f[1])] = int(f[3])
            elif tag == "eval":
                evals[f[1]] = (int(f[2]), int(f[3]))
            elif tag == "params":
                params[int(f[1])] = bytes.fromhex(f[2])
            elif tag == "out":
                outputs[int(f[1])] = bytes.fromhex(f[2])
            elif tag == "sha256":
                sha = f[1]
        except (IndexError, ValueError):
            raise DeviceRunError(f"{board.name}: unreadable firmware line {line!r}",
                                 text) from None
    if not begun:
        raise DeviceRunError(f"{board.name}: the firmware printed no @pe:begin line "
                             f"(output: {tail[-200:]!r})", text)
    data = project.manifest["device"]["data"]
    steps = int(data["steps"])
    if sorted(losses) != list(range(steps)):
        raise DeviceRunError(f"{board.name}: {len(losses)} step losses reported, {steps} "
                             "expected", text)
    blob = None
    if params:
        blob = b"".join(params[k] for k in sorted(params))
        if sha is not None and hashlib.sha256(blob).hexdigest() != sha:
            raise DeviceRunError(f"{board.name}: the device's params_sha256 {sha} differs "
                                 "from the hash of the parameters it printed", text)
    kind = "accuracy" if data.get("eval_labels") else "mse" if data.get("eval_targets") \
        else "none"

    def mse_pair(v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is None or kind != "mse":
            return v
        return ((v[0] << 32) | v[1], int(data["eval_samples"]))

    return DeviceResult(
        board=board.name,
        loss_bits=np.array([losses[k] for k in range(steps)], dtype=np.uint32),
        saturated=np.array([saturated[k] for k in range(steps)], dtype=np.int64),
        eval_before=mse_pair(evals.get("before")),
        eval_after=mse_pair(evals.get("after" if steps else "before")),
        eval_kind=kind, params=blob, params_sha256=sha, outputs=outputs,
        instructions=instruction_report(project, board, result, steps, profile_ops),
        stack_used=result.stack_bytes, run=result)


def instruction_report(project: Project, board: Any, result: Any, steps: int,
                       profile_ops: bool = False) -> dict[str, Any]:
    """Per-step instructions by phase (forward, loss, backward, update, step), the totals of
    every phase, instructions per inference and (``profile_ops``) per kernel call."""
    if result.instructions is None:
        return {}
    ph = result.phases
    unit = "packets" if board.arch == "hexagon" else "instructions"
    out: dict[str, Any] = {"unit": unit, "steps": steps}
    for name in (*PHASES, "step"):
        pc = ph.get(name)
        out[name] = round(pc.instructions / steps) if pc is not None and steps else 0
    infer = ph.get("infer")
    out["infer"] = round(infer.instructions / infer.calls) if infer and infer.calls else None
    out["total"] = {"program": int(result.instructions)} | {
        name: int(pc.instructions) for name, pc in sorted(ph.items())
        if not name.startswith("p")}
    out["calls"] = {name: int(pc.calls) for name, pc in sorted(ph.items())
                    if not name.startswith("p")}
    if profile_ops:
        ops = (project.manifest.get("training") or {}).get("ops", [])
        per_op = []
        for k, op in enumerate(ops):
            pc = ph.get(f"p{FIRST_OP_PHASE + k}")
            per_op.append({"index": k, **op,
                           "instructions": int(pc.instructions) if pc else None,
                           "per_step": round(pc.instructions / steps) if pc and steps
                           else None})
        out["per_op"] = per_op
        per_infer = []                     # pe_infer's calls, numbered after the step's
        for k, op in enumerate(project.manifest.get("ops", [])):
            pc = ph.get(f"p{FIRST_OP_PHASE + len(ops) + k}")
            per_infer.append({"index": k, **op,
                              "instructions": int(pc.instructions) if pc else None,
                              "per_call": round(pc.instructions / pc.calls)
                              if pc and pc.calls else None})
        out["per_op_infer"] = per_infer
    return out
