"""Post-training quantization: parameter rules (unit tests) and end-to-end acceptance on the
MLPerf Tiny KWS float model and the digits CNN (golden int8 == TFLM bit for bit, accuracy)."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.errors import PockError
from codegen.ir import Graph, Op, QuantParams, Role, Tensor
from codegen.quant import activation_params, quantize, round_half_away, weight_params
from tests.quant.conftest import MODELS_DIR
from tests.quant.graphs import GraphBuilder, cnn_weights

KWS_FLOAT = MODELS_DIR / "kws_ref_model_float32.tflite"


def _calib(rng: np.random.Generator, shape: tuple[int, ...], n: int = 16,
           lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return rng.uniform(lo, hi, (n, *shape[1:])).astype(np.float32)


def _float_values(graph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of the float graph over a batch (golden model)."""
    from codegen.golden import execute

    return execute(graph, {graph.inputs[0]: x}, keep_all=True)


def _q(graph: Graph, name: str) -> QuantParams:
    q = graph.tensors[name].quant
    assert q is not None, name
    return q


def _expected_act(lo: float, hi: float) -> tuple[np.float32, int]:
    """TFLite GetAsymmetricQuantizationParams, written out independently."""
    lo, hi = np.float32(min(lo, 0.0)), np.float32(max(hi, 0.0))
    scale = np.float32((hi - lo) / np.float32(255.0))
    zp = float(np.float32(np.float32(-128.0) - lo / scale))
    return scale, int(np.clip(np.sign(zp) * np.floor(abs(zp) + 0.5), -128, 127))


# -- parameter rules -----------------------------------------------------------------------------

def test_activation_params_tflite_rule():
    for lo, hi in [(-1.0, 3.0), (0.0, 6.0), (-0.37, 0.0), (-5.5, 2.25), (-100.0, 0.001)]:
        q = activation_params(lo, hi)
        scale, zp = _expected_act(lo, hi)
        assert q.scale.dtype == np.float32 and q.s == scale and q.zp == zp
        assert q.axis is None
        # real 0.0 is exactly representable, and the range is covered to within one step
        assert -128 <= q.zp <= 127
        assert q.s * (-128 - q.zp) <= min(lo, 0.0) + q.s
        assert q.s * (127 - q.zp) >= max(hi, 0.0) - q.s
    # the range always includes 0
    assert activation_params(2.0, 5.0) == activation_params(0.0, 5.0)
    assert activation_params(-5.0, -2.0) == activation_params(-5.0, 0.0)
    # an empty range (all zeros) gives a usable, finite scale
    q = activation_params(0.0, 0.0)
    assert np.isfinite(q.s) and q.s > 0 and q.zp == -128


def test_round_half_away_from_zero():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997])
    assert round_half_away(x).tolist() == [1, 2, 3, -1, -2, -3, 0, 0]


@pytest.mark.parametrize("per_channel", [True, False])
def test_weight_scales_per_channel(rng, per_channel):
    b = GraphBuilder((1, 6, 6, 3))
    w_conv = cnn_weights(rng, 3, 4) * np.array([1, 10, 0.1, 3], np.float32)[:, None, None, None]
    h = b.conv(b.x, w_conv, rng.standard_normal(4).astype(np.float32), "relu")
    w_dw = (rng.standard_normal((1, 3, 3, 8)) * np.linspace(0.1, 2, 8)).astype(np.float32)
    h = b.dwconv(h, w_dw, rng.standard_normal(8).astype(np.float32))
    h = b.reshape(h, (1, 6 * 6 * 8))
    w_fc = (rng.standard_normal((5, 288)) * np.linspace(0.01, 1, 5)[:, None]).astype(np.float32)
    out = b.fc(h, w_fc, rng.standard_normal(5).astype(np.float32))
    g = b.build(out)
    q = quantize(g, _calib(rng, (1, 6, 6, 3)), per_channel=per_channel)

    for op, w, axis in zip(q.ops[:2] + [q.ops[3]], (w_conv, w_dw, w_fc), (0, 3, 0)):
        wt = q.tensors[op.inputs[1]]
        assert wt.dtype == "int8" and wt.role == Role.WEIGHT
        moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
        if per_channel:
            assert wt.quant.axis == axis
            expect = (np.abs(moved).max(1) / np.float32(127)).astype(np.float32)
        else:
            assert wt.quant.axis is None
            expect = np.array([np.abs(w).max() / np.float32(127)], np.float32)
        np.testing.assert_array_equal(wt.quant.scale, expect)
        assert np.all(wt.quant.zero_point == 0)
        assert wt.data.min() >= -127 and wt.data.max() <= 127
        shape = [1] * w.ndim
        if per_channel:
            shape[axis] = -1
        scale = expect.reshape(shape).astype(np.float64)
        np.testing.assert_array_equal(wt.data, round_half_away(w / scale))
        # each channel's largest weight maps to +-127
        qm = np.abs(np.moveaxis(wt.data, axis, 0).reshape(w.shape[axis], -1)).max(1)
        assert (qm == 127).all() if per_channel else qm.max() == 127


def test_bias_scale_is_input_times_weight_scale(rng):
    b = GraphBuilder((1, 5, 5, 2))
    bias = (rng.standard_normal(3) * 2).astype(np.float32)
    h = b.conv(b.x, cnn_weights(rng, 2, 3), bias, "relu")
    h = b.reshape(h, (1, 75))
    fc_bias = rng.standard_normal(4).astype(np.float32)
    out = b.fc(h, (rng.standard_normal((4, 75)) * 0.1).astype(np.float32), fc_bias)
    g = b.build(out)
    q = quantize(g, _calib(rng, (1, 5, 5, 2)))
    for op, bf in zip((q.ops[0], q.ops[2]), (bias, fc_bias)):
        s_in = _q(q, op.inputs[0]).s
        wq = _q(q, op.inputs[1])
        bt = q.tensors[op.inputs[2]]
        assert bt.dtype == "int32" and bt.role == Role.BIAS
        expect = (np.float32(s_in) * wq.scale).astype(np.float32)
        np.testing.assert_array_equal(bt.quant.scale, expect)
        assert bt.quant.axis == 0 and np.all(bt.quant.zero_point == 0)
        np.testing.assert_array_equal(bt.data, round_half_away(bf / expect.astype(np.float64)))


def test_missing_bias_becomes_zero_int32_bias(rng):
    b = GraphBuilder((1, 4, 4, 2))
    out = b.conv(b.x, cnn_weights(rng, 2, 3), None)
    q = quantize(b.build(out), _calib(rng, (1, 4, 4, 2)))
    bt = q.tensors[q.ops[0].inputs[2]]
    assert bt.dtype == "int32" and bt.shape == (3,) and not bt.data.any()


def test_bias_saturates_int32(rng):
    b = GraphBuilder((1, 4))
    w = np.full((2, 4), 1e-3, np.float32)
    out = b.fc(b.x, w, np.array([1e9, -1e9], np.float32))
    q = quantize(b.build(out), _calib(rng, (1, 4)))
    assert q.tensors[q.ops[0].inputs[2]].data.tolist() == [2**31 - 1, -(2**31 - 1)]


def test_zero_weight_channels_and_zero_ranges(rng):
    b = GraphBuilder((1, 4, 4, 2))
    w = cnn_weights(rng, 2, 3)
    w[1] = 0.0                                      # a dead output channel
    bias = np.array([0.1, 0.5, -0.2], np.float32)  # ... with a non-zero bias
    h = b.conv(b.x, w, bias)
    out = b.conv(h, np.zeros((2, 3, 3, 3), np.float32), np.zeros(2, np.float32), "relu")
    g = b.build(out)
    with np.errstate(all="raise"):
        q = quantize(g, _calib(rng, (1, 4, 4, 2)))
    wq = _q(q, q.ops[0].inputs[1])
    assert np.all(np.isfinite(wq.scale)) and np.all(wq.scale > 0)
    assert wq.scale[1] == 1.0 and not q.tensors[q.ops[0].inputs[1]].data[1].any()
    bt = q.tensors[q.ops[0].inputs[2]]
    s_in = _q(q, q.ops[0].inputs[0]).s
    assert bt.data[1] == round_half_away(0.5 / np.float32(s_in * np.float32(1.0)))
    # all-zero weights; the output is always 0 -> empty range, still a finite positive scale
    w2 = _q(q, q.ops[1].inputs[1])
    assert np.all(w2.scale == 1.0)
    oq = _q(q, out)
    assert np.isfinite(oq.s) and oq.s > 0 and oq.zp == -128
    # calibration data that is all zeros
    q0 = quantize(g, np.zeros((4, 4, 4, 2), np.float32))
    iq = _q(q0, q0.inputs[0])
    assert np.isfinite(iq.s) and iq.s > 0 and -128 <= iq.zp <= 127


def test_fused_relu_ranges_from_post_activation_values(rng):
    w = cnn_weights(rng, 2, 3)
    bias = np.array([-0.3, 0.2, 0.0], np.float32)
    calib = _calib(rng, (1, 5, 5, 2), n=20)
    outs = {}
    for act in ("none", "relu", "relu6"):
        b = GraphBuilder((1, 5, 5, 2))
        outs[act] = (b.build(b.conv(b.x, w * 4, bias, act)))
    vals = _float_values(outs["none"], calib)[outs["none"].outputs[0]]
    assert vals.min() < 0 and vals.max() > 6      # the test needs both sides
    q_none = quantize(outs["none"], calib)
    assert _q(q_none, q_none.outputs[0]) == activation_params(vals.min(), vals.max())
    q_relu = quantize(outs["relu"], calib)
    assert _q(q_relu, q_relu.outputs[0]) == activation_params(0.0, vals.max())
    assert _q(q_relu, q_relu.outputs[0]).zp == -128
    q_relu6 = quantize(outs["relu6"], calib)
    assert _q(q_relu6, q_relu6.outputs[0]) == activation_params(0.0, 6.0)


def test_standalone_relu_is_fused_into_producer(rng):
    b = GraphBuilder((1, 4, 4, 2))
    h = b.conv(b.x, cnn_weights(rng, 2, 3), np.zeros(3, np.float32))
    out = b.op("relu", [h], b.shape(h))
    g = b.build(out)
    q = quantize(g, _calib(rng, (1, 4, 4, 2)))
    assert [op.type for op in q.ops] == ["conv2d"]
    assert q.ops[0].attrs["activation"] == "relu" and q.ops[0].outputs == (out,)
    assert _q(q, out).zp == -128


def test_standalone_relu_kept_when_producer_output_is_shared(rng):
    b = GraphBuilder((1, 4, 4, 2))
    h = b.conv(b.x, cnn_weights(rng, 2, 2), np.zeros(2, np.float32))
    r = b.op("relu", [h], b.shape(h))
    out = b.op("add", [h, r], b.shape(h), activation="none")
    q = quantize(b.build(out), _calib(rng, (1, 4, 4, 2)))
    assert [op.type for op in q.ops] == ["conv2d", "relu", "add"]
    assert _q(q, h).zp > -128 and _q(q, r).zp == -128


def test_shared_params_reshape_maxpool_avgpool_pad(rng):
    b = GraphBuilder((1, 8, 8, 2))
    h = b.conv(b.x, cnn_weights(rng, 2, 4), np.zeros(4, np.float32))
    p = b.pool("max_pool2d", h)
    a = b.pool("avg_pool2d", p)
    pd = b.op("pad", [a], (1, 4, 4, 4), pads=((0, 0), (1, 1), (1, 1), (0, 0)))
    r = b.reshape(pd, (1, 64))
    out = b.fc(r, (rng.standard_normal((3, 64)) * 0.1).astype(np.float32), None)
    g = b.build(out)
    calib = _calib(rng, (1, 8, 8, 2))
    q = quantize(g, calib)
    vals = _float_values(g, calib)[h]
    for name in (p, a, pd, r):
        assert _q(q, name) == _q(q, h), name
    assert _q(q, h) == activation_params(vals.min(), vals.max())
    assert _q(q, out) != _q(q, h)


def test_concat_inputs_share_output_params(rng):
    b = GraphBuilder((1, 4, 4, 2))
    h1 = b.conv(b.x, cnn_weights(rng, 2, 3), np.zeros(3, np.float32), "relu")
    h2 = b.conv(b.x, cnn_weights(rng, 2, 2) * 5, np.ones(2, np.float32))
    c = b.op("concat", [h1, h2, b.x], (1, 4, 4, 7), axis=3, activation="none")
    g = b.build(c)
    calib = _calib(rng, (1, 4, 4, 2))
    q = quantize(g, calib)
    vals = _float_values(g, calib)
    lo = min(vals[n].min() for n in (h1, h2, "in0"))
    hi = max(vals[n].max() for n in (h1, h2, "in0"))
    expect = activation_params(lo, hi)
    for name in (h1, h2, "in0", c):
        assert _q(q, name) == expect, name
    assert q.metadata["input_quant"] == {"scale": expect.s, "zero_point": expect.zp}


def test_concat_of_pinned_softmax_output_gets_requantize(rng):
    b = GraphBuilder((1, 6))
    s = b.op("softmax", [b.x], (1, 6), beta=1.0)
    h = b.fc(b.x, (rng.standard_normal((4, 6)) * 2).astype(np.float32), None)
    c = b.op("concat", [s, h], (1, 10), axis=1, activation="none")
    q = quantize(b.build(c), _calib(rng, (1, 6)))
    assert [op.type for op in q.ops] == ["softmax", "fully_connected", "quantize", "concat"]
    rq = q.ops[2]
    assert rq.inputs == (s,) and q.ops[3].inputs[0] == rq.outputs[0]
    assert _q(q, s).s == np.float32(1 / 256)
    assert _q(q, rq.outputs[0]) == _q(q, c) == _q(q, h)


def test_softmax_output_params(rng):
    b = GraphBuilder((1, 10))
    h = b.fc(b.x, (rng.standard_normal((12, 10))).astype(np.float32), None)
    out = b.op("softmax", [h], (1, 12), beta=1.0)
    q = quantize(b.build(out), _calib(rng, (1, 10)))
    oq = _q(q, out)
    assert oq.scale.dtype == np.float32 and oq.s == np.float32(1.0 / 256) and oq.zp == -128
    assert q.metadata["output_quant"] == {"scale": 1.0 / 256, "zero_point": -128}
    assert _q(q, h).s != oq.s


def test_int8_io_no_quantize_ops_and_metadata(rng):
    b = GraphBuilder((1, 4, 4, 2))
    h = b.conv(b.x, cnn_weights(rng, 2, 3), np.zeros(3, np.float32), "relu")
    out = b.reshape(b.pool("avg_pool2d", h), (1, 12))
    g = b.build(out)
    calib = _calib(rng, (1, 4, 4, 2), lo=0.0, hi=2.0)
    q = quantize(g, calib)
    assert all(op.type not in ("quantize", "dequantize") for op in q.ops)
    for name in q.inputs + q.outputs:
        assert q.tensors[name].dtype == "int8"
    for t in q.tensors.values():
        assert t.dtype in ("int8", "int32"), t.name
        assert t.quant is not None, t.name
    iq = _q(q, q.inputs[0])
    assert q.metadata["input_quant"] == {"scale": iq.s, "zero_point": iq.zp}
    assert iq == activation_params(calib.min(), calib.max())      # from calibration
    assert q.metadata["output_quant"]["zero_point"] == _q(q, out).zp
    assert g.tensors[g.inputs[0]].dtype == "float32"     # input graph untouched


def _every_op_graph(rng: np.random.Generator) -> Graph:
    """Every op the quantizer supports, incl. a standalone relu it cannot fuse and a concat
    with a pinned softmax input (requantized)."""
    b = GraphBuilder((1, 8, 8, 3))
    h = b.conv(b.x, cnn_weights(rng, 3, 8), rng.standard_normal(8).astype(np.float32) * 0.1,
               "relu")
    d = b.dwconv(h, (rng.standard_normal((1, 3, 3, 8)) * 0.3).astype(np.float32),
                 np.zeros(8, np.float32), "relu6")
    s = b.op("add", [h, d], b.shape(h), activation="none")
    m = b.op("mul", [s, h], b.shape(h), activation="none")
    r = b.op("relu", [s], b.shape(h))
    m = b.op("add", [m, r], b.shape(h), activation="none")
    p = b.pool("max_pool2d", m)
    a = b.pool("avg_pool2d", p)
    sm = b.op("softmax", [a], b.shape(a), beta=1.0)
    cat = b.op("concat", [a, sm], (1, 2, 2, 16), axis=3, activation="none")
    pd = b.op("pad", [cat], (1, 4, 4, 16), pads=((0, 0), (1, 1), (1, 1), (0, 0)))
    mean = b.op("mean", [pd], (1, 16), axes=(1, 2), keep_dims=False)
    f = b.fc(mean, (rng.standard_normal((10, 16)) * 0.3).astype(np.float32),
             np.zeros(10, np.float32))
    return b.build(b.op("softmax", [f], (1, 10), beta=1.0))


@pytest.mark.parametrize("per_channel", [True, False])
def test_every_op_int8_tracks_float_and_matches_tflm(rng, per_channel):
    from codegen.golden import run

    g = _every_op_graph(rng)
    calib = _calib(rng, (1, 8, 8, 3), n=32)
    q = quantize(g, calib, per_channel=per_channel)
    assert [op.type for op in q.ops] == [
        "conv2d", "depthwise_conv2d", "add", "mul", "relu", "add", "max_pool2d", "avg_pool2d",
        "softmax", "quantize", "concat", "pad", "mean", "fully_connected", "softmax"]
    iq, oq = q.metadata["input_quant"], q.metadata["output_quant"]
    ref = _float_values(g, calib)[g.outputs[0]]
    y = run(q, _quantize_input(calib, iq))[0]
    err = np.abs((y.astype(np.float32) - oq["zero_point"]) * oq["scale"] - ref).max()
    assert err < 0.06, err

    pytest.importorskip("tflite_micro")
    from codegen.frontend.tflite_writer import write_tflite

    xs = np.concatenate([_quantize_input(calib, iq),
                         rng.integers(-128, 128, (100, 8, 8, 3)).astype(np.int8)])
    tflm = _tflm_outputs(write_tflite(q), xs)
    gold = _golden_outputs(q, xs)
    assert int(np.any(tflm != gold, axis=1).sum()) == 0


def test_two_input_graph_list_and_dict_calibration(rng):
    b = GraphBuilder((1, 6), (1, 6))
    s = b.op("add", ["in0", "in1"], (1, 6), activation="relu")
    g = b.build(s)
    a0, a1 = _calib(rng, (1, 6), lo=-1, hi=1), _calib(rng, (1, 6), lo=-3, hi=3)
    q = quantize(g, [a0, a1])
    assert _q(q, "in0") == activation_params(a0.min(), a0.max())
    assert _q(q, "in1") == activation_params(a1.min(), a1.max())
    assert [d["scale"] for d in q.metadata["inputs_quant"]] == [_q(q, "in0").s, _q(q, "in1").s]
    q2 = quantize(g, {"in1": a1, "in0": a0})
    assert _q(q2, s) == _q(q, s)
    with pytest.raises(PockError, match="2 inputs"):
        quantize(g, [a0])


# -- errors and unusual inputs -----------------------------------------------------------------

def test_wrong_calibration_shape_names_expected_and_given(rng):
    b = GraphBuilder((1, 4, 4, 2))
    g = b.build(b.conv(b.x, cnn_weights(rng, 2, 3), None))
    with pytest.raises(PockError, match=r"\[10, 4, 4, 3\].*expected \[N, 4, 4, 2\]"):
        quantize(g, np.zeros((10, 4, 4, 3), np.float32))
    with pytest.raises(PockError, match=r"\[10, 2, 4, 4\].*expected \[N, 4, 4, 2\]"):
        quantize(g, np.zeros((10, 2, 4, 4), np.float32))
    with pytest.raises(PockError, match="no samples"):
        quantize(g, np.zeros((0, 4, 4, 2), np.float32))
    with pytest.raises(PockError, match="NaN"):
        quantize(g, np.full((2, 4, 4, 2), np.nan, np.float32))
    # one sample without the batch axis, or a list of samples, is accepted
    quantize(g, np.zeros((4, 4, 2), np.float32))
    quantize(g, [np.zeros((4, 4, 2), np.float32)] * 3)


def test_nchw_hint_for_onnx_models(rng):
    b = GraphBuilder((1, 8, 8, 1))
    g = b.build(b.conv(b.x, cnn_weights(rng, 1, 2), None))
    g.metadata["input_layout"] = "NCHW"
    with pytest.raises(PockError, match="NHWC"):
        quantize(g, np.zeros((5, 1, 8, 8), np.float32))


def test_already_quantized_model_is_rejected(rng):
    b = GraphBuilder((1, 4, 4, 2))
    g = b.build(b.conv(b.x, cnn_weights(rng, 2, 3), None))
    q = quantize(g, _calib(rng, (1, 4, 4, 2)))
    with pytest.raises(PockError, match="already quantized"):
        quantize(q, _calib(rng, (1, 4, 4, 2)))


def test_non_constant_weight_is_rejected_naming_op(rng):
    g = Graph("t")
    g.add_tensor(Tensor("x", (1, 4), "float32"))
    g.add_tensor(Tensor("w", (3, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 3), "float32"))
    g.add_op(Op("fully_connected", "fc_dyn", ("x", "w"), ("y",),
                {"activation": "none", "keep_num_dims": False}))
    g.inputs, g.outputs = ["x", "w"], ["y"]
    with pytest.raises(PockError, match=r"fc_dyn.*fully_connected.*not a constant"):
        quantize(g, [np.zeros((2, 1, 4), np.float32), np.zeros((2, 3, 4), np.float32)])


def test_concat_with_fused_activation_is_rejected(rng):
    b = GraphBuilder((1, 4))
    c = b.op("concat", [b.x, b.x], (1, 8), axis=1, activation="relu")
    with pytest.raises(PockError, match=r"concat.*relu"):
        quantize(b.build(c), _calib(rng, (1, 4)))


def test_quantize_dequantize_pairs_pin_params_and_fold(rng):
    """A float graph with fake-quant (QUANTIZE->DEQUANTIZE) on an activation and int8 weights
    behind a DEQUANTIZE: the pair's parameters are kept, the weights are folded."""
    b = GraphBuilder((1, 4, 4, 2))
    pinned = QuantParams(np.array([0.05], np.float32), np.array([3], np.int64))
    xq = b.op("quantize", [b.x], (1, 4, 4, 2), out_dtype="int8", out_quant=pinned)
    xd = b.op("dequantize", [xq], (1, 4, 4, 2))
    w = cnn_weights(rng, 2, 3)
    wqp = weight_params(w, 0)
    w_int8 = b.const(np.clip(np.round(w / wqp.scale[:, None, None, None]), -127, 127),
                     Role.WEIGHT, "int8", wqp)
    wd = b.op("dequantize", [w_int8], w.shape)
    out = b.op("conv2d", [xd, wd, ""], (1, 4, 4, 3), stride=(1, 1), dilation=(1, 1),
               padding=(1, 1, 1, 1), activation="none")
    q = quantize(b.build(out), _calib(rng, (1, 4, 4, 2)))
    assert [op.type for op in q.ops] == ["conv2d"]
    assert _q(q, q.inputs[0]) == pinned
    assert q.metadata["input_quant"] == {"scale": np.float32(0.05), "zero_point": 3}
    wt = q.tensors[q.ops[0].inputs[1]]
    np.testing.assert_array_equal(wt.quant.scale, wqp.scale)


def test_dequantize_of_int8_activation_is_rejected(rng):
    g = Graph("t")
    qp = QuantParams(np.array([0.1], np.float32), np.array([0], np.int64))
    g.add_tensor(Tensor("x", (1, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 4), "float32"))
    g.add_tensor(Tensor("c", (1, 4), "int8", Role.CONSTANT, qp, np.zeros((1, 4))))
    g.add_tensor(Tensor("a", (1, 4), "int8", quant=qp))
    g.add_tensor(Tensor("z", (1, 4), "float32"))
    g.add_op(Op("add", "add_i8", ("c", "c"), ("a",), {"activation": "none"}))
    g.add_op(Op("dequantize", "dq", ("a",), ("z",)))
    g.add_op(Op("add", "add_f", ("x", "z"), ("y",), {"activation": "none"}))
    g.inputs, g.outputs = ["x"], ["y"]
    with pytest.raises(PockError, match=r"'dq' \(dequantize\).*partly quantized"):
        quantize(g, _calib(rng, (1, 4)))


# -- acceptance: KWS (MLPerf Tiny DS-CNN, float) -------------------------------------------------

def _kws_features(rng: np.random.Generator, n: int) -> np.ndarray:
    """Synthetic MFCC-like features (the dataset is not available): the int8 reference model's
    input range is about [-123, 26]; use smooth per-coefficient offsets plus noise."""
    base = np.linspace(-40.0, 5.0, 10, dtype=np.float32)[None, None, :, None]
    smooth = np.cumsum(rng.standard_normal((n, 49, 1, 1)), axis=1) * 2.0
    noise = rng.standard_normal((n, 49, 10, 1)) * 12.0
    return np.clip(base + smooth + noise, -120.0, 25.0).astype(np.float32)


def _tflm_outputs(model_bytes: bytes, xs: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model_bytes)
    outs = []
    for x in xs:
        interp.set_input(x[None], 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0)))
    return np.concatenate(outs)


def _golden_outputs(graph: Graph, xs: np.ndarray) -> np.ndarray:
    from codegen.golden import run

    return np.asarray(run(graph, xs)[0])


def _quantize_input(x: np.ndarray, qd: dict) -> np.ndarray:
    v = round_half_away(x.astype(np.float64) / qd["scale"]) + qd["zero_point"]
    return np.clip(v, -128, 127).astype(np.int8)


@pytest.fixture(scope="module")
def kws_quantized():
    if not KWS_FLOAT.exists():
        pytest.skip(f"{KWS_FLOAT} not present (shared MLPerf Tiny models directory)")
    pytest.importorskip("tflite_micro")
    from codegen.frontend.tflite_reader import read_tflite

    g = read_tflite(KWS_FLOAT.read_bytes(), str(KWS_FLOAT))
    rng = np.random.default_rng(1)
    calib = _kws_features(rng, 100)
    return g, quantize(g, calib), rng


def test_kws_golden_int8_equals_tflm_bit_for_bit(kws_quantized):
    from codegen.frontend.tflite_writer import write_tflite

    _, q, _ = kws_quantized
    data = write_tflite(q)
    rng = np.random.default_rng(2)
    xs = np.concatenate([   # 200 uniform random int8 inputs + 100 feature-like ones
        rng.integers(-128, 128, (200, 49, 10, 1)).astype(np.int8),
        _quantize_input(_kws_features(rng, 100), q.metadata["input_quant"])])
    tflm = _tflm_outputs(data, xs)
    gold = _golden_outputs(q, xs)
    assert tflm.dtype == gold.dtype == np.int8
    mismatched = int(np.any(tflm != gold, axis=1).sum())
    assert mismatched == 0, f"{mismatched} of {len(xs)} inputs differ"


def test_kws_int8_tracks_float(kws_quantized):
    g, q, _ = kws_quantized
    xs = _kws_features(np.random.default_rng(3), 100)
    ref = _float_values(g, xs)[g.outputs[0]]
    out = _golden_outputs(q, _quantize_input(xs, q.metadata["input_quant"]))
    oq = q.metadata["output_quant"]
    prob = (out.astype(np.float32) - oq["zero_point"]) * oq["scale"]
    agree = float((prob.argmax(1) == ref.argmax(1)).mean())
    print(f"KWS int8 vs float: argmax agreement {agree:.3f}, "
          f"max |prob diff| {np.abs(prob - ref).max():.4f}")
    assert agree >= 0.8
    assert np.abs(prob - ref).mean() < 0.05


# -- acceptance: digits CNN (PyTorch -> ONNX -> IR) ----------------------------------------------

@pytest.fixture(scope="module")
def digits_quantized(trained_digits):
    from codegen.frontend.onnx_reader import read_onnx
    from tests.digits_cnn import nchw_to_nhwc

    g = read_onnx(trained_digits.onnx_bytes, "digits_cnn.onnx")
    calib = nchw_to_nhwc(trained_digits.split.x_train[:100])
    q = quantize(g, calib)
    x_test = _quantize_input(nchw_to_nhwc(trained_digits.split.x_test), q.metadata["input_quant"])
    return g, q, x_test


def test_digits_int8_accuracy_within_one_point_of_float(trained_digits, digits_quantized):
    _, q, x_test = digits_quantized
    y = trained_digits.split.y_test
    pred = _golden_outputs(q, x_test).argmax(1)
    acc = float((pred == y).mean())
    print(f"digits: float accuracy {trained_digits.float_accuracy:.4f}, int8 accuracy {acc:.4f} "
          f"({len(y)} test samples)")
    assert acc >= trained_digits.float_accuracy - 0.01


def test_digits_tflm_equals_golden_on_test_split(digits_quantized):
    pytest.importorskip("tflite_micro")
    from codegen.frontend.tflite_writer import write_tflite

    _, q, x_test = digits_quantized
    tflm = _tflm_outputs(write_tflite(q), x_test)
    gold = _golden_outputs(q, x_test)
    mismatched = int(np.any(tflm != gold, axis=1).sum())
    assert mismatched == 0, f"{mismatched} of {len(x_test)} test inputs differ"
