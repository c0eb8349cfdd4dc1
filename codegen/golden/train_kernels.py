"""Golden kernels of the training ops (docs/training.md): the bit-exact oracle for the C.

``build_train_kernel(graph, op)`` returns a :class:`TrainKernel` for one training op: a function
of the op's input values (``None`` for an absent ``""`` input, exponents as int32 ``(1,)``
arrays) returning the op's outputs (a tuple in ``op.outputs`` order) or, for the update ops,
the new values of the tensors it mutates (``dict`` tensor name -> array).

The arithmetic lives in the per-family modules, each kernel's docstring giving its exact
recipe (what the C must do):

- ``train_numerics``: float32 sequencing (``seq_sum_axis``), ``pe_logf`` (the loss's float32 log,
  exact C sequence in its docstring), rounding/saturation, and the integer gradient
  primitives ``normalise`` / ``rescale`` / ``mul_by_multiplier_sat``.
- ``train_conv``: conv2d / depthwise_conv2d / fully_connected ``_grad_input`` and
  ``_grad_weight``, ``bias_grad``.
- ``train_grads``: act_mask, mask_grad, pooling, add/mul, mean/pad/concat/reshape, softmax,
  grad_add.
- ``train_loss``: softmax_cross_entropy, mse_loss.
- ``train_optim``: sgd_update, adam_update, step_counter.

int8-mode recipes in one place (``(q, e)``: int8 gradient with value q * 2**e):

==========================  ====================================================================
op                          recipe
==========================  ====================================================================
mask_grad                   q masked, e kept
conv/dw/fc _grad_input      dys = MBQM(dy << b, M_o, k_o) with r_o = s_w[o]/max s_w; int32 sum
                            of dys * w_q over the fp32 kernel's taps; rescale(acc, e-b, s_ref)
conv/dw/fc _grad_weight     int32 sum of (x - zp_x) * dy_q, exponent e (s_x folded in QAS)
bias_grad                   int32 sum of dy_q, exponent e
avg_pool2d_grad             dy_q * RECIP[count] (Q16), int32 scatter-sum, normalise(e - Q)
max_pool2d_grad             int32 scatter-sum to the first max, normalise(e)
add_grad                    int32 sum over broadcast axes, normalise(e)
mul_grad                    int32 sum of dy_q * (other - zp), rescale(e, s_other)
mean_grad                   rescale(dy_q, e, 1/count), broadcast
pad/concat/reshape_grad     slice/reshape q, e kept
softmax_grad                D = 256 dy - sum dy*u, to 16 bits, t = u*D, rescale(beta)
grad_add                    all-zero input: the other; else align to max(e) - 16, add, normalise
softmax_cross_entropy       TFLM int8->int16 softmax u; d = u - 65536[label]; normalise(d, -16)
mse_loss                    rescale(y - t, 0, 2 s / N)
sgd_update                  MBQM_sat(acc, M_c, k_c + e + G) (+ Q15 momentum), G = 0, 8 or
                            F = 16 with an int32 master (w << F copy / bias remainder);
                            every clamp saturates and is counted (saturated slot)
==========================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError, PockError
from ..ir import Graph, Op, Tensor
from ..ir.ops import UPDATE_INPUTS, UPDATE_OPS
from . import train_conv as tc
from . import train_grads as tg
from . import train_loss as tl
from . import train_optim as to
from .train_numerics import pe_logf  # noqa: F401  (the documented home of the loss log)


@dataclass(frozen=True)
class TrainKernel:
    """A prepared training op: ``run(values)`` with one value per op input."""

    op: Op
    run: Callable[[list[np.ndarray | None]], Any]
    updates: bool = False          # run returns {tensor name: new value}


def _exp(v: np.ndarray | None) -> int:
    if v is None:
        raise ModelError("missing gradient exponent")
    return int(np.asarray(v).reshape(-1)[0])


def _e(e: int) -> np.ndarray:
    return np.array([e], dtype=np.int32)


class _View:
    """An op and its graph: attributes and the tensors' quantization."""

    def __init__(self, graph: Graph, op: Op):
        self.graph, self.op = graph, op
        self.int8 = op.attrs.get("mode") == "int8"

    def t(self, i: int) -> Tensor:
        return self.graph.tensors[self.op.inputs[i]]

    def out(self, i: int = 0) -> Tensor:
        return self.graph.tensors[self.op.outputs[i]]

    def a(self, name: str, default=None):
        return self.op.attrs.get(name, default)

    def pair(self, name: str, default=(1, 1)) -> tuple[int, int]:
        v = self.a(name, default)
        return int(v[0]), int(v[1])

    def quad(self, name: str) -> tuple[int, int, int, int]:
        v = self.a(name, (0, 0, 0, 0))
        return tuple(int(x) for x in v)  # type: ignore[return-value]

    def per_tensor(self, t: Tensor) -> tuple[float, int]:
        if t.quant is None:
            raise self.error(f"tensor {t.name!r} has no quantization parameters")
        return float(t.quant.scale[0]), int(t.quant.zero_point[0])

    def scales(self, t: Tensor) -> np.ndarray:
        if t.quant is None:
            raise self.error(f"weight {t.name!r} has no quantization parameters")
        return t.quant.scale.astype(np.float32)

    def error(self, msg: str) -> ModelError:
        return ModelError(f"op {self.op.name!r} ({self.op.type}): {msg}")

    def channels(self):
        ch = self.a("channels")
        return None if ch is None else tuple(int(c) for c in ch)

    # int8 mode: a gradient input i is followed by its exponent at i + 1
    def grad_in(self, vals, i: int):
        return (vals[i], _exp(vals[i + 1])) if self.int8 else (vals[i], None)

    def result(self, g):
        """fp32: (g,); int8: (q, e) -> (q, e as int32 (1,))."""
        if self.int8:
            q, e = g
            return (q, _e(e))
        return (g,)


# ---------------------------------------------------------------------------------------------
# builders


def _conv_geometry(v: _View):
    return v.pair("stride"), v.pair("dilation"), v.quad("padding")


def _b_act_mask(v: _View):
    lo, hi = int(v.a("lo")), int(v.a("hi"))
    return lambda vals: (tg.act_mask(vals[0], lo, hi),)


def _b_mask_grad(v: _View):
    if v.int8:
        return lambda vals: v.result(tg.mask_grad_i8(vals[0], _exp(vals[1]), vals[2]))
    return lambda vals: v.result(tg.mask_grad_f32(vals[0], vals[1]))


def _b_conv_grad_input(v: _View):
    w_i = 2 if v.int8 else 1
    w_t = v.t(w_i)
    s_w = v.scales(w_t)
    x_shape = v.out(0).shape
    stride, dil, pad = _conv_geometry(v)
    depthwise = v.op.type.startswith("depthwise")
    mult = int(v.a("depth_multiplier", 1))
    if v.int8:
        dy_shape = v.t(0).shape
        # compile-time bound check (raises before the first step)
        if v.op.type == "fully_connected_grad_input":
            tc.input_grad_prescale(s_w, w_t.shape[0], w_t.shape[0])
        elif depthwise:
            tc.input_grad_prescale(s_w, dy_shape[3], w_t.shape[1] * w_t.shape[2] * mult)
        else:
            groups = x_shape[3] // w_t.shape[3]
            tc.input_grad_prescale(s_w, dy_shape[3],
                                   w_t.shape[1] * w_t.shape[2] * (dy_shape[3] // groups))

    def run(vals):
        dy, e = v.grad_in(vals, 0)
        w = np.asarray(vals[w_i])
        if v.op.type == "fully_connected_grad_input":
            g = (tc.fully_connected_grad_input_i8(dy, e, w, s_w, x_shape) if v.int8
                 else tc.fully_connected_grad_input_f32(dy, w, s_w, x_shape))
        elif depthwise:
            g = (tc.depthwise_conv2d_grad_input_i8(dy, e, w, s_w, x_shape, mult, stride, dil,
                                                   pad) if v.int8 else
                 tc.depthwise_conv2d_grad_input_f32(dy, w, s_w, x_shape, mult, stride, dil, pad))
        else:
            g = (tc.conv2d_grad_input_i8(dy, e, w, s_w, x_shape, stride, dil, pad) if v.int8
                 else tc.conv2d_grad_input_f32(dy, w, s_w, x_shape, stride, dil, pad))
        return v.result(g)
    return run


def _b_conv_grad_weight(v: _View):
    x_t = v.t(0)
    s_x, zp_x = v.per_tensor(x_t)
    w_shape = v.out(0).shape
    stride, dil, pad = _conv_geometry(v)
    ch = v.channels()
    mult = int(v.a("depth_multiplier", 1))
    kind = v.op.type
    if v.int8:
        dy_shape = v.t(1).shape
        positions = int(np.prod(dy_shape[:-1], dtype=np.int64))
        try:
            tc.weight_grad_bound(positions)
        except ModelError as err:
            raise v.error(str(err)) from None

    def run(vals):
        x = np.asarray(vals[0])
        dy, e = v.grad_in(vals, 1)
        if kind == "fully_connected_grad_weight":
            g = (tc.fully_connected_grad_weight_i8(x, zp_x, dy, e, ch) if v.int8
                 else tc.fully_connected_grad_weight_f32(x, zp_x, s_x, dy, ch))
        elif kind.startswith("depthwise"):
            g = (tc.depthwise_conv2d_grad_weight_i8(x, zp_x, dy, e, w_shape, mult, stride, dil,
                                                    pad, ch) if v.int8 else
                 tc.depthwise_conv2d_grad_weight_f32(x, zp_x, s_x, dy, w_shape, mult, stride,
                                                     dil, pad, ch))
        else:
            g = (tc.conv2d_grad_weight_i8(x, zp_x, dy, e, w_shape, stride, dil, pad, ch)
                 if v.int8 else
                 tc.conv2d_grad_weight_f32(x, zp_x, s_x, dy, w_shape, stride, dil, pad, ch))
        if v.int8:
            return (np.asarray(g[0]).astype(np.int32), _e(g[1]))
        return (g,)
    return run


def _b_bias_grad(v: _View):
    def run(vals):
        dy, e = v.grad_in(vals, 0)
        if v.int8:
            acc, e2 = tc.bias_grad_i8(dy, e)
            return (acc.astype(np.int32), _e(e2))
        return (tc.bias_grad_f32(dy),)
    return run


def _b_pool_conv_grad(v: _View):
    """The ops it stands for, one after the other (codegen.pool_grads): the global average
    pool's gradient, the mask, the bias gradient and the 1x1 conv's input gradient."""
    if v.int8:
        raise v.error("pool_conv_grad is an fp32 backward op")
    x_shape = v.out(0).shape
    hw = tuple(int(d) for d in x_shape[1:3])
    s_w = v.scales(v.t(2))

    def run(vals):
        dy = tg.avg_pool2d_grad_f32(vals[0], x_shape[:3] + (v.t(0).shape[3],), hw, hw,
                                    (0, 0, 0, 0))
        dy = tg.mask_grad_f32(dy, vals[1])
        return (tc.conv2d_grad_input_f32(dy, np.asarray(vals[2]), s_w, x_shape, (1, 1),
                                         (1, 1), (0, 0, 0, 0)), tc.bias_grad_f32(dy))
    return run


def _dy_grad(v: _View, i8: Callable, f32: Callable, *args, second: bool = False):
    """The common gradient kernel: dy (int8: with its exponent), with ``second`` the op's next
    input (a forward tensor, after dy's exponent in int8 mode), then ``args``:
    ``i8(dy, e, [x,] *args)`` or ``f32(dy, [x,] *args)``."""
    xi = 2 if v.int8 else 1

    def run(vals):
        dy, e = v.grad_in(vals, 0)
        x = (np.asarray(vals[xi]),) if second else ()
        return v.result(i8(dy, e, *x, *args) if v.int8 else f32(dy, *x, *args))
    return run


def _b_avg_pool_grad(v: _View):
    return _dy_grad(v, tg.avg_pool2d_grad_i8, tg.avg_pool2d_grad_f32, v.out(0).shape,
                    v.pair("filter"), v.pair("stride"), v.quad("padding"))


def _b_max_pool_grad(v: _View):
    return _dy_grad(v, tg.max_pool2d_grad_i8, tg.max_pool2d_grad_f32, v.pair("filter"),
                    v.pair("stride"), v.quad("padding"), second=True)


def _b_add_grad(v: _View):
    return _dy_grad(v, tg.add_grad_i8, tg.add_grad_f32, v.out(0).shape)


def _b_mul_grad(v: _View):
    s_o, zp_o = v.per_tensor(v.t(2 if v.int8 else 1))
    return _dy_grad(v, tg.mul_grad_i8, tg.mul_grad_f32, s_o, zp_o, v.out(0).shape, second=True)


def _b_mean_grad(v: _View):
    axes = tuple(sorted(int(a) for a in v.a("axes")))
    return _dy_grad(v, tg.mean_grad_i8, tg.mean_grad_f32, v.out(0).shape, axes,
                    bool(v.a("keep_dims")))


def _b_copy(fn: Callable[[np.ndarray], np.ndarray]):
    """Data-movement gradients: the same function on q (int8) or the float32 values."""
    def build(v: _View):
        move = fn(v)

        def run(vals):
            dy, e = v.grad_in(vals, 0)
            g = move(np.asarray(dy))
            return (g, _e(e)) if v.int8 else (g,)
        return run
    return build


def _pad_fn(v: _View):
    pads = tuple((int(a), int(b)) for a, b in v.a("pads"))
    return lambda dy: tg.pad_grad(dy, pads)


def _concat_fn(v: _View):
    axis, begin = int(v.a("axis")), int(v.a("begin"))
    size = v.out(0).shape[axis]
    return lambda dy: tg.concat_grad(dy, axis, begin, size)


def _reshape_fn(v: _View):
    shape = v.out(0).shape
    return lambda dy: tg.reshape_grad(dy, shape)


def _b_softmax_grad(v: _View):
    s_y, zp_y = v.per_tensor(v.t(2 if v.int8 else 1))
    return _dy_grad(v, tg.softmax_grad_i8, tg.softmax_grad_f32, s_y, zp_y,
                    float(v.a("beta", 1.0)), second=True)


def _b_grad_add(v: _View):
    def run(vals):
        if v.int8:
            return v.result(tg.grad_add_i8(vals[0], _exp(vals[1]), vals[2], _exp(vals[3])))
        return v.result(tg.grad_add_f32(vals[0], vals[1]))
    return run


def _b_cross_entropy(v: _View):
    s, zp = v.per_tensor(v.t(0))
    beta = float(v.a("beta", 1.0))
    if v.int8:
        softmax = tl._int8_softmax(s, zp, v.t(0).shape[-1], beta, bits=16)

        def run_i8(vals):
            loss, (dq, e) = tl.softmax_cross_entropy_i8(vals[0], vals[1], vals[2], s, zp, beta,
                                                        softmax)
            return (np.array([loss], np.float32), dq, _e(e))
        return run_i8

    def run(vals):
        loss, d = tl.softmax_cross_entropy_f32(vals[0], vals[1], vals[2], s, beta)
        return (np.array([loss], np.float32), d)
    return run


def _b_mse(v: _View):
    s, _ = v.per_tensor(v.t(0))

    def run(vals):
        if v.int8:
            loss, (dq, e) = tl.mse_loss_i8(vals[0], vals[1], s)
            return (np.array([loss], np.float32), dq, _e(e))
        loss, d = tl.mse_loss_f32(vals[0], vals[1], s)
        return (np.array([loss], np.float32), d)
    return run


def _update_slots(v: _View) -> dict[str, str]:
    return {k: n for k, n in zip(UPDATE_INPUTS, v.op.inputs) if n}


def _b_update(v: _View):
    names = _update_slots(v)
    rows = v.a("rows")
    ch = to.Channels(to.update_block(v.channels(), rows), int(v.a("channel_axis", 0)))
    lr = float(v.a("lr"))
    acc = int(v.a("accumulate", 1) or 1)
    updates = set(v.a("updates"))
    kind = v.op.type
    if kind == "adam_update" and v.int8:
        raise v.error("adam_update needs backward fp32")
    frac_bits = int(v.a("master_frac_bits", to.MASTER_FRAC_BITS))
    bias_limit = v.a("bias_limit")
    try:
        to.param_limits(v.t(0).dtype, bias_limit)
    except ValueError as err:
        raise v.error(str(err)) from None
    if "master" in names:
        want = "int32" if v.int8 else "float32"
        if v.graph.tensors[names["master"]].dtype != want:
            raise v.error(f"master {names['master']!r} must be {want} in "
                          f"{'int8' if v.int8 else 'fp32'} mode")
        if v.int8 and not 0 < frac_bits <= 23:
            raise v.error(f"master_frac_bits {frac_bits} outside [1, 23]")

    def run(vals):
        s = {k: vals[UPDATE_INPUTS.index(k)] for k in names}
        whole = {k: s[k] for k in to.ROW_SLOTS if k in s}
        if rows is not None:       # a block: rows j0..j1 of the per-channel inputs and state
            s.update({k: w[int(rows[0]):int(rows[1])] for k, w in whole.items()})
        common = {"lr_t": s.get("lr"), "master": s.get("master"), "accum": s.get("accum"),
                  "step": s.get("step"), "accumulate": acc, "saturated": s.get("saturated"),
                  "bias_limit": bias_limit}
        if kind == "adam_update":
            new = to.adam_update_f32(s["param"], s["grad"], s["qas"], ch, lr=lr,
                                     beta1=float(v.a("beta1")), beta2=float(v.a("beta2")),
                                     eps=float(v.a("eps")), m=s["buf1"], v=s["buf2"],
                                     pows=s["pows"], **common)
        elif v.int8:
            new = to.sgd_update_i8(s["param"], s["grad"], _exp(s["grad_exp"]), s["qas"],
                                   s["qas_shift"], ch, momentum=float(v.a("momentum", 0.0)),
                                   buf=s.get("buf1"), master=s.get("master"),
                                   frac_bits=frac_bits, saturated=s.get("saturated"),
                                   bias_limit=bias_limit)
        else:
            new = to.sgd_update_f32(s["param"], s["grad"], s["qas"], ch, lr=lr,
                                    momentum=float(v.a("momentum", 0.0)), buf=s.get("buf1"),
                                    **common)
        out = {}
        for slot, value in new.items():
            name = names[slot]
            if name not in updates:
                raise v.error(f"writes {name!r} ({slot}), which is not in its updates")
            value = np.asarray(value).astype(v.graph.tensors[name].dtype)
            if rows is not None and slot in whole:
                value = np.concatenate([whole[slot][:int(rows[0])], value,
                                        whole[slot][int(rows[1]):]])
            out[name] = value
        return out
    return run


def _b_step_counter(v: _View):
    ins = list(v.op.inputs) + [""] * (3 - len(v.op.inputs))
    slot_names = dict(zip(("step", "lr", "pows"), ins))
    sched = v.a("schedule", "constant")
    if isinstance(sched, dict):
        sched = sched.get("name", "constant")
    kw = {"accumulate": int(v.a("accumulate", 1) or 1), "schedule": str(sched),
          "lr": float(v.a("lr", 0.0)), "gamma": float(v.a("gamma", 1.0)),
          "step_size": int(v.a("step_size", 1) or 1),
          "warmup_steps": int(v.a("warmup_steps", 0) or 0),
          "total_steps": int(v.a("total_steps", 1) or 1),
          "min_lr": float(v.a("min_lr", 0.0)),
          "beta1": float(v.a("beta1", 0.9)), "beta2": float(v.a("beta2", 0.999))}

    def run(vals):
        vals = list(vals) + [None] * (3 - len(vals))
        new = to.step_counter(vals[0], vals[1], vals[2], **kw)
        return {slot_names[k]: np.asarray(val).astype(v.graph.tensors[slot_names[k]].dtype)
                for k, val in new.items() if slot_names[k]}
    return run


def merge_channels(trained: np.ndarray, frozen: np.ndarray, channels, axis: int = 0
                   ) -> np.ndarray:
    """The whole weight of a partial trainable tensor (codegen.partial): the trained
    ``channels`` (ascending) on ``axis`` from ``trained``, the others in order from
    ``frozen``."""
    trained, frozen = np.asarray(trained), np.asarray(frozen)
    n = trained.shape[axis] + frozen.shape[axis]
    mask = np.zeros(n, bool)
    mask[list(channels)] = True
    out = np.empty(trained.shape[:axis] + (n,) + trained.shape[axis + 1:], trained.dtype)
    idx: list[Any] = [slice(None)] * out.ndim
    idx[axis] = mask
    out[tuple(idx)] = trained
    idx[axis] = ~mask
    out[tuple(idx)] = frozen
    return out


def _b_merge_channels(v: _View):
    channels, axis = tuple(int(c) for c in v.a("channels")), int(v.a("axis", 0))
    return lambda vals: (merge_channels(vals[0], vals[1], channels, axis),)


TRAIN_KERNEL_BUILDERS: dict[str, Callable[[_View], Callable]] = {
    "act_mask": _b_act_mask,
    "mask_grad": _b_mask_grad,
    "softmax_cross_entropy": _b_cross_entropy,
    "mse_loss": _b_mse,
    "conv2d_grad_input": _b_conv_grad_input,
    "conv2d_grad_weight": _b_conv_grad_weight,
    "depthwise_conv2d_grad_input": _b_conv_grad_input,
    "depthwise_conv2d_grad_weight": _b_conv_grad_weight,
    "fully_connected_grad_input": _b_conv_grad_input,
    "fully_connected_grad_weight": _b_conv_grad_weight,
    "bias_grad": _b_bias_grad,
    "avg_pool2d_grad": _b_avg_pool_grad,
    "max_pool2d_grad": _b_max_pool_grad,
    "add_grad": _b_add_grad,
    "mul_grad": _b_mul_grad,
    "mean_grad": _b_mean_grad,
    "pad_grad": _b_copy(_pad_fn),
    "concat_grad": _b_copy(_concat_fn),
    "reshape_grad": _b_copy(_reshape_fn),
    "softmax_grad": _b_softmax_grad,
    "grad_add": _b_grad_add,
    "sgd_update": _b_update,
    "adam_update": _b_update,
    "step_counter": _b_step_counter,
    "merge_channels": _b_merge_channels,
    "pool_conv_grad": _b_pool_conv_grad,
}


def build_train_kernel(graph: Graph, op: Op) -> TrainKernel:
    """The prepared golden kernel of a training op; ModelError if it cannot run."""
    builder = TRAIN_KERNEL_BUILDERS.get(op.type)
    if builder is None:
        raise ModelError(f"op {op.name!r} ({op.type}): no golden training kernel")
    view = _View(graph, op)
    try:
        run = builder(view)
    except PockError as err:
        msg = str(err)
        raise ModelError(msg if msg.startswith("op ") else f"op {op.name!r} ({op.type}): {msg}"
                         ) from None
    return TrainKernel(op, run, op.type in UPDATE_OPS)
