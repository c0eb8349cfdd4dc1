"""`pockengine fit` as a user calls it: JSON contract, optimizers converging, spec errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen.cli import main

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """The bundled digits in the shifted domain of the transfer benchmark, as .npz files."""
    import codegen.models as bundled

    d = tmp_path_factory.mktemp("data")
    x, y = bundled.digits("train")
    np.savez(d / "train.npz", x=bundled.shift_digits(x)[:600], y=y[:600])
    x, y = bundled.digits("test")
    np.savez(d / "eval.npz", x=bundled.shift_digits(x), y=y)
    np.savez(d / "calib.npz", x=bundled.digits("train")[0][:100])
    return d


def fit_json(capsys, *argv: str) -> dict:
    status = main(["fit", *argv, "--json"])
    out = capsys.readouterr()
    assert status == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize("opt", ["sgd,lr=0.01", "sgd,lr=0.002,momentum=0.9",
                                 "adam,lr=0.01"])
def test_optimizers_converge_on_shifted_digits(capsys, shifted, opt):
    import codegen.models as bundled

    r = fit_json(capsys, str(bundled.path("digits_cnn.onnx")), "--train",
                 f"bias:all+weight:last2,master_weights=fp32,opt={opt}", "--data",
                 str(shifted / "train.npz"), "--eval", str(shifted / "eval.npz"), "--calib",
                 str(shifted / "calib.npz"), "--epochs", "2")
    for key in ("accuracy_before", "accuracy_after", "loss", "params_sha256"):
        assert key in r
    assert len(r["loss"]) == r["steps"] == 1200
    assert len(r["params_sha256"]) == 64
    first, last = np.mean(r["loss"][:100]), np.mean(r["loss"][-100:])
    assert last < 0.5 * first, (opt, first, last)
    assert r["accuracy_after"] >= r["accuracy_before"] + 0.4, (opt, r["accuracy_before"],
                                                                 r["accuracy_after"])


def test_fit_is_deterministic_and_exports(capsys, shifted, tmp_path):
    import codegen.models as bundled
    from codegen.frontend import load_model

    args = [str(bundled.path("digits_cnn.onnx")), "--train", "bias:last3,opt=sgd,lr=0.01",
            "--data", str(shifted / "train.npz"), "--eval", str(shifted / "eval.npz"),
            "--calib", str(shifted / "calib.npz")]
    a = fit_json(capsys, *args, "-o", str(tmp_path / "tuned.tflite"))
    b = fit_json(capsys, *args)
    assert a["params_sha256"] == b["params_sha256"] and a["loss"] == b["loss"]
    tuned = load_model(tmp_path / "tuned.tflite")
    assert tuned.tensors[tuned.inputs[0]].dtype == "int8"
    # the exported model scores what fit reported
    from codegen import golden
    from codegen.data import fit_input

    with np.load(shifted / "eval.npz") as z:
        x, y = z["x"], z["y"]
    acc = (golden.run(tuned, fit_input(tuned, x))[0].argmax(1) == y).mean()
    assert acc == pytest.approx(a["accuracy_after"])


@pytest.mark.parametrize("spec,needle", [
    ("weight:conv_99", "unknown layer"),
    ("weight:last2@1.5", "channel ratio"),
    ("bias:last99", "trainable layers"),
    ("bias:last2,opt=adam,backward=int8", "adam"),
    ("bias:last2,loss=mse", "mse"),
])
def test_bad_specs_one_line(capsys, shifted, spec, needle):
    import codegen.models as bundled

    status = main(["fit", str(bundled.path("digits_cnn.onnx")), "--train", spec, "--data",
                   str(shifted / "train.npz"), "--calib", str(shifted / "calib.npz")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and needle in err.lower(), err


def test_empty_and_bad_yaml_specs(capsys, shifted, tmp_path):
    import codegen.models as bundled

    cases = {"empty.yaml": "loss: cross_entropy\ntrainable: []\n",
             "bad.yaml": "trainable: [\n", "unknown.yaml": "trainable: all\nfoo: 1\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        status = main(["fit", str(bundled.path("digits_cnn.onnx")), "--train",
                       str(tmp_path / name), "--data", str(shifted / "train.npz")])
        err = capsys.readouterr().err
        assert status == 2 and len(err.strip().splitlines()) == 1, (name, err)
        assert name in err
