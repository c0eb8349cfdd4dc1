"""A board project as files (no toolchain needed): the host model files plus the device
harness, embedded data, board runtime, linker script and Makefile; deterministic; the board's
default backward mode; data errors and host-only verbs give one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen.errors import PockError
from codegen.pipeline import compile_model

from .helpers import SPEC, digits_data, digits_graph, pockengine


def _files(d):
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file()}


def test_board_project_files_are_deterministic(tmp_path):
    train, evals = digits_data()
    kw = {"board": "mps2-an385", "spec": SPEC, "data": train, "evals": evals, "epochs": 2,
          "seed": 3}
    a = compile_model(digits_graph(), out_dir=tmp_path / "a", **kw)
    b = compile_model(digits_graph(), out_dir=tmp_path / "b", **kw)
    assert _files(a.dir) == _files(b.dir)
    files = set(_files(a.dir))
    assert {"pe_model.c", "pe_weights.c", "main_device.c", "pe_data.c", "pe_data.h",
            "Makefile", "mps2-an385.ld", "runtime/pe_sha256.c",
            "startup/cortex_m/pe_startup_cortex_m.c"} <= files
    assert "main_host.c" not in files
    # the model as a library for a firmware of one's own (tests/firmware/test_integrate.py)
    assert {"CMakeLists.txt", "pockengine.cmake", "model.mk"} <= files
    assert "add_executable" not in (a.dir / "CMakeLists.txt").read_text()
    m = a.manifest
    assert m["training"]["backward"] == "int8"            # the Cortex-M3's default
    data = m["device"]["data"]
    assert (data["train_samples"], data["eval_samples"], data["steps"]) == (
        len(train["x"]), len(evals["x"]), 2 * len(train["x"]))
    assert m["device"]["budget"] == {"sram_bytes": 128 * 1024, "flash_bytes": 1 << 20}
    make = (a.dir / "Makefile").read_text()
    assert "CC = arm-none-eabi-gcc" in make and "-Tmps2-an385.ld" in make
    assert "-DPE_PROFILE=1" in make
    model_c = (a.dir / "pe_model.c").read_text()
    assert "PE_PHASE_BEGIN(PE_PROF_BACKWARD);" in model_c
    # a marker per call of the step, then of pe_infer, + the 2 #defines
    assert model_c.count("PE_OP_BEGIN(") == len(m["training"]["ops"]) + len(m["ops"]) + 2
    assert f"PE_OP_BEGIN({len(m['training']['ops'])}u);" in model_c    # pe_infer's first
    # the order table is the golden/host sample order
    from codegen.run.host import sample_order

    order = sample_order(len(train["x"]), 2, seed=3)
    text = (a.dir / "pe_data.c").read_text()
    table = text.split("pe_order[")[1].split("{", 1)[1].split("}", 1)[0]
    assert [int(v) for v in table.replace("\n", " ").split(",")] == order.tolist()


def test_hexagon_project_uses_clang_and_the_freestanding_headers(tmp_path):
    p = compile_model(digits_graph(), board="hexagon-v67", spec=SPEC, out_dir=tmp_path / "h")
    make = (p.dir / "Makefile").read_text()
    assert "--target=hexagon" in make and "-Iruntime/freestanding" in make
    assert (p.dir / "runtime" / "freestanding" / "string.h").is_file()
    assert "startup/hexagon/pe_crt0_hexagon.S" in make
    assert p.manifest["training"]["backward"] == "int8"
    spec_fp32 = compile_model(digits_graph(), board="hexagon-v67", spec=SPEC + ",backward=fp32",
                              out_dir=tmp_path / "f")
    assert spec_fp32.manifest["training"]["backward"] == "fp32"   # the spec chose


def test_bad_device_data_is_one_line(tmp_path):
    train, _ = digits_data()
    with pytest.raises(PockError, match="labels range 0..12, the model has 10 classes"):
        compile_model(digits_graph(), board="mps2-an386", spec=SPEC, out_dir=tmp_path / "x",
                      data={"x": train["x"][:3], "y": np.array([0, 12, 1])})
    with pytest.raises(PockError, match="without a training spec"):
        compile_model(digits_graph(), board="mps2-an386", out_dir=tmp_path / "y", data=train)


def test_sim_of_a_host_project_says_why(tmp_path):
    from codegen.frontend import save_model

    model = tmp_path / "m.tflite"
    save_model(digits_graph(), model)
    r = pockengine("compile", model, "--board", "host", "-o", tmp_path / "host")
    assert r.returncode == 0, r.stderr
    r = pockengine("sim", tmp_path / "host")
    assert r.returncode == 2 and "compiled for host" in r.stderr
    r = pockengine("fit", model, "--train", SPEC, "--data", tmp_path / "none.npz",
                   "--engine", "no-such-board")
    assert r.returncode == 2
    manifest = json.loads((tmp_path / "host" / "pockengine.json").read_text())
    assert "device" not in manifest
