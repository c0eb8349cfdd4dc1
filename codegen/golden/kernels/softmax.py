"""softmax over the last axis: int8 -> int8 / int16 (TFLM reference, bit exact) and float32."""

from __future__ import annotations

import math

import numpy as np

from .. import numerics as nx
from .common import Kernel, OpView

_SCALED_DIFF_INTEGER_BITS = 5        # input differences in Q5.26
_ACCUMULATION_INTEGER_BITS = 12      # sum of exps in Q12.19


def build_softmax(view: OpView) -> Kernel:
    x, out = view.x(), view.out()
    beta = float(np.float32(view.attr("beta", 1.0)))     # a float in the flatbuffer
    if x.dtype == "float32":
        if out.dtype != "float32":
            raise view.error(f"input is float32 but output is {out.dtype}")
        fbeta = np.float32(beta)

        def softmax_f32(v: np.ndarray) -> np.ndarray:
            e = np.exp((v - v.max(axis=-1, keepdims=True)) * fbeta, dtype=np.float32)
            return (e / e.sum(axis=-1, keepdims=True, dtype=np.float32)).astype(np.float32)
        return softmax_f32
    if x.dtype != "int8":
        raise view.unsupported_dtype(x.dtype)

    s_in, _ = view.quant(x)
    s_out, zp_out = view.quant(out)
    if out.dtype == "int8":
        want_zp, want_scale, out_bits = -128, 1.0 / 256, 8
        scale_ok = np.float32(s_out) == np.float32(want_scale)
    elif out.dtype == "int16":
        want_zp, want_scale, out_bits = -32768, 1.0 / 65536, 16
        scale_ok = abs(s_out - want_scale) <= 0.001 * want_scale
    else:
        raise view.error(f"int8 softmax cannot output {out.dtype}")
    if zp_out != want_zp or not scale_ok:
        raise view.error(f"{out.dtype} softmax output must have zero point {want_zp} and scale "
                         f"1/{round(1 / want_scale)}, got zp {zp_out} scale {s_out:g}")

    # PreprocessSoftmaxScaling + CalculateInputRadius (softmax_common.cc).
    real = min(beta * s_in * float(1 << (31 - _SCALED_DIFF_INTEGER_BITS)), float(2**31 - 1))
    multiplier, left_shift = nx.quantize_multiplier(real)
    if left_shift < 0:
        raise view.error(f"input scale {s_in:g} x beta {beta:g} is too small for int8 softmax")
    max_input_rescaled = (1.0 * ((1 << _SCALED_DIFF_INTEGER_BITS) - 1)
                          * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)) / (1 << left_shift))
    diff_min = -math.floor(max_input_rescaled)
    qmin = -(1 << (out_bits - 1))
    qmax = (1 << (out_bits - 1)) - 1
    out_dtype = out.dtype

    def softmax_int8(v: np.ndarray) -> np.ndarray:
        v = v.astype(np.int64)
        diff = v - v.max(axis=-1, keepdims=True)
        inside = diff >= diff_min
        rescaled = nx.multiply_by_quantized_multiplier_greater_than_one(
            np.where(inside, diff, 0), multiplier, left_shift)
        exp = nx.exp_on_negative_values(rescaled, _SCALED_DIFF_INTEGER_BITS)
        sum_of_exps = np.where(
            inside, nx.rounding_divide_by_pot(exp, _ACCUMULATION_INTEGER_BITS), 0).sum(
                axis=-1, keepdims=True)
        shifted_scale, num_bits_over_unit = nx.get_reciprocal(sum_of_exps,
                                                              _ACCUMULATION_INTEGER_BITS)
        exponent = num_bits_over_unit + 31 - out_bits
        q = nx.rounding_divide_by_pot(nx.sat_rounding_doubling_high_mul(shifted_scale, exp),
                                      exponent) + qmin
        q = np.where(inside, np.clip(q, qmin, qmax), qmin)
        return q.astype(out_dtype)
    return softmax_int8
