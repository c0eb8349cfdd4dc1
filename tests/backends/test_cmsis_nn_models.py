"""The shared MLPerf Tiny models through CMSIS-NN on every CMSIS-NN board: ``infer --engine
BOARD --backend cmsis-nn`` on random inputs equals the golden model bit for bit on the
Cortex-M4F (mps2-an386), M7 (mps2-an500), M33 (mps2-an505) and M55 with Helium (mps3-an547),
every CMSIS-NN-capable op runs a CMSIS-NN kernel, and ``--json`` reports instructions per
inference (a contract); on the host, the generated project under ASan + UBSan.

Needs the CMSIS-NN checkout (skips with the backend's reason), the shared models, the board's
compiler and QEMU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from codegen import golden, pipeline
from codegen.backends import cmsis_nn as cm
from tests.targets.helpers import runnable

from .cmsis_helpers import checkout

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "models"
MODELS = ("kws_ref_model", "kws_ref_model_float32", "vww_96_int8", "pretrainedResnet_quant",
          "ad01_int8")
BOARDS = ("mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547")
N_INPUTS = 2
_graphs: dict[str, object] = {}


def _graph(name: str):
    path = SHARED / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"shared model {path} not found")
    if name not in _graphs:
        source = pipeline.load(path)
        if name.endswith("float32"):            # PTQ with random calibration features
            shape = source.graph.tensors[source.graph.inputs[0]].shape[1:]
            calib = np.random.default_rng(1).normal(0, 4, (32, *shape)).astype(np.float32)
            source = pipeline.quantize(source, calib)
        _graphs[name] = source.graph
    return _graphs[name]


def infer_equals_golden(model: str, board, tmp_path: Path, capsys, backend: str | None = None):
    """``infer --engine BOARD [--backend B] --json`` of a shared model on random inputs: its
    outputs equal the golden model's bit for bit (and are not all saturated); the model's
    graph and the ``--json`` document."""
    from codegen.cli import main
    from codegen.frontend import save_model

    graph = _graph(model)
    t = graph.tensors[graph.inputs[0]]
    x = np.random.default_rng(5).integers(-128, 128, (N_INPUTS, *t.shape[1:]), dtype=np.int8)
    want = golden.run(graph, x)[0]
    model_file = tmp_path / "m.tflite"
    save_model(graph, model_file)
    np.save(tmp_path / "x.npy", x)
    pick = ["--backend", backend] if backend else []
    assert main(["infer", str(model_file), "--input", str(tmp_path / "x.npy"), "--output",
                 str(tmp_path / "y.npy"), "--engine", board.name, *pick, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    unit = "packets" if board.arch == "hexagon" else "instructions"
    assert doc["instructions"]["unit"] == unit and doc["instructions"]["infer"] > 0
    got = np.load(tmp_path / "y.npy")
    assert got.shape == want.shape and np.array_equal(got, want), \
        f"{model} on {board.name}: {int(np.count_nonzero(got != want))} outputs differ"
    assert len(np.unique(want)) > 1                  # not a comparison of saturated outputs
    return graph, doc


@pytest.mark.emulator
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("model", MODELS)
def test_model_on_board_equals_golden(model, board, tmp_path, capsys):
    b = runnable(board)
    checkout(b)
    graph, doc = infer_equals_golden(model, b, tmp_path, capsys, "cmsis-nn")
    assert doc["chain"] == ["cmsis-nn", "ref"] and doc["backend"] == "cmsis-nn"
    # every op CMSIS-NN has a kernel for ran on it (these models have nothing it declines)
    low = pipeline.lower(graph, b, "cmsis-nn")
    for op in graph.ops:
        call = low.choices[op.name].call
        assert (call.backend == "cmsis-nn") == (op.type in cm.BUILDERS), (op.name, call.kernel)


@pytest.mark.parametrize("model", [m for m in MODELS if not m.endswith("float32")])
def test_host_project_under_sanitizers_equals_golden(model, tmp_path):
    """The generated host project with --backend cmsis-nn (CMSIS-NN's C paths), built with
    ASan + UBSan (make SANITIZE=1; CMSIS-NN's own sources without the two checks it relies on
    the compiler for), equals the golden model."""
    from codegen.toolchain.host import build_project

    checkout()
    graph = _graph(model)
    proj = pipeline.compile_model(graph, out_dir=tmp_path / "p", backend="cmsis-nn")
    assert "cmsis-nn" in {o["backend"] for o in proj.manifest["ops"]}
    build = build_project(proj, sanitize=True)
    t = graph.tensors[graph.inputs[0]]
    x = np.random.default_rng(6).integers(-128, 128, (3, *t.shape[1:]), dtype=np.int8)
    assert np.array_equal(pipeline.run_host_infer(build, x), golden.run(graph, x)[0])
