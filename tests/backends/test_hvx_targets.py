"""The hvx backend's kernels on the DSPs they are for, bit for bit with the golden model:
random single-op cases (tests/backends/hvx_cases.py) rendered as the calls a generated model
makes, built with each Hexagon board's flags (v66, v67; HVX in 128-byte mode) together with
the kernels of runtime_c/kernels/hvx and run under qemu-hexagon; each case prints a hash of
the bytes its kernel wrote.

Needs clang with the Hexagon target and qemu-hexagon (skips with the reason otherwise); no
third-party code, so it runs in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen import golden
from codegen.backends import Target
from codegen.backends.hvx import HVX, TRAIN_BUILDERS
from codegen.board import Board
from codegen.targets import cross_compile, run_on_emulator
from tests.kernels.c_runner import KERNELS_DIR
from tests.kernels.train_target import (
    chunk_cases,
    render_cases,
    run_board_cases,
    training_expected,
)
from tests.targets.helpers import runnable

from . import hvx_cases, hvx_train_cases

pytestmark = pytest.mark.emulator

BOARDS = ("hexagon-v66", "hexagon-v67")
N_PER_OP = {"conv2d": 120, "depthwise_conv2d": 80, "fully_connected": 100, "avg_pool2d": 30,
            "max_pool2d": 30, "add": 30, "mul": 30}
IMAGE_BYTES = 512 * 1024
HVX_SOURCES = sorted((KERNELS_DIR / "hvx").glob("*.c"))
# kernel paths every run must reach (a path or its prefix, hvx_cases.path)
PATHS = {"conv-direct-packed", "conv-direct-trained", "conv-gathered-packed",
         "conv-gathered-trained", "conv-gathered-wide", "conv-direct-packed-odd-blocks", "conv-gathered-packed-tail",
         "fc-packed-odd-blocks", "fc-trained-odd-blocks", "fc-dot-short", "fc-dot-long",
         "fc-small-32", "fc-small-32-relu", "fc-small-64", "fc-small-64-relu",
         "fc-small-32-rows", "fc-small-64-rows", "fc-small-128", "fc-small-128-relu",
         "dw-flat-one", "dw-flat-many", "dw-pixel-one", "dw-pixel-many", "dw-flat-one-trained",
         "dw-pixel-many-trained", "avg_pool2d",
         "max_pool2d", "add", "mul"}


def cases(target: Target) -> list[tuple]:
    """(graph, inputs, batch, path) of the cases hvx takes."""
    out = []
    for op_type in hvx_cases.OPS:
        for graph, feeds, batch in hvx_cases.iter_cases(op_type, N_PER_OP[op_type], seed=5):
            if HVX.build(graph, graph.ops[0], batch, target) is None:
                continue
            out.append((graph, [feeds[n] for n in graph.inputs], batch,
                        hvx_cases.path(graph, batch)))
    return out


def run_cases(board: Board, chunk: list[tuple], target: Target, out: Path,
              optimise: bool = False) -> list[tuple[int, int]]:
    """Build one image of ``chunk`` for ``board``, run it; (printed, expected) hashes.
    ``optimise``: the case functions compiled at -O2 too (else clang leaves them unoptimised,
    see train_target): kernels inlined into them then fold the case's constant shapes as they
    do in a generated model."""
    batches = {id(g): b for g, _, b, _ in chunk}

    def record(graph, inputs):
        return HVX.build(graph, graph.ops[0], batches[id(graph)], target)

    def expected(graph, inputs):
        return {graph.ops[0].outputs[0]: golden.run(graph, *inputs)[0]}

    src, want = render_cases([(g, x) for g, x, _, _ in chunk], record, expected,
                             headers=("pe_hvx_kernels.h",), fill=0x5A)
    out.mkdir(parents=True, exist_ok=True)
    harness = out / "cases.c"
    if optimise:
        src = src.replace("__attribute__((optnone, noinline))", "__attribute__((noinline))")
    harness.write_text(src.replace("@ENTRY@", '#include "pe_runtime.h"'))
    elf = cross_compile(board, [harness, *HVX_SOURCES],
                        [KERNELS_DIR, KERNELS_DIR / "hvx", KERNELS_DIR / "ref"], out,
                        ["-std=c99"], name="hvx_cases")
    got = run_board_cases(board, elf, want)
    return list(zip(got, want, strict=True))


@pytest.mark.parametrize("name", BOARDS)
def test_hvx_kernels_bit_exact_on_the_dsp(name, tmp_path):
    board = runnable(name)
    target = Target.of(board)
    taken = cases(target)
    assert len(taken) > 250
    reached = {c[3] for c in taken}
    missing = {p for p in PATHS if not any(r == p or r.startswith(p + "-") for r in reached)}
    assert not missing, missing
    bad: dict[str, int] = {}
    for k, chunk in enumerate(chunk_cases(taken, IMAGE_BYTES)):
        for (_, _, _, label), (got, want) in zip(
                chunk, run_cases(board, chunk, target, tmp_path / f"image{k}"), strict=True):
            if got != want:
                bad[label] = bad.get(label, 0) + 1
    assert not bad, f"{name}: cases that differ from the golden model: {bad}"
    # the small FC kernel is inlined where it is called: in a model, with constant shapes
    small = [c for c in taken if c[3].startswith("fc-small")]
    assert len(small) > 30
    for (_, _, _, label), (got, want) in zip(
            small, run_cases(board, small, target, tmp_path / "small", optimise=True),
            strict=True):
        if got != want:
            bad[label] = bad.get(label, 0) + 1
    assert not bad, f"{name}: inlined small FC cases that differ from the golden model: {bad}"


# -- the int8 backward --------------------------------------------------------------------------
N_TRAIN = {"conv2d_grad_input": 60, "fully_connected_grad_input": 40, "conv2d_grad_weight": 60,
           "depthwise_conv2d_grad_input": 50, "depthwise_conv2d_grad_weight": 50,
           "fully_connected_grad_weight": 30, "bias_grad": 30, "avg_pool2d_grad": 40,
           "act_mask": 40, "mask_grad": 40, "sgd_update": 120}


def test_every_training_builder_has_cases():
    assert set(hvx_train_cases.OPS) == set(TRAIN_BUILDERS) == set(N_TRAIN)


def train_cases(target: Target) -> list[tuple]:
    """(graph, inputs, batch 1, op type) of the int8 training cases hvx takes."""
    out = []
    for op_type in hvx_train_cases.OPS:
        for graph, inputs in hvx_train_cases.iter_cases(op_type, N_TRAIN[op_type], seed=3):
            if HVX.build(graph, graph.ops[0], 1, target) is not None:
                out.append((graph, inputs, 1, op_type))
    return out


@pytest.mark.parametrize("name", BOARDS)
def test_hvx_training_kernels_bit_exact_on_the_dsp(name, tmp_path):
    board = runnable(name)
    target = Target.of(board)
    taken = train_cases(target)
    per_op = {op: sum(c[3] == op for c in taken) for op in N_TRAIN}
    assert all(per_op[op] >= N_TRAIN[op] // 2 for op in N_TRAIN), per_op

    def record(graph, inputs):
        return HVX.build(graph, graph.ops[0], 1, target)

    bad: dict[str, int] = {}
    for k, chunk in enumerate(chunk_cases(taken, IMAGE_BYTES)):
        src, want = render_cases([(g, x) for g, x, _, _ in chunk], record, training_expected,
                                 headers=("pe_hvx_kernels.h",), fill=0x5A)
        out = tmp_path / f"train{k}"
        out.mkdir()
        (out / "cases.c").write_text(src.replace("@ENTRY@", '#include "pe_runtime.h"'))
        elf = cross_compile(board, [out / "cases.c", *HVX_SOURCES],
                            [KERNELS_DIR, KERNELS_DIR / "hvx", KERNELS_DIR / "ref"], out,
                            ["-std=c99"], name="hvx_train")
        res = run_on_emulator(board, elf, timeout=600)
        assert res.ok, (res.exit_code, res.fault, res.stderr[-2000:])
        got = [int(w, 16) for w in res.stdout.split() if len(w) == 8]
        assert len(got) == len(want)
        for (_, _, _, op_type), g, w in zip(chunk, got, want, strict=True):
            if g != w:
                bad[op_type] = bad.get(op_type, 0) + 1
    assert not bad, f"{name}: cases that differ from the golden model: {bad}"
