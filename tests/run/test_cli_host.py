"""The compile / build verbs and `infer --engine host` of the command line."""

from __future__ import annotations

import json

import numpy as np

from codegen import golden
from codegen.cli import main
from codegen.frontend import load_model
from tests.render.helpers import model_path, random_int8


def test_compile_build_infer_host(tmp_path, capsys):
    model = model_path("kws_ref_model.tflite")
    out = tmp_path / "kws"
    assert main(["compile", str(model), "--board", "host", "--prefix", "kws", "-o",
                 str(out)]) == 0
    assert "arena" in capsys.readouterr().out
    assert (out / "kws_model.h").is_file()
    assert main(["build", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["flash_bytes"] > info["constant_bytes"] > 20_000     # the weights are in flash
    assert info["sram_bytes"] >= info["arena_bytes"] > 0
    assert (out / "build" / "kws_host").is_file()
    # a second compile into the same (pockengine) directory is fine; a foreign one is not
    assert main(["compile", str(model), "--board", "host", "-o", str(out)]) == 0
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "x.c").write_text("int x;\n")
    capsys.readouterr()
    assert main(["compile", str(model), "--board", "host", "-o", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pockengine: error:") and len(err.strip().splitlines()) == 1
    assert main(["build", str(tmp_path / "missing")]) == 2

    g = load_model(model)
    x = random_int8(g, 10, seed=2)
    np.save(tmp_path / "x.npy", x)
    assert main(["infer", str(model), "--input", str(tmp_path / "x.npy"), "--output",
                 str(tmp_path / "y.npy"), "--engine", "host"]) == 0
    assert np.array_equal(np.load(tmp_path / "y.npy"), golden.run(g, x)[0])
