"""The arm backend's kernels on the cores they are for, bit for bit with the golden model:
random single-op cases (tests/backends/arm_cases.py) rendered as the calls a generated model
makes (the kernel bodies inlined with every shape a literal, over weights packed at compile
time, and over the weights as they are, as in training graphs), built into images with each
board's compiler flags (the DSP paths, with the assembly loops, on the Cortex-M4F, M7, M33 and
M55) and run under QEMU; each case prints a hash of the bytes its kernel wrote.

Needs arm-none-eabi-gcc and qemu-system-arm (skips with the reason otherwise); no third-party
code, so it runs in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen import golden
from codegen.backends import Target
from codegen.board import Board
from codegen.targets import cross_compile
from tests.kernels.c_runner import KERNELS_DIR
from tests.kernels.train_target import chunk_cases, render_cases, run_board_cases
from tests.targets.helpers import runnable

from . import arm_cases
from .arm_helpers import arm_record

pytestmark = pytest.mark.emulator

BOARDS = ("mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547")
N_PER_OP = {"conv2d": 160, "depthwise_conv2d": 200, "fully_connected": 50, "add": 30,
            "stream_chain": 40}
IMAGE_BYTES = 160 * 1024                  # case data per image (the M55's TCMs are 512 KiB)
CASES_PER_IMAGE = 120                     # inlined bodies: keep one file's compile short
PATHS = {"conv-c4", "conv-c-any-tail", "conv-c4-odd-pixels", "conv-c4-odd-c", "dw-3x3-s1",
         "dw-3x3-s2", "dw-pairs", "dw-3x3-s2-fast-signed", "dw-3x3-s1-fast-rows4",
         "dw-3x3-s2-fast-rows4", "dw-3x3-s1-rows4", "dw-3x3-s2-rows4", "dw-5x5-s1-fast-rows4",
         "dw-5x5-s1-rows4", "dw-5x5-s2-fast-rows4", "dw-5x5-s2-rows4", "dw-7x7-s1-fast-rows4",
         "dw-7x7-s1-rows4", "dw-7x7-s2-fast-rows4", "dw-7x7-s2-rows4",
         "dw-pairs-fast-signed", "fc-quads", "fc-rest-tail", "add-rq",
         "conv-w16-fast-relu", "conv-w16-fast-signed-pad", "conv-w16-general-relu-pad",
         "conv-w16-general-signed", "conv-w16-general-relu-odd-pixels", "conv-rows-relu",
         "conv-rows-signed"}


def _cases(target: Target) -> list[tuple]:
    """(graph, inputs, batch, path, form) of the cases arm takes, in both forms of the body."""
    out = []
    for op_type in arm_cases.OPS:
        for k, (graph, feeds, batch) in enumerate(
                arm_cases.iter_cases(op_type, N_PER_OP[op_type], seed=29)):
            form = "arm" if k % 2 == 0 else "arm-plain"
            if arm_record(graph, graph.ops[0], batch, target, form, True) is None:
                continue
            out.append((graph, [feeds[n] for n in graph.inputs], batch,
                        arm_cases.path(graph, batch, form), form))
    return out


def _run(board: Board, cases: list[tuple], target: Target, out: Path) -> list[tuple[int, int]]:
    info = {id(g): (b, form) for g, _, b, _, form in cases}

    def record(graph, inputs):
        batch, form = info[id(graph)]
        return arm_record(graph, graph.ops[0], batch, target, form, specialised=True)

    def expected(graph, inputs):
        return {graph.ops[0].outputs[0]: golden.run(graph, *inputs)[0]}

    src, want = render_cases([(g, x) for g, x, _, _, _ in cases], record, expected,
                             headers=("pe_arm_kernels.h",), fill=0x5A)
    out.mkdir(parents=True, exist_ok=True)
    harness = out / "cases.c"
    harness.write_text(src.replace("@ENTRY@", '#include "pe_runtime.h"'))
    # the bodies are inlined; stream_chain's drivers are files of their own (the stage
    # function form, and the out-of-line form over the weights as they are)
    streams = [KERNELS_DIR / "arm" / f for f in ("pe_stream_chain_fn.c",
                                                 "pe_stream_chain_s8_arm.c")]
    elf = cross_compile(board, [harness, *streams], [KERNELS_DIR, KERNELS_DIR / "arm"], out,
                        ["-std=c99"], name="arm_cases")
    got = run_board_cases(board, elf, want)
    return list(zip(got, want, strict=True))


@pytest.mark.parametrize("name", BOARDS)
def test_arm_kernels_bit_exact_on_the_core(name, tmp_path):
    board = runnable(name)
    target = Target.of(board)
    cases = _cases(target)
    assert len(cases) > 150
    reached = {c[3] for c in cases}
    assert PATHS <= reached, PATHS - reached
    assert sum(p.startswith("stream-") and "ref" not in p for p in reached) >= 10
    assert {c[4] for c in cases} == {"arm", "arm-plain"}
    bad: dict[str, int] = {}
    for k, chunk in enumerate(chunk_cases(cases, IMAGE_BYTES, CASES_PER_IMAGE)):
        for (_, _, _, label, form), (got, want) in zip(
                chunk, _run(board, chunk, target, tmp_path / f"image{k}"), strict=True):
            if got != want:
                key = f"{form} {label}"
                bad[key] = bad.get(key, 0) + 1
    assert not bad, f"{name}: cases that differ from the golden model: {bad}"
