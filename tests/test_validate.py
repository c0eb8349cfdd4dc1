"""``pockengine validate MODEL --engine E``: the golden model and an engine on the same inputs;
exit 0 when bit-exact, 1 when not, 2 on bad input."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from codegen import cli
from codegen.validate import compare
from tests.firmware.helpers import digits_graph


def run(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from codegen.frontend import save_model

    path = tmp_path_factory.mktemp("validate") / "digits_int8.tflite"
    save_model(digits_graph(), path)
    return path


def test_validate_host_is_bit_exact(model, tmp_path):
    status, out, err = run("validate", model, "--engine", "host", "--samples", 6)
    assert status == 0, err
    lines = out.splitlines()
    assert "engine host" in lines[0] and "6 samples, random inputs (seed 0)" in lines[0]
    assert [ln.split()[0] for ln in lines[1:]] == ["bit-exact", "max", "top-1", "samples"]
    assert lines[1].split()[-1] == "yes" and lines[2].split()[-1] == "0"
    assert "6/6 (100.0%)" in lines[3] and lines[4].split()[-1] == "6"
    # given inputs, machine-readable
    x = np.random.default_rng(5).integers(-128, 128, size=(5, 8, 8, 1), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    status, out, err = run("validate", model, "--engine", "host", "--input", tmp_path / "x.npy",
                           "--json")
    assert status == 0, err
    r = json.loads(out)
    assert r["bit_exact"] is True and r["max_abs_diff"] == 0 and r["samples"] == 5
    assert r["top1_agreement"] == 1.0 and r["top1_agree"] == 5 and r["seed"] is None
    assert r["input"] == str(tmp_path / "x.npy") and r["output_shape"] == [10]
    assert r["chain"] == ["native", "ref"] and r["mismatched_values"] == 0


def test_validate_on_a_board(model):
    from tests.targets.helpers import runnable

    runnable("mps2-an386")
    status, out, err = run("validate", model, "--engine", "mps2-an386", "--samples", 4,
                           "--seed", 3, "--no-measure", "--json")
    assert status == 0, err
    r = json.loads(out)
    assert r["bit_exact"] is True and r["samples"] == 4 and r["seed"] == 3
    assert r["instructions"]["infer"] > 0 and r["chain"][0] == "arm"


def test_validate_exits_1_when_the_engine_differs(model, monkeypatch):
    """An engine that gets one value wrong: not bit-exact, status 1, the numbers."""
    from codegen import golden

    def off_by_three(graph, x, *_args, **_kw):
        y = np.array(golden.run(graph, x)[0])
        y[1, int(np.argmax(y[1]))] -= 3         # sample 1's top value: top-1 may move
        return y, {"chain": ["ref"]}

    monkeypatch.setattr(cli, "_run_engine", off_by_three)
    status, out, err = run("validate", model, "--engine", "host", "--samples", 4)
    assert status == 1, err
    assert "no (1 of 40 values differ; 3 of 4 samples identical)" in out
    assert out.splitlines()[2].split()[-1] == "3"
    status, out, _ = run("validate", model, "--engine", "host", "--samples", 4, "--json")
    r = json.loads(out)
    assert status == 1 and r["bit_exact"] is False and r["max_abs_diff"] == 3
    assert r["identical_samples"] == 3 and r["top1_agree"] in (3, 4)


@pytest.mark.parametrize("argv, needle", [
    (["--engine", "golden"], "compares an engine with the golden model"),
    (["--engine", "no-such-board"], "not available"),
    (["--engine", "host", "--samples", "0"], "at least 1 sample"),
])
def test_validate_bad_input(model, argv, needle):
    status, out, err = run("validate", model, *argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and needle in err


def test_validate_bad_input_files(model, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 3, 1), np.int8))
    status, _, err = run("validate", model, "--engine", "host", "--input", tmp_path / "x.npy")
    assert status == 2 and err.count("\n") == 1
    status, _, err = run("validate", tmp_path / "missing.tflite", "--engine", "host")
    assert status == 2 and err.count("\n") == 1


def test_compare():
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    assert compare(a, a.copy())["bit_exact"]
    r = compare(a, a.astype(np.int16))
    assert not r["bit_exact"] and r["max_abs_diff"] == 0         # same values, other type
    r = compare(a, a[:, :2])
    assert not r["bit_exact"] and r["max_abs_diff"] is None and r["engine_shape"] == [2]
    f = np.array([[np.nan, 1.0], [0.0, 2.0]], np.float32)
    assert compare(f, f.copy())["bit_exact"]
    r = compare(f, np.array([[np.nan, 1.0], [-0.0, 2.5]], np.float32))
    assert not r["bit_exact"] and r["max_abs_diff"] == 0.5 and r["mismatched_values"] == 1
