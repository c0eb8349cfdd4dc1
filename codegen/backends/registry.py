"""The backends pockengine has, and the chain a board gets.

Chains come from board data: a board's ``features`` choose its default chain (``dsp`` or ``mve``
-> arm, cmsis-nn, ref; ``hvx`` -> hvx, ref; none -> ref), its ``defaults.backend`` overrides
that, and ``--backend NAME`` overrides both (NAME first, ref after it for the ops NAME does not
take). Where several backends of a chain take an op, lowering picks the cheapest (measured or
static cost, see ``cost``). ``auto`` drops a default backend that cannot build here (CMSIS-NN
not checked out) and says so in the chain's notes; an explicit ``--backend`` that cannot is a
one-line error naming the board.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError, PockError
from ..ir import Graph, Op
from .arm import ARM
from .base import Backend, Target
from .cmsis_nn import CMSIS_NN
from .hvx import HVX
from .kernel_call import KernelCall
from .native import NATIVE
from .ref_args import CALL_BUILDERS, forward_call
from .train_args import TRAIN_CALL_BUILDERS, train_kernel_call

REF = Backend(
    name="ref",
    summary="portable C99 kernels (runtime_c/kernels/ref): every op, forward and training",
    builders={**dict.fromkeys(CALL_BUILDERS, lambda g, op, batch, target:
                              forward_call(g, op, batch)),
              **dict.fromkeys(TRAIN_CALL_BUILDERS, lambda g, op, batch, target:
                              train_kernel_call(g, op, batch))},
    kernel_dir="ref",
)

BACKENDS: dict[str, Backend] = {b.name: b for b in (ARM, CMSIS_NN, HVX, NATIVE, REF)}
CHOICES = ("auto", *BACKENDS)
# board feature -> the backends its default chain puts before ref
_FEATURE_CHAINS = (("mve", ("arm", "cmsis-nn")), ("dsp", ("arm", "cmsis-nn")), ("hvx", ("hvx",)))


@dataclass(frozen=True)
class Chain:
    """The backends a build lowers with, in order of preference, and what was left out."""

    backends: tuple[Backend, ...]
    requested: str
    notes: tuple[str, ...] = ()
    target: Target = field(default_factory=Target)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)


def get_backend(name: str) -> Backend:
    b = BACKENDS.get(name)
    if b is None:
        raise PockError(f"unknown backend {name!r} (choose from {', '.join(CHOICES)})")
    return b


def default_chain(board: Any) -> tuple[str, ...]:
    """The backends a board's default chain puts before ref."""
    defaults: Mapping[str, str] = getattr(board, "defaults", None) or {}
    if defaults.get("backend"):
        return () if defaults["backend"] == "ref" else (defaults["backend"],)
    features = set(getattr(board, "features", ()) or ())
    for feature, chain in _FEATURE_CHAINS:
        if feature in features:
            return chain
    return ()


def default_backend(board: Any) -> str:
    """The backend a board's default chain puts first."""
    return (default_chain(board) or ("ref",))[0]


def chain_for(board: Any = None, backend: str = "auto") -> Chain:
    """The chain for ``board`` (a codegen.board.Board; None: the host) and ``--backend``."""
    board_name = getattr(board, "name", "host")
    if backend not in CHOICES:
        raise PockError(f"unknown backend {backend!r} for board {board_name} (choose from "
                        f"{', '.join(CHOICES)})")
    wanted = default_chain(board) if backend == "auto" else \
        (() if backend == "ref" else (backend,))
    notes: list[str] = []
    chain: list[Backend] = []
    where = f"board {board_name}" + (" (this machine)" if board_name == "host" else "")
    for name in wanted:
        b = BACKENDS.get(name)
        reason = (f"backend {name} does not exist in this version" if b is None
                  else b.unavailable(board))
        if reason is None:
            chain.append(b)
        elif backend != "auto":
            raise PockError(f"--backend {name} on {where}: {reason}")
        else:
            notes.append(f"{where}: {reason}; left out of the chain")
    chain.append(REF)
    return Chain(tuple(chain), backend, tuple(notes), Target.of(board))


def kernel_call(graph: Graph, op: Op, batch: int = 1) -> KernelCall:
    """The ref kernel call of any op (forward or training); ModelError if none can run it."""
    call = REF.build(graph, op, batch)
    if call is None:
        raise ModelError(f"op {op.name!r} ({op.type}): no portable C kernel for this op")
    return call


def kernel_calls(graph: Graph, batch: int = 1) -> list[KernelCall]:
    """The ref kernel calls of every op of a (forward or training) graph, in graph order."""
    return [kernel_call(graph, op, batch) for op in graph.ops]
