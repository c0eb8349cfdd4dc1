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
