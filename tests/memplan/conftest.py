"""Shared models for the planner tests (skipped with a reason when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

MODELS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "models"

# TFLM's planned arena head (bytes) for the int8 MLPerf Tiny models (shared/models/README.md)
TFLM_HEAD = {"ad01_int8.tflite": 768, "kws_ref_model.tflite": 16_000,
             "pretrainedResnet_quant.tflite": 49_152, "vww_96_int8.tflite": 73_728}
MODELS = sorted(TFLM_HEAD) + ["kws_ref_model_float32.tflite"]


def model_path(name: str) -> Path:
    path = MODELS_DIR / name
    if not path.is_file():
        pytest.skip(f"shared model {path} is not available")
    return path


@pytest.fixture(scope="session")
def load():
    from codegen.frontend import load_model

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = load_model(model_path(name))
        return cache[name]

    return get


def ref_kernels(g) -> dict:
    """op name -> the ref backend's call record (the facts the planner reads)."""
    from codegen.backends import kernel_calls

    return {c.op: c for c in kernel_calls(g)}


def plan_ref(g, *args, **kw):
    """plan_memory with the ref kernels' facts, as `pockengine plan` (host) plans."""
    from codegen.memplan import plan_memory

    return plan_memory(g, *args, kernels=ref_kernels(g), **kw)
