"""Golden int8 kernels vs direct loop transcriptions of TFLM's reference kernels.

These cover what single-op TFLite files cannot express directly (arbitrary explicit and
asymmetric padding for every windowed op, grouped convolution) on small random shapes.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen import golden
from codegen.ir import QuantParams, Role, Tensor, conv_out_size
from tests.frontend.single_op import single_op_graph

from .test_numerics import ref_mbqm, ref_quantize_multiplier, trunc_div


def _rha(v: float) -> int:
    a = abs(v)
    r = math.floor(a) + (1 if a - math.floor(a) >= 0.5 else 0)
    return int(math.copysign(r, v))


def ref_act_range(act: str, s: float, zp: int) -> tuple[int, int]:
    q = lambda f: zp + _rha(float(np.float32(f) / np.float32(s)))
    lo, hi = -128, 127
    if act in ("relu", "relu6"):
        lo = max(lo, q(0.0))
    if act == "relu6":
        hi = min(hi, q(6.0))
    if act == "relu_n1_to_1":
        lo, hi = max(lo, q(-1.0)), min(hi, q(1.0))
    return lo, hi


def naive_conv(x, w, b, zp_in, mults, zp_out, lo, hi, stride, dilation, pad, out_hw,
               depthwise: bool, depth_multiplier: int = 1) -> np.ndarray:
    n, h, wd, c = x.shape
    if depthwise:
        _, kh, kw, o = w.shape
    else:
        o, kh, kw, ci = w.shape
    oh, ow = out_hw
    out = np.zeros((n, oh, ow, o), dtype=np.int8)
    for b_ in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for oc in range(o):
                    acc = 0
                    for fy in range(kh):
                        for fx in range(kw):
                            iy = oy * stride[0] - pad[0] + dilation[0] * fy
                            ix = ox * stride[1] - pad[2] + dilation[1] * fx
                            if not (0 <= iy < h and 0 <= ix < wd):
                                continue
                            if depthwise:
                                ic = oc // depth_multiplier
                                acc += int(w[0, fy, fx, oc]) * (int(x[b_, iy, ix, ic]) - zp_in)
                            else:
                                g = oc // (o // (c // ci))
                                for k in range(ci):
                                    acc += int(w[oc, fy, fx, k]) * (
                                        int(x[b_, iy, ix, g * ci + k]) - zp_in)
                    if b is not None:
                        acc += int(b[oc])
                    m, s = mults[oc]
                    v = ref_mbqm(acc, m, s) + zp_out
                    out[b_, oy, ox, oc] = min(max(v, lo), hi)
    return out


@st.composite
def window_params(draw):
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    oh = conv_out_size(h, kh, stride[0], dilation[0], pad[0], pad[1])
    ow = conv_out_size(w, kw, stride[1], dilation[1], pad[2], pad[3])
    if oh < 1 or ow < 1:
        pad = (pad[0], pad[1] + 2 * kh * 2, pad[2], pad[3] + 2 * kw * 2)
        oh = conv_out_size(h, kh, stride[0], dilation[0], pad[0], pad[1])
        ow = conv_out_size(w, kw, stride[1], dilation[1], pad[2], pad[3])
    act = draw(st.sampled_from(["none", "relu", "relu6", "relu_n1_to_1"]))
    seed = draw(st.integers(0, 2**31))
    return (h, w), (kh, kw), stride, dilation, pad, (oh, ow), act, seed


def _quant_tensors(rng, x_shape, y_shape, w_shape, w_axis, n_out, bias: bool):
    s_in, zp_in = float(rng.uniform(0.005, 0.1)), int(rng.integers(-128, 128))
    s_out, zp_out = float(rng.uniform(0.01, 0.3)), int(rng.integers(-128, 128))
    w_scales = rng.uniform(0.001, 0.05, size=n_out).astype(np.float32)
    x = Tensor("x", x_shape, "int8", Role.ACTIVATION, QuantParams(np.float32(s_in), zp_in))
    w = Tensor("w", w_shape, "int8", Role.WEIGHT,
               QuantParams(w_scales, np.zeros(n_out, np.int64), w_axis),
               rng.integers(-127, 128, size=w_shape, dtype=np.int8))
    b = None
    if bias:
        b = Tensor("b", (n_out,), "int32", Role.BIAS,
                   QuantParams((np.float32(s_in) * w_scales).astype(np.float32),
                               np.zeros(n_out, np.int64), 0),
                   rng.integers(-5000, 5000, size=n_out).astype(np.int32))
    y = Tensor("y", y_shape, "int8", Role.ACTIVATION, QuantParams(np.float32(s_out), zp_out))
    mults = [ref_quantize_multiplier(float(np.float32(s_in)) * float(ws)
                                     / float(np.float32(s_out))) for ws in w_scales]
    return x, w, b, y, mults


@settings(max_examples=40, deadline=None)
@given(window_params(), st.integers(1, 2), st.integers(1, 3), st.booleans())
def test_conv2d_explicit_padding_and_groups(params, groups, og, bias) -> None:
    (h, wd), k, stride, dilation, pad, out_hw, act, seed = params
    rng = np.random.default_rng(seed)
    ci = 2
    c, o = ci * groups, og * groups
    x, w, b, y, mults = _quant_tensors(rng, (1, h, wd, c), (1,) + out_hw + (o,),
                                       (o,) + k + (ci,), 0, o, bias)
    g = single_op_graph("conv2d", [x, w, b], y, {"stride": stride, "dilation": dilation,
                                                  "padding": pad, "activation": act})
    xv = rng.integers(-128, 128, size=(3, h, wd, c), dtype=np.int8)
    lo, hi = ref_act_range(act, y.quant.s, y.quant.zp)
    want = naive_conv(xv, w.data, None if b is None else b.data, x.quant.zp, mults, y.quant.zp,
                      lo, hi, stride, dilation, pad, out_hw, depthwise=False)
    assert np.array_equal(golden.run(g, xv)[0], want)


@settings(max_examples=40, deadline=None)
@given(window_params(), st.integers(1, 3), st.integers(1, 3), st.booleans())
def test_depthwise_explicit_padding(params, c, mult, bias) -> None:
    (h, wd), k, stride, dilation, pad, out_hw, act, seed = params
    rng = np.random.default_rng(seed)
    o = c * mult
    x, w, b, y, mults = _quant_tensors(rng, (1, h, wd, c), (1,) + out_hw + (o,),
                                       (1,) + k + (o,), 3, o, bias)
    g = single_op_graph("depthwise_conv2d", [x, w, b], y, {
        "stride": stride, "dilation": dilation, "padding": pad, "activation": act,
        "depth_multiplier": mult})
    xv = rng.integers(-128, 128, size=(3, h, wd, c), dtype=np.int8)
    lo, hi = ref_act_range(act, y.quant.s, y.quant.zp)
    want = naive_conv(xv, w.data, None if b is None else b.data, x.quant.zp, mults, y.quant.zp,
                      lo, hi, stride, dilation, pad, out_hw, depthwise=True,
                      depth_multiplier=mult)
    assert np.array_equal(golden.run(g, xv)[0], want)


@st.composite
def pool_params(draw):
    """Windows that all touch the image (TFLM fails otherwise): padding < kernel size."""
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    h, wd = draw(st.integers(k[0], 6)), draw(st.integers(k[1], 6))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = (draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[0] - 1)),
           draw(st.integers(0, k[1] - 1)), draw(st.integers(0, k[1] - 1)))
    act = draw(st.sampled_from(["none", "relu", "relu6", "relu_n1_to_1"]))
    return (h, wd), k, stride, pad, act, draw(st.integers(0, 2**31))


@settings(max_examples=40, deadline=None)
@given(pool_params(), st.sampled_from(["avg", "max"]))
def test_pooling_explicit_padding(params, kind) -> None:
    (h, wd), k, stride, pad, act, seed = params
    oh = conv_out_size(h, k[0], stride[0], 1, pad[0], pad[1])
    ow = conv_out_size(wd, k[1], stride[1], 1, pad[2], pad[3])
    rng = np.random.default_rng(seed)
    q = QuantParams(np.float32(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128)))
    c = 2
    x = Tensor("x", (1, h, wd, c), "int8", Role.ACTIVATION, q)
    y = Tensor("y", (1, oh, ow, c), "int8", Role.ACTIVATION, q)
    g = single_op_graph(f"{kind}_pool2d", [x], y, {"filter": k, "stride": stride,
                                                  "padding": pad, "activation": act})
    xv = rng.integers(-128, 128, size=(2, h, wd, c), dtype=np.int8)
    lo, hi = ref_act_range(act, q.s, q.zp)
    want = np.zeros((2, oh, ow, c), dtype=np.int8)
    for n in range(2):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    vals = [int(xv[n, iy, ix, ch])
                            for iy in range(oy * stride[0] - pad[0],
                                            oy * stride[0] - pad[0] + k[0])
                            for ix in range(ox * stride[1] - pad[2],
                                            ox * stride[1] - pad[2] + k[1])
                            if 0 <= iy < h and 0 <= ix < wd]
                    if kind == "max":
                        v = max(vals)
                    else:
                        acc, cnt = sum(vals), len(vals)
                        v = trunc_div(acc + cnt // 2 if acc > 0 else acc - cnt // 2, cnt)
                    want[n, oy, ox, ch] = min(max(v, lo), hi)
    assert np.array_equal(golden.run(g, xv)[0], want)
