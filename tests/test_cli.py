"""The CLI contracts of DESIGN.md as a user calls them: inspect, quantize, infer, demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codegen.cli import main

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason=f"no shared models at {MODELS}")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


@needs_models
def test_inspect_json_fields(capsys):
    status, out, _ = cli(capsys, "inspect", str(MODELS / "kws_ref_model.tflite"), "--json")
    assert status == 0
    s = json.loads(out)
    assert s["format"] == "tflite"
    assert s["op_counts"] == {"avg_pool2d": 1, "conv2d": 5, "depthwise_conv2d": 4,
                              "fully_connected": 1, "reshape": 1, "softmax": 1}
    assert s["inputs"][0]["shape"] == [1, 49, 10, 1] and s["inputs"][0]["dtype"] == "int8"
    assert s["inputs"][0]["quant"]["zero_point"] == 83
    # DS-CNN KWS: ~2.66 M MACs (MLPerf Tiny reports 2.7 M)
    assert 2_500_000 < s["macs"] < 2_800_000
    assert s["macs"] == sum(op["macs"] for op in s["ops"])
    assert s["param_bytes"] > 20_000 and s["activation_bytes"] > 0
    conv = next(op for op in s["ops"] if op["type"] == "conv2d")
    assert conv["inputs"][1]["quant"]["axis"] == 0          # per-channel weights
    status, out, _ = cli(capsys, "inspect", str(MODELS / "kws_ref_model.tflite"))
    assert status == 0 and "depthwise_conv2d" in out and "MACs" in out


@needs_models
def test_infer_matches_tflm(tmp_path, capsys):
    from tflite_micro.python.tflite_micro import runtime

    model = MODELS / "kws_ref_model.tflite"
    x = np.random.default_rng(3).integers(-128, 128, size=(5, 49, 10, 1), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    status, _, err = cli(capsys, "infer", str(model), "--input", str(tmp_path / "x.npy"),
                         "--output", str(tmp_path / "y.npy"), "--engine", "golden")
    assert status == 0, err
    y = np.load(tmp_path / "y.npy")
    it = runtime.Interpreter.from_file(str(model))
    for i in range(len(x)):
        it.set_input(x[i:i + 1], 0)
        it.invoke()
        assert np.array_equal(y[i:i + 1], it.get_output(0))


def test_quantize_then_infer_onnx(tmp_path, capsys):
    """The bundled float ONNX model through `quantize` and `infer`, data given as NCHW."""
    from tflite_micro.python.tflite_micro import runtime

    import codegen.models as bundled

    x_train, _ = bundled.digits("train")
    x_test, y_test = bundled.digits("test")
    nchw = lambda a: np.ascontiguousarray(a.transpose(0, 3, 1, 2))
    np.savez(tmp_path / "calib.npz", x=nchw(x_train[:100]))
    out = tmp_path / "digits_int8.tflite"
    status, _, err = cli(capsys, "quantize", str(bundled.path("digits_cnn.onnx")), "--calib",
                         str(tmp_path / "calib.npz"), "-o", str(out))
    assert status == 0, err
    np.save(tmp_path / "x.npy", x_test)                      # float NHWC, quantized by infer
    status, _, err = cli(capsys, "infer", str(out), "--input", str(tmp_path / "x.npy"),
                         "--output", str(tmp_path / "y.npy"))
    assert status == 0, err
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.int8 and y.shape == (len(x_test), 10)
    assert (y.argmax(1) == y_test).mean() > 0.9
    it = runtime.Interpreter.from_file(str(out))
    from codegen.data import fit_input
    from codegen.frontend import load_model

    xq = fit_input(load_model(out), x_test[:20])
    for i in range(20):
        it.set_input(xq[i:i + 1], 0)
        it.invoke()
        assert np.array_equal(it.get_output(0), y[i:i + 1])
    # refuses to overwrite
    status, _, err = cli(capsys, "quantize", str(bundled.path("digits_cnn.onnx")), "--calib",
                         str(tmp_path / "calib.npz"), "-o", str(out))
    assert status == 2 and "already exists" in err


def test_demo_runs(tmp_path):
    """The README's main job: quantize the bundled digits CNN, compile its training firmware
    for mps2-an386, build it and let it fine-tune itself under QEMU (the generated C on the
    host where the cross toolchain or QEMU is missing)."""
    import re
    import shutil

    r = subprocess.run(check=False, args=[sys.executable, "-m", "codegen", "demo", "-o",
                                          str(tmp_path / "demo")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "int8 golden engine" in r.stdout
    assert (tmp_path / "demo" / "digits_int8.tflite").is_file()
    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        assert "training the generated C on this machine instead" in r.stdout
        return
    assert "training in place under QEMU (mps2-an386)" in r.stdout
    assert "epoch 2/2, step 2696/2696: mean loss" in r.stdout
    m = re.search(r"before (\d+\.\d+)% -> after (\d+\.\d+)% \(computed on the device\)",
                  r.stdout)
    assert m and float(m.group(1)) < 30 and float(m.group(2)) > 80, r.stdout
    assert re.search(r"instructions per training step: forward [\d,]+, backward [\d,]+, "
                     r"update [\d,]+", r.stdout)
    assert re.search(r"memory: SRAM [\d,]+ B \(stack used [\d,]+ of", r.stdout)
    assert (tmp_path / "demo" / "firmware-mps2-an386" / "build" / "pe_firmware.elf").is_file()


@needs_models
def test_plan_json_contract_and_reordering(tmp_path, capsys):
    status, out, err = cli(capsys, "plan", str(MODELS / "vww_96_int8.tflite"), "--train",
                           "weight:last4", "--json", "--plot", str(tmp_path / "plan.svg"))
    assert status == 0, err
    r = json.loads(out)
    for key in ("peak_bytes", "lower_bound_bytes", "pools", "schedule"):
        assert key in r
    assert r["peak_bytes"] <= 1.05 * r["lower_bound_bytes"]
    assert r["peak_bytes"] < r["peak_bytes_without_reordering"]
    assert (tmp_path / "plan.svg").read_text().lstrip().startswith("<")


@needs_models
def test_plan_board_too_small(capsys):
    status, _, err = cli(capsys, "plan", str(MODELS / "vww_96_int8.tflite"), "--train", "all",
                         "--board", "netduinoplus2")
    assert status == 2
    line = err.strip()
    assert "\n" not in line and "needs" in line and "192 KiB" in line, line
