"""conv2d, depthwise_conv2d and fully_connected: int8 (TFLM reference, bit exact) and float32.

Integer accumulations run as float32/float64 matrix products (BLAS): every partial sum is an
integer bounded by sum(|w|) * max|x - zp|, so when that bound is below 2**24 (float32) or
2**53 (float64) the floating-point result is the exact integer sum. The bound is computed per
op at preparation time and picks the narrowest exact type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import numerics as nx
from .common import Kernel, OpView, dtype_limits, im2col, pad_hw, pair, quad, tap

# TFLM's source (GetQuantizedConvolutionMultipler) takes the per-tensor FULLY_CONNECTED scale
# product s_in * s_w in float32, but the tflite-micro interpreter we verify against computes
# it in double, like every other op: ad01_int8's last layer (s_in 0.0247909, s_w 0.0195567,
# s_out 0.364498, accumulator -88337) gives -21 there, -22 with the float32 product.
FC_PER_TENSOR_FLOAT32_PRODUCT = False


@dataclass(frozen=True)
class OutputStage:
    """Bias, requantization (per-channel multiplier/shift), zero point and activation clamp."""

    multiplier: np.ndarray            # int64, (O,) or (1,)
    shift: np.ndarray                 # int64, same shape
    bias: np.ndarray | None           # int64, (O,)
    zero_point: int
    lo: int
    hi: int
    dtype: str
    wrap: bool                        # the int32 accumulator can overflow: wrap like C

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        acc = acc.astype(np.int64)
        if self.bias is not None:
            acc += self.bias
        if self.wrap:
            acc = nx.wrap_int32(acc)
        q = nx.multiply_by_quantized_multiplier(acc, self.multiplier, self.shift)
        q += self.zero_point
        return np.clip(q, self.lo, self.hi).astype(self.dtype)


@dataclass(frozen=True)
class IntegerSetup:
    stage: OutputStage
    zp_in: int
    compute: type                     # np.float32 or np.float64: exact for this op's sums
    weight: np.ndarray                # int64 copy of the weights


def output_multipliers(s_in: float, w_scales: np.ndarray, s_out: float, n: int,
                       per_tensor_fc: bool) -> tuple[np.ndarray, np.ndarray]:
    """The requantization of an int8 conv / FC: ``n`` (multiplier, shift) pairs (int64) of
    s_in * s_w[o] / s_out, from one weight scale or one per output channel."""
    if per_tensor_fc and w_scales.size == 1 and FC_PER_TENSOR_FLOAT32_PRODUCT:
        real = np.array([float(np.float32(s_in) * w_scales[0]) / s_out])
    else:
        real = np.float64(s_in) * w_scales.astype(np.float64) / np.float64(s_out)
    return nx.quantize_multipliers(np.broadcast_to(real, (n,)))


def _integer_setup(view: OpView, per_tensor_fc: bool, abs_sums: np.ndarray) -> IntegerSetup:
    """Multipliers, bias, clamp and the exact compute type for an int8 conv/FC."""
    x, w_t, b_t, out = view.x(), view.input(1), view.input(2), view.out()
    assert w_t is not None
    s_in, zp_in = view.quant(x)
    s_out, zp_out = view.quant(out)
    if w_t.quant is None:
        raise view.error(f"weight {w_t.name!r} has no quantization parameters")
    if np.any(w_t.quant.zero_point != 0):
        raise view.error(f"weight {w_t.name!r} must be symmetric (zero point 0)")
    if w_t.dtype != "int8":
        raise view.error(f"weight {w_t.name!r} is {w_t.dtype}; int8 ops need int8 weights")
    n_out = abs_sums.size
    w_scales = w_t.quant.scale
    if w_scales.size not in (1, n_out):
        raise view.error(f"weight has {w_scales.size} scales for {n_out} output channels")
    m, s = output_multipliers(s_in, w_scales, s_out, n_out, per_tensor_fc)
    bias = None
    if b_t is not None:
        bias = view.const(2).astype(np.int64).reshape(-1)
        if bias.size != n_out:
            raise view.error(f"bias has {bias.size} values for {n_out} output channels")
    lo_t, hi_t = dtype_limits(out.dtype)
    lo, hi = nx.activation_range(view.attr("activation", "none"), s_out, zp_out, lo_t, hi_t)
    max_dx = max(abs(-128 - zp_in), abs(127 - zp_in))
    bound = int(abs_sums.max(initial=0)) * max_dx
    bias_bound = 0 if bias is None else int(np.abs(bias).max(initial=0))
    stage = OutputStage(m, s, bias, zp_out, lo, hi, out.dtype,
                        wrap=bound + bias_bound > nx.INT32_MAX)
    compute = np.float32 if bound < 2**24 else np.float64
    return IntegerSetup(stage, zp_in, compute, view.const(1).astype(np.int64))


def _float_bias(view: OpView) -> np.ndarray | None:
    b = view.input(2)
    return None if b is None else view.const(2).astype(np.float64).reshape(-1)


def _float_finish(acc: np.ndarray, bias: np.ndarray | None, activation: str) -> np.ndarray:
    if bias is not None:
        acc = acc + bias
    lo, hi = nx.float_activation_range(activation)
    if activation != "none":
        acc = np.clip(acc, lo, hi)
    return acc.astype(np.float32)


def _check_activation_dtype(view: OpView) -> str:
    dtype = view.x().dtype
    if dtype not in ("int8", "float32"):
        raise view.unsupported_dtype(dtype)
    if view.out().dtype != ("int8" if dtype == "int8" else "float32"):
        raise view.error(f"input is {dtype} but output is {view.out().dtype}")
    return dtype


def build_conv2d(view: OpView) -> Kernel:
    dtype = _check_activation_dtype(view)
    w = view.const(1)
    o, kh, kw, ci = w.shape
    cin = view.x().shape[3]
    groups = cin // ci
    out_hw = view.out().shape[1:3]
    stride = pair(view.attr("stride"), "stride", view)
    dilation = pair(view.attr("dilation", (1, 1)), "dilation", view)
    padding = quad(view.attr("padding"), "padding", view)
    k = kh * kw * ci
    og = o // groups

    if dtype == "float32":
        wmat = w.astype(np.float64).reshape(o, k)
        bias = _float_bias(view)
        activation = view.attr("activation", "none")

        def conv_f32(x: np.ndarray, *_) -> np.ndarray:
            xp = pad_hw(x.astype(np.float64), padding, 0.0)
            acc = _grouped_matmul(im2col(xp, (kh, kw), out_hw, stride, dilation), wmat, groups,
                                  kh * kw, ci, og)
            return _float_finish(acc, bias, activation)
        return conv_f32

    setup = _integer_setup(view, False, np.abs(w.astype(np.int64)).reshape(o, -1).sum(1))
    wmat = setup.weight.reshape(o, k).astype(setup.compute)
    zp, ct, stage = setup.zp_in, setup.compute, setup.stage

    def conv_int8(x: np.ndarray, *_) -> np.ndarray:
        xp = pad_hw(x.astype(ct) - ct(zp), padding, 0.0)     # padding taps contribute 0
        acc = _grouped_matmul(im2col(xp, (kh, kw), out_hw, stride, dilation), wmat, groups,
                              kh * kw, ci, og)
        return stage(acc)
    return conv_int8


def _grouped_matmul(cols: np.ndarray, wmat: np.ndarray, groups: int, taps: int, ci: int,
                    og: int) -> np.ndarray:
    """cols (N, OH, OW, taps*ci*groups) x wmat (O, taps*ci) -> (N, OH, OW, O)."""
    lead = cols.shape[:-1]
    if groups == 1:
        return (cols.reshape(-1, cols.shape[-1]) @ wmat.T).reshape(lead + (wmat.shape[0],))
    cols = cols.reshape(-1, taps, groups, ci)
    parts = [cols[:, :, g, :].reshape(-1, taps * ci) @ wmat[g * og:(g + 1) * og].T
             for g in range(groups)]
    return np.concatenate(parts, axis=-1).reshape(lead + (wmat.shape[0],))


def build_depthwise_conv2d(view: OpView) -> Kernel:
    dtype = _check_activation_dtype(view)
    w = view.const(1)
    _, kh, kw, o = w.shape
    mult = int(view.attr("depth_multiplier", 1))
    out_hw = view.out().shape[1:3]
    stride = pair(view.attr("stride"), "stride", view)
    dilation = pair(view.attr("dilation", (1, 1)), "dilation", view)
    padding = quad(view.attr("padding"), "padding", view)

    def accumulate(xp: np.ndarray, wt: np.ndarray) -> np.ndarray:
        if mult > 1:
            xp = np.repeat(xp, mult, axis=3)              # output channel c*M + m reads c
        acc = None
        for fy in range(kh):
            for fx in range(kw):
                term = tap(xp, fy, fx, out_hw, stride, dilation) * wt[fy, fx]
                acc = term if acc is None else acc + term
        assert acc is not None
        return acc

    if dtype == "float32":
        wt = w.astype(np.float64)[0]
        bias = _float_bias(view)
        activation = view.attr("activation", "none")

        def depthwise_f32(x: np.ndarray, *_) -> np.ndarray:
            xp = pad_hw(x.astype(np.float64), padding, 0.0)
            return _float_finish(accumulate(xp, wt), bias, activation)
        return depthwise_f32

    setup = _integer_setup(view, False, np.abs(w.astype(np.int64)).reshape(-1, o).sum(0))
    wt = setup.weight[0].astype(setup.compute)
    zp, ct, stage = setup.zp_in, setup.compute, setup.stage

    def depthwise_int8(x: np.ndarray, *_) -> np.ndarray:
        xp = pad_hw(x.astype(ct) - ct(zp), padding, 0.0)
        return stage(accumulate(xp, wt))
    return depthwise_int8


def build_fully_connected(view: OpView) -> Kernel:
    dtype = _check_activation_dtype(view)
    w = view.const(1)
    i = w.shape[1]

    if dtype == "float32":
        wmat = w.astype(np.float64)
        bias = _float_bias(view)
        activation = view.attr("activation", "none")

        def fc_f32(x: np.ndarray, *_) -> np.ndarray:
            return _float_finish(x.astype(np.float64).reshape(-1, i) @ wmat.T, bias, activation)
        return fc_f32

    setup = _integer_setup(view, True, np.abs(w.astype(np.int64)).sum(1))
    wmat = setup.weight.astype(setup.compute)
    zp, ct, stage = setup.zp_in, setup.compute, setup.stage

    def fc_int8(x: np.ndarray, *_) -> np.ndarray:
        return stage((x.astype(ct).reshape(-1, i) - ct(zp)) @ wmat.T)
    return fc_int8
