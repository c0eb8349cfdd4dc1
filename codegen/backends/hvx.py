"""The hvx backend: pockengine's own int8 kernels for Hexagon DSPs with 128-byte HVX vectors.

The kernels (``runtime_c/kernels/hvx``, prototypes in ``pe_hvx_kernels.h``) are C with
clang's HVX intrinsics; they build only for Hexagon (v66 and later) and are tested under
qemu-hexagon against the golden model. Each builder starts from the op's ref record (the same
offsets, clamps, dims and multipliers, from ``params``) and adds what can be computed at
compile time:

- ``rq``: TFLM's double-rounding requantization per output lane as five vectors of int32
  per 32 lanes (:func:`rq_words`), in the order the kernel's accumulators hold the lanes;
- conv2d / fully_connected: the weights packed for ``vrmpy`` (:func:`pack_gemm_weights`: per
  block of 32 output channels and group of four inputs one 128-byte vector) and the input
  offset folded into the bias (``ksum``), for weights nothing changes at run time; weights
  that training changes are packed into the scratch by the kernel at every call;
- depthwise_conv2d: the weights as int16 per lane pattern and tap (:func:`dw_layout`), the
  lane layout (``flat``: the output row as one run of values when the stride along the width
  is 1, else per pixel) and the ksum.

What each kernel takes (others decline to the next backend):

- conv2d: one group, int8 (any kernel, stride, padding, dilation);
- depthwise_conv2d: depth multiplier 1 (weights that training changes laid out per pattern at
  every call);
- fully_connected: symmetric weights (filter offset 0), per tensor or per channel;
- avg_pool2d (windows below 2^20 taps), max_pool2d; add, mul: equal shapes.
"""

from __future__ import annotations

from dataclasses import replace
from math import gcd

import numpy as np

from ..golden import numerics as nx
from ..ir import Graph, Op
from .base import Backend, Builder, Target
from .kernel_call import (
    Arg,
    ArrayArg,
    ConstArray,
    KernelCall,
    NullArg,
    ScalarArg,
)
from .params import OpArgs, int32_array, mutable_tensors
from .ref_args import forward_call, same_dims_call
from .train_args import train_kernel_call

SUFFIX = "_hvx"
LANES = 32                       # int32 lanes of a 128-byte vector
RQ_VECTORS = 5
MAX_POOL_TAPS = 1 << 20          # pe_pool2d_s8_hvx.c's exact division
MAX_FLAT_PATTERNS = 16           # depthwise: more lane patterns than this: per pixel


def _pad_to(values: np.ndarray, n: int, fill: int = 0) -> np.ndarray:
    out = np.full(n, fill, np.int64)
    out[: values.size] = values
    return out


def rq_words(multiplier, shift, pre_shift: int = 0) -> np.ndarray:
    """pe_hvx.h's requantization vectors of lanes with these multipliers and shifts, lanes
    padded to a multiple of 32 (padding: multiplier 0): per block of 32 lanes the 32
    multipliers, left shifts, right shifts, 2^right - 1 and (2^right - 1) >> 1.
    ``pre_shift``: a left shift applied before (MBQM(x << b, M, k): the int8 input gradients'
    prescale) joins the left shifts."""
    m = np.asarray(multiplier, np.int64).reshape(-1)
    s = np.asarray(shift, np.int64).reshape(-1)
    n = -(-m.size // LANES) * LANES
    m, s = _pad_to(m, n), _pad_to(s, n)
    left, right = np.maximum(s, 0) + int(pre_shift), np.maximum(-s, 0)
    mask = np.left_shift(np.int64(1), right) - 1
    words = np.stack([m, left, right, mask, mask >> 1])          # (5, n)
    return words.reshape(RQ_VECTORS, n // LANES, LANES).transpose(1, 0, 2).reshape(-1)


def _quant(ref: KernelCall, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    q = ref.arg("quant").value.values
    m, s = q["multiplier"], q["shift"]
    m = m.values if isinstance(m, ConstArray) else np.array([m])
    s = s.values if isinstance(s, ConstArray) else np.array([s])
    return (np.broadcast_to(np.asarray(m, np.int64), (n_out,)),
            np.broadcast_to(np.asarray(s, np.int64), (n_out,)))


def pack_gemm_weights(weight: np.ndarray) -> np.ndarray:
    """Rows (out, k) of int8 weights in pe_hvx_gemm.h's layout: per block ob of 32 rows and
    group kg of four values a vector whose lane i holds w[32 ob + i][4 kg .. 4 kg + 3]."""
    w = np.asarray(weight, np.int8).reshape(weight.shape[0], -1)
    out_c, k = w.shape
    blocks, groups = -(-out_c // LANES), -(-k // 4)
    padded = np.zeros((blocks * LANES, groups * 4), np.int8)
    padded[:out_c, :k] = w
    return padded.reshape(blocks, LANES, groups, 4).transpose(0, 2, 1, 3).reshape(-1)


def kernel_sums(weight: np.ndarray, input_offset: int) -> np.ndarray:
    """input_offset * sum of each output channel's weights (rows: the first axis), wrapped to
    int32, padded to a multiple of 32."""
    w = np.asarray(weight, np.int64).reshape(weight.shape[0], -1)
    sums = nx.wrap_int32(w.sum(axis=1) * int(input_offset))
    return _pad_to(sums, -(-w.shape[0] // LANES) * LANES)


def gemm_scratch(out_c: int, k: int, packed: bool, rows: bool) -> int:
    """pe_conv2d_s8_hvx.c's scratch: alignment slack, bias + ksum vectors, the packed weights
    when packed at run time, four gathered rows (128 bytes each when K <= 128: whole
    vectors are stored)."""
    blocks, groups = -(-out_c // LANES), -(-k // 4)
    size = 128 + blocks * 128 + (0 if packed else blocks * groups * 128)
    return size + (4 * max(groups * 4, 128) if rows else 0)


def _frozen(graph: Graph, name: str) -> bool:
    t = graph.tensors[name]
    return t.data is not None and name not in mutable_tensors(graph)


def _gemm_args(ref: KernelCall, graph: Graph, w_name: str, weight_2d, n_out: int,
               input_offset: int) -> tuple[list[tuple[str, Arg]], bool]:
    """rq, packed, ksum and the filter argument of a conv / FC record."""
    m, s = _quant(ref, n_out)
    args: list[tuple[str, Arg]] = [("rq", ArrayArg(int32_array("rq", rq_words(m, s))))]
    frozen = _frozen(graph, w_name)
    if frozen:
        w = weight_2d(graph.tensors[w_name].data)
        args += [("packed", ArrayArg(ConstArray("packed", "int8_t", pack_gemm_weights(w)))),
                 ("ksum", ArrayArg(int32_array("ksum", kernel_sums(w, input_offset))))]
    else:
        args += [("packed", NullArg("const int8_t *")), ("ksum", NullArg("const int32_t *"))]
    return args, frozen


def _conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    w = view.input(1)
    assert w is not None
    out_c, k_h, k_w, k_c = (int(v) for v in w.shape)
    if view.shape(view.x())[3] != k_c:
        return None                                   # grouped: ref
    ref = forward_call(graph, op, batch)
    p = ref.arg("params").value.values
    extra, frozen = _gemm_args(ref, graph, w.name, lambda d: np.asarray(d).reshape(out_c, -1),
                               out_c, int(p["input_offset"]))
    st, pad = p["stride"].values, p["padding"].values
    i, o = ref.arg("input_dims").value.values, ref.arg("output_dims").value.values
    direct = (k_h, k_w) == (1, 1) and (int(st["h"]), int(st["w"])) == (1, 1) and \
        (int(pad["h"]), int(pad["w"])) == (0, 0) and (i["h"], i["w"]) == (o["h"], o["w"]) and \
        k_c % 4 == 0
    filt = NullArg("const int8_t *") if frozen else ref.arg("filter")
    args = (("ctx", ref.arg("ctx")), ("params", ref.arg("params")), *extra,
            ("input_dims", ref.arg("input_dims")), ("input", ref.arg("input")),
            ("filter_dims", ref.arg("filter_dims")), ("filter", filt),
            ("bias", ref.arg("bias")), ("output_dims", ref.arg("output_dims")),
            ("output", ref.arg("output")))
    return replace(ref, kernel="pe_conv2d_s8" + SUFFIX, args=args,
                   scratch_bytes=gemm_scratch(out_c, k_h * k_w * k_c, frozen, not direct))


FC_SMALL_ROWS = 4                          # the small kernel row by row up to this many rows


def fc_small(units: int, depth: int) -> bool:
    """Whether hvx/pe_hvx_fc_small.h takes a layer (its dispatch: units per vector)."""
    return (depth <= 32 and units <= 32 or depth <= 64 and units <= 16
            or depth <= 512 and units <= 8)


def _fully_connected(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """One input row: the dot-product kernel over the weights as they are; a layer of few
    units (``fc_small``), up to FC_SMALL_ROWS rows: the small kernel (inlined: specialised to
    the layer); more rows: the gemm over packed weights."""
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    p = ref.arg("params").value.values
    if p["filter_offset"] != 0:
        return None
    w = view.input(1)
    assert w is not None
    units, depth = (int(v) for v in w.shape)
    rows = int(ref.arg("input_dims").value.values["n"])
    small = fc_small(units, depth)
    if rows == 1 or small and rows <= FC_SMALL_ROWS:
        m, s = _quant(ref, units)
        args = tuple(("rq", ArrayArg(int32_array("rq", rq_words(m, s)))) if n == "quant"
                     else (n, a) for n, a in ref.args)
        return replace(ref, kernel="pe_fully_connected_s8_" + ("small" if small else "dot")
                       + SUFFIX, args=args, scratch_bytes=0)
    extra, frozen = _gemm_args(ref, graph, w.name, np.asarray, units, int(p["input_offset"]))
    filt = NullArg("const int8_t *") if frozen else ref.arg("filter")
    args = (("ctx", ref.arg("ctx")), ("params", ref.arg("params")), *extra,
            ("input_dims", ref.arg("input_dims")), ("input", ref.arg("input")),
            ("filter_dims", ref.arg("filter_dims")), ("filter", filt),
            ("bias", ref.arg("bias")), ("output_dims", ref.arg("output_dims")),
            ("output", ref.arg("output")))
    return replace(ref, kernel="pe_fully_connected_s8" + SUFFIX, args=args,
                   scratch_bytes=gemm_scratch(units, depth, frozen, True))


# -- depthwise ------------------------------------------------------------------------------------
def dw_lanes(channels: int, flat: bool) -> tuple[int, np.ndarray]:
    """(patterns, channel of each lane per pattern (patterns, 128), -1 past the channels) of
    pe_depthwise_conv2d_s8_hvx.c's layouts."""
    lanes = np.arange(128)
    if flat:
        patterns = channels // gcd(channels, 128)
        return patterns, (128 * np.arange(patterns)[:, None] + lanes) % channels
    patterns = -(-channels // 128)
    chan = 128 * np.arange(patterns)[:, None] + lanes
    return patterns, np.where(chan < channels, chan, -1)


def dw_layout(weight: np.ndarray, multiplier, shift, flat: bool
              ) -> tuple[int, np.ndarray, np.ndarray]:
    """(patterns, int16 weights, rq words) of a depthwise layer (weight (1, kh, kw, C)): per
    pattern and tap the weights of the even lanes then of the odd lanes; per pattern the rq
    vectors of the four accumulators (lanes 4i, 4i+1, 4i+2, 4i+3)."""
    w = np.asarray(weight, np.int64).reshape(-1, weight.shape[-1])      # (taps, C)
    channels = w.shape[1]
    patterns, chan = dw_lanes(channels, flat)
    valid = chan >= 0
    c = np.where(valid, chan, 0)
    lane_w = np.where(valid[:, None, :], w[:, c].transpose(1, 0, 2), 0)   # (pat, taps, 128)
    halves = np.concatenate([lane_w[..., 0::2], lane_w[..., 1::2]], axis=-1)
    m = np.where(valid, np.asarray(multiplier, np.int64)[c], 0)
    s = np.where(valid, np.asarray(shift, np.int64)[c], 0)
    order = np.concatenate([np.arange(r, 128, 4) for r in range(4)])      # accumulator lanes
    rq = np.concatenate([rq_words(m[p, order], s[p, order]) for p in range(patterns)])
    return patterns, halves.astype(np.int16).reshape(-1), rq


def dw_scratch(channels: int, patterns: int, out_w: int, k_h: int, k_w: int, s_w: int,
               d_w: int, trained: bool = False) -> int:
    """pe_depthwise_conv2d_s8_hvx.c's scratch: slack, bias vectors, the int16 weights laid
    out at run time when training changes them, k_h staged rows."""
    cols = (out_w - 1) * s_w + (k_w - 1) * d_w + 1
    row = -(-(cols * channels + 128) // 128) * 128
    weights = patterns * k_h * k_w * 256 if trained else 0
    return 128 + patterns * 4 * 128 + weights + k_h * row


def _depthwise_conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2) or int(view.attr("depth_multiplier", 1)) != 1:
        return None
    w = view.input(1)
    assert w is not None
    ref = forward_call(graph, op, batch)
    p = ref.arg("params").value.values
    _, k_h, k_w, chans = (int(v) for v in w.shape)
    m, s = _quant(ref, chans)
    s_w, d_w = int(p["stride"].values["w"]), int(p["dilation"].values["w"])
    flat = s_w == 1 and chans // gcd(chans, 128) <= MAX_FLAT_PATTERNS
    frozen = _frozen(graph, w.name)
    patterns, weights, rq = dw_layout(np.zeros(w.shape, np.int8) if not frozen else w.data,
                                      m, s, flat)
    if frozen:
        ksum = nx.wrap_int32(np.asarray(w.data, np.int64).reshape(-1, chans).sum(axis=0)
                             * int(p["input_offset"]))
        extra: tuple = (("weights", ArrayArg(ConstArray("weights", "int16_t", weights))),
                        ("ksum", ArrayArg(int32_array("ksum", ksum))))
        filt: Arg = NullArg("const int8_t *")
    else:                                  # trained: laid out from the filter at every call
        extra = (("weights", NullArg("const int16_t *")), ("ksum", NullArg("const int32_t *")))
        filt = ref.arg("filter")
    out_w = int(ref.arg("output_dims").value.values["w"])
    args = (("ctx", ref.arg("ctx")), ("params", ref.arg("params")),
            ("rq", ArrayArg(int32_array("rq", rq))), *extra,
            ("flat", ScalarArg("int32_t", int(flat))),
            ("patterns", ScalarArg("int32_t", patterns)),
            ("input_dims", ref.arg("input_dims")), ("input", ref.arg("input")),
            ("filter_dims", ref.arg("filter_dims")), ("filter", filt),
            ("bias", ref.arg("bias")), ("output_dims", ref.arg("output_dims")),
            ("output", ref.arg("output")))
    return replace(ref, kernel="pe_depthwise_conv2d_s8" + SUFFIX, args=args,
                   scratch_bytes=dw_scratch(chans, patterns, out_w, k_h, k_w, s_w, d_w,
                                            not frozen))


# -- pooling, add, mul ---------------------------------------------------------------------------
def _pool(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(1):
        return None
    fh, fw = (int(v) for v in view.attr("filter"))
    if op.type == "avg_pool2d" and fh * fw >= MAX_POOL_TAPS:
        return None
    ref = forward_call(graph, op, batch)
    return replace(ref, kernel=ref.kernel + SUFFIX)


def _elementwise(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """add, mul of two int8 tensors of the same shape (no broadcast)."""
    ref = same_dims_call(graph, op, batch)
    if ref is None:
        return None
    d = ref.arg("output_dims").value.values
    size = int(np.prod([d[k] for k in "nhwc"], dtype=np.int64))
    args = (("params", ref.arg("params")), ("size", ScalarArg("int32_t", size)),
            ("input1", ref.arg("input1")), ("input2", ref.arg("input2")),
            ("output", ref.arg("output")))
    return replace(ref, kernel=f"pe_{op.type}_s8" + SUFFIX, args=args)


# -- int8 backward -------------------------------------------------------------------------------
def pack_grad_input_weights(weight: np.ndarray) -> np.ndarray:
    """int8 weights (O, kh, kw, C) as pe_grad_s8_hvx.c's int16 pairs: per block of 32 input
    channels and pair j of the row elements e = tap * O2 + o (O2: O rounded up to even) the
    words (w[o][tap][c], w[o + 1][tap][c]) of lanes c."""
    w = np.asarray(weight, np.int64)
    out_c, c_n = w.shape[0], w.shape[-1]
    w = w.reshape(out_c, -1, c_n)                                    # (O, taps, C)
    taps = w.shape[1]
    o2, blocks = out_c + out_c % 2, -(-c_n // LANES)
    rows = np.zeros((taps, o2, blocks * LANES), np.int64)           # row element -> lanes
    rows[:, :out_c, :c_n] = w.transpose(1, 0, 2)
    pairs = rows.reshape(taps * o2 // 2, 2, blocks, LANES)          # (pair, 2, cb, lane)
    return pairs.transpose(2, 0, 3, 1).reshape(-1).astype(np.int16)


def grad_input_scratch(out_c: int, taps: int, c_n: int, packed: bool) -> int:
    """pe_grad_s8_hvx.c's input-gradient scratch: slack, the weights when packed at run
    time, four rows of taps * O2 int16."""
    o2, blocks = out_c + out_c % 2, -(-c_n // LANES)
    size = 128 + (0 if packed else blocks * taps * o2 // 2 * 128)
    return size + 4 * taps * o2 * 2


def _int8_train(*kernels: str) -> Builder:
    """A builder for the int8 training kernels hvx runs with ref's arguments (``kernels``: the
    ref kernels it takes; the rest stay ref)."""
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        ref = train_kernel_call(graph, op, batch)
        return replace(ref, kernel=ref.kernel + SUFFIX) if ref.kernel in kernels else None
    return build


MOMENTUM_Q15_MAX = 1 << 15       # pe_sgd_update_s8_hvx.c: mq * buf exact from vmpye up to 1.0


SGD_MIN_INNER = 16               # entries per trained channel below which ref is as fast


def _sgd_update(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """int8-mode SGD on int8 weights and int32 biases (momentum up to 1.0) whose trained
    channels have at least 16 entries each (the vectors run along a channel: biases and
    depthwise weights, one entry per channel and position, stay on ref)."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel not in ("pe_sgd_update_s8_s8", "pe_sgd_update_s8_s32") or \
            int(ref.arg("params").value.values["momentum_q15"]) > MOMENTUM_Q15_MAX or \
            int(ref.arg("dims").value.values["inner"]) < SGD_MIN_INNER:
        return None
    return replace(ref, kernel=ref.kernel + SUFFIX)


def _grad_input(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """conv2d (one group): rows of prescaled gradients times packed int16 weight pairs; FC:
    the weight rows as they are times each prescaled gradient."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel not in ("pe_conv2d_grad_input_s8", "pe_fully_connected_grad_input_s8"):
        return None
    f, dx = ref.arg("filter_dims").value.values, ref.arg("dx_dims").value.values
    if int(f["c"]) != int(dx["c"]):
        return None                                   # grouped: ref
    q = ref.arg("quant").value.values
    pre = rq_words(q["multiplier"].values, q["shift"].values, int(q["prescale_shift"]))
    out_c, taps, c_n = int(f["n"]), int(f["h"]) * int(f["w"]), int(f["c"])
    at = next(i for i, (n, _) in enumerate(ref.args) if n == "quant") + 1
    if ref.kernel.startswith("pe_fully_connected"):
        args = ref.args[:at] + (("pre", ArrayArg(int32_array("pre", pre))),) + ref.args[at:]
        return replace(ref, kernel=ref.kernel + SUFFIX, args=args,
                       scratch_bytes=128 + -(-(2 * out_c + 2) // 128) * 128)
    w = graph.tensors[ref.arg("filter").tensor]
    frozen = _frozen(graph, w.name)
    packed: Arg = (ArrayArg(ConstArray("packed", "int16_t", pack_grad_input_weights(
        np.asarray(w.data).reshape(out_c, int(f["h"]), int(f["w"]), c_n))))
                   if frozen else NullArg("const int16_t *"))
    args = ref.args[:at] + (("pre", ArrayArg(int32_array("pre", pre))),
                            ("packed", packed)) + ref.args[at:]
    return replace(ref, kernel=ref.kernel + SUFFIX, args=args,
                   scratch_bytes=grad_input_scratch(out_c, taps, c_n, frozen))


DW_GRAD_ROWS = 16               # PE_HVX_DW_ROWS in pe_grad_s8_hvx.c


def _dw_grad_input(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """Depth multiplier 1, windows of at most 16 rows: a ring of k_h prescaled int16 dy rows
    (scratch), the filter read as it is."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel != "pe_depthwise_conv2d_grad_input_s8":
        return None
    p, f = ref.arg("params").value.values, ref.arg("filter_dims").value.values
    dy = ref.arg("dy_dims").value.values
    if int(p["ch_mult"]) != 1 or int(f["h"]) > DW_GRAD_ROWS:
        return None
    q = ref.arg("quant").value.values
    pre = rq_words(q["multiplier"].values, q["shift"].values, int(q["prescale_shift"]))
    c64 = -(-int(dy["c"]) // 64) * 64
    at = next(i for i, (n, _) in enumerate(ref.args) if n == "quant") + 1
    args = ref.args[:at] + (("pre", ArrayArg(int32_array("pre", pre))),) + ref.args[at:]
    return replace(ref, kernel=ref.kernel + SUFFIX, args=args,
                   scratch_bytes=128 + int(f["h"]) * int(dy["w"]) * c64 * 2)


def grad_weight_scratch(out_c: int, c_n: int) -> int:
    """pe_grad_s8_hvx.c's weight-gradient scratch: slack, the column sums of dy, a row of
    the input's zero point."""
    return 128 + 4 * (-(-out_c // 128) * 128) + -(-c_n // LANES) * LANES + 128


def _grad_weight(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel not in ("pe_conv2d_grad_weight_s8", "pe_fully_connected_grad_weight_s8"):
        return None
    x, dw, dy = (ref.arg(n).value.values for n in ("x_dims", "dw_dims", "dy_dims"))
    if int(x["c"]) != int(dw["c"]):
        return None                                   # grouped: ref
    fc = ref.kernel.startswith("pe_fully_connected")  # FC: no scratch
    return replace(ref, kernel=ref.kernel + SUFFIX,
                   scratch_bytes=0 if fc else grad_weight_scratch(int(dy["c"]), int(x["c"])))


def _dw_grad_weight(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """Depth multiplier 1: every channel a lane, the trained ones picked (scratch: 64 sums)."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel != "pe_depthwise_conv2d_grad_weight_s8" or \
            int(ref.arg("params").value.values["ch_mult"]) != 1:
        return None
    return replace(ref, kernel=ref.kernel + SUFFIX, scratch_bytes=128 + 64 * 4)


def _avg_pool_grad(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """Windows that do not overlap (each dx value in at most one window)."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel != "pe_avg_pool2d_grad_s8":
        return None
    f = ref.arg("filter_dims").value.values
    st = ref.arg("params").value.values["stride"].values
    if int(st["h"]) < int(f["h"]) or int(st["w"]) < int(f["w"]):
        return None
    return replace(ref, kernel=ref.kernel + SUFFIX)


TRAIN_BUILDERS: dict[str, Builder] = {
    "conv2d_grad_input": _grad_input,
    "fully_connected_grad_input": _grad_input,
    "depthwise_conv2d_grad_input": _dw_grad_input,
    "depthwise_conv2d_grad_weight": _dw_grad_weight,
    "conv2d_grad_weight": _grad_weight,
    "fully_connected_grad_weight": _grad_weight,
    "bias_grad": _int8_train("pe_bias_grad_s8"),
    "avg_pool2d_grad": _avg_pool_grad,
    "act_mask": _int8_train("pe_act_mask_s8"),
    "mask_grad": _int8_train("pe_mask_grad_s8"),
    "sgd_update": _sgd_update,
}

FORWARD_BUILDERS: dict[str, Builder] = {
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise_conv2d,
    "fully_connected": _fully_connected,
    "avg_pool2d": _pool,
    "max_pool2d": _pool,
    "add": _elementwise,
    "mul": _elementwise,
}

BUILDERS: dict[str, Builder] = {**FORWARD_BUILDERS, **TRAIN_BUILDERS}

HVX = Backend(
    name="hvx",
    summary="pockengine's own int8 kernels for Hexagon HVX, 128-byte vectors "
            "(runtime_c/kernels/hvx)",
    builders=BUILDERS, kernel_dir="hvx", archs=("hexagon",), needs=("hvx",))
