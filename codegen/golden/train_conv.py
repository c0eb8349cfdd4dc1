"""Backward kernels of the layers with weights: conv2d, depthwise_conv2d, fully_connected, bias.

Every op has an fp32 kernel (``*_f32``: float32 with the summation orders of docs/training.md)
and an int8 kernel (``*_i8``: integer only). Layouts are the IR's (NHWC activations, conv
weights OHWI, depthwise 1HW(C*M), FC (O, I)); ``padding`` is (top, bottom, left, right),
``stride`` (sh, sw), ``dilation`` (dh, dw). Kernels take any batch N (the training graph uses
N = 1; sums over n come first in every documented order).

Input tap geometry: output (oh, ow) reads input (ih, iw) = (oh*sh + kh*dh - top,
ow*sw + kw*dw - left) through tap (kh, kw); taps outside the image are padding and contribute
nothing (forward: zero point; backward: skipped).

int8 gradients are ``(q, e)`` pairs: int8 array ``q`` and int exponent ``e`` (value q * 2**e);
the weight/bias gradients are int32 accumulators ``(acc, e)``. Integer sums are exact in any
order, so the NumPy code may sum in float64 (every partial sum is an integer below 2**53).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import ModelError
from . import numerics as nx
from . import train_numerics as tn

F32 = np.float32
Geometry = tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]  # stride, dil, pad

_ACC_CHUNK = 1 << 22          # elements of a float32 term block summed at once


# ---------------------------------------------------------------------------------------------
# helpers


def seq_add(acc: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``acc + terms[0] + terms[1] + ...`` in float32, strictly in order along axis 0.

    ``np.add.accumulate`` is sequential by definition (r[i] = r[i-1] + a[i]); the block is
    chunked to bound memory.
    """
    acc = np.asarray(acc, dtype=np.float32)
    terms = np.asarray(terms, dtype=np.float32)
    n = terms.shape[0]
    if n == 0:
        return acc.copy()
    step = max(1, _ACC_CHUNK // max(1, acc.size))
    for i in range(0, n, step):
        block = np.concatenate([acc[None], terms[i:i + step]], axis=0)
        acc = np.add.accumulate(block, axis=0, dtype=np.float32)[-1]
    return acc


def _tap_slice(k: int, d: int, s: int, n_out: int) -> slice:
    start = k * d
    return slice(start, start + (n_out - 1) * s + 1, s)


def _padded_shape(x_shape: tuple[int, ...], padding) -> tuple[int, int, int, int]:
    n, h, w, c = x_shape
    top, bottom, left, right = padding
    return n, h + top + bottom, w + left + right, c


def _crop(xp: np.ndarray, x_shape, padding) -> np.ndarray:
    top, _, left, _ = padding
    return xp[:, top:top + x_shape[1], left:left + x_shape[2], :]


def _pad_hw(x: np.ndarray, padding, value=0) -> np.ndarray:
    top, bottom, left, right = padding
    return np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=value)


def _weights_f32(w_q: np.ndarray, s_w: np.ndarray, axis: int) -> np.ndarray:
    """w_r = float32(w_q) * s_w[o] (per channel on ``axis``, or one scale)."""
    s = np.asarray(s_w, dtype=np.float32).reshape(-1)
    shape = [1] * w_q.ndim
    if s.size > 1:
        shape[axis] = s.size
    return w_q.astype(np.float32) * s.reshape(shape)


def _channel_scales(s_w: np.ndarray, n: int) -> np.ndarray:
    s = np.asarray(s_w, dtype=np.float32).reshape(-1).astype(np.float64)
    return np.broadcast_to(s, (n,)) if s.size == 1 else s


def _selected(channels, n: int) -> np.ndarray:
    return np.arange(n) if channels is None else np.asarray(channels, dtype=np.int64)


def _group_inputs(sel: np.ndarray, o: int, cin: int, ci: int) -> np.ndarray | None:
    """Grouped conv2d (CI < C_in input channels per weight): the (k, CI) input channels each
    selected output channel reads; None for an ungrouped one."""
    groups = cin // ci
    if groups == 1:
        return None
    return (sel // (o // groups))[:, None] * ci + np.arange(ci)[None, :]


def _input_taps(xp: np.ndarray, kernel: tuple[int, int], out_hw: tuple[int, int], stride,
                dilation) -> Iterator[tuple[int, int, np.ndarray]]:
    """For each weight tap (fy, fx) in order: (fy, fx, the (N*OH*OW, C) values of the padded
    input ``xp`` that the output positions read through it)."""
    (oh, ow), (sh, sw), (dh, dw) = out_hw, stride, dilation
    p = xp.shape[0] * oh * ow
    for fy in range(kernel[0]):
        for fx in range(kernel[1]):
            xt = xp[:, _tap_slice(fy, dh, sh, oh), _tap_slice(fx, dw, sw, ow), :]
            yield fy, fx, xt.reshape(p, xp.shape[3])


# ---------------------------------------------------------------------------------------------
# int8 grad_input: per-channel weight scales applied to dy, one static factor after the sum


def input_grad_prescale(s_w: np.ndarray, n_out: int, taps: int) -> tuple[np.ndarray, np.ndarray,
                                                                          int, int, int]:
    """Compile-time constants of an int8 ``*_grad_input``: (M_o, k_o, b, M_ref, k_ref).

    ``s_ref = max_o s_w[o]``; ``r_o = s_w[o] / s_ref`` (float64 of the float32 scales);
    ``(M_o, k_o) = quantize_multiplier(r_o)``; ``(M_ref, k_ref) = quantize_multiplier(s_ref)``;
    ``b`` = the largest integer in [0, 8] with ``taps * 128 * 127 * 2**b <= 2**31 - 1`` where
    ``taps`` is the number of (kh, kw, o) terms summed into one dx element. ModelError when even
    b = 0 does not fit.
    """
    s = _channel_scales(s_w, n_out)
    s_ref = float(s.max())
    if not s_ref > 0:
        raise ModelError("weight scales must be positive for an int8 backward")
    m, k = nx.quantize_multipliers(s / s_ref)
    b = 8
    while b >= 0 and taps * 128 * 127 * (1 << b) > nx.INT32_MAX:
        b -= 1
    if b < 0:
        raise ModelError(f"int8 backward: {taps} terms per input gradient overflow an int32 "
                         "accumulator")
    m_ref, k_ref = nx.quantize_multiplier(s_ref)
    return m, k, b, m_ref, k_ref


def _prescale_dy(dy_q: np.ndarray, m: np.ndarray, k: np.ndarray, b: int) -> np.ndarray:
    """dys[..., o] = multiply_by_quantized_multiplier(dy_q << b, M_o, k_o), |dys| <= 127*2**b."""
    return nx.multiply_by_quantized_multiplier(dy_q.astype(np.int64) << b, m, k)


def weight_grad_bound(positions: int) -> None:
    """int8 ``*_grad_weight``: |acc| <= positions * 255 * 127 must fit an int32."""
    if positions * 255 * 127 > nx.INT32_MAX:
        raise ModelError(f"int8 backward: a weight gradient sums {positions} positions, which "
                         "overflows an int32 accumulator")


# ---------------------------------------------------------------------------------------------
# conv2d


def conv2d_grad_input_f32(dy: np.ndarray, w_q: np.ndarray, s_w: np.ndarray,
                          x_shape: tuple[int, ...], stride, dilation, padding) -> np.ndarray:
    """dx[n,ih,iw,c] = sum over (kh, kw, o) ascending of dy[n,oh,ow,o] * w_r[o,kh,kw,c].

    w_r = float32(w_q) * s_w[o]; only the (oh, ow) reaching (ih, iw) through tap (kh, kw)
    contribute (at most one per tap); grouped convolutions (C_in = groups * CI) sum over the
    o of the input channel's group. float32, accumulator from +0.0.
    """
    dy = np.asarray(dy, dtype=np.float32)
    _, oh, ow, o = dy.shape
    _, kh, kw, ci = w_q.shape
    cin = x_shape[3]
    groups = cin // ci
    og = o // groups
    (sh, sw), (dh, dw) = stride, dilation
    w_r = _weights_f32(w_q, s_w, 0)
    dxp = np.zeros(_padded_shape(x_shape, padding), dtype=np.float32)
    dy_o = np.moveaxis(dy, 3, 0)                                    # (O, N, OH, OW)
    for fy in range(kh):
        for fx in range(kw):
            ys, xs = _tap_slice(fy, dh, sh, oh), _tap_slice(fx, dw, sw, ow)
            for g in range(groups):
                osl = slice(g * og, (g + 1) * og)
                csl = slice(g * ci, (g + 1) * ci)
                terms = dy_o[osl, ..., None] * w_r[osl, fy, fx, None, None, None, :]
                dxp[:, ys, xs, csl] = seq_add(dxp[:, ys, xs, csl], terms)
    return _crop(dxp, x_shape, padding).copy()


def conv2d_grad_input_i8(dy_q: np.ndarray, e: int, w_q: np.ndarray, s_w: np.ndarray,
                         x_shape: tuple[int, ...], stride, dilation, padding
                         ) -> tuple[np.ndarray, int]:
    """int8 conv2d input gradient. Recipe (constants from :func:`input_grad_prescale` with
    taps = KH * KW * (O / groups)):

    1. ``dys[n,oh,ow,o] = multiply_by_quantized_multiplier(dy_q << b, M_o, k_o)``
       (|dys| <= 127 * 2**b; TFLM MBQM, double rounding).
    2. ``acc[n,ih,iw,c] = sum over (kh, kw, o) of dys[n,oh,ow,o] * w_q[o,kh,kw,c]`` (int32,
       same taps as the fp32 kernel; |acc| <= taps * 128 * 127 * 2**b <= 2**31 - 1).
    3. ``(dx, e_dx) = rescale(acc, e - b, M_ref, k_ref)`` (train_numerics.rescale).
    """
    _, oh, ow, o = dy_q.shape
    _, kh, kw, ci = w_q.shape
    cin = x_shape[3]
    groups = cin // ci
    og = o // groups
    m, k, b, m_ref, k_ref = input_grad_prescale(s_w, o, kh * kw * og)
    dys = _prescale_dy(dy_q, m, k, b).astype(np.float64)
    (sh, sw), (dh, dw) = stride, dilation
    wf = w_q.astype(np.float64)
    accp = np.zeros(_padded_shape(x_shape, padding), dtype=np.float64)
    for fy in range(kh):
        for fx in range(kw):
            ys, xs = _tap_slice(fy, dh, sh, oh), _tap_slice(fx, dw, sw, ow)
            for g in range(groups):
                osl, csl = slice(g * og, (g + 1) * og), slice(g * ci, (g + 1) * ci)
                accp[:, ys, xs, csl] += dys[..., osl] @ wf[osl, fy, fx, :]
    acc = _crop(accp, x_shape, padding).astype(np.int64)
    return tn.rescale(acc, e - b, m_ref, k_ref)


def conv2d_grad_weight_f32(x_q: np.ndarray, zp_x: int, s_x: float, dy: np.ndarray,
                           w_shape: tuple[int, ...], stride, dilation, padding,
                           channels=None) -> np.ndarray:
    """dw[j,kh,kw,c] = sum over (n, oh, ow) ascending of x_r[n,ih,iw,c] * dy[n,oh,ow,o_j].

    o_j = channels[j] (all output channels when None); x_r = float32(x_q - zp) * s_x; padding
    taps skipped; float32 from +0.0. Grouped conv: c indexes the group of o_j.
    """
    dy = np.asarray(dy, dtype=np.float32)
    n, oh, ow, o = dy.shape
    _, kh, kw, ci = w_shape
    sel = _selected(channels, o)
    gidx = _group_inputs(sel, o, x_q.shape[3], ci)
    xp = _pad_hw(tn.dequantize_f32(x_q, s_x, zp_x), padding, 0.0)
    dyc = dy.reshape(n * oh * ow, o)[:, sel]                         # (P, k)
    dw_out = np.zeros((sel.size, kh, kw, ci), dtype=np.float32)
    for fy, fx, xt in _input_taps(xp, (kh, kw), (oh, ow), stride, dilation):
        xg = xt[:, None, :] if gidx is None else xt[:, gidx]        # (P, 1 or k, CI)
        terms = dyc[:, :, None] * xg                                 # x_r * dy (commutative)
        dw_out[:, fy, fx, :] = seq_add(np.zeros((sel.size, ci), np.float32), terms)
    return dw_out


def conv2d_grad_weight_i8(x_q: np.ndarray, zp_x: int, dy_q: np.ndarray, e: int,
                          w_shape: tuple[int, ...], stride, dilation, padding,
                          channels=None) -> tuple[np.ndarray, int]:
    """int8 conv2d weight gradient: an int32 accumulator, not normalised.

    ``acc[j,kh,kw,c] = sum over in-image (n, oh, ow) of (x_q[n,ih,iw,c] - zp_x) * dy_q[n,oh,ow,o_j]``
    with exponent ``e`` (real value acc * 2**e * s_x; s_x is folded into the update's QAS
    multiplier). |acc| <= N*OH*OW * 255 * 127 (checked: :func:`weight_grad_bound`).
    """
    n, oh, ow, o = dy_q.shape
    _, kh, kw, ci = w_shape
    sel = _selected(channels, o)
    gidx = _group_inputs(sel, o, x_q.shape[3], ci)
    p = n * oh * ow
    weight_grad_bound(p)
    xp = _pad_hw(x_q.astype(np.float64) - zp_x, padding, 0.0)
    dyc = dy_q.astype(np.float64).reshape(p, o)[:, sel]
    acc = np.zeros((sel.size, kh, kw, ci), dtype=np.float64)
    for fy, fx, xt in _input_taps(xp, (kh, kw), (oh, ow), stride, dilation):
        acc[:, fy, fx, :] = (dyc.T @ xt if gidx is None
                             else np.einsum("pk,pkc->kc", dyc, xt[:, gidx]))
    return acc.astype(np.int64), int(e)


# ---------------------------------------------------------------------------------------------
# depthwise_conv2d


def depthwise_conv2d_grad_input_f32(dy: np.ndarray, w_q: np.ndarray, s_w: np.ndarray,
                                    x_shape: tuple[int, ...], depth_multiplier: int, stride,
                                    dilation, padding) -> np.ndarray:
    """dx[n,ih,iw,c] = sum over (kh, kw, m) ascending of dy[n,oh,ow,c*M+m] * w_r[0,kh,kw,c*M+m].

    float32 from +0.0; taps as conv2d.
    """
    dy = np.asarray(dy, dtype=np.float32)
    n, oh, ow, o = dy.shape
    _, kh, kw, _ = w_q.shape
    mult = int(depth_multiplier)
    c = o // mult
    (sh, sw), (dh, dw) = stride, dilation
    w_r = _weights_f32(w_q, s_w, 3)[0].reshape(kh, kw, c, mult)
    dy_m = np.moveaxis(dy.reshape(n, oh, ow, c, mult), 4, 0)          # (M, N, OH, OW, C)
    dxp = np.zeros(_padded_shape(x_shape, padding), dtype=np.float32)
    for fy in range(kh):
        for fx in range(kw):
            ys, xs = _tap_slice(fy, dh, sh, oh), _tap_slice(fx, dw, sw, ow)
            terms = dy_m * np.moveaxis(w_r[fy, fx], 1, 0)[:, None, None, None, :]
            dxp[:, ys, xs, :] = seq_add(dxp[:, ys, xs, :], terms)
    return _crop(dxp, x_shape, padding).copy()


def depthwise_conv2d_grad_input_i8(dy_q: np.ndarray, e: int, w_q: np.ndarray, s_w: np.ndarray,
                                   x_shape: tuple[int, ...], depth_multiplier: int, stride,
                                   dilation, padding) -> tuple[np.ndarray, int]:
    """int8 depthwise input gradient: the conv2d recipe with taps = KH * KW * M and
    ``acc[n,ih,iw,c] = sum over (kh, kw, m) of dys[n,oh,ow,c*M+m] * w_q[0,kh,kw,c*M+m]``, then
    ``rescale(acc, e - b, M_ref, k_ref)``.
    """
    n, oh, ow, o = dy_q.shape
    _, kh, kw, _ = w_q.shape
    mult = int(depth_multiplier)
    c = o // mult
    m, k, b, m_ref, k_ref = input_grad_prescale(s_w, o, kh * kw * mult)
    dys = _prescale_dy(dy_q, m, k, b).astype(np.float64).reshape(n, oh, ow, c, mult)
    wf = w_q.astype(np.float64)[0].reshape(kh, kw, c, mult)
    (sh, sw), (dh, dw) = stride, dilation
    accp = np.zeros(_padded_shape(x_shape, padding), dtype=np.float64)
    for fy in range(kh):
        for fx in range(kw):
            ys, xs = _tap_slice(fy, dh, sh, oh), _tap_slice(fx, dw, sw, ow)
            accp[:, ys, xs, :] += (dys * wf[fy, fx]).sum(axis=-1)
    acc = _crop(accp, x_shape, padding).astype(np.int64)
    return tn.rescale(acc, e - b, m_ref, k_ref)


def depthwise_conv2d_grad_weight_f32(x_q: np.ndarray, zp_x: int, s_x: float, dy: np.ndarray,
                                     w_shape: tuple[int, ...], depth_multiplier: int, stride,
                                     dilation, padding, channels=None) -> np.ndarray:
    """dw[0,kh,kw,j] = sum over (n, oh, ow) ascending of x_r[n,ih,iw,o_j // M] * dy[n,oh,ow,o_j].

    o_j = channels[j] (indices on axis 3), float32 from +0.0, padding taps skipped.
    """
    dy = np.asarray(dy, dtype=np.float32)
    n, oh, ow, o = dy.shape
    _, kh, kw, _ = w_shape
    mult = int(depth_multiplier)
    sel = _selected(channels, o)
    xp = _pad_hw(tn.dequantize_f32(x_q, s_x, zp_x), padding, 0.0)
    dyc = dy.reshape(n * oh * ow, o)[:, sel]
    out = np.zeros((1, kh, kw, sel.size), dtype=np.float32)
    for fy, fx, xt in _input_taps(xp, (kh, kw), (oh, ow), stride, dilation):
        out[0, fy, fx, :] = seq_add(np.zeros(sel.size, np.float32), xt[:, sel // mult] * dyc)
    return out


def depthwise_conv2d_grad_weight_i8(x_q: np.ndarray, zp_x: int, dy_q: np.ndarray, e: int,
                                    w_shape: tuple[int, ...], depth_multiplier: int, stride,
                                    dilation, padding, channels=None) -> tuple[np.ndarray, int]:
    """``acc[0,kh,kw,j] = sum over in-image (n, oh, ow) of (x_q[.., o_j // M] - zp_x) *
    dy_q[.., o_j]``, int32, exponent ``e`` (real: acc * 2**e * s_x); bound as conv2d."""
    n, oh, ow, o = dy_q.shape
    _, kh, kw, _ = w_shape
    mult = int(depth_multiplier)
    sel = _selected(channels, o)
    p = n * oh * ow
    weight_grad_bound(p)
    xp = _pad_hw(x_q.astype(np.int64) - zp_x, padding, 0)
    dyc = dy_q.astype(np.int64).reshape(p, o)[:, sel]
    acc = np.zeros((1, kh, kw, sel.size), dtype=np.int64)
    for fy, fx, xt in _input_taps(xp, (kh, kw), (oh, ow), stride, dilation):
        acc[0, fy, fx, :] = (xt[:, sel // mult] * dyc).sum(axis=0)
    return acc, int(e)


# ---------------------------------------------------------------------------------------------
# fully_connected and bias


def fully_connected_grad_input_f32(dy: np.ndarray, w_q: np.ndarray, s_w: np.ndarray,
                                   x_shape: tuple[int, ...]) -> np.ndarray:
    """dx[n,i] = sum over o ascending of dy[n,o] * w_r[o,i]; x seen as (N, I); float32."""
    o, i = w_q.shape
    dy = np.asarray(dy, dtype=np.float32).reshape(-1, o)
    w_r = _weights_f32(w_q, s_w, 0)
    terms = np.moveaxis(dy, 1, 0)[:, :, None] * w_r[:, None, :]        # (O, N, I)
    dx = seq_add(np.zeros((dy.shape[0], i), np.float32), terms)
    return dx.reshape(x_shape)


def fully_connected_grad_input_i8(dy_q: np.ndarray, e: int, w_q: np.ndarray, s_w: np.ndarray,
                                  x_shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """int8 FC input gradient: the conv2d recipe with taps = O:
    ``dys = MBQM(dy_q << b, M_o, k_o)``; ``acc[n,i] = sum over o of dys[n,o] * w_q[o,i]``;
    ``rescale(acc, e - b, M_ref, k_ref)``."""
    o = w_q.shape[0]
    m, k, b, m_ref, k_ref = input_grad_prescale(s_w, o, o)
    dys = _prescale_dy(dy_q.reshape(-1, o), m, k, b).astype(np.float64)
    acc = (dys @ w_q.astype(np.float64)).astype(np.int64)
    q, e2 = tn.rescale(acc, e - b, m_ref, k_ref)
    return q.reshape(x_shape), e2


def fully_connected_grad_weight_f32(x_q: np.ndarray, zp_x: int, s_x: float, dy: np.ndarray,
                                    channels=None) -> np.ndarray:
    """dw[j,i] = sum over n ascending of dy[n,o_j] * x_r[n,i]; float32 from +0.0."""
    dy = np.asarray(dy, dtype=np.float32)
    o = dy.shape[-1]
    dy = dy.reshape(-1, o)
    x_r = tn.dequantize_f32(x_q, s_x, zp_x).reshape(dy.shape[0], -1)
    sel = _selected(channels, o)
    terms = dy[:, sel, None] * x_r[:, None, :]                       # (N, k, I)
    return seq_add(np.zeros((sel.size, x_r.shape[1]), np.float32), terms)


def fully_connected_grad_weight_i8(x_q: np.ndarray, zp_x: int, dy_q: np.ndarray, e: int,
                                   channels=None) -> tuple[np.ndarray, int]:
    """``acc[j,i] = sum over n of dy_q[n,o_j] * (x_q[n,i] - zp_x)``, int32, exponent e
    (real: acc * 2**e * s_x). |acc| <= N * 255 * 127."""
    o = dy_q.shape[-1]
    dy = dy_q.astype(np.int64).reshape(-1, o)
    weight_grad_bound(dy.shape[0])
    x = x_q.astype(np.int64).reshape(dy.shape[0], -1) - zp_x
    sel = _selected(channels, o)
    return dy[:, sel].T @ x, int(e)


def bias_grad_f32(dy: np.ndarray) -> np.ndarray:
    """db[o] = sum over all positions but the last axis, ascending row-major; float32."""
    dy = np.asarray(dy, dtype=np.float32)
    c = dy.shape[-1]
    return seq_add(np.zeros(c, np.float32), dy.reshape(-1, c))


def bias_grad_i8(dy_q: np.ndarray, e: int) -> tuple[np.ndarray, int]:
    """``acc[o] = sum of dy_q[..., o]`` (int32, |acc| <= positions * 127), exponent e."""
    c = dy_q.shape[-1]
    rows = dy_q.astype(np.int64).reshape(-1, c)
    if rows.shape[0] * 127 > nx.INT32_MAX:
        raise ModelError(f"int8 backward: a bias gradient sums {rows.shape[0]} positions")
    return rows.sum(axis=0), int(e)
