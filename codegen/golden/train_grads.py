"""Backward kernels of the ops without weights: masks, pooling, add/mul, shape ops, softmax,
gradient sums. fp32 (``*_f32``) and int8 (``*_i8``, integer only) as in train_conv.py.

int8 gradients are ``(q, e)``: int8 ``q`` in [-127, 127], exponent ``e`` (value q * 2**e).
Data-movement ops (mask, pad, concat, reshape) keep ``e`` and copy ``q``.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from . import numerics as nx
from . import train_numerics as tn
from .train_conv import _crop, _pad_hw, _padded_shape, _tap_slice

F32 = np.float32

# ---------------------------------------------------------------------------------------------
# activation masks


def act_mask(y: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """mask = lo < y < hi (strict), one bit per element (a bool array here)."""
    y = np.asarray(y, dtype=np.int64)
    return (y > lo) & (y < hi)


def mask_grad_f32(dy: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """dx = mask ? dy : +0.0f."""
    return np.where(np.asarray(mask, bool), np.asarray(dy, np.float32), F32(0.0))


def mask_grad_i8(dy_q: np.ndarray, e: int, mask: np.ndarray) -> tuple[np.ndarray, int]:
    """dx_q = mask ? dy_q : 0; exponent unchanged."""
    return np.where(np.asarray(mask, bool), dy_q, 0).astype(np.int8), int(e)


# ---------------------------------------------------------------------------------------------
# pooling


def pool_counts(x_hw: tuple[int, int], filter_, stride, padding,
                out_hw: tuple[int, int]) -> np.ndarray:
    """Number of in-image taps of each output window, (OH, OW) int64."""
    inside = _pad_hw(np.ones((1, x_hw[0], x_hw[1], 1), np.int64), padding, 0)
    count = np.zeros(out_hw, dtype=np.int64)
    for fy in range(filter_[0]):
        for fx in range(filter_[1]):
            count += inside[0, _tap_slice(fy, 1, stride[0], out_hw[0]),
                            _tap_slice(fx, 1, stride[1], out_hw[1]), 0]
    if np.any(count == 0):
        raise ModelError("a pooling window lies entirely in the padding")
    return count


def avg_pool2d_grad_f32(dy: np.ndarray, x_shape, filter_, stride, padding) -> np.ndarray:
    """dx[n,ih,iw,c] = sum over (kh, kw) ascending of dy[n,oh,ow,c] / float32(count[oh,ow])."""
    dy = np.asarray(dy, np.float32)
    oh, ow = dy.shape[1:3]
    count = pool_counts(x_shape[1:3], filter_, stride, padding, (oh, ow))
    q = dy / count.astype(np.float32)[None, :, :, None]
    dxp = np.zeros(_padded_shape(x_shape, padding), np.float32)
    for fy in range(filter_[0]):
        for fx in range(filter_[1]):
            ys, xs = _tap_slice(fy, 1, stride[0], oh), _tap_slice(fx, 1, stride[1], ow)
            dxp[:, ys, xs, :] = dxp[:, ys, xs, :] + q
    return _crop(dxp, x_shape, padding).copy()


def avg_pool_recip_bits(filter_) -> int:
    """Q of the int8 avg-pool reciprocals: largest in [0, 16] with KH*KW*127*2**Q <= 2**31-1."""
    taps = filter_[0] * filter_[1]
    q = 16
    while q > 0 and taps * 127 * (1 << q) > nx.INT32_MAX:
        q -= 1
    return q


def avg_pool2d_grad_i8(dy_q: np.ndarray, e: int, x_shape, filter_, stride,
                       padding) -> tuple[np.ndarray, int]:
    """int8 average-pool gradient::

        Q = avg_pool_recip_bits(filter)                     # compile time, 16 for <= 16x16
        RECIP[oh,ow] = (2**Q + count[oh,ow] / 2) / count[oh,ow]   # C integer division
        dys[n,oh,ow,c] = dy_q[n,oh,ow,c] * RECIP[oh,ow]
        acc[n,ih,iw,c] = sum over the windows (kh, kw) reaching (ih, iw) of dys   # int32
        (dx, e_dx) = normalise(acc, e - Q)

    |acc| <= KH*KW * 127 * 2**Q <= 2**31 - 1.
    """
    oh, ow = dy_q.shape[1:3]
    count = pool_counts(x_shape[1:3], filter_, stride, padding, (oh, ow))
    qbits = avg_pool_recip_bits(filter_)
    recip = ((1 << qbits) + count // 2) // count
    dys = dy_q.astype(np.int64) * recip[None, :, :, None]
    accp = np.zeros(_padded_shape(x_shape, padding), np.int64)
    for fy in range(filter_[0]):
        for fx in range(filter_[1]):
            ys, xs = _tap_slice(fy, 1, stride[0], oh), _tap_slice(fx, 1, stride[1], ow)
            accp[:, ys, xs, :] += dys
    return tn.normalise(_crop(accp, x_shape, padding), e - qbits)


def max_pool_argmax(x_q: np.ndarray, filter_, stride, padding,
                    out_hw: tuple[int, int]) -> np.ndarray:
    """Index kh*KW + kw of the first maximum of each window over in-image taps, scanning
    (kh, kw) ascending with a strict ``>`` (ties keep the earlier tap). (N, OH, OW, C)."""
    xp = _pad_hw(x_q.astype(np.int64), padding, -(1 << 20))         # padding never wins
    best = None
    arg = None
    for fy in range(filter_[0]):
        for fx in range(filter_[1]):
            t = xp[:, _tap_slice(fy, 1, stride[0], out_hw[0]),
                   _tap_slice(fx, 1, stride[1], out_hw[1]), :]
            k = fy * filter_[1] + fx
            if best is None:
                best, arg = t.copy(), np.zeros(t.shape, np.int64)
            else:
                better = t > best
                best = np.where(better, t, best)
                arg = np.where(better, k, arg)
    assert arg is not None
    return arg


def max_pool2d_grad_f32(dy: np.ndarray, x_q: np.ndarray, filter_, stride,
                        padding) -> np.ndarray:
    """dx[n,ih,iw,c] = sum over (kh, kw) ascending of dy[n,oh,ow,c] for the windows whose
    first maximum (:func:`max_pool_argmax`) is (ih, iw); float32 from +0.0."""
    dy = np.asarray(dy, np.float32)
    oh, ow = dy.shape[1:3]
    arg = max_pool_argmax(x_q, filter_, stride, padding, (oh, ow))
    dxp = np.zeros(_padded_shape(x_q.shape, padding), np.float32)
    for fy in range(filter_[0]):
        for fx in range(filter_[1]):
            ys, xs = _tap_slice(fy, 1, stride[0], oh), _tap_slice(fx, 1, stride[1], ow)
            hit = arg == fy * filter_[1] + fx
            dxp[:, ys, xs, :] = np.where(hit, dxp[:, ys, xs, :] + dy, dxp[:, ys, xs, :])
    return _crop(dxp, x_q.shape, padding).copy()


def max_pool2d_grad_i8(dy_q: np.ndarray, e: int, x_q: np.ndarray, filter_, stride,
                       padding) -> tuple[np.ndarray, int]:
    """int8 max-pool gradient: ``acc[n,ih,iw,c]`` = int32 sum of the dy_q routed to (ih, iw)
    (as the fp32 kernel; |acc| <= KH*KW*127), then ``normalise(acc, e)`` (identity for
    non-overlapping windows)."""
    oh, ow = dy_q.shape[1:3]
    arg = max_pool_argmax(x_q, filter_, stride, padding, (oh, ow))
    accp = np.zeros(_padded_shape(x_q.shape, padding), np.int64)
    dyi = dy_q.astype(np.int64)
    for fy in range(filter_[0]):
        for fx in range(filter_[1]):
            ys, xs = _tap_slice(fy, 1, stride[0], oh), _tap_slice(fx, 1, stride[1], ow)
            accp[:, ys, xs, :] += np.where(arg == fy * filter_[1] + fx, dyi, 0)
    return tn.normalise(_crop(accp, x_q.shape, padding), e)


# ---------------------------------------------------------------------------------------------
# broadcasting: add, mul


def broadcast_axes(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of ``y_shape`` summed to reduce a gradient of shape y to x (numpy broadcasting)."""
    lead = len(y_shape) - len(x_shape)
    axes = list(range(lead))
    for i, d in enumerate(x_shape):
        if d == 1 and y_shape[lead + i] != 1:
            axes.append(lead + i)
    return tuple(axes)


def reduce_to_f32(g: np.ndarray, x_shape: tuple[int, ...]) -> np.ndarray:
    """Sum a float32 gradient over its broadcast axes: for each output element, the reduced
    positions in ascending row-major order of the reduced axes, from +0.0."""
    axes = broadcast_axes(tuple(x_shape), g.shape)
    if not axes:
        return np.asarray(g, np.float32).reshape(x_shape).copy()
    return tn.seq_sum_axes(g, axes).reshape(x_shape)


def add_grad_f32(dy: np.ndarray, x_shape) -> np.ndarray:
    """dx = dy summed over the axes on which x was broadcast (ascending row-major order)."""
    return reduce_to_f32(np.asarray(dy, np.float32), tuple(x_shape))


def add_grad_i8(dy_q: np.ndarray, e: int, x_shape) -> tuple[np.ndarray, int]:
    """``acc = int32 sum of dy_q over the broadcast axes`` (|acc| <= count * 127);
    ``normalise(acc, e)``."""
    axes = broadcast_axes(tuple(x_shape), dy_q.shape)
    acc = dy_q.astype(np.int64).sum(axis=axes).reshape(x_shape)
    return tn.normalise(acc, e)


def mul_grad_f32(dy: np.ndarray, other_q: np.ndarray, s_o: float, zp_o: int,
                 x_shape) -> np.ndarray:
    """dx = reduce_to(x.shape, dy * other_r), other_r = float32(other_q - zp) * s broadcast to
    dy's shape; one float32 product per element, then the add_grad summation order."""
    dy = np.asarray(dy, np.float32)
    other_r = np.broadcast_to(tn.dequantize_f32(other_q, s_o, zp_o), dy.shape)
    return reduce_to_f32(dy * other_r, tuple(x_shape))


def mul_grad_i8(dy_q: np.ndarray, e: int, other_q: np.ndarray, s_o: float, zp_o: int,
                x_shape) -> tuple[np.ndarray, int]:
    """``acc = reduce_to(x.shape, dy_q * (other_q - zp_o))`` (int32, |acc| <= count*127*255);
    ``rescale(acc, e, quantize_multiplier(s_o))``."""
    prod = dy_q.astype(np.int64) * (np.broadcast_to(other_q, dy_q.shape).astype(np.int64) - zp_o)
    axes = broadcast_axes(tuple(x_shape), dy_q.shape)
    count = int(np.prod([dy_q.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    if count * 127 * 255 > nx.INT32_MAX:
        raise ModelError(f"int8 backward: mul gradient sums {count} products")
    acc = prod.sum(axis=axes).reshape(x_shape) if axes else prod.reshape(x_shape)
    m, k = tn.static_factor(float(np.float32(s_o)))
    return tn.rescale(acc, e, m, k)


# ---------------------------------------------------------------------------------------------
# mean, pad, concat, reshape


def _mean_expand(dy: np.ndarray, x_shape, axes, keep_dims: bool) -> np.ndarray:
    if not keep_dims:
        for a in sorted(axes):
            dy = np.expand_dims(dy, a)
    return np.broadcast_to(dy, x_shape)


def mean_count(x_shape, axes) -> int:
    return int(np.prod([x_shape[a] for a in axes], dtype=np.int64))


def mean_grad_f32(dy: np.ndarray, x_shape, axes, keep_dims: bool) -> np.ndarray:
    """dx = broadcast(dy / float32(count)), count = product of x's sizes on ``axes``."""
    q = np.asarray(dy, np.float32) / F32(mean_count(x_shape, axes))
    return _mean_expand(q, tuple(x_shape), axes, keep_dims).copy()


def mean_grad_i8(dy_q: np.ndarray, e: int, x_shape, axes, keep_dims: bool
                 ) -> tuple[np.ndarray, int]:
    """``(q, e') = rescale(dy_q, e, quantize_multiplier(1 / count))`` (float64 1/count), then
    broadcast q to x's shape."""
    m, k = tn.static_factor(1.0 / mean_count(x_shape, axes))
    q, e2 = tn.rescale(dy_q, e, m, k)
    return _mean_expand(q, tuple(x_shape), axes, keep_dims).copy(), e2


def pad_grad(dy: np.ndarray, pads) -> np.ndarray:
    """dx = the interior slice dy[p0 : p0 + size] on every axis (any dtype; e unchanged)."""
    sl = tuple(slice(int(p0), dy.shape[i] - int(p1)) for i, (p0, p1) in enumerate(pads))
    return dy[sl].copy()


def concat_grad(dy: np.ndarray, axis: int, begin: int, size: int) -> np.ndarray:
    """dx = dy[begin : begin + size] on ``axis`` (any dtype; e unchanged)."""
    sl = [slice(None)] * dy.ndim
    sl[axis] = slice(begin, begin + size)
    return dy[tuple(sl)].copy()


def reshape_grad(dy: np.ndarray, x_shape) -> np.ndarray:
    return np.asarray(dy).reshape(x_shape).copy()


# ---------------------------------------------------------------------------------------------
# softmax (mid-graph)


def softmax_grad_f32(dy: np.ndarray, y_q: np.ndarray, s_y: float, zp_y: int,
                     beta: float) -> np.ndarray:
    """Over the last axis: y_r = float32(y_q - zp) * s_y; S = sum over j ascending of
    dy[j] * y_r[j] (from +0.0); dx = (beta * y_r) * (dy - S), each a float32 operation
    (beta = float32(attr))."""
    dy = np.asarray(dy, np.float32)
    y_r = tn.dequantize_f32(y_q, s_y, zp_y)
    s = tn.seq_sum_axis(dy * y_r, dy.ndim - 1)[..., None]
    return (F32(beta) * y_r) * (dy - s)


def softmax_grad_i8(dy_q: np.ndarray, e: int, y_q: np.ndarray, s_y: float, zp_y: int,
                    beta: float) -> tuple[np.ndarray, int]:
    """int8 softmax gradient (y: the int8 softmax output, scale 1/256, zero point -128)::

        u[j] = y_q[j] - zp_y                                  # in [0, 255]
        sdot = sum over j of dy_q[j] * u[j]                   # per row, int32
        D[i] = 256 * dy_q[i] - sdot                           # 256*(dy - S) in units 2**e/256
        r1 = max(0, bitlen(max|D|) - 15); D' = rounding_divide_by_pot(D, r1)   # |D'| <= 2**15
        t[i] = u[i] * D'[i]                                   # |t| < 2**23
        (dx, e_dx) = rescale(t, e - 16 + r1, quantize_multiplier(beta))

    |sdot| <= C * 127 * 255 (C = classes) fits int32 for C < 66,000.
    """
    if np.float32(s_y) != np.float32(1.0 / 256):
        raise ModelError(f"int8 softmax gradient needs the output scale 1/256, got {s_y:g}")
    u = y_q.astype(np.int64) - zp_y
    dyi = dy_q.astype(np.int64)
    if dy_q.shape[-1] * 127 * 255 + 127 * 256 > nx.INT32_MAX:
        raise ModelError(f"int8 softmax gradient over {dy_q.shape[-1]} classes overflows int32")
    sdot = (dyi * u).sum(axis=-1, keepdims=True)
    d = 256 * dyi - sdot
    r1 = max(0, tn.bitlen(tn.max_abs(d)) - 15)
    d = nx.rounding_divide_by_pot(d, r1)
    m, k = tn.static_factor(float(np.float32(beta)))
    return tn.rescale(u * d, e - 16 + r1, m, k)


# ---------------------------------------------------------------------------------------------
# gradient sums (residuals)


def grad_add_f32(g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
    """g = g1 + g2 (float32)."""
    return np.asarray(g1, np.float32) + np.asarray(g2, np.float32)


GRAD_ADD_BITS = 16


def grad_add_i8(q1: np.ndarray, e1: int, q2: np.ndarray, e2: int) -> tuple[np.ndarray, int]:
    """int8 gradient sum, both aligned to 16 bits below the larger exponent::

        if all q2 == 0: return (q1, e1)            # an all-zero input (e.g. fully masked)
        if all q1 == 0: return (q2, e2)            # must not decide the exponent
        E = max(e1, e2)
        t_j = s_j >= 0 ? q_j << s_j : (s_j < -31 ? 0 : rounding_divide_by_pot(q_j, -s_j))
              with s_j = e_j - E + 16 (<= 16)
        (g, e) = normalise(t_1 + t_2, E - 16)      # |t_1 + t_2| < 2**24
    """
    if not np.any(q2):
        return np.array(q1, dtype=np.int8, copy=True), int(e1)
    if not np.any(q1):
        return np.array(q2, dtype=np.int8, copy=True), int(e2)
    big = max(int(e1), int(e2))
    t = (tn.shift_exp(q1, int(e1) - big + GRAD_ADD_BITS)
         + tn.shift_exp(q2, int(e2) - big + GRAD_ADD_BITS))
    return tn.normalise(t, big - GRAD_ADD_BITS)
