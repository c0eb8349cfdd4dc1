"""Bad input never gives a traceback or a hang: one line on stderr and exit status 2.

Over 1,000 generated files (truncated, bit-flipped, random bytes; TFLite and ONNX) go through
`pockengine inspect` in-process; a sample also goes through the real console entry point in a
subprocess. Models with unsupported ops and inconsistent shapes must name the op/node.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codegen.cli import main

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
TFLITE_MODELS = ["kws_ref_model.tflite", "ad01_int8.tflite", "pretrainedResnet_quant.tflite",
                 "kws_ref_model_float32.tflite", "vww_96_int8.tflite"]

pytestmark = pytest.mark.skipif(not MODELS.is_dir(), reason=f"shared models not found at {MODELS}")


class Hang(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - only on a hang
    raise Hang()


def run_cli(argv: list[str], capsys, limit_s: int = 20) -> tuple[int, str]:
    """Run the CLI in-process with a hang guard; return (status, stderr)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    try:
        status = main(argv)
    except SystemExit as e:  # argparse errors
        status = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out = capsys.readouterr()
    return status, out.err


def assert_one_line_error(status: int, err: str, what: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, f"{what}: exit status {status}, stderr {err!r}"
    assert len(lines) == 1, f"{what}: expected one line on stderr, got {err!r}"
    assert "Traceback" not in err and "internal error" not in err, f"{what}: {err!r}"
    assert lines[0].startswith("pockengine: error: "), f"{what}: {err!r}"


@pytest.fixture(scope="module")
def onnx_bytes(tmp_path_factory) -> bytes:
    torch = pytest.importorskip("torch")
    from tests.digits_cnn import build_cnn, export_onnx

    torch.manual_seed(0)
    path = export_onnx(build_cnn().eval(), tmp_path_factory.mktemp("onnx") / "cnn.onnx")
    return path.read_bytes()


def corrupted(data: bytes, rng: np.random.Generator, kind: str) -> bytes:
    b = np.frombuffer(data, dtype=np.uint8).copy()
    if kind == "truncate":
        return bytes(b[: int(rng.integers(0, len(b)))])
    if kind == "flip":
        n = int(rng.integers(1, 16))
        pos = rng.integers(0, len(b), size=n)
        b[pos] ^= (1 << rng.integers(0, 8, size=n)).astype(np.uint8)
        return bytes(b)
    if kind == "flip_header":  # flips inside the first 1 KiB: offsets, vtables, tables
        n = int(rng.integers(1, 4))
        pos = rng.integers(0, min(len(b), 1024), size=n)
        b[pos] ^= (1 << rng.integers(0, 8, size=n)).astype(np.uint8)
        return bytes(b)
    if kind == "random":
        n = int(rng.integers(0, 4096))
        head = b[:8] if rng.random() < 0.5 else np.zeros(0, np.uint8)  # keep the magic sometimes
        return bytes(head) + rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
    raise ValueError(kind)


def test_corrupted_files_fail_cleanly(tmp_path, capsys, onnx_bytes):
    rng = np.random.default_rng(1234)
    originals = {name: (MODELS / name).read_bytes() for name in TFLITE_MODELS}
    originals["cnn.onnx"] = onnx_bytes
    cases = 0
    accepted = {"truncate": 0, "flip": 0, "flip_header": 0, "random": 0}
    for name, data in originals.items():
        n_per_kind = 60 if name != "vww_96_int8.tflite" else 30
        for kind in ("truncate", "flip", "flip_header", "random"):
            for i in range(n_per_kind):
                bad = corrupted(data, rng, kind)
                path = tmp_path / f"{kind}_{i}_{name}"
                path.write_bytes(bad)
                status, err = run_cli(["inspect", str(path)], capsys)
                cases += 1
                if status == 0:  # e.g. a flip in weight data leaves a valid model: fine
                    accepted[kind] += 1
                    continue
                assert_one_line_error(status, err, f"{kind} case {i} of {name}")
                assert str(path.name) in err, f"error does not name the file: {err!r}"
                path.unlink()
    assert cases >= 1000
    # Random bytes are never a model; most truncations must be detected.
    assert accepted["random"] == 0, accepted
    assert accepted["truncate"] < cases // 16, accepted


def _patch_field(data: bytearray, table, slot_offset: int, value: int, fmt: str) -> None:
    import struct

    o = table._tab.Offset(slot_offset)
    assert o, "field absent in this model"
    struct.pack_into(fmt, data, table._tab.Pos + o, value)


def tflite_with_unsupported_op() -> bytes:
    import tflite

    data = bytearray((MODELS / "ad01_int8.tflite").read_bytes())
    model = tflite.Model.GetRootAsModel(data, 0)
    code = model.OperatorCodes(0)
    # OperatorCode fields: deprecated_builtin_code (vtable 4, int8), builtin_code (vtable 10, int32)
    _patch_field(data, code, 4, tflite.BuiltinOperator.LOGISTIC, "<b")
    if code._tab.Offset(10):
        _patch_field(data, code, 10, tflite.BuiltinOperator.LOGISTIC, "<i")
    return bytes(data)


def tflite_with_bad_shape() -> bytes:
    import struct

    import tflite

    data = bytearray((MODELS / "ad01_int8.tflite").read_bytes())
    model = tflite.Model.GetRootAsModel(data, 0)
    sg = model.Subgraphs(0)
    op = sg.Operators(0)
    out_t = sg.Tensors(op.Outputs(0))
    o = out_t._tab.Offset(4)                     # Tensor.shape
    vec = out_t._tab.Vector(o)
    last = out_t.ShapeLength() - 1
    struct.pack_into("<i", data, vec + 4 * last, out_t.Shape(last) + 3)
    return bytes(data)


def onnx_model(nodes, inputs, outputs, inits=()) -> bytes:
    from onnx import helper

    g = helper.make_graph(nodes, "bad", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return m.SerializeToString()


def test_unsupported_ops_named(tmp_path, capsys):
    from onnx import TensorProto, helper

    p = tmp_path / "unsupported.tflite"
    p.write_bytes(tflite_with_unsupported_op())
    status, err = run_cli(["inspect", str(p)], capsys)
    assert_one_line_error(status, err, "tflite unsupported op")
    assert "LOGISTIC" in err and "unsupported" in err.lower()

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    for op_type in ("Sigmoid", "LSTM", "Tanh", "Erf"):
        node = helper.make_node(op_type, ["x"], ["y"], name=f"/block/{op_type}_7")
        p = tmp_path / f"unsupported_{op_type}.onnx"
        p.write_bytes(onnx_model([node], [x], [y]))
        status, err = run_cli(["inspect", str(p)], capsys)
        assert_one_line_error(status, err, f"onnx {op_type}")
        assert op_type in err and f"/block/{op_type}_7" in err, err


def test_inconsistent_shapes_named(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    p = tmp_path / "badshape.tflite"
    p.write_bytes(tflite_with_bad_shape())
    status, err = run_cli(["inspect", str(p)], capsys)
    assert_one_line_error(status, err, "tflite inconsistent shape")
    assert "shape" in err

    # Gemm whose weight does not fit the input width.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    w = numpy_helper.from_array(np.ones((3, 5), np.float32), "w")
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="/fc/Gemm", transB=1)
    p = tmp_path / "badgemm.onnx"
    p.write_bytes(onnx_model([node], [x], [y], [w]))
    status, err = run_cli(["inspect", str(p)], capsys)
    assert_one_line_error(status, err, "onnx gemm shape")
    assert "/fc/Gemm" in err

    # Add of tensors that do not broadcast.
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 3, 4, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 5, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 4, 4])
    node = helper.make_node("Add", ["a", "b"], ["y"], name="/res/Add")
    p = tmp_path / "badadd.onnx"
    p.write_bytes(onnx_model([node], [a, b], [y]))
    status, err = run_cli(["inspect", str(p)], capsys)
    assert_one_line_error(status, err, "onnx add shape")
    assert "/res/Add" in err
    assert onnx  # the onnx package is the model writer here


def test_bad_cli_inputs(tmp_path, capsys):
    model = str(MODELS / "ad01_int8.tflite")
    cases = {
        "missing model": ["inspect", str(tmp_path / "nope.tflite")],
        "empty model": ["inspect", str(tmp_path / "empty.tflite")],
        "missing input": ["infer", model, "--input", str(tmp_path / "x.npy"),
                          "--output", str(tmp_path / "y.npy")],
        "wrong input shape": ["infer", model, "--input", str(tmp_path / "wrong.npy"),
                              "--output", str(tmp_path / "y.npy")],
        "not an npy": ["infer", model, "--input", model, "--output", str(tmp_path / "y.npy")],
        "calib of an int8 model": ["quantize", model, "--calib", str(tmp_path / "c.npz"),
                                   "-o", str(tmp_path / "q.tflite")],
        "calib missing": ["quantize", str(MODELS / "kws_ref_model_float32.tflite"), "--calib",
                          str(tmp_path / "none.npz"), "-o", str(tmp_path / "q.tflite")],
        "calib without x": ["quantize", str(MODELS / "kws_ref_model_float32.tflite"), "--calib",
                            str(tmp_path / "nox.npz"), "-o", str(tmp_path / "q.tflite")],
    }
    (tmp_path / "empty.tflite").write_bytes(b"")
    np.save(tmp_path / "wrong.npy", np.zeros((2, 7), np.int8))
    np.savez(tmp_path / "c.npz", x=np.zeros((4, 640), np.float32))
    np.savez(tmp_path / "nox.npz", y=np.zeros(3))
    for what, argv in cases.items():
        status, err = run_cli(argv, capsys)
        assert_one_line_error(status, err, what)


def test_existing_output_not_overwritten(tmp_path, capsys):
    out = tmp_path / "y.npy"
    out.write_bytes(b"precious")
    np.save(tmp_path / "x.npy", np.zeros((1, 640), np.int8))
    status, err = run_cli(["infer", str(MODELS / "ad01_int8.tflite"), "--input",
                           str(tmp_path / "x.npy"), "--output", str(out)], capsys)
    assert_one_line_error(status, err, "existing output")
    assert out.read_bytes() == b"precious"


def test_console_script_subprocess(tmp_path):
    """The real entry point: exit status 2 and one stderr line, for a few bad files."""
    rng = np.random.default_rng(7)
    data = (MODELS / "kws_ref_model.tflite").read_bytes()
    for i, kind in enumerate(["truncate", "flip_header", "random", "truncate"]):
        p = tmp_path / f"bad_{i}.tflite"
        p.write_bytes(corrupted(data, rng, kind))
        r = subprocess.run(check=False, args=[sys.executable, "-m", "codegen", "inspect", str(p)],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        if r.returncode == 0:
            continue
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr
