"""Session fixtures: the device-side C built once for the host (gcc, ASan + UBSan)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .helpers import SERVER_SOURCES, UNIT_SOURCES, build, sanitizers_work


@pytest.fixture(scope="session")
def serial_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serial-c")


@pytest.fixture(scope="session")
def sanitize(serial_build: Path) -> bool:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (needed to build the device-side C for the host)")
    return sanitizers_work("gcc", serial_build)


@pytest.fixture(scope="session")
def proto_host(serial_build: Path, sanitize: bool) -> Path:
    """The protocol server with the toy model, on stdin/stdout (ASan + UBSan if available)."""
    return build("gcc", serial_build, "proto_host.c", SERVER_SOURCES, sanitize=sanitize)


@pytest.fixture(scope="session")
def serial_unit(serial_build: Path, sanitize: bool) -> Path:
    return build("gcc", serial_build, "serial_unit.c", UNIT_SOURCES, sanitize=sanitize)
