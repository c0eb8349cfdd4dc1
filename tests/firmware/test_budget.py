"""Memory budgets: VWW with every weight trainable does not fit the netduinoplus2 (192 KiB
SRAM) and says so with numbers, exit status 2; ``bias:last4`` fits and trains there, its
losses equal to the golden model's. The build-time check and the link-overflow message."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from codegen.board import load_board
from codegen.errors import PockError
from codegen.fit import fit_model
from codegen.render.output import Project
from codegen.toolchain.device import FirmwareBuild, _overflow
from tests.targets.helpers import runnable

from .helpers import pockengine, shared_model

NEEDS = re.compile(r"needs (\d+(?:\.\d+)?) KiB SRAM .*board netduinoplus2 has 192 KiB; hint: ")


@pytest.mark.parametrize("spec", ["all", "weight:all"])
def test_vww_all_weights_do_not_fit_netduino(tmp_path, spec):
    vww = shared_model("vww_96_int8.tflite")
    r = pockengine("compile", vww, "--board", "netduinoplus2", "--train", spec,
                   "-o", tmp_path / "vww")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    m = NEEDS.search(line)
    assert m, line
    assert float(m.group(1)) > 192


@pytest.mark.emulator
def test_vww_bias_last4_fits_and_trains_on_netduino(tmp_path):
    vww = shared_model("vww_96_int8.tflite")
    runnable("netduinoplus2")
    rng = np.random.default_rng(7)
    train = {"x": rng.integers(-128, 128, (2, 96, 96, 3)).astype(np.int8), "y": np.array([1, 0])}
    evals = {"x": rng.integers(-128, 128, (1, 96, 96, 3)).astype(np.int8), "y": np.array([1])}
    dev = fit_model(vww, "bias:last4", train, evals, engine="netduinoplus2", seed=1)
    gold = fit_model(vww, "bias:last4,backward=fp32", train, evals, engine="golden", seed=1)
    assert dev["backward"] == "fp32" and dev["steps"] == 2
    assert np.array_equal(np.float32(dev["loss"]).view(np.uint32),
                          np.float32(gold["loss"]).view(np.uint32))
    assert dev["params_sha256"] == gold["params_sha256"]
    mem = dev["memory"]
    assert mem["fits"] and mem["sram_bytes"] <= 192 * 1024 and mem["flash_bytes"] <= 1 << 20


def _fake_build(tmp_path: Path, **sizes) -> FirmwareBuild:
    board = load_board("netduinoplus2")
    manifest = {"prefix": "pe", "board": board.name,
                "memory": {"arena_bytes": 150_000, "params_bytes": 40_000},
                "device": {"data": {"flash_bytes": 1000}}}
    base = {"flash_bytes": 100_000, "sram_bytes": 100_000, "sram_static_bytes": 92_000,
            "stack_bytes": 8192}
    return FirmwareBuild(Project(tmp_path, manifest), board, tmp_path / "pe_firmware.elf", "cc",
                         base | sizes)


def test_build_budget_check_names_the_numbers(tmp_path):
    _fake_build(tmp_path).check_budget()
    with pytest.raises(PockError, match=r"needs 203\.1 KiB SRAM .* arena 146\.5 KiB \+ "
                                         r"parameters 39\.1 KiB; stack 8\.0 KiB\), board "
                                         r"netduinoplus2 has 192 KiB; hint"):
        _fake_build(tmp_path, sram_bytes=208_000, sram_static_bytes=199_808).check_budget()
    with pytest.raises(PockError, match=r"needs 1074\.2 KiB flash .* has 1 MiB; hint"):
        _fake_build(tmp_path, flash_bytes=1_100_000).check_budget()


def test_link_overflow_becomes_a_budget_error(tmp_path):
    board = load_board("netduinoplus2")
    proj = Project(tmp_path, {"prefix": "pe", "board": board.name})
    log = "ld: pe_firmware.elf section `.bss' will not fit in region `SRAM'\n" \
          "ld: region `SRAM' overflowed by 2048 bytes\n"
    with pytest.raises(PockError, match=r"needs 194\.0 KiB SRAM \(the link overflowed the "
                                        r"192 KiB sram region by 2048 B\), board netduinoplus2 "
                                        r"has 192 KiB"):
        _overflow(proj, board, log)
    _overflow(proj, board, "some other error")          # not an overflow: no opinion
