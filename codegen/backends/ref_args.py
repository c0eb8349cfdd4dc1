"""IR op -> call of a portable C kernel (runtime_c/kernels/ref), with every number precomputed.

``forward_call(graph, op)`` returns a :class:`~codegen.backends.kernel_call.KernelCall`: the
kernel's name and its arguments in C order — parameter structs (offsets, strides, top/left
padding, clamp bounds), requantization multipliers and shifts (TFLM's QuantizeMultiplier, as
the golden model computes them), shapes as ``pe_dims`` and the IR tensors to pass. The code
generator renders these records; the kernel tests marshal them through ctypes. The numbers are
those of ``codegen.golden`` (the oracle) and NUMERICS.md.

Shapes: tensors of rank below 4 are padded with leading 1s; broadcasting (add, mul), padding
and mean collapse higher ranks to 4-D where the op allows it, else ModelError. ``batch`` > 1
scales the leading batch dimension of non-constant tensors whose first dimension is 1 (as the
golden model batches); generated firmware uses batch 1.

Broadcast patterns of add/mul: any numpy broadcast whose shapes collapse to 4-D (adjacent
dimensions with the same broadcast pattern merge): equal shapes, scalar / one-element
operands, per-channel vectors ``[C]`` / ``[1,1,1,C]`` against NHWC, row/column broadcasts,
and any 4-D mix of the above (TFLite's BroadcastAdd4DSlow).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from ..golden import numerics as nx
from ..golden.kernels.pooling import int8_mean_requant, int8_pool_range
from ..golden.kernels.shape import int8_concat_range
from ..ir import Graph, Op
from ..ir.stream import band_plan, chain_graph, row_stages
from ..partial import MERGE_OP
from .kernel_call import (
    C_TYPES,
    STRUCTS,
    Arg,
    ArrayArg,
    ContextArg,
    KernelCall,
    ScalarArg,
    Struct,
    StructArg,
    StructArrayArg,
    TensorListArg,
)
from .params import (
    ADD_LEFT_SHIFT,
    OpArgs,
    activation,
    activation_f32,
    bias_arg,
    broadcast_dims,
    call,
    check_int32_sizes,
    collapse_padding,
    collapse_reduction,
    dims,
    int32_array,
    output_stage,
    per_channel,
    portable_builder,
    size_of,
    softmax_params_s8,
    tensor_arg,
    tile,
    window_attrs,
)


# -- conv2d, depthwise_conv2d, fully_connected --------------------------------------------------
def _conv_like(view: OpArgs, kernel: str, struct: str, fields: Mapping[str, Struct | int],
               n_out: int, dims_in: Struct, dims_w: Struct, dims_out: Struct, fc: bool = False
               ) -> KernelCall:
    """conv2d / depthwise / FC: int8 with per-channel quant (FC: per-tensor when the weight
    has one scale, else the _per_channel variant), or float32. The parameters: ``struct``
    (``<struct>_f32`` for float32) with ``fields`` and the activation, int8 adding the input
    and output offsets (FC: and a zero filter offset)."""
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    w = view.input(1)
    assert w is not None
    made = view.graph.producer(w.name)
    if w.data is None and (made is None or made.type != MERGE_OP):
        raise view.error(f"weight {w.name!r} must be a constant (or a parameter) tensor, or "
                         "the whole weight of a partial trainable tensor (codegen.partial)")
    head: list[tuple[str, Arg]] = [("ctx", ContextArg())]
    if dtype == "int8":
        m, s, in_off, out_off, lo, hi = output_stage(view, n_out, fc)
        offsets = {"input_offset": in_off, "output_offset": out_off}
        if fc:
            offsets["filter_offset"] = 0
        head.append(("params", StructArg(Struct(struct, {**offsets, **fields,
                                                         "activation": activation(lo, hi)}))))
        name = f"{kernel}_s8"
        if fc and m.size == 1:
            quant = Struct("pe_per_tensor_quant", {"multiplier": int(m[0]), "shift": int(s[0])})
        else:
            quant = per_channel(m, s, n_out)
            if fc:
                name += "_per_channel"
        head.append(("quant", StructArg(quant)))
        ctype_b = "int32_t"
    else:
        act = activation_f32(view.attr("activation", "none"))
        head.append(("params", StructArg(Struct(f"{struct}_f32", {**fields, "activation": act}))))
        name = f"{kernel}_f32"
        ctype_b = "float"
    return call(view, name, head + [
        ("input_dims", StructArg(dims_in)), ("input", tensor_arg(view.x())),
        ("filter_dims", StructArg(dims_w)), ("filter", tensor_arg(w)),
        ("bias", bias_arg(view, ctype_b)),
        ("output_dims", StructArg(dims_out)), ("output", tensor_arg(view.out(), write=True))])


def _conv2d(view: OpArgs) -> KernelCall:
    x, w, out = view.x(), view.input(1), view.out()
    assert w is not None
    o, _, _, ci = w.shape
    cin = x.shape[3]
    if ci == 0 or cin % ci or o % (cin // ci):
        raise view.error(f"{cin} input channels do not split into groups of {ci} for {o} "
                         f"output channels")
    return _conv_like(view, "pe_conv2d", "pe_conv_params", window_attrs(view), o,
                      dims(view.shape(x)), dims(w.shape), dims(view.shape(out)))


def _depthwise_conv2d(view: OpArgs) -> KernelCall:
    x, w, out = view.x(), view.input(1), view.out()
    assert w is not None
    mult = int(view.attr("depth_multiplier", 1))
    o = w.shape[3]
    if o != x.shape[3] * mult:
        raise view.error(f"{o} output channels != {x.shape[3]} input channels x depth "
                         f"multiplier {mult}")
    return _conv_like(view, "pe_depthwise_conv2d", "pe_dw_conv_params",
                      {"ch_mult": mult, **window_attrs(view)}, o,
                      dims(view.shape(x)), dims(w.shape), dims(view.shape(out)))


def _fully_connected(view: OpArgs) -> KernelCall:
    x, w = view.x(), view.input(1)
    assert w is not None
    units, depth = w.shape
    size = size_of(view, x)
    if depth == 0 or size % depth:
        raise view.error(f"input of {size} values does not split into rows of {depth}")
    rows = size // depth
    return _conv_like(view, "pe_fully_connected", "pe_fc_params", {}, units,
                      dims((rows, 1, 1, depth)), dims((units, 1, 1, depth)),
                      dims((rows, 1, 1, units)), fc=True)


# -- pooling --------------------------------------------------------------------------------------
def _pool(view: OpArgs) -> KernelCall:
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    fh, fw = (int(v) for v in view.attr("filter"))
    sh, sw = (int(v) for v in view.attr("stride"))
    top, bottom, left, right = (int(v) for v in view.attr("padding"))
    x, out = view.x(), view.out()
    h, w = x.shape[1:3]
    act = view.attr("activation", "none")
    if fh * fw > 1 << 23:
        raise view.error(f"pooling window {fh}x{fw} overflows the int32 sum of int8 taps")
    if view.op.type == "avg_pool2d":
        for o in range(out.shape[1]):
            if o * sh - top >= h or o * sh - top + fh <= 0:
                raise view.error("a pooling window lies entirely in the padding")
        for o in range(out.shape[2]):
            if o * sw - left >= w or o * sw - left + fw <= 0:
                raise view.error("a pooling window lies entirely in the padding")
    common = {"stride": tile(sh, sw), "padding": tile(top, left)}
    if dtype == "int8":
        params = Struct("pe_pool_params", {**common,
                                           "activation": activation(*int8_pool_range(view, act))})
    else:
        params = Struct("pe_pool_params_f32", {**common, "activation": activation_f32(act)})
    kind = "avg" if view.op.type == "avg_pool2d" else "max"
    suffix = "s8" if dtype == "int8" else "f32"
    del bottom, right                 # implied by the output size
    return call(view, f"pe_{kind}_pool2d_{suffix}", [
        ("ctx", ContextArg()), ("params", StructArg(params)),
        ("input_dims", StructArg(dims(view.shape(x)))), ("input", tensor_arg(x)),
        ("filter_dims", StructArg(dims((1, fh, fw, 1)))),
        ("output_dims", StructArg(dims(view.shape(out)))),
        ("output", tensor_arg(out, write=True))])


# -- add, mul -------------------------------------------------------------------------------------
def _binary(view: OpArgs) -> KernelCall:
    (dtype, _, _) = view.dtypes(("int8", "int8", "int8"), ("float32", "float32", "float32"))
    a, b, out = view.x(), view.input(1), view.out()
    assert b is not None
    collapsed = broadcast_dims(view.shape(a), view.shape(b), view.shape(out))
    if collapsed is None:
        raise view.error(f"broadcast of {list(a.shape)} and {list(b.shape)} needs more than "
                         f"4 dimensions")
    act = view.attr("activation", "none")
    kind = view.op.type
    if dtype == "float32":
        params = activation_f32(act)
    else:
        s1, zp1 = view.quant(a)
        s2, zp2 = view.quant(b)
        s_out, zp_out = view.quant(out)
        clamp = activation(*nx.activation_range(act, s_out, zp_out))
        if kind == "add":
            twice_max = 2.0 * float(max(np.float32(s1), np.float32(s2)))
            m1, sh1 = nx.quantize_multiplier(s1 / twice_max)
            m2, sh2 = nx.quantize_multiplier(s2 / twice_max)
            m_out, sh_out = nx.quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * s_out))
            params = Struct("pe_add_params", {
                "input1_offset": -zp1, "input1_multiplier": m1, "input1_shift": sh1,
                "input2_offset": -zp2, "input2_multiplier": m2, "input2_shift": sh2,
                "left_shift": ADD_LEFT_SHIFT, "output_offset": zp_out,
                "output_multiplier": m_out, "output_shift": sh_out, "activation": clamp})
        else:
            m, sh = nx.quantize_multiplier(s1 * s2 / s_out)
            params = Struct("pe_mul_params", {
                "input1_offset": -zp1, "input2_offset": -zp2, "output_offset": zp_out,
                "output_multiplier": m, "output_shift": sh, "activation": clamp})
    suffix = "s8" if dtype == "int8" else "f32"
    da, db, do = collapsed
    return call(view, f"pe_{kind}_{suffix}", [
        ("params", StructArg(params)),
        ("input1_dims", StructArg(dims(da))), ("input1", tensor_arg(a)),
        ("input2_dims", StructArg(dims(db))), ("input2", tensor_arg(b)),
        ("output_dims", StructArg(dims(do))), ("output", tensor_arg(out, write=True))],
        inplace=(a.name, b.name))     # each output element reads its inputs' elements first


# -- reshape, softmax, mean, pad, concat ----------------------------------------------------------
def _reshape(view: OpArgs) -> KernelCall:
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    x, out = view.x(), view.out()
    suffix = "s8" if dtype == "int8" else "f32"
    return call(view, f"pe_reshape_{suffix}", [
        ("size", ScalarArg("int32_t", size_of(view, out))), ("input", tensor_arg(x)),
        ("output", tensor_arg(out, write=True))], may_alias=((x.name, out.name),))


def _softmax(view: OpArgs) -> KernelCall:
    (dtype, out_dtype) = view.dtypes(("int8", "int8"), ("int8", "int16"),
                                     ("float32", "float32"))
    x, out = view.x(), view.out()
    shape = view.shape(x)
    row = int(shape[-1]) if shape else 1
    rows = size_of(view, x) // max(row, 1)
    beta = float(np.float32(view.attr("beta", 1.0)))
    if dtype == "float32":
        params = Struct("pe_softmax_params_f32", {"beta": beta})
        name = "pe_softmax_f32"
    else:
        s_in, _ = view.quant(x)
        s_out, zp_out = view.quant(out)
        if out_dtype == "int8":
            ok = zp_out == -128 and np.float32(s_out) == np.float32(1.0 / 256)
        else:
            ok = zp_out == -32768 and abs(s_out - 1.0 / 65536) <= 0.001 / 65536
        if not ok:
            raise view.error(f"{out_dtype} softmax output has zero point {zp_out} and scale "
                             f"{s_out:g}, TFLM needs -128 and 1/256 (int8) or -32768 and "
                             f"1/65536 (int16)")
        if row > 4096:
            raise view.error(f"int8 softmax rows of {row} values overflow TFLM's int32 sum "
                             f"(at most 4096)")
        params = softmax_params_s8(s_in, beta, view.error)
        name = "pe_softmax_s8" if out_dtype == "int8" else "pe_softmax_s8_s16"
    return call(view, name, [
        ("params", StructArg(params)), ("num_rows", ScalarArg("int32_t", rows)),
        ("row_size", ScalarArg("int32_t", row)), ("input", tensor_arg(x)),
        ("output", tensor_arg(out, write=True))])


def _mean(view: OpArgs) -> KernelCall:
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    x, out = view.x(), view.out()
    axes = sorted({int(a) for a in view.attr("axes")})
    shape = view.shape(x)
    if any(not 0 <= a < len(shape) for a in axes):
        raise view.error(f"axes {axes} outside input rank {len(shape)}")
    if 0 in axes and view.batch > 1 and x.shape and x.shape[0] == 1:
        raise view.error("mean over the batch axis cannot run batched")
    collapsed = collapse_reduction(shape, [i in axes for i in range(len(shape))])
    if collapsed is None:
        raise view.error(f"mean of {list(shape)} over axes {axes} needs more than 4 "
                         f"dimensions")
    d_in, d_out = collapsed
    tensors: list[tuple[str, Arg]] = [
        ("input_dims", StructArg(dims(d_in))), ("input", tensor_arg(x)),
        ("output_dims", StructArg(dims(d_out))), ("output", tensor_arg(out, write=True))]
    if dtype == "float32":
        return call(view, "pe_mean_f32", tensors)
    _, multiplier, shift = int8_mean_requant(view, axes)
    zp_in, zp_out = view.quant(x)[1], view.quant(out)[1]
    params = Struct("pe_mean_params", {"input_offset": -zp_in, "output_offset": zp_out,
                                       "multiplier": multiplier, "shift": shift})
    return call(view, "pe_mean_s8", [("params", StructArg(params))] + tensors)


def _pad(view: OpArgs) -> KernelCall:
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    x, out = view.x(), view.out()
    pads = tuple((int(a), int(b)) for a, b in view.attr("pads"))
    if len(pads) != len(x.shape):
        raise view.error(f"pads {list(pads)} do not fit input rank {len(x.shape)}")
    if any(a < 0 or b < 0 for a, b in pads):
        raise view.error(f"negative padding {list(pads)}")
    collapsed = collapse_padding(view.shape(x), pads)
    if collapsed is None:
        raise view.error(f"padding {list(pads)} of {list(x.shape)} needs more than 4 "
                         f"dimensions")
    shape, p = collapsed
    out_shape = tuple(d + a + b for d, (a, b) in zip(shape, p))
    before = dims(tuple(a for a, _ in p))
    if dtype == "int8":
        params = Struct("pe_pad_params", {"before": before, "pad_value": view.quant(out)[1]})
    else:
        params = Struct("pe_pad_params_f32", {"before": before, "pad_value": 0.0})
    suffix = "s8" if dtype == "int8" else "f32"
    return call(view, f"pe_pad_{suffix}", [
        ("params", StructArg(params)),
        ("input_dims", StructArg(dims(shape))), ("input", tensor_arg(x)),
        ("output_dims", StructArg(dims(out_shape))), ("output", tensor_arg(out, write=True))])


def _concat(view: OpArgs) -> KernelCall:
    out = view.out()
    ins = [view.graph.tensors[n] for n in view.op.inputs]
    dtype = out.dtype
    if dtype not in ("int8", "float32") or any(t.dtype != dtype for t in ins):
        raise view.error(f"no ref kernel for concatenating {[t.dtype for t in ins]} -> "
                         f"{dtype}")
    axis = int(view.attr("axis"))
    out_shape = view.shape(out)
    if not 0 <= axis < len(out_shape):
        raise view.error(f"axis {axis} outside rank {len(out_shape)}")
    shapes = [view.shape(t) for t in ins]
    if any(len(s) != len(out_shape) or s[:axis] != out_shape[:axis] for s in shapes):
        raise view.error(f"inputs {[list(s) for s in shapes]} do not stack into "
                         f"{list(out_shape)} on axis {axis}")
    outer = int(np.prod(out_shape[:axis], dtype=np.int64))
    inner = [int(np.prod(s[axis:], dtype=np.int64)) for s in shapes]
    act = view.attr("activation", "none")
    if dtype == "int8":
        params = Struct("pe_concat_params", {
            "outer_size": outer, "activation": activation(*int8_concat_range(view, ins, act))})
    else:
        params = Struct("pe_concat_params_f32", {"outer_size": outer,
                                                 "activation": activation_f32(act)})
    ctype = C_TYPES[dtype]
    suffix = "s8" if dtype == "int8" else "f32"
    return call(view, f"pe_concat_{suffix}", [
        ("params", StructArg(params)), ("num_inputs", ScalarArg("int32_t", len(ins))),
        ("input_inner_sizes", ArrayArg(int32_array("inner_sizes", inner))),
        ("inputs", TensorListArg(tuple(t.name for t in ins), f"const {ctype} *const *")),
        ("output", tensor_arg(out, write=True))])


# -- quantize, dequantize, relu, relu6 ------------------------------------------------------------
def _elementwise(view: OpArgs, name: str, params: Struct | None, inplace: bool = False
                 ) -> KernelCall:
    """out[i] = f(in[i]): ``inplace`` kernels may write over their input."""
    x, out = view.x(), view.out()
    args: list[tuple[str, Arg]] = [] if params is None else [("params", StructArg(params))]
    return call(view, name, args + [("size", ScalarArg("int32_t", size_of(view, out))),
                                    ("input", tensor_arg(x)), ("output", tensor_arg(out, True))],
                inplace=(x.name,) if inplace else ())


def _quantize(view: OpArgs) -> KernelCall:
    (src, _) = view.dtypes(("float32", "int8"), ("int8", "int8"))
    s_out, zp_out = view.quant(view.out())
    if src == "float32":
        return _elementwise(view, "pe_quantize_f32_s8", Struct(
            "pe_affine_params_f32", {"scale": float(np.float32(s_out)), "zero_point": zp_out}))
    s_in, zp_in = view.quant(view.x())
    m, sh = nx.quantize_multiplier(s_in / s_out)
    return _elementwise(view, "pe_quantize_s8_s8", Struct("pe_requant_params", {
        "input_offset": -zp_in, "output_offset": zp_out, "multiplier": m, "shift": sh,
        "activation": activation(nx.INT8_MIN, nx.INT8_MAX)}))


def _dequantize(view: OpArgs) -> KernelCall:
    view.dtypes(("int8", "float32"))
    s_in, zp_in = view.quant(view.x())
    return _elementwise(view, "pe_dequantize_s8_f32", Struct(
        "pe_affine_params_f32", {"scale": float(np.float32(s_in)), "zero_point": zp_in}))


def _relu(view: OpArgs) -> KernelCall:
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    if dtype == "float32":
        return _elementwise(view, "pe_relu_f32", None, inplace=True)
    s_in, zp_in = view.quant(view.x())
    s_out, zp_out = view.quant(view.out())
    # TFLM CalculateReluOpData: the scale ratio in float32; RELU requantizes.
    m, sh = nx.quantize_multiplier(float(np.float32(s_in) / np.float32(s_out)))
    return _elementwise(view, "pe_relu_s8", Struct("pe_requant_params", {
        "input_offset": -zp_in, "output_offset": zp_out, "multiplier": m, "shift": sh,
        "activation": activation(*nx.activation_range("relu", s_out, zp_out))}),
        inplace=True)


def _relu6(view: OpArgs) -> KernelCall:
    (dtype, _) = view.dtypes(("int8", "int8"), ("float32", "float32"))
    if dtype == "float32":
        return _elementwise(view, "pe_relu6_f32", None, inplace=True)
    # TFLM Relu6: clamps in the *input* quantization, no requantization.
    s_in, zp_in = view.quant(view.x())
    six = min(127, max(-128, zp_in + nx.round_half_away_int(np.float32(6.0) / np.float32(s_in))))
    return _elementwise(view, "pe_relu6_s8", activation(zp_in, six), inplace=True)


# -- stream_chain ---------------------------------------------------------------------------------
def _stream_chain(view: OpArgs) -> KernelCall:
    """The chain's stages as the ref records of their own ops (ir.stream.chain_graph): their
    parameter structs, requantization and dims become the pe_stream_stage array, the residual
    add's parameters pe_stream_params.add; the row buffers of ir.stream.band_plan and then the
    schedule's state are the kernel's scratch."""
    view.dtypes(("int8", "int8"))
    chain = chain_graph(view.graph, view.op)
    plan = band_plan(row_stages(chain), int(view.attr("band_rows")))
    stages, filters, biases = [], [], []
    residual, add = 0, None
    j = 0
    for op in chain.ops:
        rec = CALL_BUILDERS[op.type](OpArgs(chain, op, 1))
        if op.type == "add":
            add = rec.arg("params").value
            residual = 1 + int(view.op.attrs["residual"]["order"])
            continue
        p = rec.arg("params").value.values
        fields = {k: p[k] for k in ("input_offset", "output_offset", "stride", "padding",
                                    "dilation", "activation")}
        last = j == len(plan.buffer_rows)
        stages.append(Struct("pe_stream_stage", {
            "kind": 1 if op.type == "depthwise_conv2d" else 0,
            "params": Struct("pe_dw_conv_params", {"ch_mult": p.get("ch_mult", 1), **fields}),
            "quant": rec.arg("quant").value, "filter_dims": rec.arg("filter_dims").value,
            "output_dims": dims(chain.tensors[op.outputs[0]].shape),
            "window": (chain.tensors[op.inputs[1]].shape[1] - 1) * int(op.attrs["dilation"][0])
            + 1,
            "buffer_offset": 0 if last else plan.buffer_offsets[j],
            "buffer_rows": 0 if last else plan.buffer_rows[j]}))
        filters.append(op.inputs[1])
        biases.append(op.inputs[2])
        j += 1
    if add is None:
        add = Struct("pe_add_params", {
            **{k: 0 for k, _ in STRUCTS["pe_add_params"] if k != "activation"},
            "activation": activation(0, 0)})
    params = Struct("pe_stream_params", {"num_stages": len(stages),
                                         "band_rows": plan.band_rows, "residual": residual,
                                         "state_offset": plan.scratch_bytes,
                                         "kernel_scratch_offset": 0,
                                         "kernel_scratch_bytes": 0, "add": add})
    x, out = view.x(), view.out()
    rec = call(view, "pe_stream_chain_s8", [
        ("ctx", ContextArg()), ("params", StructArg(params)),
        ("stages", StructArrayArg("pe_stream_stage", tuple(stages))),
        ("filters", TensorListArg(tuple(filters), "const int8_t *const *")),
        ("biases", TensorListArg(tuple(biases), "const int32_t *const *")),
        ("input_dims", StructArg(dims(view.shape(x)))), ("input", tensor_arg(x)),
        ("output_dims", StructArg(dims(view.shape(out)))),
        ("output", tensor_arg(out, write=True))])
    return replace(rec, scratch_bytes=plan.scratch_bytes + plan.state_bytes)


CALL_BUILDERS: dict[str, Callable[[OpArgs], KernelCall]] = {
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise_conv2d,
    "fully_connected": _fully_connected,
    "avg_pool2d": _pool,
    "max_pool2d": _pool,
    "add": _binary,
    "mul": _binary,
    "reshape": _reshape,
    "softmax": _softmax,
    "mean": _mean,
    "pad": _pad,
    "concat": _concat,
    "quantize": _quantize,
    "dequantize": _dequantize,
    "relu": _relu,
    "relu6": _relu6,
    "stream_chain": _stream_chain,
}


def forward_call(graph: Graph, op: Op, batch: int = 1) -> KernelCall:
    """The ref kernel call of a forward op; ModelError if no ref kernel can run it."""
    builder = portable_builder(CALL_BUILDERS, op)
    view = OpArgs(graph, op, batch)
    check_int32_sizes(view)
    return builder(view)


def same_dims_call(graph: Graph, op: Op, batch: int = 1) -> KernelCall | None:
    """The ref record of an int8 add or mul whose inputs and output have the same dims, for
    the kernels that do not broadcast; None for any other."""
    if not OpArgs(graph, op, batch).int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    d1, d2, d_out = (ref.arg(n).value.values for n in ("input1_dims", "input2_dims", "output_dims"))
    return ref if d1 == d2 == d_out else None
