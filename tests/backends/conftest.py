"""Fixtures of the backend tests: the quantized digits CNN, built once per session."""

from __future__ import annotations

import pytest

from tests.render.helpers import digits_int8


@pytest.fixture(scope="session")
def digits_graph():
    return digits_int8()
