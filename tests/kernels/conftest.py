"""Session fixtures: the ref kernels compiled once per test session into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from .c_runner import RefKernels, build_library, have, sanitizer_flags


@pytest.fixture(scope="session")
def build_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernels")


@pytest.fixture(scope="session")
def ref_lib(build_root: Path) -> RefKernels:
    """gcc -O2 with UBSan (aborting on the first report) when the toolchain supports it."""
    if not have("gcc"):
        pytest.skip("gcc is not installed")
    out = build_root / "gcc_ubsan"
    out.mkdir()
    flags = ["-O2", *sanitizer_flags("gcc", "undefined", out)]
    return RefKernels(build_library("gcc", out, flags))


@pytest.fixture(scope="session")
def cmsis_lib(build_root: Path, ref_lib: RefKernels) -> RefKernels:
    """The ref kernels, the CMSIS-NN wrappers (gcc -O2, UBSan) and their CMSIS-NN sources (its
    plain C paths: the host has neither DSP nor MVE) in one library, lowering along the chain
    cmsis-nn, ref. Skips where CMSIS-NN is not checked out."""
    from tests.backends.cmsis_helpers import checkout, cmsis_or_ref, host_objects

    root = checkout()
    out = build_root / "gcc_cmsis"
    out.mkdir()
    flags = ["-O2", *sanitizer_flags("gcc", "undefined", out)]
    objs = host_objects(root, out, flags)
    return RefKernels(build_library("gcc", out, flags, objs), record=cmsis_or_ref)


@pytest.fixture(scope="session")
def arm_library(build_root: Path, ref_lib: RefKernels) -> Path:
    """The ref kernels and the arm backend's (out-of-line kernels and exported bodies, its
    portable C paths: the host has no DSP extension), gcc -O2 with UBSan."""
    from tests.backends.arm_helpers import host_objects

    out = build_root / "gcc_arm"
    out.mkdir()
    flags = ["-O2", *sanitizer_flags("gcc", "undefined", out)]
    return build_library("gcc", out, flags, host_objects(out, flags))


_NATIVE_LIBRARIES: dict[str, Path] = {}


def native_library(build_root: Path, form: str) -> Path:
    """The ref kernels and the native backend's compiled for one of its code paths
    (tests/backends/native_helpers.FORMS), gcc -O2 with UBSan; built once per session, skipped
    where the machine cannot run that path."""
    from tests.backends.native_helpers import FORMS, check_path, cpu_lacks, host_objects

    if form not in _NATIVE_LIBRARIES:
        reason = cpu_lacks(form)
        if reason is not None:
            pytest.skip(f"{form}: {reason}")
        out = build_root / f"gcc_{form}"
        out.mkdir()
        flags = ["-O2", *sanitizer_flags("gcc", "undefined", out)]
        lib = build_library("gcc", out, [*flags, *FORMS[form][0]],
                            host_objects(out, form, flags))
        check_path(lib, form)
        _NATIVE_LIBRARIES[form] = lib
    return _NATIVE_LIBRARIES[form]


@pytest.fixture
def kernels(request: pytest.FixtureRequest, backend: str) -> RefKernels:
    """The library of the test's ``backend`` parameter: ref, cmsis-nn before ref, one form
    of the arm records (arm, arm-plain, arm-ool) before ref, or one code path of the native
    kernels (native, native-avx2, native-portable) before ref."""
    if backend.startswith("native"):
        from tests.backends.native_helpers import native_or_ref

        return RefKernels(native_library(request.getfixturevalue("build_root"), backend),
                          record=native_or_ref)
    if backend.startswith("arm"):
        from tests.backends.arm_helpers import arm_or_ref

        return RefKernels(request.getfixturevalue("arm_library"), record=arm_or_ref(backend))
    return request.getfixturevalue("ref_lib" if backend == "ref" else "cmsis_lib")
