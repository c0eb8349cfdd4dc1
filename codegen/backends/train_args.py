"""Training op -> call of a portable C training kernel (runtime_c/kernels/pe_train_kernels.h).

``train_kernel_call(graph, op)`` returns a :class:`~codegen.backends.kernel_call.KernelCall`
for every op of ``ir.ops.TRAINING_OP_SPECS`` (``ref_args.kernel_call`` dispatches here, so one
call lowers a whole training graph). The records follow the forward records' conventions:
kernel ``pe_<op>_f32`` (``backward: fp32``) or ``pe_<op>_s8`` (``backward: int8``; update
kernels add the parameter dtype, ``pe_sgd_update_f32_s8``), arguments in C order — scratch
context, parameter struct, quantization (or the constant array in its place: weight scales,
trained channels), then the tensors in IR input order (each int8-mode gradient followed by
its int32 exponent tensor), outputs last.

Every number a kernel needs is computed here, with the golden model's own functions
(``codegen.golden.train_conv.input_grad_prescale``, ``train_grads.avg_pool_recip_bits``,
``train_numerics.static_factor``, ``train_loss.mse_constants``, ``train_optim.momentum_q15``):
the C kernels do no compile-time arithmetic. The bounds the golden kernels check when they are
built (int32 accumulators that could overflow, a pooling window entirely in the padding, an
int8 softmax gradient whose output scale is not 1/256) raise ModelError here.

Tables (EXP / NEGLOG), QAS factors, multipliers and shifts that are tensors of the training
graph are passed as those tensors. Update ops take their ``ops.UPDATE_INPUTS`` slots as
tensors or NULL; the kernel writes the parameter and its own buffers in place and adds its
saturated updates to the ``saturated`` counter (the last argument, NULL: not counted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ModelError, PockError
from ..golden import train_conv, train_grads, train_loss, train_numerics, train_optim
from ..ir import Graph, Op, Tensor
from ..ir.ops import UPDATE_INPUTS
from ..partial import runs
from .kernel_call import (
    C_TYPES,
    Arg,
    ArrayArg,
    ConstArray,
    ContextArg,
    KernelCall,
    NullArg,
    ScalarArg,
    Struct,
    StructArg,
    TensorArg,
)
from .params import (
    OpArgs,
    broadcast_dims,
    call,
    check_int32_sizes,
    collapse_padding,
    collapse_reduction,
    dims,
    int32_array,
    portable_builder,
    softmax_params_s8,
    tile,
)

F32 = np.float32
SCHEDULES = {"constant": 0, "step": 1, "warmup": 2, "cosine": 3}


class _TrainOp(OpArgs):
    """A training op: its mode, and its tensors by role (int8 mode adds exponent tensors)."""

    def __init__(self, graph: Graph, op: Op, batch: int):
        super().__init__(graph, op, batch)
        self.int8 = op.attrs.get("mode") == "int8"
        self.suffix = "s8" if self.int8 else "f32"

    def roles(self, pattern: Sequence[str], names: Sequence[str]) -> dict[str, Tensor]:
        """Tensors by role: ``pattern`` lists the roles in order, a role starting with ``#``
        exists only in int8 mode (an exponent)."""
        want = [r[1:] + "_exp" if r.startswith("#") else r for r in pattern
                if self.int8 or not r.startswith("#")]
        if len(names) != len(want):
            raise self.error(f"expects {len(want)} tensors ({', '.join(want)}), has "
                             f"{len(names)}")
        return {r: self.graph.tensors[n] for r, n in zip(want, names) if n}

    def ins(self, *pattern: str) -> dict[str, Tensor]:
        return self.roles(pattern, self.op.inputs)

    def outs(self, *pattern: str) -> dict[str, Tensor]:
        return self.roles(pattern, self.op.outputs)

    def pair(self, name: str, default=(1, 1)) -> tuple[int, int]:
        v = self.attr(name, default)
        return int(v[0]), int(v[1])

    def weight_scales(self, w: Tensor, n_out: int) -> np.ndarray:
        if w.quant is None:
            raise self.error(f"weight {w.name!r} has no quantization parameters")
        s = w.quant.scale.astype(np.float32).reshape(-1)
        if s.size not in (1, n_out):
            raise self.error(f"weight has {s.size} scales for {n_out} output channels")
        return np.broadcast_to(s, (n_out,)).astype(np.float32)

    def channels(self) -> tuple[int, ...] | None:
        ch = self.attr("channels")
        return None if ch is None else tuple(int(c) for c in ch)

    def call(self, kernel: str, args: Sequence[tuple[str, Arg]],
             may_alias: tuple[tuple[str, str], ...] = (), inplace: Sequence[str] = ()
             ) -> KernelCall:
        return call(self, kernel, args, may_alias, inplace)


# -- argument helpers -----------------------------------------------------------------------------
def _t(t: Tensor, write: bool = False) -> TensorArg:
    ctype = C_TYPES[t.dtype]
    return TensorArg(t.name, f"{ctype} *" if write else f"const {ctype} *")


def _grad(v: _TrainOp, ts: dict[str, Tensor], role: str, write: bool = False
          ) -> list[tuple[str, Arg]]:
    """A gradient tensor and, in int8 mode, its exponent."""
    out: list[tuple[str, Arg]] = [(role, _t(ts[role], write))]
    if v.int8:
        out.append((f"{role}_exp", _t(ts[f"{role}_exp"], write)))
    return out


def _f32_array(name: str, values) -> ConstArray:
    return ConstArray(name, "float", np.asarray(values, dtype=np.float32).reshape(-1))


def _channels_arg(ch: tuple[int, ...] | None) -> Arg:
    if ch is None:
        return NullArg("const int32_t *")
    return ArrayArg(int32_array("channels", ch))


def _geometry(v: _TrainOp) -> dict[str, Struct]:
    sh, sw = v.pair("stride")
    dh, dw = v.pair("dilation")
    top, _, left, _ = (int(x) for x in v.attr("padding", (0, 0, 0, 0)))
    return {"stride": tile(sh, sw), "padding": tile(top, left), "dilation": tile(dh, dw)}


def _static(v: _TrainOp, real: float) -> tuple[int, int]:
    m, k = train_numerics.static_factor(real)
    return int(m), int(k)


def _check(v: _TrainOp, fn: Callable[[], object]) -> None:
    """Run a golden compile-time check; its ModelError names the op."""
    try:
        fn()
    except PockError as err:
        raise v.error(str(err)) from None


# -- masks ------------------------------------------------------------------------------------------
def _act_mask(v: _TrainOp) -> KernelCall:
    y, mask = v.x(), v.out()
    if y.dtype != "int8" or mask.dtype != "bit":
        raise v.error(f"act_mask maps int8 to bit, got {y.dtype} -> {mask.dtype}")
    lo, hi = int(v.attr("lo")), int(v.attr("hi"))
    return v.call("pe_act_mask_s8", [
        ("params", StructArg(Struct("pe_activation", {"min": lo, "max": hi}))),
        ("size", ScalarArg("int32_t", y.size)), ("y", _t(y)), ("mask", _t(mask, True))])


def _mask_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy", "mask")
    outs = v.outs("dx", "#dx")
    return v.call(f"pe_mask_grad_{v.suffix}", [
        ("size", ScalarArg("int32_t", ins["dy"].size)), *_grad(v, ins, "dy"),
        ("mask", _t(ins["mask"])), *_grad(v, outs, "dx", True)],
        inplace=(ins["dy"].name,))           # dx[i] depends on dy[i] only


# -- losses -------------------------------------------------------------------------------------------
def _cross_entropy(v: _TrainOp) -> KernelCall:
    ins = v.ins("logits", "label", "table")
    outs = v.outs("loss", "dlogits", "#dlogits")
    logits = ins["logits"]
    s, _ = v.quant(logits)
    beta = F32(v.attr("beta", 1.0))
    classes = logits.size
    if v.int8:
        if classes > 4096:
            raise v.error(f"int8 softmax rows of {classes} values overflow TFLM's int32 sum "
                          "(at most 4096)")
        m, k = (0, 0) if beta == F32(1.0) else _static(v, float(beta))
        params = Struct("pe_cross_entropy_params", {
            "softmax": softmax_params_s8(s, float(beta), v.error),
            "beta_multiplier": m, "beta_shift": k})
    else:
        params = Struct("pe_cross_entropy_params_f32", {
            "scale": float(F32(beta * F32(s))), "beta": float(beta)})
    return v.call(f"pe_softmax_cross_entropy_{v.suffix}", [
        ("params", StructArg(params)), ("classes", ScalarArg("int32_t", classes)),
        ("logits", _t(logits)), ("label", _t(ins["label"])), ("table", _t(ins["table"])),
        ("loss", _t(outs["loss"], True)), *_grad(v, outs, "dlogits", True)])


def _mse(v: _TrainOp) -> KernelCall:
    ins = v.ins("y", "target")
    outs = v.outs("loss", "dy", "#dy")
    y = ins["y"]
    s, _ = v.quant(y)
    n = y.size
    if v.int8:
        if n * 255 * 255 > train_numerics.INT32_MAX:
            raise v.error(f"int8 mse over {n} outputs overflows an int32 sum")
        loss_k, m, k = train_loss.mse_constants(s, n)
        params = Struct("pe_mse_params", {"loss_scale": float(loss_k), "multiplier": int(m),
                                          "shift": int(k)})
    else:
        params = Struct("pe_mse_params_f32", {"scale": float(F32(s))})
    return v.call(f"pe_mse_loss_{v.suffix}", [
        ("params", StructArg(params)), ("size", ScalarArg("int32_t", n)), ("y", _t(y)),
        ("target", _t(ins["target"])), ("loss", _t(outs["loss"], True)),
        *_grad(v, outs, "dy", True)])


# -- conv2d, depthwise_conv2d, fully_connected, bias ---------------------------------------------
def _grad_input_quant(v: _TrainOp, s_w: np.ndarray, n_out: int, taps: int) -> Struct:
    try:
        m, k, b, m_ref, k_ref = train_conv.input_grad_prescale(s_w, n_out, taps)
    except PockError as err:
        raise v.error(str(err)) from None
    return Struct("pe_grad_input_quant", {
        "multiplier": int32_array("multiplier", m), "shift": int32_array("shift", k),
        "prescale_shift": int(b), "output_multiplier": int(m_ref), "output_shift": int(k_ref)})


def _conv_grad_input(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy", "filter")
    outs = v.outs("dx", "#dx")
    dy, w, dx = ins["dy"], ins["filter"], outs["dx"]
    kind = v.op.type
    if w.dtype != "int8":
        raise v.error(f"weight {w.name!r} must be int8")
    if kind == "fully_connected_grad_input":
        n_out, depth = w.shape
        rows = dx.size // depth
        dy_dims, w_dims, dx_dims = (dims((rows, 1, 1, n_out)), dims((n_out, 1, 1, depth)),
                                    dims((rows, 1, 1, depth)))
        taps, head = n_out, []
    elif kind == "depthwise_conv2d_grad_input":
        n_out = w.shape[3]
        mult = int(v.attr("depth_multiplier", 1))
        taps = w.shape[1] * w.shape[2] * mult
        head = [("params", StructArg(Struct("pe_dw_conv_grad_params",
                                            {"ch_mult": mult, **_geometry(v)})))]
        dy_dims, w_dims, dx_dims = dims(dy.shape), dims(w.shape), dims(dx.shape)
    else:
        n_out = w.shape[0]
        groups = dx.shape[3] // w.shape[3]
        taps = w.shape[1] * w.shape[2] * (n_out // groups)
        head = [("params", StructArg(Struct("pe_conv_grad_params", _geometry(v))))]
        dy_dims, w_dims, dx_dims = dims(dy.shape), dims(w.shape), dims(dx.shape)
    s_w = v.weight_scales(w, n_out)
    if v.int8:
        quant: tuple[str, Arg] = ("quant", StructArg(_grad_input_quant(v, s_w, n_out, taps)))
    else:
        quant = ("filter_scale", ArrayArg(_f32_array("filter_scale", s_w)))
    return v.call(f"pe_{kind}_{v.suffix}", [
        ("ctx", ContextArg()), *head, quant, ("dy_dims", StructArg(dy_dims)),
        *_grad(v, ins, "dy"), ("filter_dims", StructArg(w_dims)), ("filter", _t(w)),
        ("dx_dims", StructArg(dx_dims)), *_grad(v, outs, "dx", True)])


def _conv_grad_weight(v: _TrainOp) -> KernelCall:
    ins = v.ins("x", "dy", "#dy")
    outs = v.outs("dw", "#dw")
    x, dy, dw = ins["x"], ins["dy"], outs["dw"]
    s_x, zp_x = v.quant(x)
    kind = v.op.type
    if v.int8:
        positions = int(np.prod(dy.shape[:-1], dtype=np.int64))
        _check(v, lambda: train_conv.weight_grad_bound(positions))
    base: dict = {"input_offset": -zp_x}
    if not v.int8:
        base["input_scale"] = float(F32(s_x))
    sfx = "" if v.int8 else "_f32"
    if kind == "fully_connected_grad_weight":
        depth = dw.shape[1]
        rows = x.size // depth
        params = Struct(f"pe_fc_grad_weight_params{sfx}", base)
        x_dims, dy_dims = dims((rows, 1, 1, depth)), dims((rows, 1, 1, dy.shape[-1]))
        dw_dims = dims((dw.shape[0], 1, 1, depth))
    elif kind == "depthwise_conv2d_grad_weight":
        params = Struct(f"pe_dw_conv_grad_weight_params{sfx}", {
            **base, "ch_mult": int(v.attr("depth_multiplier", 1)), **_geometry(v)})
        x_dims, dy_dims, dw_dims = dims(x.shape), dims(dy.shape), dims(dw.shape)
    else:
        params = Struct(f"pe_conv_grad_weight_params{sfx}", {**base, **_geometry(v)})
        x_dims, dy_dims, dw_dims = dims(x.shape), dims(dy.shape), dims(dw.shape)
    return v.call(f"pe_{kind}_{v.suffix}", [
        ("ctx", ContextArg()), ("params", StructArg(params)), ("channels", _channels_arg(v.channels())),
        ("x_dims", StructArg(x_dims)), ("x", _t(x)), ("dy_dims", StructArg(dy_dims)),
        *_grad(v, ins, "dy"), ("dw_dims", StructArg(dw_dims)), *_grad(v, outs, "dw", True)])


def _bias_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy")
    outs = v.outs("db", "#db")
    dy = ins["dy"]
    c = int(dy.shape[-1]) if dy.shape else 1
    rows = dy.size // max(c, 1)
    if v.int8 and rows * 127 > train_numerics.INT32_MAX:
        raise v.error(f"int8 backward: a bias gradient sums {rows} positions")
    return v.call(f"pe_bias_grad_{v.suffix}", [
        ("num_rows", ScalarArg("int32_t", rows)), ("row_size", ScalarArg("int32_t", c)),
        *_grad(v, ins, "dy"), *_grad(v, outs, "db", True)])


def _pool_conv_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("g", "mask", "filter")
    outs = v.outs("dx", "db")
    g, w, dx = ins["g"], ins["filter"], outs["dx"]
    if v.int8:
        raise v.error("pool_conv_grad is an fp32 backward op")
    if w.dtype != "int8" or tuple(w.shape[1:3]) != (1, 1):
        raise v.error(f"weight {w.name!r} must be an int8 1x1 filter")
    n_out = int(w.shape[0])
    return v.call("pe_pool_conv_grad_f32", [
        ("filter_scale", ArrayArg(_f32_array("filter_scale", v.weight_scales(w, n_out)))),
        ("g", _t(g)), ("mask", _t(ins["mask"])), ("filter", _t(w)),
        ("dx_dims", StructArg(dims(dx.shape))), ("n_out", ScalarArg("int32_t", n_out)),
        ("dx", _t(dx, True)), ("db", _t(outs["db"], True))])


# -- pooling ------------------------------------------------------------------------------------------
def _pool_grad(v: _TrainOp) -> KernelCall:
    avg = v.op.type == "avg_pool2d_grad"
    ins = v.ins("dy", "#dy") if avg else v.ins("dy", "#dy", "x")
    outs = v.outs("dx", "#dx")
    dy, dx = ins["dy"], outs["dx"]
    flt, stride = v.pair("filter"), v.pair("stride")
    pad = tuple(int(p) for p in v.attr("padding", (0, 0, 0, 0)))
    if flt[0] * flt[1] * 127 > train_numerics.INT32_MAX:
        raise v.error(f"pooling window {flt[0]}x{flt[1]} overflows an int32 gradient sum")
    if avg:
        _check(v, lambda: train_grads.pool_counts(dx.shape[1:3], flt, stride, pad, dy.shape[1:3]))
    geo = {"stride": tile(*stride), "padding": tile(pad[0], pad[2])}
    if avg and v.int8:
        params = Struct("pe_avg_pool_grad_params",
                        {**geo, "recip_bits": train_grads.avg_pool_recip_bits(flt)})
    else:
        params = Struct("pe_pool_grad_params", geo)
    x_arg = [] if avg else [("x", _t(ins["x"]))]
    kind = "avg" if avg else "max"
    return v.call(f"pe_{kind}_pool2d_grad_{v.suffix}", [
        ("ctx", ContextArg()), ("params", StructArg(params)), ("dy_dims", StructArg(dims(dy.shape))),
        *_grad(v, ins, "dy"), *x_arg, ("filter_dims", StructArg(dims((1, flt[0], flt[1], 1)))),
        ("dx_dims", StructArg(dims(dx.shape))), *_grad(v, outs, "dx", True)])


# -- broadcasting: add, mul, mean -----------------------------------------------------------------
def _add_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy")
    outs = v.outs("dx", "#dx")
    dy, dx = ins["dy"], outs["dx"]
    collapsed = broadcast_dims(dx.shape, dx.shape, dy.shape)
    if collapsed is None or len(dx.shape) > len(dy.shape):
        raise v.error(f"reducing {list(dy.shape)} to {list(dx.shape)} needs more than 4 "
                      "dimensions")
    d_dx, _, d_dy = collapsed
    if not train_grads.broadcast_axes(tuple(dx.shape), tuple(dy.shape)):
        return _reshape_grad(v)                     # nothing reduced: dx is dy (a copy)
    return v.call(f"pe_add_grad_{v.suffix}", [
        ("dy_dims", StructArg(dims(d_dy))), *_grad(v, ins, "dy"),
        ("dx_dims", StructArg(dims(d_dx))), *_grad(v, outs, "dx", True)])


def _mul_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy", "other")
    outs = v.outs("dx", "#dx")
    dy, other, dx = ins["dy"], ins["other"], outs["dx"]
    s_o, zp_o = v.quant(other)
    collapsed = broadcast_dims(dx.shape, other.shape, dy.shape)
    if collapsed is None or len(dx.shape) > len(dy.shape) or len(other.shape) > len(dy.shape):
        raise v.error(f"mul gradient of {list(dy.shape)} x {list(other.shape)} -> "
                      f"{list(dx.shape)} needs more than 4 dimensions")
    d_dx, d_other, d_dy = collapsed
    if v.int8:
        axes = train_grads.broadcast_axes(tuple(dx.shape), tuple(dy.shape))
        count = int(np.prod([dy.shape[a] for a in axes], dtype=np.int64)) if axes else 1
        if count * 127 * 255 > train_numerics.INT32_MAX:
            raise v.error(f"int8 backward: mul gradient sums {count} products")
        m, k = _static(v, float(F32(s_o)))
        params = Struct("pe_mul_grad_params", {"other_offset": -zp_o, "multiplier": m,
                                               "shift": k})
    else:
        reduce = int(bool(train_grads.broadcast_axes(tuple(dx.shape), tuple(dy.shape))))
        params = Struct("pe_mul_grad_params_f32", {"other_offset": -zp_o,
                                                   "other_scale": float(F32(s_o)),
                                                   "reduce": reduce})
    return v.call(f"pe_mul_grad_{v.suffix}", [
        ("params", StructArg(params)), ("dy_dims", StructArg(dims(d_dy))), *_grad(v, ins, "dy"),
        ("other_dims", StructArg(dims(d_other))), ("other", _t(other)),
        ("dx_dims", StructArg(dims(d_dx))), *_grad(v, outs, "dx", True)])


def _mean_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy")
    outs = v.outs("dx", "#dx")
    dx = outs["dx"]
    axes = sorted({int(a) for a in v.attr("axes")})
    if any(not 0 <= a < len(dx.shape) for a in axes):
        raise v.error(f"axes {axes} outside rank {len(dx.shape)}")
    collapsed = collapse_reduction(dx.shape, [i in axes for i in range(len(dx.shape))])
    if collapsed is None:
        raise v.error(f"mean of {list(dx.shape)} over axes {axes} needs more than 4 dimensions")
    d_dx, d_dy = collapsed
    count = train_grads.mean_count(dx.shape, axes)
    if count == 0:
        raise v.error("mean over an empty axis")
    if v.int8:
        m, k = _static(v, 1.0 / count)
        head: tuple[str, Arg] = ("quant", StructArg(Struct("pe_per_tensor_quant",
                                                           {"multiplier": m, "shift": k})))
    else:
        head = ("params", StructArg(Struct("pe_mean_grad_params_f32",
                                           {"count": float(F32(count))})))
    return v.call(f"pe_mean_grad_{v.suffix}", [
        head, ("dy_dims", StructArg(dims(d_dy))), *_grad(v, ins, "dy"),
        ("dx_dims", StructArg(dims(d_dx))), *_grad(v, outs, "dx", True)])


# -- data movement --------------------------------------------------------------------------------
def _pad_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy")
    outs = v.outs("dx", "#dx")
    dx = outs["dx"]
    pads = tuple((int(a), int(b)) for a, b in v.attr("pads"))
    if len(pads) != len(dx.shape) or any(a < 0 or b < 0 for a, b in pads):
        raise v.error(f"pads {list(pads)} do not fit rank {len(dx.shape)}")
    collapsed = collapse_padding(dx.shape, pads)
    if collapsed is None:
        raise v.error(f"padding {list(pads)} of {list(dx.shape)} needs more than 4 dimensions")
    shape, p = collapsed
    dy_shape = tuple(d + a + b for d, (a, b) in zip(shape, p))
    params = Struct("pe_pad_grad_params", {"before": dims(tuple(a for a, _ in p))})
    return v.call(f"pe_pad_grad_{v.suffix}", [
        ("params", StructArg(params)), ("dy_dims", StructArg(dims(dy_shape))),
        *_grad(v, ins, "dy"), ("dx_dims", StructArg(dims(shape))), *_grad(v, outs, "dx", True)])


def _concat_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy")
    outs = v.outs("dx", "#dx")
    dy, dx = ins["dy"], outs["dx"]
    axis, begin = int(v.attr("axis")), int(v.attr("begin"))
    if not 0 <= axis < len(dx.shape) or len(dy.shape) != len(dx.shape):
        raise v.error(f"axis {axis} does not fit {list(dy.shape)} -> {list(dx.shape)}")
    if begin < 0 or begin + dx.shape[axis] > dy.shape[axis]:
        raise v.error(f"slice {begin}:{begin + dx.shape[axis]} outside {dy.shape[axis]}")
    inner = int(np.prod(dx.shape[axis + 1:], dtype=np.int64))
    params = Struct("pe_concat_grad_params", {
        "outer_size": int(np.prod(dx.shape[:axis], dtype=np.int64)),
        "dy_inner_size": int(np.prod(dy.shape[axis:], dtype=np.int64)),
        "dx_inner_size": int(dx.shape[axis]) * inner, "offset": begin * inner})
    return v.call(f"pe_concat_grad_{v.suffix}", [
        ("params", StructArg(params)), *_grad(v, ins, "dy"), *_grad(v, outs, "dx", True)])


def _reshape_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy")
    outs = v.outs("dx", "#dx")
    dy, dx = ins["dy"], outs["dx"]
    if dy.size != dx.size:
        raise v.error(f"cannot reshape {list(dy.shape)} to {list(dx.shape)}")
    return v.call(f"pe_reshape_grad_{v.suffix}", [
        ("size", ScalarArg("int32_t", dx.size)), *_grad(v, ins, "dy"),
        *_grad(v, outs, "dx", True)], may_alias=((dy.name, dx.name),))


# -- softmax, grad_add ------------------------------------------------------------------------------
def _softmax_grad(v: _TrainOp) -> KernelCall:
    ins = v.ins("dy", "#dy", "y")
    outs = v.outs("dx", "#dx")
    dy, y = ins["dy"], ins["y"]
    s_y, zp_y = v.quant(y)
    beta = F32(v.attr("beta", 1.0))
    row = int(dy.shape[-1]) if dy.shape else 1
    rows = dy.size // max(row, 1)
    if v.int8:
        if F32(s_y) != F32(1.0 / 256):
            raise v.error(f"int8 softmax gradient needs the output scale 1/256, got {s_y:g}")
        if row * 127 * 255 + 127 * 256 > train_numerics.INT32_MAX:
            raise v.error(f"int8 softmax gradient over {row} classes overflows int32")
        m, k = _static(v, float(beta))
        params = Struct("pe_softmax_grad_params", {"y_offset": -zp_y, "beta_multiplier": m,
                                                   "beta_shift": k})
    else:
        params = Struct("pe_softmax_grad_params_f32", {"y_offset": -zp_y,
                                                       "y_scale": float(F32(s_y)),
                                                       "beta": float(beta)})
    return v.call(f"pe_softmax_grad_{v.suffix}", [
        ("params", StructArg(params)), ("num_rows", ScalarArg("int32_t", rows)),
        ("row_size", ScalarArg("int32_t", row)), *_grad(v, ins, "dy"), ("y", _t(y)),
        *_grad(v, outs, "dx", True)])


def _grad_add(v: _TrainOp) -> KernelCall:
    ins = v.ins("g1", "#g1", "g2", "#g2")
    outs = v.outs("g", "#g")
    if not (ins["g1"].shape == ins["g2"].shape == outs["g"].shape):
        raise v.error(f"grad_add of {list(ins['g1'].shape)} and {list(ins['g2'].shape)}")
    return v.call(f"pe_grad_add_{v.suffix}", [
        ("size", ScalarArg("int32_t", outs["g"].size)), *_grad(v, ins, "g1"),
        *_grad(v, ins, "g2"), *_grad(v, outs, "g", True)],
        inplace=(ins["g1"].name, ins["g2"].name))


# -- updates --------------------------------------------------------------------------------------------
_WRITES = ("param", "buf1", "buf2", "master", "accum", "saturated")
_UPDATE_C_SLOTS = {
    ("sgd_update", "f32"): ("param", "grad", "qas", "buf1", "master", "lr", "accum", "step",
                            "saturated"),
    ("sgd_update", "s8"): ("param", "grad", "qas", "grad_exp", "qas_shift", "buf1", "master",
                           "saturated"),
    ("adam_update", "f32"): ("param", "grad", "qas", "buf1", "buf2", "pows", "master", "lr",
                             "accum", "step", "saturated"),
}
_SLOT_CTYPES = {  # slot -> element type in each mode (param: by the parameter's dtype)
    "f32": {"grad": "float", "qas": "float", "buf1": "float", "buf2": "float",
            "pows": "float", "master": "float", "lr": "float", "accum": "float",
            "step": "int32_t", "saturated": "int32_t"},
    "s8": {"grad": "int32_t", "qas": "int32_t", "grad_exp": "int32_t",
           "qas_shift": "int32_t", "buf1": "int32_t", "master": "int32_t",
           "saturated": "int32_t"},
}


def _update_channels(v: _TrainOp) -> tuple[int, ...] | None:
    """The channels an update op writes (a block of the trained ones with attr rows)."""
    return train_optim.update_block(v.channels(), v.attr("rows"))


def _update_dims(v: _TrainOp, param: Tensor) -> Struct:
    axis = int(v.attr("channel_axis", 0))
    shape = param.shape
    if not 0 <= axis < len(shape):
        raise v.error(f"channel_axis {axis} outside the parameter's rank {len(shape)}")
    ch = _update_channels(v)
    count = shape[axis] if ch is None else len(ch)
    if ch is not None and any(not 0 <= c < shape[axis] for c in ch):
        raise v.error(f"channels {list(ch)} outside the parameter's {shape[axis]} channels")
    try:
        lo, hi = train_optim.param_limits(param.dtype, v.attr("bias_limit"))
    except ValueError as err:
        raise v.error(str(err)) from None
    return Struct("pe_update_dims", {
        "outer": int(np.prod(shape[:axis], dtype=np.int64)), "channels": int(shape[axis]),
        "inner": int(np.prod(shape[axis + 1:], dtype=np.int64)), "count": int(count),
        "lo": lo, "hi": hi})


def _update(v: _TrainOp) -> KernelCall:
    kind = v.op.type
    mode = v.suffix
    if (kind, mode) not in _UPDATE_C_SLOTS:
        raise v.error(f"{kind} needs backward fp32")
    names = dict(zip(UPDATE_INPUTS, list(v.op.inputs) + [""] * len(UPDATE_INPUTS)))
    slots = {k: v.graph.tensors[n] for k, n in names.items() if n}
    param = slots.get("param")
    if param is None or param.dtype not in ("int8", "int32"):
        raise v.error("the updated parameter must be an int8 weight or an int32 bias")
    ptype = "s8" if param.dtype == "int8" else "s32"
    used = _UPDATE_C_SLOTS[(kind, mode)]
    extra = set(slots) - set(used)
    if extra:
        raise v.error(f"slots {sorted(extra)} have no {mode} kernel argument")
    acc = int(v.attr("accumulate", 1) or 1)
    if acc > 1 and ("accum" not in slots or "step" not in slots):
        raise v.error("accumulate > 1 needs the accum and step slots")
    if kind == "adam_update" and ("buf1" not in slots or "buf2" not in slots
                                  or "pows" not in slots):
        raise v.error("adam_update needs the m, v and pows slots")
    momentum = float(v.attr("momentum", 0.0) or 0.0)
    if kind == "sgd_update" and (momentum > 0) != ("buf1" in slots):
        raise v.error("momentum > 0 needs (only then) the buf1 slot")
    if mode == "s8":
        if "master" in slots and slots["master"].dtype != "int32":
            raise v.error("int8-mode master weights must be int32")
        frac = int(v.attr("master_frac_bits", train_optim.MASTER_FRAC_BITS))
        if "master" in slots and not 0 < frac <= 23:
            raise v.error(f"master_frac_bits {frac} outside [1, 23]")
        params = Struct("pe_sgd_params", {"momentum_q15": train_optim.momentum_q15(momentum)
                                          if momentum > 0 else 0, "master_frac_bits": frac})
    elif kind == "sgd_update":
        params = Struct("pe_sgd_params_f32", {"lr": float(F32(v.attr("lr"))),
                                              "momentum": float(F32(momentum)),
                                              "accumulate": acc})
    else:
        params = Struct("pe_adam_params_f32", {
            "lr": float(F32(v.attr("lr"))), "beta1": float(F32(v.attr("beta1"))),
            "beta2": float(F32(v.attr("beta2"))), "eps": float(F32(v.attr("eps"))),
            "accumulate": acc})
    ch = _update_channels(v)
    rows = v.attr("rows")
    j0 = int(rows[0]) if rows is not None else 0
    inner = int(np.prod(slots["grad"].shape[1:], dtype=np.int64)) if "grad" in slots else 0
    args: list[tuple[str, Arg]] = [
        ("params", StructArg(params)), ("dims", StructArg(_update_dims(v, param))),
        ("channels", _channels_arg(ch))]
    for slot in used:
        write = slot in _WRITES
        ctype = C_TYPES[param.dtype] if slot == "param" else _SLOT_CTYPES[mode][slot]
        t = slots.get(slot)
        if t is None:
            if slot in ("param", "grad", "qas") or (mode == "s8" and slot in ("grad_exp",
                                                                              "qas_shift")):
                raise v.error(f"missing the {slot} slot")
            args.append((slot, NullArg(f"{ctype} *" if write else f"const {ctype} *")))
            continue
        if C_TYPES.get(t.dtype) != ctype:
            raise v.error(f"slot {slot} ({t.name!r}) is {t.dtype}, the kernel takes {ctype}")
        # a block of a blocked update: rows j0.. of the per-channel constants and state
        offset = (j0 if slot in ("qas", "qas_shift") else j0 * inner) \
            if slot in train_optim.ROW_SLOTS else 0
        args.append((slot, TensorArg(t.name, f"{ctype} *" if write else f"const {ctype} *",
                                     offset)))
    return v.call(f"pe_{kind}_{mode}_{ptype}", args)


def _merge_channels(v: _TrainOp) -> KernelCall:
    """The whole weight of a partial trainable tensor from its two parts (codegen.partial)."""
    trained, frozen = (v.graph.tensors[n] for n in v.op.inputs)
    out = v.out()
    ch = v.channels() or ()
    if int(v.attr("axis", 0)) != 0 or not (trained.dtype == frozen.dtype == out.dtype
                                           == "int8"):
        raise v.error("merges int8 rows on axis 0 only")
    total = int(out.shape[0])
    if trained.shape[0] != len(ch) or trained.shape[0] + frozen.shape[0] != total \
            or trained.shape[1:] != out.shape[1:] or frozen.shape[1:] != out.shape[1:]:
        raise v.error(f"parts {list(trained.shape)} and {list(frozen.shape)} do not make "
                      f"{list(out.shape)} with {len(ch)} trained channels")
    row = int(np.prod(out.shape[1:], dtype=np.int64))
    counts = runs(ch, total)
    return v.call("pe_merge_rows_s8", [
        ("num_runs", ScalarArg("int32_t", len(counts))),
        ("runs", ArrayArg(int32_array("runs", counts))), ("row_size", ScalarArg("int32_t", row)),
        ("trained", _t(trained)), ("frozen", _t(frozen)), ("output", _t(out, True))])


def _step_counter(v: _TrainOp) -> KernelCall:
    names = list(v.op.inputs) + [""] * (3 - len(v.op.inputs))
    step, lr, pows = (v.graph.tensors[n] if n else None for n in names[:3])
    if step is None or step.dtype != "int32":
        raise v.error("step_counter needs an int32 step tensor")
    mode = v.graph.metadata.get("training", {}).get("mode", "fp32")
    sched = v.attr("schedule", "constant")
    if isinstance(sched, dict):
        sched = sched.get("name", "constant")
    if str(sched) not in SCHEDULES:
        raise v.error(f"unknown learning-rate schedule {sched!r}")
    if mode == "int8" and (lr is not None or pows is not None):
        raise v.error("int8 mode counts steps only (no schedule state, no Adam powers)")
    params = Struct("pe_step_counter_params", {
        "accumulate": int(v.attr("accumulate", 1) or 1), "schedule": SCHEDULES[str(sched)],
        "lr": float(F32(v.attr("lr", 0.0))), "gamma": float(F32(v.attr("gamma", 1.0))),
        "step_size": int(v.attr("step_size", 1) or 1),
        "warmup_steps": int(v.attr("warmup_steps", 0) or 0),
        "total_steps": int(v.attr("total_steps", 1) or 1),
        "min_lr": float(F32(v.attr("min_lr", 0.0))),
        "beta1": float(F32(v.attr("beta1", 0.9))), "beta2": float(F32(v.attr("beta2", 0.999)))})
    suffix = "s8" if mode == "int8" else "f32"
    return v.call(f"pe_step_counter_{suffix}", [
        ("params", StructArg(params)), ("step", _t(step, True)),
        ("lr", _t(lr, True) if lr is not None else NullArg("float *")),
        ("pows", _t(pows, True) if pows is not None else NullArg("float *"))])


TRAIN_CALL_BUILDERS: dict[str, Callable[[_TrainOp], KernelCall]] = {
    "act_mask": _act_mask,
    "mask_grad": _mask_grad,
    "softmax_cross_entropy": _cross_entropy,
    "mse_loss": _mse,
    "conv2d_grad_input": _conv_grad_input,
    "conv2d_grad_weight": _conv_grad_weight,
    "depthwise_conv2d_grad_input": _conv_grad_input,
    "depthwise_conv2d_grad_weight": _conv_grad_weight,
    "fully_connected_grad_input": _conv_grad_input,
    "fully_connected_grad_weight": _conv_grad_weight,
    "bias_grad": _bias_grad,
    "avg_pool2d_grad": _pool_grad,
    "max_pool2d_grad": _pool_grad,
    "add_grad": _add_grad,
    "mul_grad": _mul_grad,
    "mean_grad": _mean_grad,
    "pad_grad": _pad_grad,
    "concat_grad": _concat_grad,
    "reshape_grad": _reshape_grad,
    "softmax_grad": _softmax_grad,
    "grad_add": _grad_add,
    "sgd_update": _update,
    "adam_update": _update,
    "step_counter": _step_counter,
    "merge_channels": _merge_channels,
    "pool_conv_grad": _pool_conv_grad,
}


def train_kernel_call(graph: Graph, op: Op, batch: int = 1) -> KernelCall:
    """The ref kernel call of a training op; ModelError if no ref kernel can run it."""
    builder = portable_builder(TRAIN_CALL_BUILDERS, op)
    missing = [n for n in op.inputs + op.outputs if n and n not in graph.tensors]
    if missing:
        raise ModelError(f"op {op.name!r} ({op.type}): no portable C kernel can run it: tensor "
                         f"{missing[0]!r} is not in the graph")
    view = _TrainOp(graph, op, batch)
    if batch != 1:
        raise view.error("training kernels run one sample per step (batch 1)")
    check_int32_sizes(view)
    return builder(view)
