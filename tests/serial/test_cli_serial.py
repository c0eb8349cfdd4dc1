"""The serial verbs at the command line (train, eval, pull) against the host-built protocol
server behind a TCP port, pull's model checks, and the progress bar."""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest

from codegen import models
from codegen.cli import main
from codegen.errors import PockError
from codegen.serial.progress import Progress
from codegen.serial.session import original_graph, tuned_from_params

from .helpers import TcpDevice


@pytest.fixture
def device(proto_host, tmp_path):
    dev = TcpDevice(proto_host, "--storage", str(tmp_path / "ck.bin")).start()
    yield f"socket://127.0.0.1:{dev.port}"
    dev.stop()


@pytest.fixture
def npz(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "toy.npz"
    np.savez(path, x=rng.integers(-128, 128, (30, 16)).astype(np.int8),
             y=rng.integers(0, 4, 30))
    other = tmp_path / "other.npz"
    np.savez(other, x=rng.integers(-128, 128, (10, 16)).astype(np.int8),
             y=rng.integers(0, 4, 10))
    return path, other


def run(capsys, *argv):
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_train_eval_resume_restart(device, npz, capsys):
    data, other = npz
    status, out, err = run(capsys, "train", "--port", device, "--data", str(data), "--epochs",
                           "2", "--seed", "4", "--checkpoint-every", "7")
    assert status == 0, err
    assert "60 samples applied (60 steps, 2 epochs)" in out
    assert "online accuracy" in out and "params_sha256" in out
    assert "train [" in err                        # the progress bar (stderr)
    sha = out.split("params_sha256 ")[1].split()[0]
    status, out, _ = run(capsys, "train", "--port", device, "--data", str(data), "--epochs",
                         "2", "--seed", "4", "--json")
    r = json.loads(out)
    assert status == 0 and r["applied"] == 0 and r["resumed_from"] == 60
    assert r["params_sha256"] == sha
    # other data: refused on one line, then accepted with --restart
    status, out, err = run(capsys, "train", "--port", device, "--data", str(other))
    assert status == 2 and err.count("\n") == 1 and "--restart" in err
    status, out, _ = run(capsys, "train", "--port", device, "--data", str(other), "--restart",
                         "--json", "--no-accuracy")
    assert status == 0 and json.loads(out)["applied"] == 10
    status, out, _ = run(capsys, "eval", "--port", device, "--data", str(data), "--json",
                         "--predictions")
    ev = json.loads(out)
    assert status == 0 and ev["samples"] == 30 and len(ev["predictions"]) == 30
    assert ev["correct"] == ev["device_correct"]
    status, out, _ = run(capsys, "eval", "--port", device, "--data", str(data))
    assert status == 0 and "accuracy" in out


def test_pull_refuses_a_firmware_without_parameter_names(device, tmp_path, capsys):
    # the toy server's DESCRIBE names tensors 'w' and 'b', which no model file has
    status, _, err = run(capsys, "pull", "--port", device, "-o", str(tmp_path / "t.tflite"),
                         "--model", str(models.path("digits_cnn.onnx")))
    assert status == 2 and "pockengine: error:" in err and err.count("\n") == 1


def test_link_errors_are_one_line(capsys, npz):
    status, _, err = run(capsys, "train", "--port", "socket://127.0.0.1:1", "--data",
                         str(npz[0]), "--reconnect", "0")
    assert status == 2 and "cannot open" in err and err.count("\n") == 1


def test_original_graph_checks_model_and_calibration(tmp_path):
    from codegen.pipeline import load, quantize

    onnx = models.path("digits_cnn.onnx")
    x, _ = models.digits("train")
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=x[:100])
    q = quantize(load(onnx), calib)
    desc = {"model": {"name": "digits_cnn.onnx", "sha256": load(onnx).sha256,
                      "calibration_sha256": q.calib_sha256}}
    g = original_graph(desc, onnx, calib)
    assert sorted(g.tensors) == sorted(q.graph.tensors)
    with pytest.raises(PockError, match="float model: give the calibration data"):
        original_graph(desc, onnx, None)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, x=x[:50])
    with pytest.raises(PockError, match="not the calibration data"):
        original_graph(desc, onnx, wrong)
    other = dict(desc, model=dict(desc["model"], sha256="0" * 64))
    with pytest.raises(PockError, match="not the model the device was compiled from"):
        original_graph(other, onnx, calib)
    with pytest.raises(PockError, match="give the original model with --model"):
        original_graph(dict(desc, model=dict(desc["model"], name="nowhere.onnx")), None, None)
    # parameters in export order, little-endian, into the tensors
    names = [n for n in ("fc.bias", "fc.weight") if n in g.tensors]
    assert len(names) == 2
    blob = b"".join(np.ascontiguousarray(g.tensors[n].data).astype(
        np.dtype(g.tensors[n].dtype).newbyteorder("<")).tobytes() for n in names)
    arr = bytearray(blob)
    arr[0] ^= 1
    tuned = tuned_from_params(g, names, bytes(arr))
    assert not np.array_equal(tuned.tensors[names[0]].data, g.tensors[names[0]].data)
    with pytest.raises(PockError, match="exported"):
        tuned_from_params(g, names, blob + b"x")
    with pytest.raises(PockError, match="not a tensor"):
        tuned_from_params(g, ["nope"], blob)
    assert hashlib.sha256(blob).hexdigest()


def test_progress_bar_lines_without_a_terminal():
    buf = io.StringIO()
    bar = Progress(50, "train", stream=buf)
    for k in range(1, 51):
        bar.update(k, loss=0.5, acc="90.0%")
    bar.close()
    lines = buf.getvalue().splitlines()
    assert 5 <= len(lines) <= 12
    assert lines[-1].startswith("train [########################] 50/50")
    assert "loss 0.5000" in lines[-1] and "acc 90.0%" in lines[-1]
