"""CMSIS-NN test helpers: the checkout (or a skip with the backend's own reason), the CMSIS-NN
sources the wrappers need, host builds of them, and records that fall back to ref.

CI machines have an empty submodule: everything here that needs the sources skips with the
reason ``CMSIS_NN.unavailable(board)`` gives.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from codegen.backends import Target, kernel_call
from codegen.backends.cmsis_nn import CMSIS_NN, CMSIS_NN_SOURCES
from codegen.backends.sources import source_index
from codegen.ir import Graph, Op
from codegen.resources import data_dir
from tests.kernels.c_runner import INCLUDES, KERNELS_DIR, STRICT_FLAGS, compile_objects

WRAPPERS = sorted((KERNELS_DIR / "cmsis_nn").glob("*.c"))
# third-party code: its own language level (the generated Makefile's THIRD_PARTY_CFLAGS)
THIRD_PARTY_FLAGS = ["-std=gnu99", "-ffp-contract=off", "-w"]


def checkout(board=None) -> Path:
    """The CMSIS-NN checkout, or skip the test with the reason the backend gives."""
    why = CMSIS_NN.unavailable(board)
    if why is not None:
        pytest.skip(why)
    root = CMSIS_NN_SOURCES.root()
    assert root is not None
    return root


def includes(root: Path) -> list[str]:
    return [*INCLUDES, f"-I{KERNELS_DIR / 'cmsis_nn'}", f"-I{root / 'Include'}"]


def cmsis_sources(root: Path, wrappers=WRAPPERS) -> list[Path]:
    """The CMSIS-NN files the wrappers' calls need (the closure a generated project builds)."""
    idents: set[str] = set()
    for w in wrappers:
        idents |= set(re.findall(r"\b[A-Za-z_]\w*\b", w.read_text()))
    return source_index(root / "Source").closure(sorted(idents))


def host_objects(root: Path, out: Path, flags: list[str]) -> list[Path]:
    """The wrappers (strict flags plus ``flags``) and their CMSIS-NN sources (third-party
    flags, no sanitizer: CMSIS-NN's C paths shift negative values left) for the host."""
    inc = includes(root)
    objs = compile_objects("gcc", out / "wrappers", ["-fPIC", *flags], WRAPPERS, inc)
    objs += compile_objects("gcc", out / "cmsis", ["-fPIC", "-O2"], cmsis_sources(root), inc,
                            strict=THIRD_PARTY_FLAGS)
    return objs


def cmsis_record(graph: Graph, op: Op, batch: int = 1, target: Target | None = None):
    """The CMSIS-NN backend's record of ``op`` on ``target`` (the host), or None."""
    return CMSIS_NN.build(graph, op, batch, target or Target())


def cmsis_or_ref(graph: Graph, op: Op, batch: int = 1):
    """The chain cmsis-nn, ref on the host (what --backend cmsis-nn lowers with)."""
    return cmsis_record(graph, op, batch) or kernel_call(graph, op, batch)


def compile_c(cc: list[str], src: Path, out: Path, root: Path) -> None:
    subprocess.run([*cc, *STRICT_FLAGS, *includes(root), "-c", str(src), "-o", str(out)],
                   check=True, capture_output=True, text=True)


RUNTIME = data_dir("runtime_c")
