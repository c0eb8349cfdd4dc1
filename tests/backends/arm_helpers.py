"""arm backend test helpers: the records of its forms (specialised body over packed
weights, body over the weights as they are, out of line, and the Helium streams of an MVE
core), and a host library of its kernels
(the bodies exported through PE_ARM_EXTERN, the out-of-line kernels, and ref for what arm
declines)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from codegen.backends import Target, kernel_call
from codegen.backends.arm import ARM, GENERIC, body_call, out_of_line, stream_out_of_line
from codegen.ir import Graph, Op
from tests.kernels.c_runner import INCLUDES, KERNELS_DIR, compile_objects

ARM_SOURCES = sorted((KERNELS_DIR / "arm").glob("*.c"))
BODIES_HARNESS = Path(__file__).with_name("arm_bodies.c")
ARM_INCLUDES = [*INCLUDES, f"-I{KERNELS_DIR / 'arm'}"]
FORMS = ("arm", "arm-plain", "arm-ool", "arm-helium")
HELIUM = Target("helium", "cortex-m", frozenset({"dsp", "mve"}))   # the natural streams


def arm_record(graph: Graph, op: Op, batch: int = 1, target: Target | None = None,
               form: str = "arm", specialised: bool = False):
    """The arm record of ``op`` in one of FORMS, or None when arm declines it.

    A stream_chain's record in a generated model passes a stage function the model defines
    (``specialised``: that form, for the tests that render C); otherwise its out-of-line form,
    which ctypes can call: over the bodies' constants (arm, arm-helium) or the weights as they
    are (arm-plain, arm-ool)."""
    t = target or Target()
    if op.type == "stream_chain" and not specialised:
        if form in ("arm-plain", "arm-ool"):
            t = replace(t, features=t.features | {GENERIC})
        return stream_out_of_line(graph, op, batch, HELIUM if form == "arm-helium" else t)
    if form == "arm":
        return ARM.build(graph, op, batch, t)
    if form == "arm-helium":
        return ARM.build(graph, op, batch, HELIUM)
    if op.type == "stream_chain":
        return ARM.build(graph, op, batch, replace(t, features=t.features | {GENERIC}))
    ool = out_of_line(graph, op, batch, target)
    if ool is None or form == "arm-ool":
        return ool
    return body_call(ool)                 # no graph: the weights as they are (not packed)


def arm_or_ref(form: str = "arm"):
    def record(graph: Graph, op: Op, batch: int = 1):
        return arm_record(graph, op, batch, form=form) or kernel_call(graph, op, batch)
    return record


def host_objects(out: Path, flags: list[str]) -> list[Path]:
    """The out-of-line kernels and the exported bodies, for a host library."""
    return compile_objects("gcc", out / "arm", ["-fPIC", *flags],
                           [*ARM_SOURCES, BODIES_HARNESS], ARM_INCLUDES)
