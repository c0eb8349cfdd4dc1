"""fp32 training kernels vs PyTorch autograd on the dequantized tensors (gradient checks).

Acceptance: every op's input and parameter gradients match ``torch.autograd`` (float64) with
relative error ||a - b|| / max(||b||, tiny) <= 1e-4, over several shapes, strides, paddings
(SAME-like, VALID, asymmetric), dilations and depthwise multipliers. Also checks that the
documented float32 summation orders are what the kernels compute (explicit loop transcriptions).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from codegen.golden import train_conv as tc
from codegen.golden import train_grads as tg
from codegen.golden import train_loss as tl
from codegen.golden import train_numerics as tn

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = 1e-4
F32 = np.float32


def rel_err(a, b) -> float:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# -- random quantized tensors ------------------------------------------------------------------

def act(rng, shape, scale=0.05):
    """int8 activation, its scale and zero point."""
    zp = int(rng.integers(-20, 21))
    return rng.integers(-128, 128, shape).astype(np.int8), F32(scale), zp


def weight(rng, shape, n_out, axis=0):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    s = (rng.random(n_out) * 0.02 + 0.005).astype(np.float32)
    return w, s


def deq(q, s, zp=0, axis=None):
    s = np.asarray(s, np.float64)
    if axis is not None and s.size > 1:
        shape = [1] * q.ndim
        shape[axis] = s.size
        s = s.reshape(shape)
    return (q.astype(np.float64) - zp) * s


def t64(a, grad=False):
    return torch.tensor(np.asarray(a, np.float64), dtype=torch.float64, requires_grad=grad)


def nchw(a):
    return a.permute(0, 3, 1, 2)


def nhwc(a):
    return a.permute(0, 2, 3, 1)


# -- torch references --------------------------------------------------------------------------

def torch_conv(x_r, w_oihw, dy_nhwc, stride, dilation, padding, groups):
    x = t64(x_r, True)
    w = t64(w_oihw, True)
    top, bottom, left, right = padding
    y = F.conv2d(F.pad(nchw(x), (left, right, top, bottom)), w, stride=stride,
                 dilation=dilation, groups=groups)
    y.backward(nchw(t64(dy_nhwc)))
    return x.grad.numpy(), w.grad.numpy(), y


def out_hw(h, w, k, stride, dilation, padding):
    from codegen.ir import conv_out_size
    return (conv_out_size(h, k[0], stride[0], dilation[0], padding[0], padding[1]),
            conv_out_size(w, k[1], stride[1], dilation[1], padding[2], padding[3]))


SAME3 = (1, 1, 1, 1)
VALID = (0, 0, 0, 0)

CONV_CASES = [
    # (H, W, Cin, O, (kh, kw), stride, dilation, padding, groups)
    (7, 6, 3, 4, (3, 3), (1, 1), (1, 1), SAME3, 1),
    (9, 8, 4, 6, (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), 1),        # TFLite SAME, stride 2
    (8, 8, 4, 5, (3, 3), (1, 2), (2, 1), (2, 1, 0, 2), 1),        # asymmetric + dilation
    (6, 7, 2, 3, (1, 1), (1, 1), (1, 1), VALID, 1),
    (10, 9, 3, 4, (5, 3), (2, 1), (1, 2), VALID, 1),
    (8, 8, 4, 6, (3, 3), (1, 1), (1, 1), SAME3, 2),               # grouped
    (5, 5, 8, 16, (2, 2), (2, 2), (1, 1), VALID, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
def test_conv2d_grads_match_torch(case):
    h, w_, cin, o, k, stride, dil, pad, groups = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x_q, s_x, zp = act(rng, (1, h, w_, cin))
    w_q, s_w = weight(rng, (o,) + k + (cin // groups,), o)
    oh, ow = out_hw(h, w_, k, stride, dil, pad)
    dy = rng.standard_normal((1, oh, ow, o)).astype(np.float32)
    dx_ref, dw_ref, _ = torch_conv(deq(x_q, s_x, zp), deq(w_q, s_w, axis=0).transpose(0, 3, 1, 2),
                                   dy, stride, dil, pad, groups)
    dx = tc.conv2d_grad_input_f32(dy, w_q, s_w, x_q.shape, stride, dil, pad)
    dw = tc.conv2d_grad_weight_f32(x_q, zp, s_x, dy, w_q.shape, stride, dil, pad)
    db = tc.bias_grad_f32(dy)
    assert dx.dtype == np.float32 and dx.shape == x_q.shape
    assert rel_err(dx, dx_ref) <= TOL
    assert rel_err(dw, dw_ref.transpose(0, 2, 3, 1)) <= TOL
    assert rel_err(db, dy.astype(np.float64).sum(axis=(0, 1, 2))) <= TOL
    # channel subset: exactly the selected rows of the full gradient
    ch = tuple(range(0, o, 2))
    dws = tc.conv2d_grad_weight_f32(x_q, zp, s_x, dy, w_q.shape, stride, dil, pad, ch)
    assert np.array_equal(dws, dw[list(ch)])


DW_CASES = [
    # (H, W, C, M, (kh, kw), stride, dilation, padding)
    (7, 7, 3, 1, (3, 3), (1, 1), (1, 1), SAME3),
    (8, 9, 2, 2, (3, 3), (2, 2), (1, 1), (0, 1, 1, 1)),
    (9, 8, 4, 2, (3, 2), (1, 2), (2, 1), (2, 0, 1, 2)),
    (6, 6, 5, 1, (5, 5), (1, 1), (1, 1), VALID),
    (6, 6, 2, 3, (2, 2), (2, 1), (1, 1), (1, 0, 0, 1)),
]


@pytest.mark.parametrize("case", DW_CASES, ids=[str(i) for i in range(len(DW_CASES))])
def test_depthwise_grads_match_torch(case):
    h, w_, c, m, k, stride, dil, pad = case
    o = c * m
    rng = np.random.default_rng(hash(case) % 2**32)
    x_q, s_x, zp = act(rng, (1, h, w_, c))
    w_q, s_w = weight(rng, (1,) + k + (o,), o)
    oh, ow = out_hw(h, w_, k, stride, dil, pad)
    dy = rng.standard_normal((1, oh, ow, o)).astype(np.float32)
    w_t = deq(w_q, s_w, axis=3)[0].transpose(2, 0, 1)[:, None]         # (O, 1, kh, kw)
    dx_ref, dw_ref, _ = torch_conv(deq(x_q, s_x, zp), w_t, dy, stride, dil, pad, c)
    dx = tc.depthwise_conv2d_grad_input_f32(dy, w_q, s_w, x_q.shape, m, stride, dil, pad)
    dw = tc.depthwise_conv2d_grad_weight_f32(x_q, zp, s_x, dy, w_q.shape, m, stride, dil, pad)
    assert rel_err(dx, dx_ref) <= TOL
    assert rel_err(dw, dw_ref[:, 0].transpose(1, 2, 0)[None]) <= TOL
    ch = (1,) if o > 1 else (0,)
    dws = tc.depthwise_conv2d_grad_weight_f32(x_q, zp, s_x, dy, w_q.shape, m, stride, dil, pad,
                                              ch)
    assert np.array_equal(dws, dw[..., list(ch)])


@pytest.mark.parametrize("x_shape,units", [((1, 24), 10), ((1, 2, 2, 6), 7), ((1, 40), 1),
                                           ((1, 1, 1, 64), 12)])
def test_fully_connected_grads_match_torch(x_shape, units):
    rng = np.random.default_rng(units)
    x_q, s_x, zp = act(rng, x_shape)
    i = int(np.prod(x_shape[1:]))
    w_q, s_w = weight(rng, (units, i), units)
    dy = rng.standard_normal((1, units)).astype(np.float32)
    x = t64(deq(x_q, s_x, zp).reshape(1, i), True)
    w = t64(deq(w_q, s_w, axis=0), True)
    b = t64(np.zeros(units), True)
    (x @ w.T + b).backward(t64(dy))
    dx = tc.fully_connected_grad_input_f32(dy, w_q, s_w, x_shape)
    dw = tc.fully_connected_grad_weight_f32(x_q, zp, s_x, dy)
    assert dx.shape == x_shape
    assert rel_err(dx.reshape(1, i), x.grad.numpy()) <= TOL
    assert rel_err(dw, w.grad.numpy()) <= TOL
    assert rel_err(tc.bias_grad_f32(dy), b.grad.numpy()) <= TOL
    ch = (0,) if units == 1 else (0, units - 1)
    assert np.array_equal(tc.fully_connected_grad_weight_f32(x_q, zp, s_x, dy, ch), dw[list(ch)])


POOL_CASES = [
    # (H, W, C, filter, stride, padding)
    (8, 8, 3, (2, 2), (2, 2), VALID),
    (7, 7, 2, (3, 3), (2, 2), SAME3),
    (6, 5, 2, (3, 3), (1, 1), (1, 1, 1, 1)),
    (7, 6, 3, (3, 2), (2, 1), (0, 1, 1, 0)),
    (4, 4, 4, (4, 4), (1, 1), VALID),                 # global
]


def _count(h, w, flt, stride, pad, oh, ow):
    return tg.pool_counts((h, w), flt, stride, pad, (oh, ow))


@pytest.mark.parametrize("case", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_avg_pool_grad_matches_torch(case):
    h, w_, c, flt, stride, pad = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x_q, s_x, zp = act(rng, (1, h, w_, c))
    oh, ow = out_hw(h, w_, flt, stride, (1, 1), pad)
    dy = rng.standard_normal((1, oh, ow, c)).astype(np.float32)
    x = t64(deq(x_q, s_x, zp), True)
    top, bottom, left, right = pad
    s = F.avg_pool2d(F.pad(nchw(x), (left, right, top, bottom)), flt, stride,
                     divisor_override=1)
    count = t64(_count(h, w_, flt, stride, pad, oh, ow))
    (s / count).backward(nchw(t64(dy)))                        # TFLite: divide by valid taps
    dx = tg.avg_pool2d_grad_f32(dy, x_q.shape, flt, stride, pad)
    assert rel_err(dx, x.grad.numpy()) <= TOL


def distinct_windows(rng, shape):
    """int8 values distinct within each channel (no ties in any window)."""
    _, h, w, c = shape
    out = np.empty(shape, np.int8)
    for ch in range(c):
        out[0, :, :, ch] = rng.permutation(np.arange(-128, 128))[:h * w].reshape(h, w)
    return out


@pytest.mark.parametrize("case", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_max_pool_grad_matches_torch(case):
    h, w_, c, flt, stride, pad = case
    rng = np.random.default_rng(hash(case) % 2**32 + 1)
    x_q = distinct_windows(rng, (1, h, w_, c))
    s_x, zp = F32(0.05), 3
    oh, ow = out_hw(h, w_, flt, stride, (1, 1), pad)
    dy = rng.standard_normal((1, oh, ow, c)).astype(np.float32)
    x = t64(deq(x_q, s_x, zp), True)
    top, bottom, left, right = pad
    y = F.max_pool2d(F.pad(nchw(x), (left, right, top, bottom), value=-math.inf), flt, stride)
    y.backward(nchw(t64(dy)))
    dx = tg.max_pool2d_grad_f32(dy, x_q, flt, stride, pad)
    assert rel_err(dx, x.grad.numpy()) <= TOL


def test_max_pool_grad_ties_go_to_first_tap_in_scan_order():
    x = np.zeros((1, 2, 2, 1), np.int8)
    x[0, 0, 1, 0] = x[0, 1, 0, 0] = 5                 # two maxima: (0,1) comes first
    dy = np.full((1, 1, 1, 1), 2.5, np.float32)
    dx = tg.max_pool2d_grad_f32(dy, x, (2, 2), (2, 2), VALID)
    assert dx[0, 0, 1, 0] == F32(2.5) and dx.sum() == F32(2.5)
    x[:] = -128                                        # all equal: the first tap
    assert tg.max_pool2d_grad_f32(dy, x, (2, 2), (2, 2), VALID)[0, 0, 0, 0] == F32(2.5)


BROADCAST = [((1, 4, 4, 3), (1, 4, 4, 3)), ((1, 4, 4, 3), (1, 1, 1, 3)), ((1, 4, 4, 3), (3,)),
             ((1, 4, 5, 3), (1, 4, 1, 3)), ((1, 6), (1, 1)), ((1, 2, 3, 4), (2, 1, 1))]


@pytest.mark.parametrize("shapes", BROADCAST, ids=[str(i) for i in range(len(BROADCAST))])
def test_add_and_mul_grads_match_torch(shapes):
    sa, sb = shapes
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a_q, s_a, zp_a = act(rng, sa, 0.04)
    b_q, s_b, zp_b = act(rng, sb, 0.07)
    out = np.broadcast_shapes(sa, sb)
    dy = rng.standard_normal(out).astype(np.float32)
    a, b = t64(deq(a_q, s_a, zp_a), True), t64(deq(b_q, s_b, zp_b), True)
    (a + b).backward(t64(dy))
    assert rel_err(tg.add_grad_f32(dy, sa), a.grad.numpy()) <= TOL
    assert rel_err(tg.add_grad_f32(dy, sb), b.grad.numpy()) <= TOL
    a.grad = b.grad = None
    (a * b).backward(t64(dy))
    assert rel_err(tg.mul_grad_f32(dy, b_q, s_b, zp_b, sa), a.grad.numpy()) <= TOL
    assert rel_err(tg.mul_grad_f32(dy, a_q, s_a, zp_a, sb), b.grad.numpy()) <= TOL


@pytest.mark.parametrize("x_shape,axes,keep", [((1, 4, 4, 3), (1, 2), True),
                                               ((1, 4, 4, 3), (1, 2), False),
                                               ((1, 5, 3), (2,), False), ((1, 3, 2, 2), (3,), True)])
def test_mean_grad_matches_torch(x_shape, axes, keep):
    rng = np.random.default_rng(sum(x_shape))
    x_q, s, zp = act(rng, x_shape)
    x = t64(deq(x_q, s, zp), True)
    y = x.mean(dim=axes, keepdim=keep)
    dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(t64(dy))
    assert rel_err(tg.mean_grad_f32(dy, x_shape, axes, keep), x.grad.numpy()) <= TOL


def test_pad_concat_reshape_grads_match_torch():
    rng = np.random.default_rng(7)
    x = t64(rng.standard_normal((1, 3, 4, 2)), True)
    pads = ((0, 0), (1, 2), (0, 1), (0, 0))
    y = F.pad(x, (0, 0, 0, 1, 1, 2))
    dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(t64(dy))
    assert rel_err(tg.pad_grad(dy, pads), x.grad.numpy()) == 0.0

    a, b = t64(rng.standard_normal((1, 2, 2, 3)), True), t64(rng.standard_normal((1, 2, 2, 5)),
                                                                True)
    y = torch.cat([a, b], dim=3)
    dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(t64(dy))
    assert rel_err(tg.concat_grad(dy, 3, 0, 3), a.grad.numpy()) == 0.0
    assert rel_err(tg.concat_grad(dy, 3, 3, 5), b.grad.numpy()) == 0.0

    y = x.reshape(1, 24)
    dy = rng.standard_normal((1, 24)).astype(np.float32)
    x.grad = None
    y.backward(t64(dy))
    assert rel_err(tg.reshape_grad(dy, (1, 3, 4, 2)), x.grad.numpy()) == 0.0


@pytest.mark.parametrize("classes,beta", [(10, 1.0), (5, 0.5), (32, 2.0)])
def test_softmax_grad_matches_torch(classes, beta):
    """Mid-graph softmax: the backward of softmax(beta * x) at the int8 forward output y (what
    autograd's softmax backward consumes), and close to autograd at the dequantized input."""
    rng = np.random.default_rng(classes)
    from codegen.golden.train_loss import _int8_softmax
    x_q, s_x, zp = act(rng, (2, classes), 0.08)
    y_q = np.concatenate([_int8_softmax(float(s_x), zp, classes, beta)(x_q[i:i + 1])
                          for i in range(2)])
    dy = rng.standard_normal((2, classes)).astype(np.float32)
    y_r = t64(deq(y_q, 1 / 256, -128))
    ref = beta * torch.ops.aten._softmax_backward_data(t64(dy), y_r, 1, torch.float64)
    dx = tg.softmax_grad_f32(dy, y_q, F32(1 / 256), -128, beta)
    assert rel_err(dx, ref.numpy()) <= TOL
    x = t64(deq(x_q, s_x, zp), True)
    torch.softmax(beta * x, dim=1).backward(t64(dy))
    assert rel_err(dx, x.grad.numpy()) < 0.1            # y is int8 (1/256 steps)


@pytest.mark.parametrize("classes,label,scale,beta", [(10, 3, 0.116, 1.0), (2, 0, 0.05, 1.0),
                                                      (20, 19, 0.2, 1.0), (7, 4, 0.1, 0.7)])
def test_cross_entropy_matches_torch(classes, label, scale, beta):
    rng = np.random.default_rng(classes + label)
    q, _, zp = act(rng, (1, classes))
    table = tl.exp_table(scale, beta)
    loss, d = tl.softmax_cross_entropy_f32(q, label, table, scale, beta)
    z = t64(deq(q, F32(scale), zp), True)                # real logits (the softmax input)
    ref = F.cross_entropy(beta * z, torch.tensor([label]))
    ref.backward()
    assert abs(float(loss) - ref.item()) <= TOL * max(abs(ref.item()), 1e-3)
    assert rel_err(d, z.grad.numpy()) <= TOL
    assert loss.dtype == np.float32 and d.dtype == np.float32


def test_cross_entropy_follows_documented_sequence():
    rng = np.random.default_rng(3)
    q = rng.integers(-128, 128, (1, 12)).astype(np.int8)
    scale = 0.09
    table = tl.exp_table(scale)
    loss, d = tl.softmax_cross_entropy_f32(q, 5, table, scale)
    m = int(q.max())
    e = [table[int(v) - m + 255] for v in q[0]]
    total = F32(0.0)
    for v in e:
        total = F32(total + v)
    p = [F32(v / total) for v in e]
    want = [F32(pi - F32(1.0)) if i == 5 else pi for i, pi in enumerate(p)]
    assert np.array_equal(d[0], np.array(want, np.float32))
    assert loss == F32(tn.pe_logf(total) - F32(int(q[0, 5]) - m) * F32(scale))


def test_mse_matches_torch():
    rng = np.random.default_rng(11)
    for shape, scale in [((1, 16), 0.05), ((1, 4, 4, 2), 0.3)]:
        y_q, _, zp = act(rng, shape)
        t_q = rng.integers(-128, 128, shape).astype(np.int8)
        loss, dy = tl.mse_loss_f32(y_q, t_q, scale)
        y = t64(deq(y_q, F32(scale), zp), True)
        ref = F.mse_loss(y, t64(deq(t_q, F32(scale), zp)))
        ref.backward()
        assert abs(float(loss) - ref.item()) <= TOL * ref.item()
        assert rel_err(dy, y.grad.numpy()) <= TOL


def test_masks_and_grad_add():
    y = np.array([[-128, -5, 0, 3, 120, 127]], np.int8)
    mask = tg.act_mask(y, -5, 120)
    assert mask.tolist() == [[False, False, True, True, False, False]]
    dy = np.arange(1, 7, dtype=np.float32)[None]
    assert tg.mask_grad_f32(dy, mask).tolist() == [[0, 0, 3, 4, 0, 0]]
    # a relu mask is the autograd of relu on the dequantized pre-activation's clamp
    z = t64([[-1.0, -0.01, 0.5, 2.0]], True)
    torch.relu(z).backward(t64(np.ones((1, 4))))
    yq = np.array([[-10, -10, 3, 30]], np.int8)           # zp -10: relu output
    assert tg.mask_grad_f32(np.ones((1, 4), np.float32), tg.act_mask(yq, -10, 127)).tolist() \
        == z.grad.numpy().tolist()
    a = np.array([1e8, 1.0, -3.0], np.float32)
    assert np.array_equal(tg.grad_add_f32(a, np.array([1.0, 2.0, 3.0], np.float32)),
                          np.array([1e8 + 1.0, 3.0, 0.0], np.float32))


# -- the documented summation orders, transcribed literally --------------------------------------

def _loop_conv_grad_input(dy, w_r, x_shape, stride, dil, pad):
    _, oh, ow, o = dy.shape
    _, kh, kw, c = w_r.shape
    dx = np.zeros(x_shape, np.float32)
    for ih in range(x_shape[1]):
        for iw in range(x_shape[2]):
            acc = np.zeros(c, np.float32)
            for fy in range(kh):
                for fx in range(kw):
                    ty = ih + pad[0] - fy * dil[0]
                    tx = iw + pad[2] - fx * dil[1]
                    if ty % stride[0] or tx % stride[1]:
                        continue
                    oy, ox = ty // stride[0], tx // stride[1]
                    if not (0 <= oy < oh and 0 <= ox < ow):
                        continue
                    for oc in range(o):
                        acc = acc + dy[0, oy, ox, oc] * w_r[oc, fy, fx]
            dx[0, ih, iw] = acc
    return dx


def _loop_conv_grad_weight(x_r, dy, k, stride, dil, pad):
    _, oh, ow, o = dy.shape
    c = x_r.shape[3]
    dw = np.zeros((o, k[0], k[1], c), np.float32)
    for fy in range(k[0]):
        for fx in range(k[1]):
            acc = np.zeros((o, c), np.float32)
            for oy in range(oh):
                for ox in range(ow):
                    iy = oy * stride[0] + fy * dil[0] - pad[0]
                    ix = ox * stride[1] + fx * dil[1] - pad[2]
                    if 0 <= iy < x_r.shape[1] and 0 <= ix < x_r.shape[2]:
                        acc = acc + dy[0, oy, ox][:, None] * x_r[0, iy, ix][None, :]
            dw[:, fy, fx] = acc
    return dw


@pytest.mark.parametrize("case", [CONV_CASES[1], CONV_CASES[2]])
def test_conv_kernels_follow_documented_order_bit_exactly(case):
    h, w_, cin, o, k, stride, dil, pad, _ = case
    rng = np.random.default_rng(5)
    x_q, s_x, zp = act(rng, (1, h, w_, cin))
    w_q, s_w = weight(rng, (o,) + k + (cin,), o)
    oh, ow = out_hw(h, w_, k, stride, dil, pad)
    # wide dynamic range: reordering the sums would change low bits
    dy = (rng.standard_normal((1, oh, ow, o)) * 10.0 ** rng.integers(-3, 4, (1, oh, ow, o))
          ).astype(np.float32)
    w_r = w_q.astype(np.float32) * s_w[:, None, None, None]
    x_r = (x_q.astype(np.int64) - zp).astype(np.float32) * s_x
    assert np.array_equal(tc.conv2d_grad_input_f32(dy, w_q, s_w, x_q.shape, stride, dil, pad),
                          _loop_conv_grad_input(dy, w_r, x_q.shape, stride, dil, pad))
    assert np.array_equal(tc.conv2d_grad_weight_f32(x_q, zp, s_x, dy, w_q.shape, stride, dil,
                                                    pad),
                          _loop_conv_grad_weight(x_r, dy, k, stride, dil, pad))


def test_seq_add_is_strictly_sequential():
    rng = np.random.default_rng(0)
    terms = (rng.standard_normal((300, 7, 5)) * 10.0 ** rng.integers(-6, 7, (300, 7, 5))
             ).astype(np.float32)
    acc = np.zeros((7, 5), np.float32)
    for t in terms:
        acc = acc + t
    assert np.array_equal(tc.seq_add(np.zeros((7, 5), np.float32), terms), acc)
    assert np.array_equal(tn.seq_sum_axis(np.moveaxis(terms, 0, 2), 2), acc)
    old = tc._ACC_CHUNK
    try:
        tc._ACC_CHUNK = 64                              # chunked path: same result
        assert np.array_equal(tc.seq_add(np.zeros((7, 5), np.float32), terms), acc)
    finally:
        tc._ACC_CHUNK = old


def test_avg_pool_and_bias_orders():
    rng = np.random.default_rng(2)
    dy = (rng.standard_normal((1, 3, 3, 2)) * 10.0 ** rng.integers(-4, 5, (1, 3, 3, 2))
          ).astype(np.float32)
    db = np.zeros(2, np.float32)
    for i in range(3):
        for j in range(3):
            db = db + dy[0, i, j]
    assert np.array_equal(tc.bias_grad_f32(dy), db)
    # avg pool 3x3 stride 2 SAME on 5x5: dx = sum over (kh, kw) of dy / count
    x_shape, flt, stride, pad = (1, 5, 5, 2), (3, 3), (2, 2), SAME3
    dx = tg.avg_pool2d_grad_f32(dy, x_shape, flt, stride, pad)
    count = tg.pool_counts((5, 5), flt, stride, pad, (3, 3))
    want = np.zeros(x_shape, np.float32)
    for ih in range(5):
        for iw in range(5):
            acc = np.zeros(2, np.float32)
            for fy in range(3):
                for fx in range(3):
                    ty, tx = ih + 1 - fy, iw + 1 - fx
                    if ty % 2 or tx % 2 or not (0 <= ty // 2 < 3 and 0 <= tx // 2 < 3):
                        continue
                    acc = acc + dy[0, ty // 2, tx // 2] / F32(count[ty // 2, tx // 2])
            want[0, ih, iw] = acc
    assert np.array_equal(dx, want)
