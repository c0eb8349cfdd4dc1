"""TFLite frontend: import of the MLPerf Tiny models, write -> TFLM round trips, single-op
models, load_model dispatch, error messages and robustness against corrupt files."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from codegen.errors import ModelError
from codegen.frontend import load_model, read_tflite, save_model, write_tflite
from codegen.ir import Graph, Op, Role, verify

from .single_op import (
    SINGLE_OP_CASES,
    conv2d_graph,
    pool2d_graph,
    random_inputs,
    run_tflm,
    tflm_interpreter,
)

MODELS_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"

# README table: file -> (input shape, input dtype, op counts)
MODELS = {
    "kws_ref_model.tflite": ((1, 49, 10, 1), "int8", {
        "conv2d": 5, "depthwise_conv2d": 4, "avg_pool2d": 1, "reshape": 1,
        "fully_connected": 1, "softmax": 1}),
    "kws_ref_model_float32.tflite": ((1, 49, 10, 1), "float32", {
        "conv2d": 5, "depthwise_conv2d": 4, "avg_pool2d": 1, "reshape": 1,
        "fully_connected": 1, "softmax": 1}),
    "pretrainedResnet_quant.tflite": ((1, 32, 32, 3), "int8", {
        "conv2d": 9, "add": 3, "avg_pool2d": 1, "reshape": 1, "fully_connected": 1,
        "softmax": 1}),
    "vww_96_int8.tflite": ((1, 96, 96, 3), "int8", {
        "conv2d": 14, "depthwise_conv2d": 13, "avg_pool2d": 1, "reshape": 1,
        "fully_connected": 1, "softmax": 1}),
    "ad01_int8.tflite": ((1, 640), "int8", {"fully_connected": 10}),
}
INT8_MODELS = [m for m, (_, dtype, _) in MODELS.items() if dtype == "int8"]

needs_models = pytest.mark.skipif(not MODELS_DIR.is_dir(),
                                  reason=f"shared models not found at {MODELS_DIR}")


def model_bytes(name: str) -> bytes:
    return (MODELS_DIR / name).read_bytes()


def _read(name: str) -> Graph:
    return read_tflite(model_bytes(name), name)


def assert_graphs_equal(a: Graph, b: Graph) -> None:
    """Same ops (type, name, inputs, outputs, attrs), tensors (shape, dtype, role, quant,
    data) and graph inputs/outputs."""
    assert [op.type for op in a.ops] == [op.type for op in b.ops]
    for x, y in zip(a.ops, b.ops):
        assert (x.name, x.inputs, x.outputs) == (y.name, y.inputs, y.outputs)
        assert dict(x.attrs) == dict(y.attrs), x.name
    assert a.inputs == b.inputs and a.outputs == b.outputs
    assert set(a.tensors) == set(b.tensors)
    for name, t in a.tensors.items():
        u = b.tensors[name]
        assert (t.shape, t.dtype, t.role) == (u.shape, u.dtype, u.role), name
        assert t.quant == u.quant, name
        assert t.is_const == u.is_const, name
        if t.is_const:
            assert t.data.dtype == u.data.dtype and np.array_equal(t.data, u.data), name


def _model_inputs(shape: tuple[int, ...], dtype: str, n: int, seed: int) -> list[np.ndarray]:
    """Half full-range, half narrow-range random inputs (narrow keeps softmax unsaturated)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        if dtype == "float32":
            out.append((rng.standard_normal(shape) * (1.0 if k % 2 else 0.2)).astype(np.float32))
        elif k % 2:
            out.append(rng.integers(-128, 128, size=shape, dtype=np.int8))
        else:
            centre = int(rng.integers(-100, 100))
            out.append(np.clip(rng.integers(-12, 13, size=shape) + centre, -128, 127)
                       .astype(np.int8))
    return out


# -- import of the shared models --------------------------------------------------------------
@needs_models
@pytest.mark.parametrize("name", list(MODELS))
def test_model_imports_and_matches_readme(name: str) -> None:
    in_shape, in_dtype, counts = MODELS[name]
    g = verify(_read(name))
    assert dict(Counter(op.type for op in g.ops)) == counts
    assert len(g.inputs) == 1 and len(g.outputs) == 1
    x = g.tensors[g.inputs[0]]
    assert (x.shape, x.dtype) == (in_shape, in_dtype)
    assert g.metadata["source_format"] == "tflite"
    for op in g.ops:
        if op.type in ("conv2d", "depthwise_conv2d", "fully_connected"):
            w, b = g.tensors[op.inputs[1]], g.tensors[op.inputs[2]]
            assert w.role is Role.WEIGHT and w.is_const
            assert b.role is Role.BIAS and b.is_const
            if in_dtype == "int8":
                assert w.dtype == "int8" and b.dtype == "int32"
                assert w.quant is not None and b.quant is not None
                if op.type == "conv2d":
                    assert w.quant.axis == 0 and w.quant.scale.size == w.shape[0]
                if op.type == "depthwise_conv2d":
                    assert w.quant.axis == 3 and w.quant.scale.size == w.shape[3]
            else:
                assert w.dtype == "float32" and w.quant is None
        if op.type == "reshape":
            assert len(op.inputs) == 1 and op.attrs["shape"] == g.tensors[op.outputs[0]].shape
    # the reshape's constant shape input is not kept
    assert not any(t.role is Role.CONSTANT for t in g.tensors.values())


@needs_models
def test_kws_padding_is_tflite_same() -> None:
    g = _read("kws_ref_model.tflite")
    first = g.ops[0]
    # 49x10 input, 10x4 kernel, stride 2: out 25x5, total pad 9 (4 top, 5 bottom), 2 (1, 1)
    assert first.attrs["padding"] == (4, 5, 1, 1) and first.attrs["stride"] == (2, 2)
    assert first.attrs["activation"] == "relu"
    pool = next(op for op in g.ops if op.type == "avg_pool2d")
    assert pool.attrs["filter"] == (25, 5) and pool.attrs["padding"] == (0, 0, 0, 0)


@needs_models
def test_float_kws_hybrid_weights_are_dequantized() -> None:
    import tflite

    data = model_bytes("kws_ref_model_float32.tflite")
    g = read_tflite(data, "kws_float")
    assert all(t.dtype == "float32" and t.quant is None for t in g.tensors.values()
               if t.role in (Role.WEIGHT, Role.BIAS))
    names = g.metadata["tflite_dequantized_weights"]
    assert len(names) == 5
    # compare against the file's int8 values and scale, read with the plain tflite package
    m = tflite.Model.GetRootAs(data, 0)
    sg = m.Subgraphs(0)
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        if t.Name().decode() in names:
            q = np.frombuffer(m.Buffers(t.Buffer()).DataAsNumpy().tobytes(), np.int8)
            scale = t.Quantization().ScaleAsNumpy()
            w = g.tensors[t.Name().decode()].data
            assert np.array_equal(w.reshape(-1), q.astype(np.float32) * scale[0])


# -- write -> TFLM round trips ---------------------------------------------------------------
@needs_models
@pytest.mark.parametrize("name", INT8_MODELS)
def test_rewritten_model_matches_original_in_tflm(name: str) -> None:
    original = model_bytes(name)
    rewritten = write_tflite(read_tflite(original, name))
    a, b = tflm_interpreter(original), tflm_interpreter(rewritten)
    in_shape, in_dtype, _ = MODELS[name]
    for x in _model_inputs(in_shape, in_dtype, 50, seed=1):
        ya, = run_tflm(a, [x])
        yb, = run_tflm(b, [x])
        assert ya.dtype == yb.dtype and np.array_equal(ya, yb)


@needs_models
def test_float_kws_rewrite_runs_in_tflm_and_is_stable() -> None:
    # TFLM cannot run the original (a hybrid model: int8 conv weights, float activations); the
    # importer dequantizes those weights, so the rewritten file is a plain float32 model.
    first = write_tflite(_read("kws_ref_model_float32.tflite"))
    second = write_tflite(read_tflite(first, "first"))
    a, b = tflm_interpreter(first), tflm_interpreter(second)
    for x in _model_inputs((1, 49, 10, 1), "float32", 50, seed=2):
        ya, = run_tflm(a, [x])
        yb, = run_tflm(b, [x])
        assert ya.dtype == np.float32 and np.array_equal(ya, yb)
        assert np.isclose(ya.sum(), 1.0, atol=1e-4)


@needs_models
@pytest.mark.parametrize("name", list(MODELS))
def test_read_write_read_gives_same_graph(name: str) -> None:
    g1 = _read(name)
    data = write_tflite(g1)
    assert data[4:8] == b"TFL3"
    g2 = read_tflite(data, "rewritten")
    assert_graphs_equal(g1, g2)
    assert g2.metadata["tflite_op_versions"] == g1.metadata["tflite_op_versions"]


@needs_models
def test_written_file_layout() -> None:
    import tflite

    data = write_tflite(_read("vww_96_int8.tflite"))
    m = tflite.Model.GetRootAs(data, 0)
    assert m.Version() == 3 and m.SubgraphsLength() == 1
    assert m.Buffers(0).DataLength() == 0
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        assert oc.DeprecatedBuiltinCode() == min(oc.BuiltinCode(), 127)
    sg = m.Subgraphs(0)
    dw = [sg.Tensors(i) for i in range(sg.TensorsLength())
          if sg.Tensors(i).Quantization() is not None
          and sg.Tensors(i).Quantization().QuantizedDimension() == 3]
    assert len(dw) == 13   # per-channel depthwise weights keep quantized_dimension 3


# -- single-op models -------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(SINGLE_OP_CASES))
def test_single_op_model_runs_in_tflm_and_reads_back(case: str) -> None:
    rng = np.random.default_rng(7)
    g = SINGLE_OP_CASES[case](rng)
    data = write_tflite(g)
    interp = tflm_interpreter(data)
    y_t = g.tensors[g.outputs[0]]
    for _ in range(3):
        y, = run_tflm(interp, random_inputs(g, rng))
        assert y.shape == y_t.shape and y.dtype == np.dtype(y_t.dtype)
    assert_graphs_equal(g, read_tflite(data, case))


def test_explicit_padding_lowers_to_pad_then_valid_conv() -> None:
    import tflite

    g = conv2d_graph(np.random.default_rng(3), padding=(1, 0, 2, 1))
    data = write_tflite(g)
    m = tflite.Model.GetRootAs(data, 0)
    codes = [m.OperatorCodes(m.Subgraphs(0).Operators(i).OpcodeIndex()).BuiltinCode()
             for i in range(m.Subgraphs(0).OperatorsLength())]
    assert codes == [tflite.BuiltinOperator.PAD, tflite.BuiltinOperator.CONV_2D]
    assert read_tflite(data).metadata["tflite_folded_pads"] == ["op/pad"]


def test_ir_pad_then_valid_conv_equals_same_conv_in_tflm() -> None:
    """PAD pads int8 with the zero point: exactly what SAME padding does inside CONV_2D."""
    same = conv2d_graph(np.random.default_rng(4), in_shape=(1, 7, 6, 3), stride=(2, 2))
    conv = same.ops[0]
    pt, pb, pl, pr = conv.attrs["padding"]
    assert (pt, pb, pl, pr) != (0, 0, 0, 0)
    x = same.tensors["x"]
    padded = same.copy()
    xp = x.replace(name="xp", shape=(1, 7 + pt + pb, 6 + pl + pr, 3))
    padded.add_tensor(xp)
    padded.ops = [Op("pad", "pad", ("x",), ("xp",),
                     {"pads": ((0, 0), (pt, pb), (pl, pr), (0, 0))}),
                  conv.replace(inputs=("xp",) + conv.inputs[1:],
                               attrs={**conv.attrs, "padding": (0, 0, 0, 0)})]
    verify(padded)
    a, b = tflm_interpreter(write_tflite(same)), tflm_interpreter(write_tflite(padded))
    rng = np.random.default_rng(5)
    for _ in range(10):
        xs = random_inputs(same, rng)
        assert np.array_equal(run_tflm(a, xs)[0], run_tflm(b, xs)[0])


def test_max_pool_explicit_padding_matches_numpy() -> None:
    g = pool2d_graph(np.random.default_rng(6), "max", in_shape=(1, 8, 8, 4), filter=(3, 3),
                     stride=(2, 2), padding=(1, 1, 1, 1))
    interp = tflm_interpreter(write_tflite(g))
    rng = np.random.default_rng(8)
    for _ in range(5):
        x, = random_inputs(g, rng)
        y, = run_tflm(interp, [x])
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-128)
        ref = np.array([[[xp[0, 2 * i:2 * i + 3, 2 * j:2 * j + 3, c].max() for c in range(4)]
                         for j in range(4)] for i in range(4)])[None]
        assert np.array_equal(y, ref)


def test_avg_pool_with_unexpressible_padding_is_refused() -> None:
    g = pool2d_graph(np.random.default_rng(0), "avg", filter=(3, 3), padding=(1, 1, 1, 1))
    with pytest.raises(ModelError, match="avg_pool2d.*neither SAME nor VALID"):
        write_tflite(g)


def test_same_padding_with_zero_total_writes_valid() -> None:
    g = pool2d_graph(np.random.default_rng(0), "max", filter=(2, 2), stride=(2, 2),
                     padding="same")
    assert g.ops[0].attrs["padding"] == (0, 0, 0, 0)
    assert_graphs_equal(g, read_tflite(write_tflite(g)))


# -- errors -----------------------------------------------------------------------------------
def _with_opcode(graph: Graph, code: int) -> bytes:
    """Write ``graph`` with its first operator's builtin code replaced (to fake other ops)."""
    from codegen.frontend import tflite_writer

    low = tflite_writer._Lowering(graph)
    low.run()
    low.ops[0].code = code
    low.ops[0].options_type = 0
    return tflite_writer._Serializer(graph, low).build()


def test_unsupported_op_names_op_node_and_index() -> None:
    import tflite

    g = SINGLE_OP_CASES["relu"](np.random.default_rng(0))
    data = _with_opcode(g, tflite.BuiltinOperator.LOGISTIC)
    with pytest.raises(ModelError) as e:
        read_tflite(data, "model.tflite")
    assert str(e.value) == "model.tflite: unsupported op LOGISTIC at node 'op' (operator 0)"
    data = _with_opcode(g, 250)
    with pytest.raises(ModelError, match=r"unsupported op with builtin code 250 at node 'op'"):
        read_tflite(data, "model.tflite")


def test_unsupported_fused_activation_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from codegen.frontend import tflite_writer

    g = SINGLE_OP_CASES["conv_same"](np.random.default_rng(0))
    low = tflite_writer._Lowering(g)
    low.run()
    low.ops[0].options["activation"] = "tanh"
    monkeypatch.setitem(tflite_writer.IR_TO_ACTIVATION, "tanh", 4)
    data = tflite_writer._Serializer(g, low).build()
    with pytest.raises(ModelError, match=r"^m: CONV_2D at node 'op' \(operator 0\): "
                                         "unsupported fused activation TANH$"):
        read_tflite(data, "m")


def test_padv2_with_other_value_is_refused() -> None:
    from codegen.frontend import tflite_writer
    from codegen.ir import Tensor

    g = SINGLE_OP_CASES["max_pool_explicit"](np.random.default_rng(0))
    low = tflite_writer._Lowering(g)
    low.run()
    k = low.index["op/pad_value"]
    low.tensors[k] = Tensor("op/pad_value", (1,), "int8", quant=low.tensors[k].quant,
                            data=np.array([5], np.int8))
    data = tflite_writer._Serializer(g, low).build()
    with pytest.raises(ModelError, match="PADV2 at node 'op/pad'.*value 5 is not supported"):
        read_tflite(data, "m")


def test_pad_feeding_a_graph_output_is_not_folded() -> None:
    g = SINGLE_OP_CASES["conv_valid_relu"](np.random.default_rng(0))
    conv = g.ops[0]
    x = g.tensors["x"]
    g.add_tensor(x.replace(name="xp", shape=(1, 9, 9, 3)))
    g.ops = [Op("pad", "pad", ("x",), ("xp",), {"pads": ((0, 0), (0, 1), (1, 0), (0, 0))}),
             conv.replace(inputs=("xp",) + conv.inputs[1:])]
    g.tensors["y"] = g.tensors["y"].replace(shape=(1, 7, 7, 4))
    g.outputs = ["y", "xp"]
    verify(g)
    back = read_tflite(write_tflite(g))
    assert [op.type for op in back.ops] == ["pad", "conv2d"]
    assert_graphs_equal(g, back)


@pytest.mark.parametrize("data, message", [
    (b"", "only 0 bytes"),
    (b"\x00" * 32, "not a TFLite model"),
    (b"\x10\x00\x00\x00TFL3", "corrupt or truncated TFLite file"),
    (b"\xff\xff\xff\x7fTFL3" + b"\x00" * 64, "outside"),
])
def test_bad_bytes_raise_model_error(data: bytes, message: str) -> None:
    with pytest.raises(ModelError, match=message) as e:
        read_tflite(data, "bad.tflite")
    assert str(e.value).startswith("bad.tflite: ") and "\n" not in str(e.value)


def test_load_model_dispatch_and_file_errors(tmp_path: Path) -> None:
    g = SINGLE_OP_CASES["conv_same"](np.random.default_rng(0))
    p = tmp_path / "m.tflite"
    save_model(g, p)
    back = load_model(p)
    assert [op.type for op in back.ops] == ["conv2d"] and back.name == "m"
    with pytest.raises(ModelError, match="no such file"):
        load_model(tmp_path / "missing.tflite")
    (tmp_path / "empty.tflite").write_bytes(b"")
    with pytest.raises(ModelError, match="empty"):
        load_model(tmp_path / "empty.tflite")
    with pytest.raises(ModelError, match="directory"):
        load_model(tmp_path)
    (tmp_path / "junk.bin").write_bytes(b"\xff\xfe junk junk junk")
    with pytest.raises(ModelError, match="not a TFLite or ONNX model"):
        load_model(tmp_path / "junk.bin")


def test_load_model_sends_onnx_to_the_onnx_importer(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4])])
    p = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph), p)
    try:
        g = load_model(p)
    except ModelError as e:   # an importer that refuses it must still say so in one line
        assert str(e).startswith(str(p))
    else:
        assert g.metadata.get("source_format") != "tflite"


# -- robustness -------------------------------------------------------------------------------
def _mutations(data: bytes, n: int, seed: int):
    rng = np.random.default_rng(seed)
    for k in range(n):
        b = bytearray(data)
        mode = k % 4
        if mode == 0:      # bit flips anywhere
            for _ in range(int(rng.integers(1, 9))):
                i = int(rng.integers(0, len(b)))
                b[i] ^= 1 << int(rng.integers(0, 8))
        elif mode == 1:    # truncation
            b = b[:int(rng.integers(0, len(b)))]
        elif mode == 2:    # random bytes in the tables (start and end hold the structure)
            for _ in range(int(rng.integers(1, 4))):
                i = int(rng.integers(0, min(len(b), 4096))) if rng.random() < 0.5 \
                    else int(rng.integers(max(0, len(b) - 8192), len(b)))
                b[i] = int(rng.integers(0, 256))
        else:              # random garbage behind a valid identifier
            size = int(rng.integers(8, 4096))
            b = bytearray(rng.integers(0, 256, size=size, dtype=np.uint8).tobytes())
            b[4:8] = b"TFL3"
        yield bytes(b)


@needs_models
def test_corrupt_files_give_verified_graph_or_model_error() -> None:
    data = model_bytes("kws_ref_model.tflite")
    outcomes = Counter()
    for k, bad in enumerate(_mutations(data, 200, seed=11)):
        start = time.perf_counter()
        try:
            g = read_tflite(bad, "fuzz.tflite")
        except ModelError as e:
            msg = str(e)
            assert msg.startswith("fuzz.tflite: ") and "\n" not in msg, msg
            outcomes["error"] += 1
        else:
            verify(g)
            outcomes["graph"] += 1
        assert time.perf_counter() - start < 2.0, f"case {k} took too long"
    assert outcomes["error"] > 50 and outcomes["graph"] > 0
