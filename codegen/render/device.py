"""Device projects: what a board build adds to the generated model.

- ``DeviceData``: the samples the firmware trains and evaluates on (int8 inputs, labels or
  int8 targets, the sample order of every step), rendered into ``<p>_data.c`` as ``const``
  arrays (flash) by ``data_files``;
- ``board_files``: the startup code and runtime of the board (copied from ``runtime_c``, so the
  project builds on its own), the linker script rendered from the board file (``linker``), and
  the records of the board Makefile (``Makefile_board.j2``) — compiler, flags, defines, sources
  — taken from ``board_build``, which ``codegen.targets.cross_compile`` builds with too, so that
  a project build and ``cross_compile`` agree.

The device harness itself is ``templates/main_device.c.j2``; the serial harness beside it
(boards with a ``uart`` section) is ``serial_harness``'s.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..board import Board
from ..errors import PockError
from ..resources import data_dir
from .board_build import (
    board_cflags,
    board_ldflags,
    board_libs,
    compiler,
    runtime_parts,
    runtime_root,
)
from .environment import render
from .linker import render_linker_script
from .literals import array_rows
from .names import comment_text

# what the device harness keeps in RAM besides its output buffer (SHA-256 state...), bytes
HARNESS_RAM_BYTES = 512

FIRMWARE_SUFFIX = "_firmware.elf"
EXTRA_RUNTIME = ("runtime/pe_sha256.c",)          # beyond what runtime_parts links
RUNTIME_WARNINGS = ("-Wall", "-Wextra", "-Werror")
PROFILE_OPS_PHASES = 256                          # marker slots with per-op counts (plugin max)
FIRST_OP_PHASE = 8                                # PE_PROF_USER


@dataclass(frozen=True, eq=False)
class DeviceData:
    """What the firmware trains and evaluates on, already fitted to the model (int8).

    ``train_t`` / ``eval_t``: class labels (N,) for cross-entropy, int8 targets (N, *out) for
    MSE, or None (evaluation without labels). ``order``: the sample index of every training
    step (all epochs), as the host and golden engines visit them."""

    train_x: np.ndarray
    train_t: np.ndarray | None
    eval_x: np.ndarray
    eval_t: np.ndarray | None
    order: np.ndarray
    epochs: int = 1
    seed: int | None = 0
    print_outputs: bool = False
    dump_params: bool = True
    source: dict[str, Any] = field(default_factory=dict)   # file names, for the manifest

    @classmethod
    def empty(cls, input_shape: tuple[int, ...]) -> DeviceData:
        z = np.zeros((0, *input_shape[1:]), np.int8)
        return cls(z, None, z, None, np.zeros(0, np.int64), epochs=0, seed=None)

    @property
    def steps(self) -> int:
        return len(self.order)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for a in (self.train_x, self.train_t, self.eval_x, self.eval_t, self.order):
            if a is not None:
                a = np.ascontiguousarray(a)
                h.update(f"{a.dtype.str}{a.shape}".encode())
                h.update(a.tobytes())
        h.update(f"{self.epochs} {self.print_outputs} {self.dump_params}".encode())
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        """The manifest's ``data`` section."""
        return {"train_samples": len(self.train_x), "eval_samples": len(self.eval_x),
                "epochs": int(self.epochs), "steps": self.steps, "seed": self.seed,
                "eval_labels": _is_labels(self.eval_t), "eval_targets": _is_targets(self.eval_t),
                "print_outputs": self.print_outputs, "dump_params": self.dump_params,
                "sha256": self.sha256(), "source": dict(self.source),
                "flash_bytes": sum(int(a.nbytes) for a in (self.train_x, self.train_t,
                                                            self.eval_x, self.eval_t)
                                   if a is not None)}


def _is_labels(t: np.ndarray | None) -> bool:
    return t is not None and t.ndim == 1 and np.issubdtype(t.dtype, np.integer) \
        and t.dtype != np.int8


def _is_targets(t: np.ndarray | None) -> bool:
    return t is not None and t.dtype == np.int8


def check_data(data: DeviceData, *, input_bytes: int, output_bytes: int, training: Any
               ) -> None:
    """The data fits the project (sizes, label range, loss kind), else a one-line PockError."""
    for what, x in (("training", data.train_x), ("evaluation", data.eval_x)):
        if x.dtype != np.int8 or (len(x) and x[0].size != input_bytes):
            raise PockError(f"{what} inputs must be int8 samples of {input_bytes} values, got "
                            f"{x.dtype} {list(x.shape)}")
    if len(data.train_x) and training is None:
        raise PockError("training data for a project compiled without a training spec "
                        "(compile with --train)")
    if training is not None and len(data.order):
        loss = training["loss"]
        ok = _is_labels(data.train_t) if loss == "cross_entropy" else _is_targets(data.train_t)
        if not ok or len(data.train_t) != len(data.train_x):
            raise PockError(f"training data: {len(data.train_x)} samples need "
                            + ("labels" if loss == "cross_entropy" else "int8 targets")
                            + f" for the {loss} loss")
        if data.order.min() < 0 or data.order.max() >= len(data.train_x):
            raise PockError(f"sample order refers to samples outside 0..{len(data.train_x) - 1}")
    for what, t, n in (("training", data.train_t, len(data.train_x)),
                       ("evaluation", data.eval_t, len(data.eval_x))):
        if t is None:
            continue
        if len(t) != n:
            raise PockError(f"{what} data: {n} inputs but {len(t)} labels or targets")
        if _is_labels(t) and len(t) and (t.min() < 0 or t.max() >= output_bytes):
            raise PockError(f"{what} labels range {int(t.min())}..{int(t.max())}, the model "
                            f"has {output_bytes} outputs")
        if _is_targets(t) and len(t) and t[0].size != output_bytes:
            raise PockError(f"{what} targets have {t[0].size} values per sample, the model "
                            f"output has {output_bytes}")


def _array(name: str, ctype: str, values: np.ndarray, comment: str, inf: str
           ) -> dict[str, Any]:
    flat = np.asarray(values).reshape(-1)
    size = max(1, int(flat.size))
    return {"name": name, "ctype": ctype, "size": size, "comment": comment_text(comment),
            "rows": array_rows(flat if flat.size else np.zeros(1, flat.dtype), ctype, inf)}


def data_records(prefix: str, data: DeviceData, banner: list[str]) -> tuple[dict[str, Any],
                                                                           list[str]]:
    """Template records of ``<p>_data.h/.c`` and the identifiers they define."""
    p, P = prefix, prefix.upper()
    inf = f"{P}_INF"                      # unused: data are integers
    n, m = len(data.train_x), len(data.eval_x)
    arrays = [_array(f"{p}_train_x", "int8_t", data.train_x,
                     f"{n} training inputs, int8, {list(data.train_x.shape[1:])} each", inf)]
    if _is_labels(data.train_t):
        arrays.append(_array(f"{p}_train_y", "int32_t", data.train_t, f"{n} labels", inf))
    elif _is_targets(data.train_t):
        arrays.append(_array(f"{p}_train_t", "int8_t", data.train_t, f"{n} int8 targets", inf))
    index = "int16_t" if n <= 32767 else "int32_t"
    arrays.append(_array(f"{p}_order", index, data.order.astype(np.int64),
                         f"the sample of each of {data.steps} steps", inf))
    arrays.append(_array(f"{p}_eval_x", "int8_t", data.eval_x,
                         f"{m} evaluation inputs, int8", inf))
    if _is_labels(data.eval_t):
        arrays.append(_array(f"{p}_eval_y", "int32_t", data.eval_t, f"{m} labels", inf))
    elif _is_targets(data.eval_t):
        arrays.append(_array(f"{p}_eval_t", "int8_t", data.eval_t, f"{m} int8 targets", inf))
    if data.seed is None:
        order = "samples in file order each epoch"
    else:
        order = f"a numpy default_rng({data.seed}) permutation per epoch"
    summary = (f"{n} training samples, {data.epochs} epoch(s), {m} evaluation samples; "
               f"data sha256 {data.sha256()}")
    rec = {"banner": banner, "summary": comment_text(summary), "train_count": n,
           "eval_count": m, "epochs": int(data.epochs), "steps": data.steps,
           "order_comment": comment_text(order), "eval_labels": _is_labels(data.eval_t),
           "eval_targets": _is_targets(data.eval_t), "print_outputs": data.print_outputs,
           "dump_params": data.dump_params, "arrays": arrays}
    idents = [a["name"] for a in arrays] + [f"{P}_DATA_H"] + [
        f"{P}_DATA_{k}" for k in ("TRAIN_COUNT", "EVAL_COUNT", "EPOCHS", "STEPS", "EVAL_LABELS",
                                  "EVAL_TARGETS", "PRINT_OUTPUTS", "DUMP_PARAMS")]
    return rec, idents


def data_files(prefix: str, data: DeviceData, banner: list[str]) -> dict[str, bytes]:
    """``<p>_data.h`` and ``<p>_data.c``."""
    rec, _ = data_records(prefix, data, banner)
    return {f"{prefix}_data.h": render("data.h.j2", p=prefix, P=prefix.upper(),
                                       data=rec).encode(),
            f"{prefix}_data.c": render("data.c.j2", p=prefix, P=prefix.upper(),
                                       data=rec).encode()}


# -- board runtime and build records ------------------------------------------------------------
@dataclass(frozen=True)
class BoardFiles:
    files: dict[str, bytes]             # project-relative path -> bytes
    records: dict[str, Any]             # the ``board`` record of Makefile_board.j2
    include_dirs: tuple[str, ...]


def board_files(board: Board, prefix: str) -> BoardFiles:
    """Startup, console, runtime (and headers) of ``board``, the linker script and the
    Makefile records; paths are relative to the project."""
    root = runtime_root()
    parts = runtime_parts(board)
    files: dict[str, bytes] = {}
    sources = [s.relative_to(root).as_posix() for s in parts.sources] + list(EXTRA_RUNTIME)
    for rel in sources:
        files[rel] = (root / rel).read_bytes()
    includes = []
    for d in parts.include_dirs:
        rel = d.relative_to(root).as_posix()
        includes.append(rel)
        for h in sorted(d.glob("*.h")):
            files[f"{rel}/{h.name}"] = h.read_bytes()
    script = f"{board.name}.ld"
    files[script] = render_linker_script(board).encode()
    P = prefix.upper()
    records = {
        "name": board.name, "cpu": board.cpu, "cc": _words(compiler(board)),
        "cflags": board_cflags(board), "runtime_cflags": list(RUNTIME_WARNINGS),
        "defines": [f"-D{d}" for d in parts.defines] + [f"-D{P}_PROFILE=1"],
        "profile_ops_defines": [f"-D{P}_PROFILE_OPS=1",
                                f"-DPE_PROF_MAX_PHASES={PROFILE_OPS_PHASES}"],
        "ldflags": board_ldflags(board, Path(script), None),
        "map_file": f"{prefix}_firmware.map",
        "libs": board_libs(board),
        "runtime_sources": [s for s in sources if s.endswith(".c")],
        "asm_sources": [s for s in sources if s.endswith(".S")],
        "linker_script": script,
    }
    return BoardFiles(files, records, tuple(includes))


def _words(command: str) -> list[str]:
    """A compiler command ($CC may be ``ccache gcc``) as words, each quoted in the Makefile."""
    try:
        return shlex.split(command) or [command]
    except ValueError:                   # unbalanced quotes: one word
        return [command]


def runtime_header_files() -> list[Path]:
    """Every header of the board runtime (for the identifier clash check)."""
    root = data_dir("runtime_c") / "runtime"
    return sorted(root.rglob("*.h"))
