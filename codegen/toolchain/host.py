"""The host toolchain: ``make`` with gcc or clang (``CC`` overridable), sizes with ``size``.

``build_project(dir)`` runs the project's generated Makefile (``-j2``) and reports the binary
and flash/SRAM-like sizes of the model and kernel objects (the harness excluded): flash =
text + data, SRAM = data + bss (the arena and the parameter pool are bss).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..board import load_board
from ..errors import PockError
from ..render.names import make_assignment
from ..render.output import Project, open_project
from .device import build_firmware

# BuildError and JOBS stay importable from here
from .make import JOBS, BuildError, find_make, fresh_build_dir, run_make  # noqa: F401

HOST_COMPILERS = ("gcc", "clang", "cc")
BUILD_DIRS = {False: "build", True: "build-asan"}
SANITIZE_OPT = "-O1"        # ASan + UBSan builds: quick to compile, still inlined


@dataclass(frozen=True)
class BuildResult:
    project: Project
    binary: Path
    cc: str
    sanitize: bool
    sizes: dict[str, int]
    objects: tuple[Path, ...]
    log: str = field(default="", repr=False)

    def to_json(self) -> dict[str, Any]:
        mem = self.project.manifest.get("memory", {})
        return {
            "project": str(self.project.dir), "board": self.project.board,
            "binary": str(self.binary), "cc": self.cc, "sanitize": self.sanitize,
            **self.sizes,
            "arena_bytes": mem.get("arena_bytes"), "params_bytes": mem.get("params_bytes"),
            "constant_bytes": mem.get("constant_bytes"),
            **_budget(self.project.board, self.sizes),
        }


def _budget(board: str, sizes: dict[str, int]) -> dict[str, Any]:
    """The board's budget and whether the model + kernels fit it (host: a nominal budget)."""
    try:
        b = load_board(board)
    except PockError:
        return {"fits": True, "budget": None}
    return {"fits": sizes["sram_bytes"] <= b.sram_budget and sizes["flash_bytes"] <= b.flash_budget,
            "budget": {"sram_bytes": b.sram_budget, "flash_bytes": b.flash_budget}}


def find_cc(cc: str | None = None) -> str:
    """The C compiler: ``cc``, else $CC, else the first of gcc, clang, cc on PATH."""
    for cand in ([cc] if cc else []) + ([os.environ["CC"]] if os.environ.get("CC") else []) \
            + list(HOST_COMPILERS):
        if shutil.which(cand.split()[0]):
            return cand
        if cc and cand == cc:
            raise PockError(f"C compiler {cc!r} not found on PATH")
    raise PockError("no C compiler found (install gcc or clang, or set CC)")


def object_sizes(objects: list[Path]) -> dict[str, int]:
    """text/data/bss summed over objects (binutils ``size``, Berkeley format)."""
    if not objects:
        return {"text_bytes": 0, "data_bytes": 0, "bss_bytes": 0, "flash_bytes": 0,
                "sram_bytes": 0}
    tool = shutil.which("size") or shutil.which("llvm-size")
    if tool is None:
        raise PockError("binutils 'size' not found (needed for flash/SRAM sizes)")
    out = subprocess.run([tool, "-B", *map(str, objects)], capture_output=True, text=True,
                         check=True).stdout
    text = data = bss = 0
    for line in out.splitlines()[1:]:
        m = re.match(r"\s*(\d+)\s+(\d+)\s+(\d+)", line)
        if m:
            text += int(m.group(1))
            data += int(m.group(2))
            bss += int(m.group(3))
    return {"text_bytes": text, "data_bytes": data, "bss_bytes": bss,
            "flash_bytes": text + data, "sram_bytes": data + bss}


def build_project(directory: str | Path | Project, *, cc: str | None = None,
                  sanitize: bool = False, build_dir: str | None = None,
                  profile_ops: bool = False, check: bool = True) -> Any:
    """Build a generated project for its board and report sizes: host projects with make and
    the host compiler (a ``BuildResult``), board projects with make and the board's cross
    compiler (a ``toolchain.device.FirmwareBuild``, checked against the board's budget unless
    ``check`` is False; ``profile_ops``: per-op instruction markers).

    ``build_dir`` (relative to the project): default ``build`` (``build-asan`` with
    ``sanitize``). A build directory made with another compiler or flags starts over."""
    project = directory if isinstance(directory, Project) else open_project(directory)
    if "device" in project.manifest:
        if sanitize or cc or build_dir:
            raise PockError(f"{project.dir}: --sanitize, --cc and build directories are for "
                            f"host projects; this one is for board {project.board}")
        return build_firmware(project, profile_ops=profile_ops, check=check)
    if project.board != "host":
        raise PockError(f"{project.dir}: board {project.board!r} has no toolchain here")
    make = find_make("to build the host project")
    compiler = find_cc(cc)
    build_dir = build_dir or BUILD_DIRS[sanitize]
    if Path(build_dir).is_absolute() or ".." in Path(build_dir).parts:
        raise PockError(f"build directory {build_dir!r} must be inside the project")
    fresh_build_dir(project.dir / build_dir, f"{compiler}\nsanitize={int(sanitize)}\n")
    args = [make_assignment("CC", compiler), make_assignment("BUILD", build_dir)]
    if sanitize:
        args += ["SANITIZE=1", f"OPT={SANITIZE_OPT}"]
    status, log, _ = run_make(make, project.dir, args)
    if status != 0:
        first = next((ln for ln in log.splitlines() if "error" in ln.lower()),
                     log.strip().splitlines()[-1] if log.strip() else "")
        raise BuildError(f"{project.dir}: build with {compiler} failed: {first.strip()}", log)
    binary = project.binary(build_dir)
    objs = sorted(p for p in (project.dir / build_dir).rglob("*.o")
                  if p.name != "main_host.o")
    sizes = object_sizes(objs)
    sizes["binary_bytes"] = binary.stat().st_size
    return BuildResult(project, binary, compiler, sanitize, sizes, tuple(objs), log)
