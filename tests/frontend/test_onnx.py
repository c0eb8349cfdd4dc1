"""ONNX importer: float op coverage against onnxruntime, QDQ int8 import, errors.

Float models come from PyTorch (legacy exporter, opset 13) or onnx.helper; each is imported,
verified and run with the golden model on NHWC data, then compared with onnxruntime on NCHW
data. QDQ models come from onnxruntime's ``quantize_static``.
"""

from __future__ import annotations

import numpy as np
import pytest

from codegen.errors import ModelError
from codegen.frontend.onnx_reader import read_onnx
from codegen.ir import verify
from tests.frontend.onnx_helpers import (
    dequantize_output,
    export_torch,
    from_ir_layout,
    golden_float,
    make_onnx,
    quantize_input,
    quantize_qdq,
    run_ort,
    to_ir_layout,
)

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
nn = torch.nn
F = torch.nn.functional

from onnx import TensorProto, helper, numpy_helper

RTOL = ATOL = 1e-5


def _randomize(model: nn.Module, seed: int) -> nn.Module:
    """Deterministic weights, and non-trivial batch-norm statistics."""
    torch.manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d | nn.BatchNorm1d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


def _op_types(graph) -> list[str]:
    return [op.type for op in graph.ops]


def _check_against_ort(model_bytes: bytes, shapes, seed: int = 0, n: int = 3):
    graph = verify(read_onnx(model_bytes, "case.onnx"))
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((n,) + tuple(s[1:])).astype(np.float32) for s in shapes]
    want = run_ort(model_bytes, *xs)
    got = golden_float(graph, *xs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return graph


# -- PyTorch modules ---------------------------------------------------------------------------

class Fn(nn.Module):
    """A module from a function of (self, *inputs) plus named submodules/parameters."""

    def __init__(self, fn, **parts):
        super().__init__()
        self.fn = fn
        for k, v in parts.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def _param(*shape):
    return nn.Parameter(torch.randn(*shape) * 0.5)


def _torch_cases():
    torch.manual_seed(0)
    S = (1, 3, 9, 9)
    return {
        "conv_stride2_pad1": (nn.Conv2d(3, 4, 3, stride=2, padding=1), [S], ["conv2d"]),
        "conv_rect_dilated": (nn.Conv2d(3, 5, (3, 2), stride=(1, 2), padding=(0, 1),
                                        dilation=(2, 1)), [(1, 3, 10, 9)], ["conv2d"]),
        "conv_valid_nobias": (nn.Conv2d(3, 2, 5, bias=False), [S], ["conv2d"]),
        "depthwise_m1": (nn.Conv2d(4, 4, 3, padding=1, groups=4), [(1, 4, 6, 6)],
                         ["depthwise_conv2d"]),
        "depthwise_m2": (nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4), [(1, 4, 7, 7)],
                         ["depthwise_conv2d"]),
        "conv_relu6": (nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU6()), [S], ["conv2d"]),
        "clip_standalone": (Fn(lambda m, x: torch.clamp(m.c(x), 0, 6) + m.c(x) * 0.5,
                               c=nn.Conv2d(3, 4, 1)), [S], None),
        "relu_standalone": (Fn(lambda m, x: torch.relu(x) + x), [S], ["relu", "add"]),
        "linear_gemm": (nn.Linear(24, 10), [(1, 24)], ["fully_connected"]),
        "matmul_add": (Fn(lambda m, x: x @ m.w + m.b, w=_param(16, 7), b=_param(7)),
                       [(1, 16)], ["fully_connected"]),
        "matmul_add_3d": (Fn(lambda m, x: torch.relu(x @ m.w + m.b), w=_param(16, 7),
                             b=_param(7)), [(1, 5, 16)], ["fully_connected"]),
        "add_mul": (Fn(lambda m, x, y: (m.c(x) + y) * m.s * y + 1.5, c=nn.Conv2d(3, 4, 1),
                       s=_param(1, 4, 1, 1)), [S, (1, 4, 9, 9)], ["conv2d", "add", "mul",
                                                                   "mul", "add"]),
        "sub_div": (Fn(lambda m, x: (x - m.mu) / 2.0, mu=_param(1, 3, 1, 1)), [S],
                    ["add", "mul"]),
        "avgpool": (nn.AvgPool2d(2), [S], ["avg_pool2d"]),
        "avgpool_pad_exclude": (nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
                                [S], ["avg_pool2d"]),
        "global_avgpool": (nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                         nn.Linear(3, 4)), [S],
                           ["mean", "reshape", "fully_connected"]),
        "maxpool_pad": (nn.MaxPool2d(3, stride=2, padding=1), [S], ["max_pool2d"]),
        "maxpool_ceil": (nn.MaxPool2d(2, stride=2, ceil_mode=True), [(1, 3, 7, 7)],
                         ["max_pool2d"]),
        "flatten_linear": (nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.Flatten(),
                                         nn.Linear(4 * 4 * 4, 5)), [S],
                           ["conv2d", "reshape", "fully_connected"]),
        "view_linear": (Fn(lambda m, x: m.fc(m.c(x).view(x.size(0), -1)),
                           c=nn.Conv2d(3, 2, 3), fc=nn.Linear(2 * 7 * 7, 3)), [S],
                        ["conv2d", "reshape", "fully_connected"]),
        "reshape_plain": (Fn(lambda m, x: m.fc(x.mean(dim=(2, 3), keepdim=True)
                                             .reshape(1, 3)), fc=nn.Linear(3, 2)), [S],
                          ["mean", "reshape", "fully_connected"]),
        "reduce_mean": (Fn(lambda m, x: x.mean(dim=(2, 3))), [S], ["mean"]),
        "softmax_fc": (nn.Sequential(nn.Linear(12, 6), nn.Softmax(dim=1)), [(1, 12)],
                       ["fully_connected", "softmax"]),
        "softmax_channels": (nn.Sequential(nn.Conv2d(3, 5, 1), nn.Softmax(dim=1)), [S],
                             ["conv2d", "softmax"]),
        "concat_channels": (Fn(lambda m, x: torch.cat([m.a(x), m.b(x)], dim=1),
                               a=nn.Conv2d(3, 2, 3, padding=1), b=nn.Conv2d(3, 3, 1)), [S],
                            ["conv2d", "conv2d", "concat"]),
        "concat_height": (Fn(lambda m, x: torch.cat([x, x * 2.0], dim=2)), [S],
                          ["mul", "concat"]),
        "pad": (nn.Sequential(nn.ZeroPad2d((1, 2, 0, 1)), nn.Conv2d(3, 2, 3)), [S],
                ["pad", "conv2d"]),
    }


TORCH_CASES = _torch_cases()


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_float_op_matches_onnxruntime(case: str) -> None:
    model, shapes, expected_ops = TORCH_CASES[case]
    data = export_torch(_randomize(model, 1), *shapes)
    graph = _check_against_ort(data, shapes)
    if expected_ops is not None:
        assert _op_types(graph) == expected_ops
    assert graph.metadata["source_format"] == "onnx"
    assert graph.metadata["input_layout"] == "NCHW"
    for name, shape in zip(graph.inputs, shapes):
        assert graph.tensors[name].shape == (to_ir_layout(np.zeros(shape)).shape)


def test_conv_bn_relu_folds_into_one_op() -> None:
    model = _randomize(nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU()), 2)
    data = export_torch(model, (1, 3, 8, 8), do_constant_folding=False)
    assert b"BatchNormalization" in data                # kept by the exporter
    graph = _check_against_ort(data, [(1, 3, 8, 8)])
    assert _op_types(graph) == ["conv2d"]
    assert graph.ops[0].attrs["activation"] == "relu"


def test_depthwise_bn_and_standalone_bn() -> None:
    model = _randomize(nn.Sequential(nn.Conv2d(4, 8, 3, groups=4), nn.BatchNorm2d(8),
                                     nn.MaxPool2d(2), nn.BatchNorm2d(8)), 3)
    data = export_torch(model, (1, 4, 8, 8), do_constant_folding=False)
    graph = _check_against_ort(data, [(1, 4, 8, 8)])
    assert _op_types(graph) == ["depthwise_conv2d", "max_pool2d", "mul", "add"]
    assert graph.ops[0].attrs["depth_multiplier"] == 2


def test_flatten_permutes_fc_weight_columns() -> None:
    model, shapes, _ = TORCH_CASES["flatten_linear"]
    graph = read_onnx(export_torch(_randomize(model, 1), *shapes))
    fc = graph.ops[-1]
    w = graph.tensors[fc.inputs[1]].data
    torch_w = model[3].weight.detach().numpy()          # (5, C*H*W) in C,H,W order
    np.testing.assert_array_equal(w, torch_w.reshape(5, 4, 4, 4).transpose(0, 2, 3, 1)
                                  .reshape(5, -1))


def test_metadata_layout_of_4d_output_and_dynamic_batch() -> None:
    model = nn.Conv2d(3, 4, 3)
    data = export_torch(_randomize(model, 0), (1, 3, 6, 5),
                        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    graph = verify(read_onnx(data, "dyn.onnx"))
    md = graph.metadata
    assert md["source_input_shapes"] == {"x": (1, 3, 6, 5)}
    assert md["dynamic_batch"] is True
    assert md["output_layouts"] == {"y": "NHWC"}
    assert graph.tensors["y"].shape == (1, 4, 3, 4)
    x = np.random.default_rng(0).standard_normal((4, 3, 6, 5)).astype(np.float32)
    np.testing.assert_allclose(golden_float(graph, x)[0], run_ort(data, x, batched=True)[0],
                               rtol=RTOL, atol=ATOL)


# -- hand-built models (attributes PyTorch does not emit) ----------------------------------------

def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def _hand_cases():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    x = _vi("x", [1, 3, 7, 8])
    cases = {}
    for name, kw, out in [
        ("conv_asymmetric_pads", {"pads": [0, 1, 2, 1], "strides": [2, 1]}, [1, 4, 4, 8]),
        ("conv_same_upper", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, [1, 4, 4, 4]),
        ("conv_same_lower", {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, [1, 4, 4, 4]),
    ]:
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name=name, kernel_shape=[3, 3],
                                **kw)
        cases[name] = (make_onnx([node], [x], [_vi("y", out)], [_init("w", w), _init("b", b)]),
                       [(1, 3, 7, 8)], ["conv2d"])
    wt = rng.standard_normal((6, 5)).astype(np.float32)
    gemm = helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="gemm", transB=0)
    cases["gemm_transB0"] = (make_onnx([gemm], [_vi("x", [1, 6])], [_vi("y", [1, 5])],
                                       [_init("w", wt), _init("c", rng.standard_normal((1, 5)))]),
                             [(1, 6)], ["fully_connected"])
    cat = helper.make_node("Concat", ["x", "k"], ["y"], name="cat", axis=1)
    cases["concat_constant"] = (make_onnx([cat], [_vi("x", [1, 2, 3, 3])],
                                          [_vi("y", [1, 3, 3, 3])],
                                          [_init("k", rng.standard_normal((1, 1, 3, 3)))]),
                                [(1, 2, 3, 3)], ["concat"])
    pool = helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[3, 3],
                            strides=[2, 2], pads=[1, 0, 0, 1], ceil_mode=1)
    cases["avgpool_ceil_asym"] = (make_onnx([pool], [_vi("x", [1, 2, 8, 8])],
                                            [_vi("y", [1, 2, 4, 4])]), [(1, 2, 8, 8)],
                                  ["avg_pool2d"])
    return cases


HAND_CASES = _hand_cases()


@pytest.mark.parametrize("case", sorted(HAND_CASES))
def test_hand_built_model_matches_onnxruntime(case: str) -> None:
    data, shapes, expected_ops = HAND_CASES[case]
    graph = _check_against_ort(data, shapes)
    assert _op_types(graph) == expected_ops


def test_asymmetric_pads_map_to_top_bottom_left_right() -> None:
    graph = read_onnx(HAND_CASES["conv_asymmetric_pads"][0])
    assert graph.ops[0].attrs["padding"] == (0, 2, 1, 1)
    graph = read_onnx(HAND_CASES["conv_same_lower"][0])
    assert graph.ops[0].attrs["padding"] == (1, 1, 1, 0)


# -- the digits CNN: float and QDQ ----------------------------------------------------------------

@pytest.fixture(scope="module")
def digits():
    """The bundled pretrained digits CNN (a file: the same model on every machine) and its
    split, NCHW."""
    import codegen.models as bundled
    from tests.digits_cnn import DigitsSplit

    def nchw(x):
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))

    (x_tr, y_tr), (x_te, y_te) = bundled.digits("train"), bundled.digits("test")
    split = DigitsSplit(nchw(x_tr), y_tr, nchw(x_te), y_te)
    return split, bundled.path("digits_cnn.onnx").read_bytes()


def test_digits_float_import_agrees_with_onnxruntime(digits) -> None:
    split, data = digits
    graph = verify(read_onnx(data, "digits.onnx"))
    assert _op_types(graph) == ["conv2d", "depthwise_conv2d", "conv2d", "add", "conv2d",
                                "avg_pool2d", "reshape", "fully_connected"]
    got = golden_float(graph, split.x_test)[0]
    want = run_ort(data, split.x_test)[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert (got.argmax(1) == want.argmax(1)).mean() == 1.0


@pytest.mark.parametrize("activation_type,per_channel", [("int8", True), ("uint8", True),
                                                         ("int8", False)])
def test_digits_qdq_top1_agrees_with_onnxruntime(digits, activation_type, per_channel) -> None:
    from codegen import golden

    split, data = digits
    qdq = quantize_qdq(data, split.x_train[:100], per_channel=per_channel,
                       activation_type=activation_type)
    graph = verify(read_onnx(qdq, "digits_qdq.onnx"))
    md = graph.metadata
    assert md["quant_format"] == "qdq" and md["output_dequantize"] is True
    assert {graph.tensors[n].dtype for n in graph.inputs + graph.outputs} == {"int8"}
    assert "quantize" not in _op_types(graph) and "dequantize" not in _op_types(graph)
    for op in graph.ops:
        if op.type in ("conv2d", "depthwise_conv2d", "fully_connected"):
            w, b = graph.tensors[op.inputs[1]], graph.tensors[op.inputs[2]]
            assert (w.dtype, b.dtype) == ("int8", "int32")
            assert w.quant.per_channel == per_channel
            if per_channel:
                assert w.quant.axis == (3 if op.type == "depthwise_conv2d" else 0)
    x = quantize_input(to_ir_layout(split.x_test), md["input_quant"])
    got = dequantize_output(golden.run(graph, x)[0], md["output_quant"])
    want = run_ort(qdq, split.x_test)[0]
    agreement = float((got.argmax(1) == want.argmax(1)).mean())
    print(f"digits QDQ {activation_type} per_channel={per_channel}: top-1 agreement "
          f"{agreement:.4f} on {len(want)} samples")
    assert agreement >= 0.99
    # Differences are requantization rounding only: a few output steps at most.
    assert np.abs(got - want).max() <= 4 * md["output_quant"]["scale"] + 1e-6


def test_qdq_op_mix_agrees_with_onnxruntime() -> None:
    """Pools, concat, pad, depthwise x2, relu6 and a flatten (H*W > 1) into Linear, int8."""
    from codegen import golden

    model = _randomize(Fn(lambda m, x: m.fc(F.relu6(m.dw(F.pad(torch.cat(
        [F.max_pool2d(torch.relu(m.c(x)), 2), F.avg_pool2d(torch.relu(m.c(x)), 2)], 1),
        (1, 1, 1, 1)))).flatten(1)),
        c=nn.Conv2d(3, 4, 3, padding=1), dw=nn.Conv2d(8, 16, 3, groups=8),
        fc=nn.Linear(16 * 4 * 4, 6)), 4)
    data = export_torch(model, (1, 3, 8, 8))
    rng = np.random.default_rng(0)
    calib = rng.uniform(-1, 1, (32, 3, 8, 8)).astype(np.float32)
    qdq = quantize_qdq(data, calib)
    graph = verify(read_onnx(qdq, "mix.onnx"))
    types = _op_types(graph)
    for t in ("conv2d", "max_pool2d", "avg_pool2d", "concat", "pad", "depthwise_conv2d",
              "reshape", "fully_connected"):
        assert t in types, types
    assert all(graph.tensors[op.outputs[0]].dtype == "int8" for op in graph.ops)
    x = rng.uniform(-1, 1, (50, 3, 8, 8)).astype(np.float32)
    md = graph.metadata
    got = dequantize_output(golden.run(graph, quantize_input(to_ir_layout(x),
                                                             md["input_quant"]))[0],
                            md["output_quant"])
    want = run_ort(qdq, x)[0]
    assert np.abs(got - want).max() <= 4 * md["output_quant"]["scale"] + 1e-6
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.9


def test_qdq_uint8_data_is_shifted_exactly(digits) -> None:
    split, data = digits
    q8 = read_onnx(quantize_qdq(data, split.x_train[:20], activation_type="int8"))
    u8 = read_onnx(quantize_qdq(data, split.x_train[:20], activation_type="uint8"))
    for a, b in zip(q8.ops, u8.ops):
        ta, tb = q8.tensors[a.outputs[0]], u8.tensors[b.outputs[0]]
        assert ta.quant == tb.quant, (a.name, ta.quant, tb.quant)


# -- errors -----------------------------------------------------------------------------------

def _single(op_type, inputs, out_shape, inits=(), name=None, **attrs):
    vis = [_vi(n, s) for n, s in inputs]
    node = helper.make_node(op_type, [n for n, _ in inputs] + [i.name for i in inits], ["y"],
                            name=name or f"/m/{op_type}", **attrs)
    return make_onnx([node], vis, [_vi("y", out_shape)], list(inits))


def _raises(data: bytes, *fragments: str) -> str:
    with pytest.raises(ModelError) as e:
        read_onnx(data, "model.onnx")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("model.onnx: "), msg
    for f in fragments:
        assert f in msg, msg
    return msg


@pytest.mark.parametrize("op_type", ["Sigmoid", "Tanh", "LeakyRelu", "Erf"])
def test_unsupported_op_names_op_and_node(op_type: str) -> None:
    msg = _raises(_single(op_type, [("x", [1, 4])], [1, 4], name=f"/block/{op_type}_3"))
    assert msg == f"model.onnx: unsupported op {op_type} at node '/block/{op_type}_3'"


def test_unsupported_lstm() -> None:
    rng = np.random.default_rng(0)
    inits = [_init("W", rng.standard_normal((1, 16, 3))), _init("R", rng.standard_normal(
        (1, 16, 4)))]
    data = _single("LSTM", [("x", [5, 1, 3])], [5, 1, 1, 4], inits, name="/lstm/LSTM",
                   hidden_size=4)
    assert _raises(data) == "model.onnx: unsupported op LSTM at node '/lstm/LSTM'"


def test_inconsistent_shapes_name_node_and_numbers() -> None:
    w = _init("w", np.ones((3, 5)))
    _raises(_single("Gemm", [("x", [1, 8])], [1, 3], [w], name="/fc/Gemm", transB=1),
            "/fc/Gemm", "8", "5")
    _raises(make_onnx([helper.make_node("Add", ["a", "b"], ["y"], name="/res/Add")],
                      [_vi("a", [1, 3, 4, 4]), _vi("b", [1, 5, 4, 4])], [_vi("y", [1, 5, 4, 4])]),
            "/res/Add", "[1, 3, 4, 4]", "[1, 5, 4, 4]")
    cw = _init("w", np.ones((4, 2, 3, 3)))
    _raises(_single("Conv", [("x", [1, 3, 8, 8])], [1, 4, 6, 6], [cw], name="/c/Conv"),
            "/c/Conv", "3 channels", "expects 2")
    _raises(_single("Relu", [("x", [1, 4])], [1, 5], name="/r/Relu"), "/r/Relu", "[1, 4]",
            "[1, 5]")
    shape = numpy_helper.from_array(np.array([1, 7], np.int64), "s")
    _raises(_single("Reshape", [("x", [1, 12])], [1, 7], [shape], name="/v/Reshape"),
            "/v/Reshape", "12", "[1, 7]")


def test_unsupported_attribute_values() -> None:
    _raises(export_torch(nn.Conv2d(4, 4, 3, groups=2), (1, 4, 6, 6)), "group=2")
    _raises(export_torch(nn.AvgPool2d(3, padding=1, count_include_pad=True), (1, 2, 6, 6)),
            "count_include_pad")
    w = _init("w", np.ones((3, 4)))
    _raises(_single("Gemm", [("x", [1, 4])], [1, 3], [w], transB=1, alpha=2.0), "alpha")


def test_flatten_feeding_non_fc_is_an_error_naming_the_flatten() -> None:
    model = Fn(lambda m, x: torch.softmax(torch.flatten(m.c(x), 1), dim=1), c=nn.Conv2d(3, 2, 1))
    msg = _raises(export_torch(model, (1, 3, 4, 4)), "Flatten", "2x4x4")
    assert "Softmax" in msg
    _raises(export_torch(Fn(lambda m, x: torch.flatten(x, 1)), (1, 3, 4, 4)), "Flatten")


def test_garbage_bytes_are_model_errors(digits) -> None:
    _, data = digits
    _raises(b"\x08\x07\x12garbage", "not a valid ONNX model")
    _raises(b"", "not a valid ONNX model")
    _raises(data[: len(data) // 2], "not a valid ONNX model")
    rng = np.random.default_rng(42)
    outcomes = {"ok": 0, "error": 0}
    for i in range(300):
        b = np.frombuffer(data, np.uint8).copy()
        kind = i % 3
        if kind == 0:
            bad = rng.integers(0, 256, int(rng.integers(1, 2000)), dtype=np.uint8).tobytes()
        elif kind == 1:
            pos = rng.integers(0, len(b), int(rng.integers(1, 8)))
            b[pos] ^= (1 << rng.integers(0, 8, len(pos))).astype(np.uint8)
            bad = b.tobytes()
        else:
            bad = b[: int(rng.integers(0, len(b)))].tobytes()
        try:
            verify(read_onnx(bad, "fuzz.onnx"))
            outcomes["ok"] += 1
        except ModelError as e:
            assert "\n" not in str(e) and str(e).startswith("fuzz.onnx: ")
            outcomes["error"] += 1
    assert outcomes["error"] > 100


def _qdq_cases():
    torch.manual_seed(3)
    return {
        "matmul_add_softmax": (Fn(lambda m, x: torch.softmax(x @ m.w + m.b, dim=1),
                                  w=_param(16, 7), b=_param(7)), (1, 16)),
        "gap_mul_sub": (Fn(lambda m, x: F.adaptive_avg_pool2d(torch.relu(m.c(x)), 1)
                           .flatten(1) * 2.0 - 1.0, c=nn.Conv2d(3, 4, 3)), (1, 3, 6, 6)),
        "relu6_view_linear": (Fn(lambda m, x: m.fc(F.relu6(m.c(x)).view(x.size(0), -1)),
                                 c=nn.Conv2d(3, 4, 3, stride=2), fc=nn.Linear(4 * 3 * 3, 5)),
                              (1, 3, 7, 7)),
        "mul_of_activations": (Fn(lambda m, x: m.c(x) * torch.relu(m.d(x))
                                  + x.mean(dim=(2, 3), keepdim=True),
                                  c=nn.Conv2d(3, 3, 1), d=nn.Conv2d(3, 3, 1)), (1, 3, 6, 6)),
        "concat_requantized_bn": (Fn(lambda m, x: m.bn(torch.cat([m.c(x), x], 2)),
                                     c=nn.Conv2d(3, 3, 1), bn=nn.BatchNorm2d(3)), (1, 3, 6, 6)),
    }


QDQ_CASES = _qdq_cases()


@pytest.mark.parametrize("case", sorted(QDQ_CASES))
def test_qdq_model_agrees_with_onnxruntime(case: str) -> None:
    """int8 layers, requantizing QUANTIZE ops (softmax 1/256, concat inputs, mean) and float
    fallbacks (Sub, a standalone BatchNormalization) all run and match onnxruntime's QDQ run
    to within a couple of output steps."""
    from codegen import golden

    model, shape = QDQ_CASES[case]
    data = export_torch(_randomize(model, 0), shape)
    rng = np.random.default_rng(0)
    qdq = quantize_qdq(data, rng.uniform(-1, 1, (32,) + shape[1:]).astype(np.float32))
    graph = verify(read_onnx(qdq, "case.onnx"))
    md = graph.metadata
    x = rng.uniform(-1, 1, (20,) + shape[1:]).astype(np.float32)
    y = golden.run(graph, quantize_input(to_ir_layout(x), md["input_quant"]))[0]
    oq = md["output_quant"]
    got = from_ir_layout(dequantize_output(y, oq) if oq is not None else y)
    want = run_ort(qdq, x)[0]
    step = oq["scale"] if oq is not None else 0.01
    assert np.abs(got - want).max() <= 2 * step + 1e-6
    for op in graph.ops:
        if op.type == "softmax" and graph.tensors[op.outputs[0]].dtype == "int8":
            q = graph.tensors[op.outputs[0]].quant
            assert (q.s, q.zp) == (np.float32(1 / 256), -128)
        if op.type == "concat" and graph.tensors[op.outputs[0]].dtype == "int8":
            assert all(graph.tensors[i].quant == graph.tensors[op.outputs[0]].quant
                       for i in op.inputs)


def test_qdq_float_bias_is_quantized_half_away_from_zero() -> None:
    """A QDQ conv whose bias is a float initializer: int32 with scale s_in * s_w[c]."""
    s_in, s_out = np.float32(0.5), np.float32(0.1)
    s_w = np.array([0.25, 0.125], np.float32)          # exact binary fractions: real ties
    wq = np.array([[[[1, -2], [3, 4]]], [[[-5, 6], [7, -8]]]], np.int8)      # (2, 1, 2, 2)
    bias = np.array([0.3125, -0.15625], np.float32)     # +2.5 and -2.5 steps of s_in * s_w
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (np.array(s_in), "s_in"), (np.array(0, np.int8), "z"), (wq, "wq"), (s_w, "s_w"),
        (np.zeros(2, np.int8), "z_w"), (bias, "b"), (np.array(s_out), "s_out")]]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s_in", "z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "s_w", "z_w"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd", "b"], ["c"], name="/conv"),
        helper.make_node("QuantizeLinear", ["c", "s_out", "z"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "s_out", "z"], ["y"]),
    ]
    graph = verify(read_onnx(make_onnx(nodes, [_vi("x", [1, 1, 3, 3])],
                                       [_vi("y", [1, 2, 2, 2])], inits)))
    conv = graph.ops[0]
    b = graph.tensors[conv.inputs[2]]
    assert b.dtype == "int32" and b.quant.axis == 0
    np.testing.assert_array_equal(b.quant.scale, s_in * s_w)
    np.testing.assert_array_equal(b.data, [3, -3])          # np.rint would give 2, -2
    w = graph.tensors[conv.inputs[1]]
    np.testing.assert_array_equal(w.data, wq.transpose(0, 2, 3, 1))
    assert graph.metadata["input_quant"] == {"scale": float(s_in), "zero_point": 0}
    assert graph.metadata["output_quant"] == {"scale": float(s_out), "zero_point": 0}


def test_constant_folding_refuses_huge_tensors() -> None:
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="/big"),
             helper.make_node("Add", ["x", "c"], ["y"], name="/add")]
    _raises(make_onnx(nodes, [_vi("x", [1, 4])], [_vi("y", [1, 4])], [shape]), "/big",
            "too many elements")
    nodes = [helper.make_node("RandomNormal", [], ["c"], name="/rnd", shape=[1, 4]),
             helper.make_node("Add", ["x", "c"], ["y"], name="/add")]
    _raises(make_onnx(nodes, [_vi("x", [1, 4])], [_vi("y", [1, 4])]),
            "unsupported op RandomNormal at node '/rnd'")


def test_outputs_sharing_a_tensor_and_input_as_output() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="/relu"),
             helper.make_node("Identity", ["r"], ["y1"]),
             helper.make_node("Identity", ["r"], ["y2"])]
    data = make_onnx(nodes, [_vi("x", [1, 3, 2, 2])],
                     [_vi("y1", [1, 3, 2, 2]), _vi("y2", [1, 3, 2, 2]), _vi("x", [1, 3, 2, 2])])
    graph = verify(read_onnx(data))
    assert graph.outputs == ["y1", "y1", "x"]
    assert graph.metadata["output_layouts"] == {"y1": "NHWC", "x": "NHWC"}
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2)).astype(np.float32)
    for got, want in zip(golden_float(graph, x), run_ort(data, x)):
        np.testing.assert_allclose(got, want)


def test_qdq_conv_with_float_weight_gets_symmetric_int8_weights() -> None:
    from codegen import golden

    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32) * 0.3
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (np.array(0.02, np.float32), "s_in"), (np.array(0, np.int8), "z"), (w, "w"),
        (np.array(0.05, np.float32), "s_out")]]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s_in", "z"], ["xd"]),
        helper.make_node("Conv", ["xd", "w"], ["c"], name="/conv", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "s_out", "z"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "s_out", "z"], ["y"]),
    ]
    data = make_onnx(nodes, [_vi("x", [1, 2, 5, 5])], [_vi("y", [1, 3, 5, 5])], inits)
    graph = verify(read_onnx(data))
    conv = graph.ops[0]
    wt = graph.tensors[conv.inputs[1]]
    assert conv.type == "conv2d" and wt.dtype == "int8" and wt.quant.axis == 0
    assert np.all(np.abs(wt.data).max(axis=(1, 2, 3)) == 127)
    x = rng.uniform(-1, 1, (4, 2, 5, 5)).astype(np.float32)
    md = graph.metadata
    got = dequantize_output(golden.run(graph, quantize_input(to_ir_layout(x),
                                                             md["input_quant"]))[0],
                            md["output_quant"])
    assert np.abs(from_ir_layout(got) - run_ort(data, x)[0]).max() <= 2 * 0.05 + 1e-6
