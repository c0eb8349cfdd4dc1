"""What a new user meets (issue #15): bad input is one line on stderr naming the file, flag or
numbers with exit status 2 (never a traceback or "internal error"), outputs are written where
they are reported, and requests that would do nothing say so. Everything here runs on the
bundled digits CNN (a few samples, no firmware built), except where a shared model is named."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codegen.cli import EXIT_BROKEN_PIPE, main

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as e:                     # argparse
        status = e.code
    out = capsys.readouterr()
    return status, out.out, out.err


def one_line_error(status: int, err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, f"exit status {status}, stderr {err!r}"
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert lines[0].startswith("pockengine: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> dict[str, Path]:
    """The bundled digits CNN quantized (digits.tflite), a few samples as .npz/.npy files and
    two compiled (not built) mps2-an386 projects: inference only, and training without data."""
    import codegen.models as bundled

    d = tmp_path_factory.mktemp("digits")
    x, y = bundled.digits("train")
    np.savez(d / "calib.npz", x=x[:50])
    np.savez(d / "train.npz", x=x[:6], y=y[:6])
    np.save(d / "x.npy", x[:4])
    assert main(["quantize", str(bundled.path("digits_cnn.onnx")), "--calib",
                 str(d / "calib.npz"), "-o", str(d / "digits.tflite")]) == 0
    for name, extra in (("fw_infer", []), ("fw_train", ["--train", "bias:last1"])):
        assert main(["compile", str(d / "digits.tflite"), "--board", "mps2-an386",
                     "--no-measure", "-o", str(d / name), *extra]) == 0
    return {"dir": d, "model": d / "digits.tflite", "train": d / "train.npz",
            "x": d / "x.npy", "fw_infer": d / "fw_infer", "fw_train": d / "fw_train"}


# -- 1. data files of the wrong kind ------------------------------------------------------------
def test_data_file_of_the_wrong_kind(capsys, digits, tmp_path):
    m, x_npy, train = str(digits["model"]), str(digits["x"]), str(digits["train"])
    # a .npy where an .npz with x and y is expected: says what the file must hold
    for flag in ("--data", "--eval"):
        argv = ["fit", m, "--train", "bias:last1", "--data", train, flag, x_npy]
        line = one_line_error(*run(capsys, *argv)[::2], x_npy, "a .npy array")
        assert "'x'" in line and "'y'" in line and "numpy.savez" in line
    one_line_error(*run(capsys, "compile", m, "--board", "mps2-an386", "--no-measure",
                        "--train", "bias:last1", "--data", x_npy, "-o",
                        str(tmp_path / "fw"))[::2], x_npy, "'y'")
    one_line_error(*run(capsys, "sim", str(digits["fw_train"]), "--data", x_npy)[::2],
                   x_npy, "'y'")
    one_line_error(*run(capsys, "quantize", m, "--calib", x_npy, "-o",
                        str(tmp_path / "q.tflite"))[::2], x_npy, "'x'")
    # and an .npz where infer --input wants a .npy
    one_line_error(*run(capsys, "infer", m, "--input", train, "--output",
                        str(tmp_path / "y.npy"))[::2], train, ".npy array", "numpy.save")
    # arrays that are not numbers, or labels that only look like integers
    x = np.zeros((3, 8, 8, 1), np.float32)
    bad = {"text_x": {"x": np.full((3, 8, 8, 1), "a"), "y": np.zeros(3, np.int64)},
           "bytes_y": {"x": x, "y": np.array([b"a", b"b", b"c"])},
           "complex_x": {"x": x.astype(np.complex64), "y": np.zeros(3, np.int64)},
           "timedelta_y": {"x": x, "y": np.zeros(3, "m8[s]")},
           "bool_y": {"x": x, "y": np.zeros(3, bool)}}
    for name, arrays in bad.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
        status, _, err = run(capsys, "fit", m, "--train", "bias:last1", "--data",
                             str(tmp_path / f"{name}.npz"))
        one_line_error(status, err, f"{name}.npz")
    for name, arr in {"text": np.full((2, 8, 8, 1), "a"), "complex": x.astype(np.complex64),
                      "dates": np.zeros((2, 8, 8, 1), "M8[s]")}.items():
        np.save(tmp_path / f"{name}.npy", arr)
        one_line_error(*run(capsys, "infer", m, "--input", str(tmp_path / f"{name}.npy"),
                            "--output", str(tmp_path / "y.npy"))[::2], f"{name}.npy")


# -- 2. outputs that cannot be written ------------------------------------------------------------
def test_unwritable_output_paths_are_one_line(capsys, digits, tmp_path):
    m, x_npy, train = str(digits["model"]), str(digits["x"]), str(digits["train"])
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    missing = tmp_path / "missing" / "deeper"
    under_file = str(afile / "y.npy")
    one_line_error(*run(capsys, "infer", m, "--input", x_npy, "--output", under_file)[::2],
                   under_file, "not a directory")
    out = str(missing / "y.npy")
    one_line_error(*run(capsys, "infer", m, "--input", x_npy, "--output", out)[::2],
                   out, "does not exist")
    one_line_error(*run(capsys, "infer", m, "--input", x_npy, "--output", str(tmp_path))[::2],
                   str(tmp_path), "is a directory")
    # directories made by compile and demo: the OS's reason and the path, not a traceback
    one_line_error(*run(capsys, "compile", m, "--board", "host", "-o",
                        str(afile / "fw"))[::2], str(afile / "fw"), "Not a directory")
    one_line_error(*run(capsys, "demo", "-o", str(afile / "demo"))[::2],
                   str(afile / "demo"), "Not a directory")
    one_line_error(*run(capsys, "plan", m, "--plot", str(afile / "plan.svg"))[::2],
                   str(afile / "plan.svg"))
    # files checked before any work is done
    one_line_error(*run(capsys, "fit", m, "--train", "bias:last1", "--data", train, "-o",
                        str(missing / "t.tflite"))[::2], str(missing / "t.tflite"),
                   "does not exist")
    one_line_error(*run(capsys, "quantize", str(ROOT / "codegen" / "models" / "digits_cnn.onnx"),
                        "--calib", str(digits["dir"] / "calib.npz"), "-o",
                        str(afile / "q.tflite"))[::2], str(afile / "q.tflite"))
    assert afile.read_text() == "not a directory" and not missing.parent.exists()


# -- 3. a closed stdout pipe ----------------------------------------------------------------------
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_closed_stdout_pipe_is_quiet(extra):
    """`pockengine inspect MODEL | head -1`: the reader goes away; pockengine stops without a
    word on stderr, with 128 + SIGPIPE like other tools ended by a closed pipe."""
    model = str(ROOT / "codegen" / "models" / "digits_cnn.onnx")
    r, w = os.pipe()
    os.close(r)                                  # the reader is gone before the first write
    try:
        p = subprocess.run([sys.executable, "-m", "codegen", "inspect", model, *extra],
                           stdout=w, stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT,
                           check=False)
    finally:
        os.close(w)
    assert p.stderr == "", p.stderr
    assert p.returncode == EXIT_BROKEN_PIPE == 141
    # the shell's own pipe, as a user types it
    line = f'"{sys.executable}" -m codegen inspect "{model}" | head -c 1 >/dev/null'
    p = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, check=False)
    assert p.returncode == 0 and p.stderr == "", p.stderr


# -- 4. infer writes exactly the file it reports ---------------------------------------------------
def test_infer_writes_exactly_the_reported_path(capsys, digits, tmp_path):
    from codegen import golden
    from codegen.data import fit_input
    from codegen.frontend import load_model

    graph = load_model(digits["model"])
    want = golden.run(graph, fit_input(graph, np.load(digits["x"])))[0]
    for name in ("o.txt", "o.csv", "o.npz", "o.bin", "o.npy", "noext"):
        out = tmp_path / name
        status, stdout, err = run(capsys, "infer", str(digits["model"]), "--input",
                                  str(digits["x"]), "--output", str(out), "--json")
        assert status == 0, err
        assert json.loads(stdout)["output"] == str(out)
        assert sorted(p.name for p in tmp_path.iterdir()) == [name], list(tmp_path.iterdir())
        if name.endswith(".txt"):
            got = np.loadtxt(out, dtype=np.int64, ndmin=2)
        elif name.endswith(".csv"):
            got = np.loadtxt(out, dtype=np.int64, delimiter=",", ndmin=2)
        elif name.endswith(".npz"):
            got = np.load(out)["y"]
        else:
            got = np.load(out)
        assert np.array_equal(got.reshape(want.shape), want), name
        out.unlink()
    status, _, err = run(capsys, "infer", str(digits["model"]), "--input", str(digits["x"]),
                         "--output", str(tmp_path / "y.txt"))
    assert status == 0 and f"wrote {tmp_path / 'y.txt'}:" in err
    assert [p.name for p in tmp_path.iterdir()] == ["y.txt"]


# -- 5. UART and port addresses ---------------------------------------------------------------------
def test_uart_ports_are_checked_before_anything_runs(capsys, tmp_path):
    """Checked before the project is even opened: a bad port fails at once, in one line."""
    for uart, needle in (("tcp:127.0.0.1:99999", "'99999'"), ("tcp:127.0.0.1:0", "'0'"),
                         ("socket://127.0.0.1:65536", "'65536'"),
                         ("tcp:127.0.0.1:http", "'http'")):
        line = one_line_error(*run(capsys, "sim", str(tmp_path / "nofw"), "--uart",
                                   uart)[::2], "--uart", uart, needle)
        assert "1..65535" in line
    one_line_error(*run(capsys, "sim", str(tmp_path / "nofw"), "--uart", "127.0.0.1:4444")[::2],
                   "tcp:HOST:PORT", "socket://HOST:PORT")
    status, _, err = run(capsys, "train", "--port", "socket://127.0.0.1:99999", "--data",
                         str(tmp_path / "d.npz"))
    one_line_error(status, err, "--port", "99999", "1..65535")


def test_both_address_spellings_are_accepted():
    from codegen.serial.firmware import qemu_serial_spec
    from codegen.serial.transport import open_port, port_url

    for uart in ("tcp:127.0.0.1:4444", "socket://127.0.0.1:4444"):
        spec, host, port = qemu_serial_spec(uart)
        assert (host, port) == ("127.0.0.1", 4444)
        assert spec == "tcp:127.0.0.1:4444,server=on,wait=off,nodelay=on"
    assert port_url("tcp:127.0.0.1:4444") == "socket://127.0.0.1:4444"
    assert port_url("socket://localhost:5555") == "socket://localhost:5555"
    assert port_url("/dev/ttyUSB0") == "/dev/ttyUSB0"
    with socket.create_server(("127.0.0.1", 0)) as server:      # a real connection, both ways
        number = server.getsockname()[1]
        for address in (f"tcp:127.0.0.1:{number}", f"socket://127.0.0.1:{number}"):
            link = open_port(address, timeout=0.1)
            conn, _ = server.accept()
            link.write(b"hi")
            assert conn.recv(2) == b"hi"
            conn.close()
            link.close()


# -- 6. an unavailable backend names the board and the reason ---------------------------------------
def test_unavailable_backend_names_the_board(capsys, digits, monkeypatch):
    m = str(digits["model"])
    monkeypatch.setenv("POCKENGINE_CMSIS_NN", str(digits["dir"] / "no-cmsis-nn"))
    line = one_line_error(*run(capsys, "plan", m, "--board", "mps2-an386", "--backend",
                               "cmsis-nn", "--no-measure")[::2],
                          "--backend cmsis-nn", "board mps2-an386",
                          "CMSIS-NN sources not found", "POCKENGINE_CMSIS_NN")
    assert "host" not in line
    line = one_line_error(*run(capsys, "plan", m, "--board", "mps2-an385", "--backend",
                               "cmsis-nn", "--no-measure")[::2],
                          "board mps2-an385", "needs a core with dsp or mve")
    assert "host" not in line
    one_line_error(*run(capsys, "compile", m, "--board", "hexagon-v67", "--backend",
                        "cmsis-nn", "--no-measure", "-o", str(digits["dir"] / "hex"))[::2],
                   "board hexagon-v67", "no kernels for hexagon")
    one_line_error(*run(capsys, "plan", m, "--backend", "cmsis-nn", "--no-measure")[::2],
                   "board host (this machine)", "CMSIS-NN sources not found")


# -- 7. numbers as the user gave them -------------------------------------------------------------
def test_shapes_are_reported_as_given(capsys, digits, tmp_path):
    np.save(tmp_path / "x3.npy", np.zeros((5, 8, 8), np.float32))
    line = one_line_error(*run(capsys, "infer", str(digits["model"]), "--input",
                               str(tmp_path / "x3.npy"), "--output",
                               str(tmp_path / "y.npy"))[::2], "[5, 8, 8]",
                          "5 samples of [8, 8]", "[5, 8, 8, 1]")
    assert "[1, 5, 8, 8]" not in line
    np.savez(tmp_path / "d3.npz", x=np.zeros((5, 8, 8), np.float32), y=np.zeros(5, np.int64))
    line = one_line_error(*run(capsys, "fit", str(digits["model"]), "--train", "bias:last1",
                               "--data", str(tmp_path / "d3.npz"))[::2], "[5, 8, 8]")
    assert "[1, 5, 8, 8]" not in line


@pytest.mark.skipif(not (MODELS / "kws_ref_model.tflite").is_file(),
                    reason=f"no shared models at {MODELS}")
def test_kws_shape_reported_as_given(capsys, tmp_path):
    np.savez(tmp_path / "kws.npz", x=np.zeros((16, 49, 10), np.float32),
             y=np.zeros(16, np.int64))
    line = one_line_error(*run(capsys, "fit", str(MODELS / "kws_ref_model.tflite"), "--train",
                               "bias:last1", "--data", str(tmp_path / "kws.npz"))[::2],
                          "[16, 49, 10]", "16 samples of [49, 10]", "[16, 49, 10, 1]")
    assert "[1, 16, 49, 10]" not in line


def test_fit_report_says_what_was_measured(capsys, digits, monkeypatch):
    # one epoch is "1 epoch"
    status, out, err = run(capsys, "fit", str(digits["model"]), "--train", "bias:last1",
                           "--data", str(digits["train"]), "--epochs", "1")
    assert status == 0, err
    assert "6 steps (1 epoch, " in out and "epochs" not in out.splitlines()[0]
    # a board run without --eval measures no inference: no "per inference 0"
    import codegen.fit

    real = codegen.fit.fit_model

    def board_run_without_eval(*args, **kw):
        r = real(*args, **kw)
        r["instructions"] = {"unit": "instructions", "forward": 10, "backward": 20,
                             "update": 3, "step": 33, "infer": None}
        return r

    monkeypatch.setattr(codegen.fit, "fit_model", board_run_without_eval)
    status, out, err = run(capsys, "fit", str(digits["model"]), "--train", "bias:last1",
                           "--data", str(digits["train"]), "--epochs", "2")
    assert status == 0, err
    assert "12 steps (2 epochs, " in out
    line = next(ln for ln in out.splitlines() if ln.startswith("instructions per step"))
    assert "per inference" not in line, line


# -- 8. requests that would do nothing ------------------------------------------------------------
def test_epochs_without_training_data_is_an_error(capsys, digits, tmp_path):
    one_line_error(*run(capsys, "compile", str(digits["model"]), "--board", "mps2-an386",
                        "--no-measure", "--train", "bias:last1", "--epochs", "3", "-o",
                        str(tmp_path / "fw"))[::2], "--epochs 3", "--data")
    assert not (tmp_path / "fw").exists()
    one_line_error(*run(capsys, "sim", str(digits["fw_infer"]), "--epochs", "3")[::2],
                   "--epochs 3", str(digits["fw_infer"]), "inference only")
    one_line_error(*run(capsys, "sim", str(digits["fw_train"]), "--epochs", "3")[::2],
                   "--epochs 3", str(digits["fw_train"]), "--data")


def test_clipped_inputs_are_reported(capsys, digits, tmp_path):
    x = np.load(digits["x"])                     # digits in [0, 1]: inside the input's range
    status, _, err = run(capsys, "infer", str(digits["model"]), "--input", str(digits["x"]),
                         "--output", str(tmp_path / "a.npy"))
    assert status == 0 and "warning" not in err, err
    big = x.copy()
    big[0] = 50.0                                # one sample of 64 values far out of range
    np.save(tmp_path / "big.npy", big)
    status, _, err = run(capsys, "infer", str(digits["model"]), "--input",
                         str(tmp_path / "big.npy"), "--output", str(tmp_path / "b.npy"))
    assert status == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("pockengine: warning: ")]
    assert len(warnings) == 1, err
    assert "big.npy" in warnings[0] and "64 of 256 values (25 %)" in warnings[0], warnings
    assert "clipped" in warnings[0]
    np.savez(tmp_path / "big.npz", x=big, y=np.zeros(len(big), np.int64))
    status, _, err = run(capsys, "fit", str(digits["model"]), "--train", "bias:last1",
                         "--data", str(tmp_path / "big.npz"))
    assert status == 0 and "64 of 256 values (25 %)" in err, err


# -- 9. an unknown layer ----------------------------------------------------------------------------
def test_unknown_layer_is_one_short_line(capsys, digits):
    m = str(digits["model"])
    line = one_line_error(*run(capsys, "plan", m, "--train", "weight:nosuchlayer")[::2],
                          "unknown layer 'nosuchlayer'", "pockengine inspect")
    assert "similar:" not in line and "no similar name" in line
    line = one_line_error(*run(capsys, "plan", m, "--train", "weight:conv2")[::2],
                          "unknown layer 'conv2'", "pockengine inspect", "/conv2/Conv")
    assert line.count("'/") <= 5                        # at most 5 names suggested


@pytest.mark.skipif(not (MODELS / "kws_ref_model.tflite").is_file(),
                    reason=f"no shared models at {MODELS}")
def test_unknown_layer_of_a_model_with_long_names(capsys):
    kws = str(MODELS / "kws_ref_model.tflite")
    line = one_line_error(*run(capsys, "plan", kws, "--train", "weight:nosuchlayer",
                               "--no-measure")[::2], "pockengine inspect")
    assert len(line) < 400, len(line)
    line = one_line_error(*run(capsys, "plan", kws, "--train", "weight:conv2d_1",
                               "--no-measure")[::2], "conv2d_1/Conv2D1")
    assert len(line) < 700 and line.count("'…") <= 5, line
