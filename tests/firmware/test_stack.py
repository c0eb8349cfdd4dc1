"""A stack of one's own size (``compile --stack BYTES``) and a measured one (``--stack auto``:
the firmware run once on the emulator with its stack painted, high-water mark + margin): the
linked image reserves exactly that, SRAM drops by the difference, and the firmware computes the
same bits in the smaller stack without overflowing it."""

from __future__ import annotations

import pytest

from codegen import models
from codegen.pipeline import MIN_STACK, reserve_stack
from tests.targets.helpers import runnable

from .helpers import EPOCHS, SEED, SPEC, pockengine, pockengine_json, write_npz


def test_reserve_stack_margin():
    assert reserve_stack(0) == MIN_STACK
    assert reserve_stack(900) == 1160                  # + 256 B, 8-byte aligned
    assert reserve_stack(4000) == 5000                 # + a quarter
    assert all(reserve_stack(n) % 8 == 0 and reserve_stack(n) >= n + 256
               for n in range(0, 20000, 37))


@pytest.mark.emulator
def test_measured_stack_is_reserved_and_enough(tmp_path):
    runnable("mps2-an386")
    train, evals, calib = write_npz(tmp_path)
    model = models.path("digits_cnn.onnx")
    common = ["--board", "mps2-an386", "--train", SPEC, "--calib", calib, "--data", train,
              "--eval", evals, "--epochs", EPOCHS, "--seed", SEED]
    default = tmp_path / "default"
    auto = tmp_path / "auto"
    assert pockengine("compile", model, *common, "-o", default).returncode == 0
    r = pockengine("compile", model, *common, "--stack", "auto", "-o", auto)
    assert r.returncode == 0, r.stderr
    assert "measured high-water mark" in r.stdout
    dev = pockengine_json("compile", model, *common, "--stack", "auto", "-o", auto, "-f",
                          "--json")["device"]
    measured, reserved = dev["stack_measured_bytes"], dev["stack_bytes"]
    assert 0 < measured < reserved == reserve_stack(measured) < 8192

    b_default = pockengine_json("build", default, "--json")
    b_auto = pockengine_json("build", auto, "--json")
    assert b_default["stack_bytes"] == 8192 and b_auto["stack_bytes"] == reserved
    assert b_default["sram_bytes"] - b_auto["sram_bytes"] == 8192 - reserved

    s_default = pockengine_json("sim", default, "--json")
    s_auto = pockengine_json("sim", auto, "--json")
    assert s_auto["params_sha256"] == s_default["params_sha256"]
    assert s_auto["stack_used_bytes"] <= reserved
    assert s_auto["stack_used_bytes"] == s_default["stack_used_bytes"]

    # a size of one's own
    mine = tmp_path / "mine"
    assert pockengine("compile", model, *common, "--stack", "2048", "-o", mine).returncode == 0
    assert pockengine_json("build", mine, "--json")["stack_bytes"] == 2048


@pytest.mark.emulator
def test_budget_error_names_the_stack_and_auto_makes_it_fit(tmp_path):
    """A board whose SRAM is a few KiB short for the firmware with 8 KiB of stack: compile says
    that --stack auto would do, and with it the firmware compiles, links within the budget and
    trains (the probe that measures the stack runs on the emulator's whole memory)."""
    runnable("mps2-an386")
    import yaml

    from codegen.board import boards_dir
    from codegen.safe_yaml import load_yaml_file

    train, evals, calib = write_npz(tmp_path)
    args = ["compile", models.path("digits_cnn.onnx"), "--train", SPEC, "--calib", calib,
            "--data", train, "--eval", evals, "--epochs", "1"]
    assert pockengine(*args, "--board", "mps2-an386", "-o", tmp_path / "roomy").returncode == 0
    need = pockengine_json("build", tmp_path / "roomy", "--json")["sram_bytes"]
    budget = need - 4096                     # 4 KiB short with the board's 8 KiB stack
    d = load_yaml_file(boards_dir() / "mps2-an386.yaml", "board file")
    d["name"], d["budget"] = "tight", {"sram": f"{budget} B", "flash": "1 MiB"}
    board = tmp_path / "tight.yaml"
    board.write_text(yaml.safe_dump(d, sort_keys=False))
    args += ["--board", board]
    r = pockengine(*args, "-o", tmp_path / "p")
    assert r.returncode == 2 and "--stack auto" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = pockengine(*args, "--stack", "auto", "-o", tmp_path / "p")
    assert r.returncode == 0, r.stderr
    built = pockengine_json("build", tmp_path / "p", "--json")
    assert built["fits"] and built["sram_bytes"] <= budget
    sim = pockengine_json("sim", tmp_path / "p", "--json")
    assert sim["stack_used_bytes"] <= built["stack_bytes"] and sim["params_sha256"]


@pytest.mark.parametrize("board, stack, msg", [
    ("mps2-an386", "100", "multiple of 8 from 512"),
    ("mps2-an386", "1001", "multiple of 8 from 512"),
    ("mps2-an386", "lots", "give bytes"),
    ("host", "2048", "host project uses the process's stack"),
])
def test_bad_stack_is_one_line(tmp_path, board, stack, msg):
    r = pockengine("compile", models.path("digits_cnn.onnx"), "--board", board, "--train",
                   "bias:all", "--stack", stack, "-o", tmp_path / "p")
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
        r.stderr
