"""The native backend: pockengine's own kernels for the machine pockengine runs on (board
``host``: ``fit --engine host``, ``search``, fleets of host clients).

The kernels (``runtime_c/kernels/native``, prototypes in ``pe_native_kernels.h``) are C with
AVX-512 / AVX2 intrinsics where the compiler targets them (the host Makefile builds with
``-march=native`` where the compiler takes it) and portable C elsewhere, every path bit-exact
with the golden model. As the arm backend does, each forward builder starts from the op's ref
record (the same offsets, clamps, dims and multipliers) and adds what can be computed at
compile time; a generated model calls the kernel's body (``static inline``) with every shape
a literal, so each layer gets its own code. The out-of-line form (:func:`out_of_line`,
``pe_<op>_s8_native``: the same arguments, run-time values) is what tests call.

- ``rq``: per block of sixteen output channels three rows of sixteen int32 (multiplier,
  high word, shift), pe_arm.h's one-rounding form of TFLM's requantization
  (``arm.requant_words``; the output zero point folded in where it fits): layers whose right
  shifts are at least 2 and multipliers above 2^30 (every layer of the MLPerf Tiny models);
  the rest decline to ref;
- conv2d / fully_connected: the weights as bytes per block of sixteen output channels and
  group of four inputs (:func:`pack_quads`, for VPDPBUSD) with their correction
  (:func:`quad_correction`: the kernel's rows hold x + 128, padding taps 128 - offset), in the
  model's constants for weights nothing changes, packed into the scratch at every call for a
  conv's weights that training changes; a fully connected layer whose weights training
  changes reads them as they are (pe_native_fc.h: products along the input);
- depthwise_conv2d (depth multiplier 1): the weights as int32 per tap and channel
  (:func:`pack_depthwise`), packed the same two ways;
- add (equal shapes): the arm backend's tables of TFLM's rescaled input values
  (``arm.add_tables``), gathered sixteen at a time;
- avg_pool2d (int8): window sums sixteen channels at a time.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import Graph, Op
from .arm import add_tables, fold_zero_point, requant_words
from .base import Backend, Builder, Target
from .kernel_call import Arg, ArrayArg, ConstArray, KernelCall, NullArg, ScalarArg
from .params import OpArgs, int32_array, mutable_tensors
from .ref_args import forward_call, same_dims_call
from .train_args import train_kernel_call

LANES = 16                         # PE_NV_LANES in native/pe_native.h
ROWS = 4                           # PE_NV_ROWS in native/pe_native_conv.h
BODIES = {"pe_conv2d_s8_native": "pe_nv_conv_s8",
          "pe_depthwise_conv2d_s8_native": "pe_nv_dw_s8",
          "pe_fully_connected_s8_native": "pe_nv_fc_s8", "pe_add_s8_native": "pe_nv_add_s8",
          "pe_avg_pool2d_s8_native": "pe_nv_avg_pool_s8"}


def _blocks(n: int) -> int:
    return -(-n // LANES)


def rq_blocks(multiplier: np.ndarray, shift: np.ndarray, zero_point: int
              ) -> tuple[np.ndarray, int] | None:
    """The requantization words of pe_native.h per block of sixteen channels (channels past
    the last padded with a dead channel's words), and the output offset the kernel still adds
    (0 when the zero point folded into the high words); None when some channel is outside
    the one-rounding form."""
    words = requant_words(multiplier, shift)
    if words is None:
        return None
    folded = fold_zero_point(words, zero_point)
    offset = 0 if folded is not None else int(zero_point)
    w = np.asarray(folded if folded is not None else words, np.int64).reshape(-1, 3)
    n = w.shape[0]
    padded = np.tile(np.array([[1, 0, 1]], np.int64), (_blocks(n) * LANES, 1))
    padded[:n] = w[:, [1, 0, 2]]                 # (k_hi, m, e1) -> (m, k_hi, e1)
    return padded.reshape(-1, LANES, 3).transpose(0, 2, 1).reshape(-1), offset


def pack_quads(weight: np.ndarray) -> np.ndarray:
    """int8 rows (out, k) as pe_native_conv.h reads them: per block of sixteen rows and group of
    four values, each row's four bytes; rows past ``out`` and values past k 0."""
    w = np.asarray(weight, np.int64).reshape(weight.shape[0], -1)
    out, k = w.shape
    k4 = -(-k // 4)
    padded = np.zeros((_blocks(out) * LANES, 4 * k4), np.int64)
    padded[:out, :k] = w
    return padded.reshape(-1, LANES, k4, 4).transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def quad_correction(weight: np.ndarray, input_offset: int) -> np.ndarray:
    """pe_native_conv.h's corr per output channel: (input_offset - 128) * sum_k w, wrapped to
    int32 (the rows hold x + 128)."""
    w = np.asarray(weight, np.int64).reshape(weight.shape[0], -1)
    v = (int(input_offset) - 128) * w.sum(axis=1)
    return ((v + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def pack_depthwise(weight: np.ndarray) -> np.ndarray:
    """A depthwise filter (1, k_h, k_w, channels) as int32 per tap, the channels padded with
    zeros to whole blocks of sixteen."""
    w = np.asarray(weight, np.int64).reshape(-1, weight.shape[-1])
    taps, c = w.shape
    padded = np.zeros((taps, _blocks(c) * LANES), np.int64)
    padded[:, :c] = w
    return padded.reshape(-1).astype(np.int32)


def conv_scratch(k: int, out_c: int, packed: bool) -> int:
    """pe_nv_conv_scratch of pe_native_conv.h."""
    k4 = -(-k // 4)
    return ROWS * k4 * 4 + _blocks(out_c) * LANES * 4 + (0 if packed else _blocks(out_c) * k4 * 64)


def depthwise_flat(channels: int, s_w: int, d_w: int) -> bool:
    """pe_nv_dw_flat of pe_native_dw.h: rows run 16 / channels positions at a time."""
    return channels < LANES and LANES % channels == 0 and s_w == 1 and d_w == 1


def depthwise_scratch(taps: int, channels: int, packed: bool, flat: bool = False) -> int:
    """pe_nv_dw_scratch of pe_native_dw.h."""
    cp = _blocks(channels) * LANES
    return cp * 4 + (0 if packed else taps * cp * 4) + ((taps + 4) * LANES * 4 if flat else 0)


def _i32(**values: int) -> list[tuple[str, ScalarArg]]:
    return [(name, ScalarArg("int32_t", int(v))) for name, v in values.items()]


def _frozen(graph: Graph, name: str):
    """The tensor ``name`` when nothing changes it at run time and its data is known."""
    t = graph.tensors[name]
    return t if t.data is not None and name not in mutable_tensors(graph) else None


def _rq(ref: KernelCall, n_out: int) -> tuple[ArrayArg, int] | None:
    quant = ref.arg("quant").value.values
    m, s = quant["multiplier"], quant["shift"]
    m = m.values if isinstance(m, ConstArray) else np.array([m])
    s = s.values if isinstance(s, ConstArray) else np.array([s])
    made = rq_blocks(np.broadcast_to(m, (n_out,)), np.broadcast_to(s, (n_out,)),
                     int(ref.arg("params").value.values["output_offset"]))
    if made is None:
        return None
    words, offset = made
    return ArrayArg(int32_array("rq", words)), offset


def _conv_like(graph: Graph, ref: KernelCall, w_name: str, shape: dict, n_out: int
               ) -> KernelCall | None:
    """The out-of-line conv record over the ref record ``ref`` (conv2d or fully_connected),
    with ``shape``: the literal geometry."""
    made = _rq(ref, n_out)
    if made is None:
        return None
    rq, out_off = made
    p = ref.arg("params").value.values
    act = p["activation"].values
    w = _frozen(graph, w_name)
    k = int(np.prod(graph.tensors[w_name].shape[1:]))
    if w is not None:
        packed: Arg = ArrayArg(ConstArray("w8", "int8_t", pack_quads(w.data)))
        corr: Arg = ArrayArg(int32_array("corr", quad_correction(w.data, p["input_offset"])))
    else:
        packed, corr = NullArg("const int8_t *"), NullArg("const int32_t *")
    args = [("ctx", ref.arg("ctx")), ("input", ref.arg("input")), ("w8", packed),
            ("corr", corr), ("filter", ref.arg("filter")), ("bias", ref.arg("bias")), ("rq", rq),
            ("output", ref.arg("output")),
            *_i32(**shape, input_offset=p["input_offset"], out_offset=out_off,
                  act_min=act["min"], act_max=act["max"])]
    return replace(ref, kernel="pe_conv2d_s8_native", args=tuple(args),
                   scratch_bytes=conv_scratch(k, n_out, w is not None))


def _conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    w = view.input(1)
    assert w is not None
    out_c, k_h, k_w, k_c = (int(v) for v in w.shape)
    _, in_h, in_w, in_c = view.shape(view.x())
    if in_c != k_c:
        return None                                   # grouped: ref
    ref = forward_call(graph, op, batch)
    p = ref.arg("params").value.values
    o = ref.arg("output_dims").value.values
    st, pad, dil = (p[k].values for k in ("stride", "padding", "dilation"))
    shape = {"batches": o["n"], "in_h": in_h, "in_w": in_w, "in_c": in_c, "out_h": o["h"],
             "out_w": o["w"], "out_c": out_c, "k_h": k_h, "k_w": k_w, "s_h": st["h"],
             "s_w": st["w"], "pad_h": pad["h"], "pad_w": pad["w"], "d_h": dil["h"],
             "d_w": dil["w"]}
    return _conv_like(graph, ref, w.name, shape, out_c)


def _fully_connected(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    if ref.arg("params").value.values["filter_offset"] != 0:
        return None
    w = view.input(1)
    assert w is not None
    units, depth = (int(v) for v in w.shape)
    rows = int(ref.arg("input_dims").value.values["n"])
    if _frozen(graph, w.name) is None:
        return _fc_direct(ref, units, depth, rows)
    shape = {"batches": 1, "in_h": rows, "in_w": 1, "in_c": depth, "out_h": rows, "out_w": 1,
             "out_c": units, "k_h": 1, "k_w": 1, "s_h": 1, "s_w": 1, "pad_h": 0, "pad_w": 0,
             "d_h": 1, "d_w": 1}
    return _conv_like(graph, ref, w.name, shape, units)


def fc_scratch(depth: int) -> int:
    """pe_nv_fc_scratch of pe_native_fc.h."""
    return -(-depth // 32) * 32 * 2 + LANES * 4


def _fc_direct(ref: KernelCall, units: int, depth: int, rows: int) -> KernelCall | None:
    """The FC over weights as they are (training changes them: no packing at every call)."""
    made = _rq(ref, units)
    if made is None:
        return None
    rq, out_off = made
    p = ref.arg("params").value.values
    act = p["activation"].values
    args = [("ctx", ref.arg("ctx")), ("input", ref.arg("input")),
            ("filter", ref.arg("filter")), ("bias", ref.arg("bias")), ("rq", rq),
            ("output", ref.arg("output")),
            *_i32(rows=rows, depth=depth, units=units, input_offset=p["input_offset"],
                  out_offset=out_off, act_min=act["min"], act_max=act["max"])]
    return replace(ref, kernel="pe_fully_connected_s8_native", args=tuple(args),
                   scratch_bytes=fc_scratch(depth))


def _depthwise_conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2) or int(view.attr("depth_multiplier", 1)) != 1:
        return None
    ref = forward_call(graph, op, batch)
    w = view.input(1)
    assert w is not None
    _, k_h, k_w, chans = (int(v) for v in w.shape)
    made = _rq(ref, chans)
    if made is None:
        return None
    rq, out_off = made
    p = ref.arg("params").value.values
    act = p["activation"].values
    i, o = ref.arg("input_dims").value.values, ref.arg("output_dims").value.values
    st, pad, dil = (p[k].values for k in ("stride", "padding", "dilation"))
    frozen = _frozen(graph, w.name)
    packed = (ArrayArg(int32_array("w32", pack_depthwise(frozen.data))) if frozen is not None
              else NullArg("const int32_t *"))
    args = [("ctx", ref.arg("ctx")), ("input", ref.arg("input")), ("w32", packed),
            ("filter", ref.arg("filter")), ("bias", ref.arg("bias")), ("rq", rq),
            ("output", ref.arg("output")),
            *_i32(batches=o["n"], in_h=i["h"], in_w=i["w"], channels=chans, out_h=o["h"],
                  out_w=o["w"], k_h=k_h, k_w=k_w, s_h=st["h"], s_w=st["w"], pad_h=pad["h"],
                  pad_w=pad["w"], d_h=dil["h"], d_w=dil["w"],
                  input_offset=p["input_offset"], out_offset=out_off, act_min=act["min"],
                  act_max=act["max"])]
    return replace(ref, kernel="pe_depthwise_conv2d_s8_native", args=tuple(args),
                   scratch_bytes=depthwise_scratch(k_h * k_w, chans, frozen is not None,
                                                   depthwise_flat(chans, st["w"], dil["w"])))


def _add(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """Equal shapes (no broadcast) and an output requantization of the one-rounding form."""
    ref = same_dims_call(graph, op, batch)
    if ref is None:
        return None
    p = ref.arg("params").value.values
    made = rq_blocks(np.array([p["output_multiplier"]] * LANES),
                     np.array([p["output_shift"]] * LANES), int(p["output_offset"]))
    if made is None:
        return None
    words, out_off = made
    d = ref.arg("output_dims").value.values
    act = p["activation"].values
    args = [("tables", ArrayArg(int32_array("tables", add_tables(p)))),
            ("rq", ArrayArg(int32_array("rq", words))), ("input1", ref.arg("input1")),
            ("input2", ref.arg("input2")), ("output", ref.arg("output")),
            *_i32(size=int(np.prod([d[k] for k in "nhwc"], dtype=np.int64)),
                  out_offset=out_off, act_min=act["min"], act_max=act["max"])]
    return replace(ref, kernel="pe_add_s8_native", args=tuple(args))


def _avg_pool2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = forward_call(graph, op, batch)
    if ref.kernel != "pe_avg_pool2d_s8":
        return None
    p = ref.arg("params").value.values
    i, f, o = (ref.arg(n).value.values for n in ("input_dims", "filter_dims", "output_dims"))
    st, pad, act = (p[k].values for k in ("stride", "padding", "activation"))
    args = [("input", ref.arg("input")), ("output", ref.arg("output")),
            *_i32(batches=o["n"], in_h=i["h"], in_w=i["w"], channels=i["c"], out_h=o["h"],
                  out_w=o["w"], f_h=f["h"], f_w=f["w"], s_h=st["h"], s_w=st["w"],
                  pad_h=pad["h"], pad_w=pad["w"], act_min=act["min"], act_max=act["max"])]
    return replace(ref, kernel="pe_avg_pool2d_s8_native", args=tuple(args), scratch_bytes=0)


OUT_OF_LINE: dict[str, Builder] = {
    "conv2d": _conv2d,
    "fully_connected": _fully_connected,
    "depthwise_conv2d": _depthwise_conv2d,
    "add": _add,
    "avg_pool2d": _avg_pool2d,
}


def out_of_line(graph: Graph, op: Op, batch: int = 1, target: Target | None = None
                ) -> KernelCall | None:
    """The out-of-line form of the native record of ``op`` (run-time arguments), or None."""
    builder = OUT_OF_LINE.get(op.type)
    call = builder(graph, op, batch, target or Target()) if builder is not None else None
    return None if call is None else replace(call, backend="native")


def _body(builder: Builder) -> Builder:
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        call = builder(graph, op, batch, target)
        return None if call is None else replace(call, kernel=BODIES[call.kernel],
                                                 outline=True)
    return build


# -- fp32 backward (pe_native_grad.c: ref's signatures, ref's name plus "_native"; input gradients
# take wr_const after the filter) ------------------------------------------------------------
DW_GRAD_TAPS = 64                  # PE_NV_DW_TAPS in native/pe_native_grad.c


def _dims(call: KernelCall, name: str) -> dict:
    return call.arg(name).value.values


def _count(d: dict, *keys: str) -> int:
    return int(np.prod([int(d[k]) for k in keys], dtype=np.int64))


def _grad(scratch) -> Builder:
    """A builder for an fp32 training kernel of pe_native_grad.c: ref's record under the name
    plus "_native" with ``scratch(ref) -> bytes | None`` (None: not this configuration)."""
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        ref = train_kernel_call(graph, op, batch)
        if not ref.kernel.endswith("_f32") and ref.kernel not in (
                "pe_act_mask_s8", "pe_sgd_update_f32_s8", "pe_sgd_update_f32_s32"):
            return None                          # the int8 backward's kernels: ref
        need = scratch(ref)
        if need is None:
            return None
        return replace(ref, kernel=ref.kernel + "_native", scratch_bytes=int(need))
    return build


def dequantised(weight: np.ndarray, scale: np.ndarray, axis: int) -> np.ndarray:
    """w_r = float32(w) * scale along ``axis``: the golden model's one rounding per value."""
    s = np.asarray(scale, np.float32).reshape(-1)
    shape = [1] * weight.ndim
    shape[axis] = -1
    return weight.astype(np.float32) * np.broadcast_to(
        s, (weight.shape[axis],)).reshape(shape)


def _grad_input(scratch, layout) -> Builder:
    """A builder for the input gradient of a conv, FC or depthwise layer: ``_grad``'s record
    with ``wr_const`` after the filter, the dequantised weights in the ``layout(w, scale)`` the
    kernel reads when nothing changes the filter (NULL when training does), and
    ``scratch(ref, given) -> bytes | None``."""
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        ref = train_kernel_call(graph, op, batch)
        if not ref.kernel.endswith("_f32"):
            return None                          # the int8 backward's kernels: ref
        filt = ref.arg("filter")
        w = _frozen(graph, filt.tensor)
        need = scratch(ref, w is not None)
        if need is None:
            return None
        wr: Arg = (ArrayArg(ConstArray("wr", "float", layout(
            w.data, ref.arg("filter_scale").value.values))) if w is not None
            else NullArg("const float *"))
        args = list(ref.args)
        args.insert([n for n, _ in args].index("filter") + 1, ("wr_const", wr))
        return replace(ref, kernel=ref.kernel + "_native", args=tuple(args),
                       scratch_bytes=int(need))
    return build


def _conv_grad_input_scratch(ref: KernelCall, given: bool) -> int | None:
    f, dx = _dims(ref, "filter_dims"), _dims(ref, "dx_dims")
    if int(f["c"]) != int(dx["c"]):
        return None                               # grouped: ref
    # w_r unless given, and four rows of dy over every tap (G)
    return (0 if given else _count(f, "n", "h", "w", "c")) * 4 + \
        4 * _count(f, "h", "w", "n") * 4


def _dw_grad_input_scratch(ref: KernelCall, given: bool) -> int | None:
    p, f = ref.arg("params").value.values, _dims(ref, "filter_dims")
    if int(p["ch_mult"]) != 1 or int(f["h"]) * int(f["w"]) > DW_GRAD_TAPS:
        return None
    in_w = int(_dims(ref, "dx_dims")["w"])
    # per input column a mask (uint64) and the kernel columns' dy columns, then w_r
    return in_w * (8 + 4 * int(f["w"])) + (0 if given else _count(f, "h", "w", "c") * 4)


def _conv_grad_weight_scratch(ref: KernelCall) -> int | None:
    x, dy, dw = _dims(ref, "x_dims"), _dims(ref, "dy_dims"), _dims(ref, "dw_dims")
    if int(dw["c"]) != int(x["c"]):
        return None                               # grouped: ref
    return (_count(x, "n", "h", "w", "c") + _count(dy, "n", "h", "w") * 4) * 4


GRAD_BUILDERS: dict[str, Builder] = {
    # w_r [kh][kw][o][c], [o][depth], [kh * kw][c]
    "conv2d_grad_input": _grad_input(_conv_grad_input_scratch, lambda w, s: np.ascontiguousarray(
        dequantised(w, s, 0).transpose(1, 2, 0, 3))),
    "fully_connected_grad_input": _grad_input(lambda r, given: 0,
                                              lambda w, s: dequantised(w, s, 0)),
    "depthwise_conv2d_grad_input": _grad_input(_dw_grad_input_scratch,
                                               lambda w, s: dequantised(w, s, 3)),
    "conv2d_grad_weight": _grad(_conv_grad_weight_scratch),
    "fully_connected_grad_weight": _grad(lambda r: _count(_dims(r, "x_dims"), "n", "c") * 4),
    "bias_grad": _grad(lambda r: 0),
    "mask_grad": _grad(lambda r: 0),
    "act_mask": _grad(lambda r: 0),
    "grad_add": _grad(lambda r: 0),
    "avg_pool2d_grad": _grad(lambda r: _count(_dims(r, "dy_dims"), "n", "h", "w", "c") * 4),
    "sgd_update": _grad(lambda r: 0),
}

BUILDERS: dict[str, Builder] = {**{k: _body(b) for k, b in OUT_OF_LINE.items()},
                                **GRAD_BUILDERS}

NATIVE = Backend(
    name="native",
    summary="pockengine's own kernels for the machine it runs on (runtime_c/kernels/native: "
            "AVX-512 / AVX2 where the compiler targets them, portable C elsewhere)",
    builders=BUILDERS, kernel_dir="native", archs=("host",))
