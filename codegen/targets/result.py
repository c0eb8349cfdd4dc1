"""What a run of firmware on an emulator gives back (``RunResult``), and the reading of the
runtime's protocol lines in its output: shared by every emulator (QEMU in ``emulator.py``,
Renode in ``renode.py``), so that neither imports the other's module for them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PockError
from .profile import PhaseCount


@dataclass(frozen=True)
class RunResult:
    board: str
    stdout: str                       # the firmware's output, protocol lines removed
    exit_code: int | None             # None: timed out or no status reported
    instructions: int | None = None   # executed instructions (Hexagon: packets); None: not counted
    phases: dict[str, PhaseCount] = field(default_factory=dict)
    unbalanced_marks: int = 0         # pe_prof_end without a matching pe_prof_begin
    stack_bytes: int | None = None    # measured stack high-water mark (painted stack)
    fault: str | None = None          # "@pe:fault ..." line, if the CPU faulted
    timed_out: bool = False
    command: tuple[str, ...] = ()
    raw_stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.fault is None


def parse_output(board: str, stdout: str, code: int | None, timed_out: bool) -> dict:
    """Split the runtime's protocol lines from the firmware's output."""
    kept = []
    status = stack = fault = None
    for line in stdout.splitlines(keepends=True):
        text = line.strip()
        if text.startswith("@pe:exit "):
            fields = text.split()
            try:
                status = int(fields[1])
                stack = int(fields[2].split("=", 1)[1]) if len(fields) > 2 else None
            except (IndexError, ValueError):
                raise PockError(f"{board}: unreadable exit line {text!r}") from None
        elif text.startswith("@pe:fault "):
            fault = text[len("@pe:fault "):]
        else:
            kept.append(line)
    exit_code = code
    if exit_code is None and status is not None and not timed_out:
        exit_code = status
    if code is not None and status is not None and (code & 0xFF) != (status & 0xFF):
        raise PockError(f"{board}: firmware reported exit status {status} but the emulator "
                        f"exited with {code}")
    return {"stdout": "".join(kept), "exit_code": exit_code, "stack": stack, "fault": fault}


def wait_for_line(path: Path, marker: str, timeout: float) -> bool:
    """Poll a growing text file until a line starts with ``marker`` (used for Renode)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and any(ln.startswith(marker)
                                  for ln in path.read_text(errors="replace").splitlines()):
            return True
        time.sleep(0.2)
    return False
