"""The board verbs as a user calls them: ``fit --engine BOARD --json`` (per-phase instruction
counts, identical on a second run), ``compile --board`` + ``build`` + ``sim --data`` (data
re-embedded, per-op counts on request), ``infer --engine BOARD``, a Renode board without
Renode (a clear reason, scripts written)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import models
from codegen.fit import fit_model
from tests.targets.helpers import buildable, runnable

from .helpers import EPOCHS, SEED, SPEC, digits_graph, pockengine, pockengine_json, write_npz

pytestmark = pytest.mark.emulator


def test_fit_json_instruction_counts_are_deterministic(tmp_path):
    runnable("mps2-an386")
    train, evals, calib = write_npz(tmp_path)
    model = models.path("digits_cnn.onnx")
    args = ["fit", model, "--train", SPEC, "--data", train, "--eval", evals, "--calib", calib,
            "--epochs", EPOCHS, "--seed", SEED, "--engine", "mps2-an386", "--json"]
    first, second = pockengine_json(*args), pockengine_json(*args)
    for key in ("accuracy_before", "accuracy_after", "loss", "params_sha256"):
        assert key in first
    ins = first["instructions"]
    assert set(ins) >= {"forward", "backward", "update", "step", "infer", "total", "unit"}
    assert ins["forward"] > 0 and ins["backward"] > 0 and ins["update"] > 0
    assert ins["total"]["forward"] >= ins["forward"] * first["steps"] - first["steps"]
    assert first["instructions"] == second["instructions"]
    assert first["loss"] == second["loss"]
    assert first["params_sha256"] == second["params_sha256"]
    assert first["memory"]["fits"] and first["memory"]["flash_bytes"] > 0


def test_compile_build_sim_with_data_and_per_op_counts(tmp_path):
    runnable("mps2-an505")
    train, evals, calib = write_npz(tmp_path)
    model = models.path("digits_cnn.onnx")
    proj = tmp_path / "proj"
    r = pockengine("compile", model, "--board", "mps2-an505", "--train", SPEC, "--calib", calib,
                   "-o", proj)
    assert r.returncode == 0, r.stderr
    built = pockengine_json("build", proj, "--json")
    assert built["fits"] and built["board"] == "mps2-an505"
    assert built["sram_bytes"] == built["sram_static_bytes"] + built["stack_bytes"]
    assert built["sram_static_bytes"] >= built["arena_bytes"] + built["params_bytes"]
    assert built["data_flash_bytes"] == 0          # compiled without data

    sim = pockengine_json("sim", proj, "--data", train, "--eval", evals, "--epochs", EPOCHS,
                          "--seed", SEED, "--profile-ops", "--json")
    gold = fit_model(digits_graph(), f"{SPEC},backward=fp32", train, evals, epochs=EPOCHS,
                     seed=SEED, engine="golden")
    assert sim["loss"] == gold["loss"] and sim["params_sha256"] == gold["params_sha256"]
    assert sim["accuracy_after"] == gold["accuracy_after"]
    per_op = sim["instructions"]["per_op"]
    manifest = json.loads((proj / "pockengine.json").read_text())
    assert [o["op"] for o in per_op] == [o["op"] for o in manifest["training"]["ops"]]
    assert all(o["per_step"] and o["per_step"] > 0 for o in per_op)
    for phase in ("forward", "backward", "update"):
        ops = sum(o["per_step"] for o in per_op if o["phase"] == phase)
        assert 0.9 * sim["instructions"][phase] < ops <= sim["instructions"][phase]

    text = pockengine("sim", proj)           # the embedded data stays; a readable report
    assert text.returncode == 0, text.stderr
    assert "accuracy on the eval split" in text.stdout and "per training step" in text.stdout


def test_infer_engine_board_equals_golden(tmp_path):
    runnable("mps2-an386")
    from codegen import golden
    from codegen.data import fit_input
    from codegen.frontend import save_model

    graph = digits_graph()
    model = tmp_path / "digits_int8.tflite"
    save_model(graph, model)
    x = fit_input(graph, models.digits("test")[0][:7])
    np.save(tmp_path / "x.npy", x)
    r = pockengine("infer", model, "--input", tmp_path / "x.npy", "--output",
                   tmp_path / "y.npy", "--engine", "mps2-an386")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), golden.run(graph, x)[0])


def test_renode_board_without_renode_says_why(tmp_path):
    board = buildable("stm32f746g-disco")
    import shutil

    if shutil.which("renode"):
        pytest.skip("renode is installed: the board runs (covered by the digits tests' API)")
    train, evals, calib = write_npz(tmp_path)
    proj = tmp_path / "proj"
    r = pockengine("compile", models.path("digits_cnn.onnx"), "--board", board.name, "--train",
                   SPEC, "--calib", calib, "--data", train, "--eval", evals, "-o", proj)
    assert r.returncode == 0, r.stderr
    r = pockengine("sim", proj)
    assert r.returncode == 2 and "renode is not on PATH" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert (proj / "build" / "pe_firmware.resc").is_file()
    assert (proj / "build" / "pe_firmware.robot").is_file()
