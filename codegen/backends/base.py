"""A backend is data: a name, a table op type -> builder, and the C it needs.

A builder takes ``(graph, op, batch, target)`` and returns a :class:`KernelCall`, or ``None`` when the
backend has no kernel for that configuration (the next backend of the chain then gets the op).
A builder raises ``ModelError`` only for an op no kernel can run (bad quantization, shapes that
overflow); lowering reports that error when no backend of the chain accepts the op.

What a backend compiles: its own C folder ``runtime_c/kernels/<kernel_dir>`` (only the files its
chosen kernels need, see ``codegen.backends.sources``) and, for a backend built on a third-party
library, that library's sources from a checkout the user points at (:class:`ThirdParty`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..ir import Graph, Op
from ..resources import source_root
from .kernel_call import KernelCall

Builder = Callable[[Graph, Op, int, "Target"], "KernelCall | None"]


@dataclass(frozen=True)
class Target:
    """What a builder may know of the board it builds for: CMSIS-NN's scratch sizes and code
    paths differ between cores with DSP, with MVE (Helium) and without either."""

    name: str = "host"
    arch: str = "host"
    features: frozenset[str] = frozenset()

    @classmethod
    def of(cls, board: Any = None) -> Target:
        if board is None:
            return cls()
        return cls(board.name, board.arch, frozenset(getattr(board, "features", ()) or ()))


@dataclass(frozen=True)
class ThirdParty:
    """A library a backend compiles from a checkout: ``env`` (an environment variable) or the
    source tree's ``default`` (relative to the repository root) points at it; ``marker`` is a
    file that must exist in it."""

    name: str                         # "CMSIS-NN"
    make_var: str                     # the generated Makefile's variable: CMSIS_NN ?= path
    env: str                          # POCKENGINE_CMSIS_NN
    default: str                      # third_party/CMSIS-NN
    marker: str                       # Include/arm_nnfunctions.h
    include_dirs: tuple[str, ...]     # relative to the checkout
    source_dirs: tuple[str, ...]      # where its functions are defined (relative)

    def root(self) -> Path | None:
        """The checkout, or None when it is missing (or the submodule is empty)."""
        given = os.environ.get(self.env)
        candidates = [Path(given)] if given else []
        repo = source_root()
        if repo is not None and not given:
            candidates.append(repo / self.default)
        for c in candidates:
            if (c / self.marker).is_file():
                return c.resolve()
        return None

    def missing_reason(self) -> str:
        given = os.environ.get(self.env)
        where = f"${self.env}={given}" if given else f"{self.default} (the git submodule)"
        return (f"{self.name} sources not found at {where}; check out the submodule "
                f"(git submodule update --init {self.default}) or set {self.env} to a "
                f"{self.name} checkout")


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str
    builders: Mapping[str, Builder]
    kernel_dir: str                   # runtime_c/kernels/<kernel_dir>
    archs: tuple[str, ...] = ("host", "cortex-m", "hexagon")
    needs: tuple[str, ...] = ()       # board features; any one suffices (empty: none)
    third_party: ThirdParty | None = None
    defines: tuple[str, ...] = field(default=())

    def unavailable(self, board: Any = None) -> str | None:
        """Why this backend cannot build for ``board`` (a codegen.board.Board, None: the host),
        or None when it can (the reason does not name the board: the caller does)."""
        arch = getattr(board, "arch", "host")
        if arch not in self.archs:
            return (f"backend {self.name} has no kernels for {arch} boards (it builds for "
                    f"{', '.join(self.archs)})")
        features = set(getattr(board, "features", ()) or ())
        if self.needs and arch != "host" and not features & set(self.needs):
            return (f"backend {self.name} needs a core with {' or '.join(self.needs)} (the "
                    f"board has {', '.join(sorted(features)) or 'no such feature'})")
        if self.third_party is not None and self.third_party.root() is None:
            return f"backend {self.name} is not available: " + self.third_party.missing_reason()
        return None

    def build(self, graph: Graph, op: Op, batch: int = 1, target: Target | None = None
              ) -> KernelCall | None:
        """This backend's call record for ``op`` on ``target`` (default: the host), or None
        when it does not take it."""
        builder = self.builders.get(op.type)
        if builder is None:
            return None
        call = builder(graph, op, batch, target or Target())
        return None if call is None else replace(call, backend=self.name)
