"""The native backend's fp32 backward kernels vs the golden training kernels, bit for bit (raw
float32 bytes: signed zeros and infinities included; a NaN must be a NaN, its payload and sign
are not compared: C leaves the choice between two NaN operands to the compiler, and a product
of 0 and infinity gives the CPU's default NaN), on every code path this machine can run
(AVX-512 with and without VNNI, AVX2, portable C): random cases aimed at each kernel
(tests/backends/native_grad_cases.py) through the host library, the planner's in-place
placement where a record permits it."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.backends import Target, kernel_call
from codegen.backends.kernel_call import NullArg
from codegen.backends.native import GRAD_BUILDERS, NATIVE
from tests.backends import native_grad_cases
from tests.backends.native_helpers import FORMS

from .c_runner import RefKernels
from .conftest import native_library
from .train_runner import check_train_case

N_CASES = 200


def _native_or_ref(graph, op, batch=1):
    return NATIVE.build(graph, op, batch, Target()) or kernel_call(graph, op, batch)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bytes, a NaN against any NaN."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype != np.float32:
        return got.tobytes() == want.tobytes()
    nan = np.isnan(got) & np.isnan(want)
    return bool(np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan]) and
                np.array_equal(np.isnan(got), np.isnan(want)))


def check_case(lib: RefKernels, graph, inputs, inplace: bool) -> str | None:
    """The first difference from the golden kernel (None: none): the outputs, or for an
    update op every input slot after the update (train_runner.check_train_case), compared
    by ``same_bits``."""
    bad, compared, first = check_train_case(lib, graph, inputs, inplace, same=same_bits)
    assert compared > 0, "nothing compared"
    return first if bad else None


def test_every_builder_has_cases():
    assert set(native_grad_cases.OPS) == set(GRAD_BUILDERS)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("op_type", native_grad_cases.OPS)
def test_native_training_kernel_matches_golden(build_root, form, op_type):
    lib = RefKernels(native_library(build_root, form), record=_native_or_ref)
    taken = bad = 0
    first = None
    given = set()                     # input gradients: w_r a constant (True) or computed
    for i, (graph, inputs) in enumerate(native_grad_cases.iter_cases(op_type, N_CASES)):
        call = lib.record(graph, graph.ops[0], 1)
        taken += call.backend == "native"
        if call.backend == "native" and op_type.endswith("_grad_input"):
            given.add(not isinstance(call.arg("wr_const"), NullArg))
        for inplace in (False, True) if call.inplace else (False,):
            with np.errstate(invalid="ignore", over="ignore"):
                diff = check_case(lib, graph, inputs, inplace)
            if diff is not None:
                bad += 1
                first = first or (i, inplace, call.kernel, diff, graph.ops[0].attrs)
    assert bad == 0, f"{form} {op_type}: {bad} of {N_CASES} cases differ; first: {first}"
    assert taken > N_CASES // 2, f"native took {taken} of {N_CASES} {op_type} cases"
    if op_type.endswith("_grad_input"):
        assert given == {True, False}, f"{op_type}: only wr_const given = {given}"
