"""The arm backend's fp32 backward kernels vs the golden training kernels, bit for bit (raw
float32 bytes, signed zeros included): random cases aimed at each kernel
(tests/backends/arm_train_cases.py) through the host library (the portable C of the same
loops), and on the Cortex-M4F, M7 and M55 under QEMU (the VLDM + VMLA assembly), rendered as a
generated model calls them."""

from __future__ import annotations

import pytest

from codegen.backends import Target, kernel_call
from codegen.backends.arm import ARM, TRAIN_BUILDERS
from tests.backends import arm_train_cases

from .c_runner import KERNELS_DIR, RefKernels
from .train_runner import check_train_case
from .train_target import render_cases, training_expected

N_CASES = 300
N_TARGET_CASES = 40
IMAGE_CASE_BYTES = 256 * 1024
TARGET_SOURCES = ("arm/pe_train_f32_arm.c", "arm/pe_mask_s8_arm.c", "ref/pe_mask_s8.c",
                  "ref/pe_mask_f32.c", "arm/pe_update_f32_arm.c", "ref/pe_sgd_update_f32.c",
                  "arm/pe_update_s8_arm.c", "ref/pe_sgd_update_s8.c", "arm/pe_grad_s8_arm.c",
                  "arm/pe_merge_rows_arm.c", "arm/pe_grad_add_s8_arm.c", "ref/pe_grad_add_s8.c")


def _arm_or_ref(target: Target | None = None):
    def record(graph, op, batch=1):
        return ARM.build(graph, op, batch, target or Target()) or kernel_call(graph, op, batch)
    return record


def test_every_training_builder_has_cases():
    assert set(arm_train_cases.OPS) == set(TRAIN_BUILDERS)


@pytest.mark.parametrize("op_type", arm_train_cases.OPS)
def test_arm_training_kernel_matches_golden(arm_library, op_type):
    lib = RefKernels(arm_library, record=_arm_or_ref())
    taken = bad = 0
    first = None
    for i, (graph, inputs) in enumerate(arm_train_cases.iter_cases(op_type, N_CASES)):
        call = lib.record(graph, graph.ops[0], 1)
        taken += call.backend == "arm"
        n_bad, _, diff = check_train_case(lib, graph, inputs)
        if n_bad:
            bad += 1
            first = first or (i, call.kernel, diff, graph.ops[0].attrs)
    assert bad == 0, f"{op_type}: {bad} of {N_CASES} cases differ; first: {first}"
    assert taken > N_CASES // 2, f"arm took {taken} of {N_CASES} {op_type} cases"


def test_depthwise_grad_input_written_over_dy_matches_golden(arm_library):
    """dx over dy (the planner's in-place placement) where the record permits it: the same
    bits as the golden model."""
    lib = RefKernels(arm_library, record=_arm_or_ref())
    taken = bad = 0
    for graph, inputs in arm_train_cases.iter_cases("depthwise_conv2d_grad_input", 600,
                                                    seed=11):
        call = lib.record(graph, graph.ops[0], 1)
        if not call.inplace:
            continue
        taken += 1
        n_bad, _, diff = check_train_case(lib, graph, inputs, inplace=True)
        assert n_bad == 0, (diff, graph.ops[0].attrs, graph.tensors[graph.inputs[0]].shape)
    assert taken >= 30 and bad == 0, taken


@pytest.mark.emulator
@pytest.mark.parametrize("name", ["mps2-an386", "mps2-an500", "mps3-an547"])
def test_arm_training_kernels_on_the_core(name, tmp_path):
    from codegen.targets import cross_compile, run_on_emulator
    from tests.targets.helpers import runnable

    board = runnable(name)
    target = Target.of(board)
    cases = []
    for op_type in arm_train_cases.OPS:
        for graph, inputs in arm_train_cases.iter_cases(op_type, N_TARGET_CASES, seed=5):
            if ARM.build(graph, graph.ops[0], 1, target) is not None:
                cases.append((graph, inputs))
    assert len(cases) > 100

    def record(graph, inputs):
        return ARM.build(graph, graph.ops[0], 1, target)

    # images of at most IMAGE_CASE_BYTES of case tensors each (the boards' flash regions)
    batches: list[list] = [[]]
    size = 0
    for case in cases:
        n = sum(t.nbytes for t in case[0].tensors.values())
        if batches[-1] and size + n > IMAGE_CASE_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(case)
        size += n
    for k, batch in enumerate(batches):
        src, want = render_cases(batch, record, training_expected,
                                 headers=("pe_arm_kernels.h",), fill=0)
        out = tmp_path / f"image{k}"
        out.mkdir()
        harness = out / "cases.c"
        harness.write_text(src.replace("@ENTRY@", '#include "pe_runtime.h"'))
        elf = cross_compile(board, [harness, *(KERNELS_DIR / f for f in TARGET_SOURCES)],
                            [KERNELS_DIR, KERNELS_DIR / "arm", KERNELS_DIR / "ref"], out,
                            ["-std=c99", "-ffp-contract=off"], name="arm_train")
        res = run_on_emulator(board, elf, timeout=600)
        assert res.ok, (res.exit_code, res.fault, res.stderr[-2000:])
        got = [int(w, 16) for w in res.stdout.split() if len(w) == 8]
        assert len(got) == len(want)
        bad = [batch[i][0].ops[0].type for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"{name}: cases that differ from the golden model: {bad}"
