"""The one ``make`` driver: host projects (``toolchain.host``), board firmware
(``toolchain.device``) and the serial firmware (``serial.firmware``) all build through it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..errors import PockError

JOBS = 2


class BuildError(PockError):
    """The C build failed; ``log`` holds the compiler output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def find_make(needed_for: str) -> str:
    """``make`` on PATH, else a one-line error (``needed_for``: what it was needed for)."""
    make = shutil.which("make")
    if make is None:
        raise PockError(f"'make' not found on PATH (needed {needed_for})")
    return make


def fresh_build_dir(out: Path, stamp: str) -> None:
    """Create the build directory ``out``; one made with another compiler or flags (its
    ``.toolchain`` file differs from ``stamp``) starts over."""
    marker = out / ".toolchain"
    if out.is_dir() and (not marker.is_file() or marker.read_text() != stamp):
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(stamp)


def run_make(make: str, project_dir: Path, args: list[str], *, log_dir: Path | None = None
             ) -> tuple[int, str, list[str]]:
    """``make -jJOBS -C project_dir args...``: (exit status, its output, the command). With
    ``log_dir``, the command and output are also written to ``log_dir/build.log``."""
    cmd = [make, f"-j{JOBS}", "-C", str(project_dir), *args]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if log_dir is not None:
        log_dir.mkdir(exist_ok=True)
        (log_dir / "build.log").write_text("$ " + " ".join(cmd) + "\n" + log)
    return proc.returncode, log, cmd
