"""The CMSIS-NN kernels on the cores they are for, bit for bit with the golden model: random
single-op cases (tests/backends/cmsis_cases.py) built into one image per board with the
board's compiler flags (so CMSIS-NN compiles its DSP path for the Cortex-M4F, M7 and M33 and its
Helium path for the M55), run under QEMU; each case prints a hash of the bytes its kernel
wrote, and the scratch CMSIS-NN's own *_get_buffer_size reports on that core, which must equal
the record's.

Needs the CMSIS-NN checkout (skips with the backend's reason), arm-none-eabi-gcc and
qemu-system-arm.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codegen import golden
from codegen.backends import KernelCall, StructArg, Target
from codegen.backends import cmsis_nn as cm
from codegen.board import Board
from codegen.targets import cross_compile
from tests.kernels.c_runner import KERNELS_DIR
from tests.kernels.train_target import chunk_cases, render_cases, run_board_cases, struct_init
from tests.targets.helpers import runnable

from . import cmsis_cases
from .cmsis_helpers import WRAPPERS, checkout, cmsis_sources

pytestmark = pytest.mark.emulator

BOARDS = ("mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547")
N_PER_OP = {"conv2d": 200, "depthwise_conv2d": 160}      # others: 60
IMAGE_BYTES = 160 * 1024                  # case data per image (the M55's TCMs are 512 KiB)
# the kernels each core's cases must reach
PATHS = {
    cm.DSP: {"conv-1x1_fast", "conv-1x1", "conv-1xn", "conv-im2col", "dw-3x3", "dw-opt",
             "dw-generic", "fc-per-channel", "fc-per-tensor", "softmax-int8", "softmax-int16"},
    cm.MVE: {"conv-1x1_fast", "conv-1x1", "conv-1xn", "conv-im2col", "dw-opt", "dw-generic",
             "dw-conv-im2col", "fc-per-channel", "fc-per-tensor", "softmax-int8",
             "softmax-int16"},
}


def _dims(d) -> str:
    return "{" + ", ".join(str(int(d.values[k])) for k in "nhwc") + "}"


def scratch_query(call: KernelCall, i: int, core: str) -> tuple[list[str], list[str], list[int]]:
    """C that prints the scratch the linked CMSIS-NN's *_get_buffer_size gives for the record's
    kernel on this core, and the value the Python formulas give (FC: the kernel-sum buffer,
    which a record with sums in flash does not ask for)."""
    a = {n: arg.value for n, arg in call.args if isinstance(arg, StructArg)}
    if call.kernel in ("pe_conv2d_s8_cmsis", "pe_depthwise_conv2d_s8_cmsis"):
        conv = call.kernel == "pe_conv2d_s8_cmsis"
        ctype = "cmsis_nn_conv_params" if conv else "cmsis_nn_dw_conv_params"
        decls = [f"static const {ctype} p{i} = {struct_init(a['params'], [], '')};"]
        decls += [f"static const cmsis_nn_dims {n[0]}{i} = {_dims(a[n])};"
                  for n in ("input_dims", "filter_dims", "output_dims")]
        fn = ("arm_convolve_wrapper_s8_get_buffer_size" if conv
              else "arm_depthwise_conv_wrapper_s8_get_buffer_size")
        return decls, [f"    pe_put_hex((uint32_t){fn}(&p{i}, &i{i}, &f{i}, &o{i}));"], \
            [call.scratch_bytes]
    if call.kernel.startswith("pe_fully_connected"):
        f = a["filter_dims"].values
        return ([f"static const cmsis_nn_dims f{i} = {{{f['c']}, 1, 1, {f['n']}}};"],
                [f"    pe_put_hex((uint32_t)arm_fully_connected_s8_get_buffer_size(&f{i}));"],
                [cm.fully_connected_buffer_size(core, int(f["n"]))])
    if call.kernel == "pe_avg_pool2d_s8_cmsis":
        o = a["output_dims"].values
        query = f"arm_avgpool_s8_get_buffer_size({o['w']}, {o['c']})"
        return [], [f"    pe_put_hex((uint32_t){query});"], [call.scratch_bytes]
    return [], [], []


def _cases(target: Target) -> list[tuple]:
    """(graph, inputs, batch, kernel path) of every op's cases the backend accepts."""
    out = []
    for op_type in cmsis_cases.OPS:
        for graph, feeds, batch in cmsis_cases.iter_cases(op_type, N_PER_OP.get(op_type, 60),
                                                          seed=17):
            if cm.CMSIS_NN.build(graph, graph.ops[0], batch, target) is None:
                continue
            out.append((graph, [feeds[n] for n in graph.inputs], batch,
                        cmsis_cases.path(graph, batch, target)))
    return out


def _run(board: Board, cases: list[tuple], target: Target, root: Path, out: Path
         ) -> list[tuple[list[int], list[int]]]:
    """(printed, expected) values per case of one image."""
    core = cm.core(target)
    batch = {id(g): b for g, _, b, _ in cases}
    counts: list[int] = []

    def record(graph, inputs):
        return cm.CMSIS_NN.build(graph, graph.ops[0], batch[id(graph)], target)

    def expected(graph, inputs):
        return {graph.ops[0].outputs[0]: golden.run(graph, *inputs)[0]}

    def probe(call, i):
        decls, stmts, values = scratch_query(call, i, core)
        counts.append(1 + len(values))
        return decls, stmts, values

    src, want = render_cases([(g, x) for g, x, _, _ in cases], record, expected,
                             headers=("arm_nnfunctions.h", "pe_cmsis_kernels.h"), fill=0x5A,
                             probe=probe)
    out.mkdir(parents=True, exist_ok=True)
    harness = out / "cases.c"
    harness.write_text(src.replace("@ENTRY@", '#include "pe_runtime.h"'))
    elf = cross_compile(board, [harness, *WRAPPERS, *cmsis_sources(root, [*WRAPPERS, harness])],
                        [KERNELS_DIR, KERNELS_DIR / "cmsis_nn", root / "Include"], out,
                        ["-std=gnu99"], name="cmsis_cases", warnings=())
    got = run_board_cases(board, elf, want)
    per_case, pos = [], 0
    for n in counts:
        per_case.append((got[pos:pos + n], want[pos:pos + n]))
        pos += n
    return per_case


@pytest.mark.parametrize("name", BOARDS)
def test_cmsis_kernels_bit_exact_on_the_core(name, tmp_path):
    board = runnable(name)
    root = checkout(board)
    target = Target.of(board)
    cases = _cases(target)
    assert len(cases) > 300
    reached = {c[3] for c in cases}
    assert PATHS[cm.core(target)] <= reached, PATHS[cm.core(target)] - reached
    bad: dict[str, int] = {}
    for k, chunk in enumerate(chunk_cases(cases, IMAGE_BYTES)):
        for (graph, _, _, label), (got, want) in zip(
                chunk, _run(board, chunk, target, root, tmp_path / f"image{k}"), strict=True):
            if got != want:
                what = f"{label} ({'output' if got[0] != want[0] else 'scratch'})"
                bad[what] = bad.get(what, 0) + 1
    assert not bad, f"{name}: cases that differ from the golden model: {bad}"


# -- the declines are needed ----------------------------------------------------------------------
def _forced(graph, op, batch, target) -> KernelCall:
    """The CMSIS-NN record the builder would make without its declines."""
    from dataclasses import replace

    from codegen.backends.params import OpArgs
    from codegen.backends.ref_args import forward_call

    ref = forward_call(graph, op, batch)
    view, core = OpArgs(graph, op, batch), cm.core(target)
    scratch = 0
    if op.type == "conv2d":
        scratch = cm.convolve_wrapper_buffer_size(core, cm.ConvGeometry.of(view))
    elif op.type == "depthwise_conv2d":
        scratch = cm.depthwise_wrapper_buffer_size(core, cm.ConvGeometry.of(view, True))
    return replace(ref, kernel=ref.kernel + cm.SUFFIX, scratch_bytes=scratch, backend="cmsis-nn")


def _declined(build, board: str, n: int) -> list[tuple]:
    target = Target.of(runnable(board))
    rng = np.random.default_rng(23)
    cases: list[tuple] = []
    while len(cases) < n:
        graph, batch = build(rng)
        if cm.CMSIS_NN.build(graph, graph.ops[0], batch, target) is None:
            feeds = cmsis_cases.random_feeds(graph, batch, rng)
            cases.append((graph, [feeds[k] for k in graph.inputs], batch, graph.ops[0].type))
    return cases


@pytest.mark.parametrize(("what", "board", "build"), [
    ("Helium 1xN", "mps3-an547", cmsis_cases.conv_1xn),
    ("3x3 depthwise, middle column in the padding", "mps2-an386",
     cmsis_cases.dw_3x3_padded_right),
    ("max pool windows in the padding", "mps2-an386", cmsis_cases.max_pool_padded),
    ("1x1 with bottom/right padding", "mps2-an386", cmsis_cases.conv_1x1_padded),
    ("broadcast add", "mps2-an386", lambda rng: cmsis_cases.case("add", rng)),
])
def test_declined_configurations_differ_on_the_core(what, board, build, tmp_path):
    """Run what the builders decline through CMSIS-NN anyway: most of it differs from the
    golden model there (the declines are needed, not just cautious)."""
    b = runnable(board)
    root = checkout(b)
    target = Target.of(b)
    cases = _declined(build, board, 24)
    original = cm.CMSIS_NN.build
    object.__setattr__(cm.CMSIS_NN, "build", _forced)      # undone below
    try:
        results = _run(b, cases, target, root, tmp_path)
    finally:
        object.__setattr__(cm.CMSIS_NN, "build", original)
    wrong = sum(got[0] != want[0] for got, want in results)
    assert wrong >= len(cases) // 2, f"{what}: only {wrong} of {len(cases)} differ"
