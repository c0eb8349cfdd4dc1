"""The arm backend: pockengine's own int8 kernels for Cortex-M cores with the DSP extension.

The kernels (``runtime_c/kernels/arm``, prototypes in ``pe_arm_kernels.h``) are C with ACLE
intrinsics (SMLAD on pairs of int16, SXTB16 to widen int8) that compiles to exact portable
code on cores without DSP, which is how the host tests them. Each builder starts from the op's
ref record (the same offsets, clamps, dims and multipliers, from ``params``) and adds what
can be computed at compile time:

- ``rq``: per output channel the three words of ``pe_arm.h``'s one-rounding requantization
  (:func:`requant_words`), for channels whose right shift is at least 2 and multiplier above
  2^30 (every layer of the MLPerf Tiny models); anything else declines to the next backend;
- ``tables`` (add): the 2 x 256 rescaled input values TFLM computes per element.

Two forms of each record: the *body* call (the default), ``pe_arm_<op>_s8(...)`` with every
shape, offset and clamp as a literal argument, which a generated model inlines (the bodies are
``static inline`` in ``runtime_c/kernels/arm/pe_arm_*.h``) so that each layer gets code
specialised for its shapes; and the *out-of-line* call ``pe_<op>_s8_arm(...)`` with the ref
kernel's structs (:func:`out_of_line`), the same body compiled once with run-time shapes, for
layers whose specialised code would not fit.

What each kernel takes (others decline):

- conv2d: one group, any kernel size, stride, padding, dilation; scratch two int16 columns;
- depthwise_conv2d: depth multiplier 1, dilation 1, k_h * ceil(k_w / 2) <= 64; scratch one
  padded int16 plane; may write its output over its input (it reads a whole channel before
  writing it, and writes no other channel);
- fully_connected: symmetric weights (filter offset 0), per tensor or per channel;
- add: equal shapes (no broadcast);
- fp32 backward (out of line, ``pe_train_f32_arm.c``, the ref signatures): input gradients of
  convolutions with one group and of FC, weight gradients of pointwise convs and FC, depthwise
  input gradients (multiplier 1, dilation 1), average-pooling gradients of windows that do not
  overlap — the same float32 sums in the same order as ref, with eight-wide VLDM + VMLA loops
  on FPU cores;
- act_mask (training graphs, either backward mode): eight values per step with SSUB8/SEL;
  mask_grad: bitwise ANDs with the mask's bits, four (int8) or eight (fp32) values a step;
- sgd_update (fp32 on int8 weights; int8 mode on int8 weights and int32 biases): the plain
  case (no momentum, master copy or accumulation) in one loop per trained channel;
- bias_grad (int8): column sums four channels a step in int16 lanes (SXTB16, SADD16);
- grad_add (int8): exponents at most 16 apart in two passes of exact integer sums;
- int8 backward (``pe_grad_s8_arm.c``): pointwise conv and FC input gradients over the
  forward's pair loop (the transposed weights as an int16 stream; layers whose prescale is
  outside ``prescale_words``' form stay on ref), depthwise input gradients (multiplier 1,
  dilation 1) and pointwise weight gradients, integer sums in the order the loops read fastest
  (exact in any order).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..golden import numerics as nx
from ..ir import Graph, Op
from ..ir.stream import band_plan, chain_graph, row_stages
from .base import Backend, Builder, Target
from .kernel_call import (
    Arg,
    ArrayArg,
    ConstArray,
    ContextArg,
    ExprArg,
    FunctionArg,
    KernelCall,
    NullArg,
    ScalarArg,
    Struct,
    StructArg,
    StructArrayArg,
    TensorArg,
)
from .params import OpArgs, int32_array, mutable_tensors
from .ref_args import forward_call, same_dims_call
from .train_args import train_kernel_call

SUFFIX = "_arm"
# A target feature that asks for the out-of-line kernels instead of specialised bodies (no
# packed weight copies, one copy of each kernel's code): what a build falls back to when the
# specialised code and packed weights do not fit the board's flash (pipeline.fit_budget).
GENERIC = "arm-generic"
RQ_WORDS = 3
DW_MAX_PAIRS = 64                   # PE_ARM_DW_MAX_PAIRS in arm/pe_arm_dw.h


def requant_words(multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray | None:
    """pe_arm.h's constants {2^(e-2), m, e-1} per channel (e = -shift), or None when some
    channel is outside the one-rounding form's range (e >= 2, m > 2^30; or m = 0, whose
    results are all 0)."""
    m = np.asarray(multiplier, dtype=np.int64).reshape(-1)
    e = -np.asarray(shift, dtype=np.int64).reshape(-1)
    zero = m == 0                       # a dead channel (scale 0): every result is 0, which
    e = np.where(zero, 2, e)            # the constants of e = 2 give with m = 0
    if m.size == 0 or np.any(e < 2) or np.any(e > 31) or np.any((m <= 1 << 30) & ~zero) or \
            np.any(m >= 1 << 31):
        return None
    return np.stack([np.left_shift(np.int64(1), e - 2), m, e - 1], axis=1).reshape(-1)


FOLD_MAX_E1 = 22                    # zero point folded when every channel's e - 1 <= this


def fold_zero_point(words: np.ndarray, zero_point: int) -> np.ndarray | None:
    """``requant_words`` with the output zero point folded into the constant: adding
    ``zp * 2^(e-1)`` to the high word adds exactly ``zp`` after the shift right by e - 1
    (floor((x + zp * 2^s) / 2^s) = floor(x / 2^s) + zp), saving an add per output. None when
    some channel's shift is too large for the high word to stay inside int32
    (|zp| <= 128: e - 1 <= 22 keeps it below 2^31 for every accumulator)."""
    w = np.asarray(words, dtype=np.int64).reshape(-1, RQ_WORDS).copy()
    if np.any(w[:, 2] > FOLD_MAX_E1) or abs(int(zero_point)) > 128:
        return None
    w[:, 0] += np.left_shift(np.int64(int(zero_point)), w[:, 2])
    return w.reshape(-1)


def _rq_arg(ref: KernelCall, n_out: int) -> ArrayArg | None:
    quant = ref.arg("quant").value.values
    m, s = quant["multiplier"], quant["shift"]
    m = m.values if isinstance(m, ConstArray) else np.array([m])
    s = s.values if isinstance(s, ConstArray) else np.array([s])
    words = requant_words(np.broadcast_to(m, (n_out,)), np.broadcast_to(s, (n_out,)))
    return None if words is None else ArrayArg(int32_array("rq", words))


def _insert_after(args: tuple, name: str, new: tuple) -> tuple:
    at = next(i for i, (n, _) in enumerate(args) if n == name) + 1
    return args[:at] + (new,) + args[at:]


# -- the two forms of a record --------------------------------------------------------------------
BODIES = {"pe_conv2d_s8_arm": "pe_arm_conv_s8", "pe_depthwise_conv2d_s8_arm": "pe_arm_dw_s8",
          "pe_fully_connected_s8_arm": "pe_arm_fc_s8", "pe_add_s8_arm": "pe_arm_add_s8"}


def _i32(*values: int) -> list[tuple[str, Arg]]:
    return [(f"k{i}", ScalarArg("int32_t", int(v))) for i, v in enumerate(values)]


def pack_rows(weight: np.ndarray, block: int) -> np.ndarray:
    """Rows of ``weight`` (out, k) in the order the packed loops read (pe_arm.h): rows padded
    with zeros to a multiple of four; each block of ``block`` rows interleaved per group of four
    values; the rows after the last whole block one after another."""
    w = np.asarray(weight, dtype=np.int8).reshape(weight.shape[0], -1)
    rows, k = w.shape
    groups = -(-k // 4)
    padded = np.zeros((rows, groups * 4), np.int8)
    padded[:, :k] = w
    whole = rows - rows % block
    head = padded[:whole].reshape(whole // block, block, groups, 4).transpose(0, 2, 1, 3)
    return np.concatenate([head.reshape(-1), padded[whole:].reshape(-1)])


W16_KERNEL = "pe_arm_conv_w16_s8"  # the conv body over the int16 weight stream
FAST, SIGNED, NATURAL = 1, 2, 4     # PE_ARM_FAST, PE_ARM_SIGNED, PE_ARM_NATURAL in arm/pe_arm.h
FAST_ACC_BOUND = 1 << 29            # |acc| bound of the fast requantization form
FAST_MAX_E = 21
FULL_RANGE = (-128, 127)


def fast_words(words: np.ndarray, zero_point: int) -> np.ndarray:
    """pe_arm.h's fast-form words {m, 2^(e-1) + zp * 2^e, e} per channel from
    ``requant_words`` (unfolded)."""
    q = np.asarray(words, dtype=np.int64).reshape(-1, RQ_WORDS)
    e = q[:, 2] + 1
    c = np.left_shift(np.int64(1), e - 1) + np.left_shift(np.int64(int(zero_point)), e)
    return np.stack([q[:, 1], c, e], axis=1).reshape(-1)


def _bias_tensor(call: KernelCall, graph: Graph):
    bias = call.arg("bias")
    return graph.tensors[bias.tensor] if isinstance(bias, TensorArg) else None


def fast_mode(call: KernelCall, graph: Graph, taps: int) -> int | None:
    """PE_ARM_FAST (with PE_ARM_SIGNED unless the output zero point is the clamp's floor, -128)
    when a conv or depthwise record qualifies for pe_arm.h's fast form: the whole int8 range as
    clamp, every e <= FAST_MAX_E, a bias that nothing changes at run time, and an accumulator
    bounded by FAST_ACC_BOUND for every input (|bias| + taps * 128 * 255, ``taps`` products per
    output); else None."""
    p = call.arg("params").value.values
    act = p["activation"].values
    words = np.asarray(call.arg("rq").value.values, np.int64).reshape(-1, RQ_WORDS)
    if (int(act["min"]), int(act["max"])) != FULL_RANGE or np.any(words[:, 2] + 1 > FAST_MAX_E):
        return None
    b = _bias_tensor(call, graph)
    if b is not None and (b.data is None or b.name in mutable_tensors(graph)):
        return None
    top = 0 if b is None else int(np.abs(np.asarray(b.data, np.int64)).max(initial=0))
    if top + taps * 128 * 255 > FAST_ACC_BOUND:
        return None
    return FAST | (0 if int(p["output_offset"]) == -128 else SIGNED)


def _pairs16(w: np.ndarray) -> np.ndarray:
    """int16 values (..., 4) as the two words of pe_arm.h's pair order, (v0, v2), (v1, v3)."""
    lo, hi = w[..., [0, 1]] & 0xFFFF, w[..., [2, 3]] & 0xFFFF
    return ((lo | (hi << 16)).astype(np.uint32)).view(np.int32)


def _pair_groups(w: np.ndarray) -> np.ndarray:
    """Rows (out, k) of int16 values, an even count, as the stream's weights: per pair of rows
    and group of four values, row 0's two pair words, then row 1's; groups padded with zeros to
    an even count. (pairs, 4 * groups) int32."""
    rows, k = w.shape
    groups = -(-k // 8) * 2
    padded = np.zeros((rows, groups * 4), np.int64)
    padded[:, :k] = w
    packed = _pairs16(padded.reshape(rows // 2, 2, groups, 4))   # pairs, row, group, 2
    return packed.transpose(0, 2, 1, 3).reshape(rows // 2, -1)


def raw_stream(weight: np.ndarray) -> np.ndarray:
    """The stream of pe_arm_raw_pairs (arm/pe_arm_conv.h) for int8 rows (out, k), an even
    count, as int32 words: per pair of rows four zero words, then per group of four
    values row 0's four int16 weights in SXTB16's pair order (w0, w2, w1, w3), then row 1's
    (k padded with zeros to a multiple of eight)."""
    w = np.asarray(weight, dtype=np.int64)
    rows, k = w.shape
    k8 = -(-k // 8) * 8
    padded = np.zeros((rows, k8), np.int64)
    padded[:, :k] = w
    slots = padded.reshape(rows, k8 // 4, 4)[:, :, [0, 2, 1, 3]]
    pairs = slots.reshape(rows // 2, 2, k8 // 4, 4).transpose(0, 2, 1, 3)
    halves = pairs.reshape(rows // 2, -1, 2) & 0xFFFF
    words = (halves[..., 0] | (halves[..., 1] << 16)).astype(np.uint32).view(np.int32)
    return np.concatenate([np.zeros((rows // 2, 4), np.int64), words.astype(np.int64)],
                          axis=1).reshape(-1)


def _natural_blocks(w: np.ndarray) -> np.ndarray:
    """Rows (out, k) of int16 values, an even count, as the natural stream's weights: per pair
    of rows and block of eight values row 0's eight, then row 1's (k padded with zeros to a
    multiple of eight), as int32 words of two values each. (pairs, 8 * blocks) int32."""
    rows, k = w.shape
    k8 = -(-k // 8) * 8
    padded = np.zeros((rows, k8), np.int64)
    padded[:, :k] = w
    blocks = padded.reshape(rows // 2, 2, k8 // 8, 8).transpose(0, 2, 1, 3)
    halves = (blocks.reshape(rows // 2, -1, 2) & 0xFFFF)
    return ((halves[..., 0] | (halves[..., 1] << 16)).astype(np.uint32)).view(np.int32)


def w16_stream(weight: np.ndarray, bias: np.ndarray | None, words: np.ndarray, zero_point: int,
               fast: bool, natural: bool = False) -> np.ndarray:
    """The int32 stream of pe_arm_conv_w16_s8 (arm/pe_arm_conv.h) for frozen weights (out, k)
    with an even number of rows: per pair of rows the bias pair twice (fast form, doubled), the
    weights as int16 pairs per group of four values and row (doubled in the fast form; groups
    padded with zeros to an even count), the requantization words of the two rows. ``words``:
    ``requant_words`` (unfolded); the output zero point goes into them here. ``natural``: the
    weights in Helium's order instead (``_natural_blocks``, mode PE_ARM_NATURAL)."""
    w = np.asarray(weight, dtype=np.int64).reshape(weight.shape[0], -1) * (2 if fast else 1)
    rows = w.shape[0]
    packed = _natural_blocks(w) if natural else _pair_groups(w)
    q = np.asarray(words, dtype=np.int64).reshape(rows, RQ_WORDS)
    if fast:
        rq = fast_words(q, zero_point)
        b = np.zeros(rows, np.int64) if bias is None else np.asarray(bias, np.int64) * 2
        parts = [np.tile(b.reshape(-1, 2), 2), packed]      # both pixels' accumulators
    else:
        rq = fold_zero_point(q, zero_point).reshape(rows, RQ_WORDS)
        parts = [packed]
    parts.append(rq.reshape(rows // 2, 2 * RQ_WORDS))
    return np.concatenate(parts, axis=1).reshape(-1)


def _w16_mode(call: KernelCall, graph: Graph, k: int, out_c: int) -> int | None:
    """The stream form's mode bits for a conv with frozen weights (``fast_mode``, else the
    general form over a bias pointer), or None when the layer keeps the packed int8 form (odd
    channel count, a clamp narrower than int8, a zero point that does not fold, no bias
    outside the fast form)."""
    p = call.arg("params").value.values
    act, out_off = p["activation"].values, int(p["output_offset"])
    if out_c % 2 or (int(act["min"]), int(act["max"])) != FULL_RANGE or \
            fold_zero_point(call.arg("rq").value.values, out_off) is None:
        return None
    mode = fast_mode(call, graph, k)
    if mode is not None:
        return mode
    return None if _bias_tensor(call, graph) is None else (0 if out_off == -128 else SIGNED)


def conv_w16_scratch(k_h: int, k_w: int, in_c: int, out_c: int) -> int:
    """pe_arm_conv_w16_s8's scratch: two int16 columns of k_h * k_w * in_c rounded up to 8,
    the staging row of conv_scratch when in_c is not a multiple of four, out_c bytes."""
    k = k_h * k_w * in_c
    return 2 * ((k + 7) & ~7) * 2 + (((k + 3) & ~3) if in_c % 4 else 0) + out_c


def _conv_w16(call: KernelCall, graph: Graph, w, helium: bool = False) -> KernelCall | None:
    """The stream form of a conv record with frozen weights ``w``, or None; ``helium``: in
    natural order for Helium's VMLADAV (cores with MVE)."""
    out_c = int(w.shape[0])
    mode = _w16_mode(call, graph, int(np.prod(w.shape[1:])), out_c)
    if mode is None:
        return None
    mode |= NATURAL if helium else 0
    fast = bool(mode & FAST)
    bias = call.arg("bias")
    bt = _bias_tensor(call, graph)
    b = bt.data if bt is not None else None
    stream = w16_stream(w.data, b, call.arg("rq").value.values,
                        int(call.arg("params").value.values["output_offset"]), fast, helium)
    p, i, o = (call.arg(n).value.values for n in ("params", "input_dims", "output_dims"))
    f = call.arg("filter_dims").value.values
    st, pad, dil = (p[n].values for n in ("stride", "padding", "dilation"))
    args = [("ctx", call.arg("ctx")), ("input", call.arg("input")),
            ("stream", ArrayArg(int32_array("stream", stream))),
            ("bias", NullArg("const int32_t *") if fast else bias),
            ("mode", ScalarArg("int32_t", mode)), ("output", call.arg("output")),
            *_i32(o["n"], i["h"], i["w"], i["c"], o["h"], o["w"], o["c"], f["h"], f["w"],
                  st["h"], st["w"], pad["h"], pad["w"], dil["h"], dil["w"], p["input_offset"])]
    scratch = conv_w16_scratch(int(f["h"]), int(f["w"]), int(i["c"]), out_c)
    if helium:                     # natural columns and a staging row of k8 bytes, out_c
        k8 = (int(np.prod(w.shape[1:])) + 7) & ~7
        scratch = 2 * k8 * 2 + k8 + out_c
    return replace(call, kernel=W16_KERNEL, args=tuple(args), scratch_bytes=scratch)


def _dw_kernel_sums(call: KernelCall, graph: Graph | None) -> Arg:
    """pe_arm_dw_s8's ksum: per channel the input offset times the sum of its weights (frozen
    weights only: the offset is folded into the bias, the plane holds the input as it is);
    NULL otherwise."""
    w = graph.tensors[call.arg("filter").tensor] if graph is not None else None
    if w is None or w.data is None or w.name in mutable_tensors(graph):
        return NullArg("const int32_t *")
    off = int(call.arg("params").value.values["input_offset"])
    sums = np.asarray(w.data, np.int64).reshape(-1, w.shape[-1]).sum(axis=0) * off
    return ArrayArg(int32_array("ksum", sums))


ROWS_KERNEL = "pe_arm_conv_rows_s8"  # the conv body over weights training changes


def _conv_rows(call: KernelCall, graph: Graph, w) -> KernelCall | None:
    """The rows form of a conv record whose weights ``w`` training changes (read as they are,
    SXTB16 in the loop; arm/pe_arm_conv.h's pe_arm_rows_pairs): an even number of output
    channels, k a multiple of eight, the whole int8 range as clamp, a bias, a zero point that
    folds; else None (the plain form of pe_arm_conv_s8)."""
    p = call.arg("params").value.values
    act, out_off = p["activation"].values, int(p["output_offset"])
    out_c, k = int(w.shape[0]), int(np.prod(w.shape[1:]))
    folded = fold_zero_point(call.arg("rq").value.values, out_off)
    if out_c % 2 or k % 8 or (int(act["min"]), int(act["max"])) != FULL_RANGE or \
            folded is None or _bias_tensor(call, graph) is None:
        return None
    i, o, f = (call.arg(n).value.values for n in ("input_dims", "output_dims", "filter_dims"))
    st, pad, dil = (p[n].values for n in ("stride", "padding", "dilation"))
    args = [("ctx", call.arg("ctx")), ("input", call.arg("input")),
            ("filter", call.arg("filter")), ("bias", call.arg("bias")),
            ("rq", ArrayArg(int32_array("rq", folded))),
            ("mode", ScalarArg("int32_t", 0 if out_off == -128 else SIGNED)),
            ("output", call.arg("output")),
            *_i32(o["n"], i["h"], i["w"], i["c"], o["h"], o["w"], o["c"], f["h"], f["w"],
                  st["h"], st["w"], pad["h"], pad["w"], dil["h"], dil["w"], p["input_offset"])]
    return replace(call, kernel=ROWS_KERNEL, args=tuple(args),
                   scratch_bytes=conv_w16_scratch(int(f["h"]), int(f["w"]), int(i["c"]), out_c))


def body_call(call: KernelCall, graph: Graph | None = None, target: Target | None = None
              ) -> KernelCall:
    """The specialised form of an out-of-line arm record: the kernel's body with its shapes,
    offsets and clamps as literal int32 arguments (see the module docstring), the output zero
    point folded into the requantization constants where it fits (``fold_zero_point``). A
    conv or FC whose weights ``graph`` does not change at run time reads a packed copy
    (flash)."""
    def s(name: str) -> dict:
        return call.arg(name).value.values

    kernel = BODIES[call.kernel]
    if kernel == "pe_arm_add_s8":
        p = s("params")
        args = [("tables", call.arg("tables")), ("rq", call.arg("rq")),
                ("input1", call.arg("input1")), ("input2", call.arg("input2")),
                ("output", call.arg("output")), ("size", call.arg("size")),
                *_i32(p["output_multiplier"], p["output_shift"], p["output_offset"],
                      p["activation"].values["min"], p["activation"].values["max"])]
        return replace(call, kernel=kernel, args=tuple(args))
    p, i, o = s("params"), s("input_dims"), s("output_dims")
    act = p["activation"].values
    head = [("ctx", call.arg("ctx")), ("input", call.arg("input")),
            ("filter", call.arg("filter"))]
    if kernel in ("pe_arm_conv_s8", "pe_arm_fc_s8"):
        w = graph.tensors[call.arg("filter").tensor] if graph is not None else None
        packed = w is not None and w.data is not None and w.name not in mutable_tensors(graph)
        if packed and kernel == "pe_arm_conv_s8":
            assert graph is not None
            w16 = _conv_w16(call, graph, w, "mve" in (target or Target()).features)
            if w16 is not None:
                return w16
        if w is not None and not packed and kernel == "pe_arm_conv_s8":
            assert graph is not None
            rows = _conv_rows(call, graph, w)
            if rows is not None:
                return rows
        if packed:
            assert w is not None
            head[-1] = ("filter", ArrayArg(ConstArray("filter", "int8_t", pack_rows(
                w.data, 2 if kernel == "pe_arm_conv_s8" else 4))))
        head.append(("packed", ScalarArg("int32_t", int(packed))))
    rq, out_off = call.arg("rq"), int(p["output_offset"])
    mode = 0
    if kernel == "pe_arm_dw_s8" and graph is not None:
        f = s("filter_dims")
        mode = fast_mode(call, graph, int(f["h"]) * int(f["w"])) or 0
    if mode:
        rq, out_off = ArrayArg(int32_array("rq", fast_words(rq.value.values, out_off))), 0
    elif (folded := fold_zero_point(rq.value.values, out_off)) is not None:
        rq, out_off = ArrayArg(int32_array("rq", folded)), 0
    head.append(("bias", call.arg("bias")))
    if kernel == "pe_arm_dw_s8":
        head.append(("ksum", _dw_kernel_sums(call, graph)))
    head += [("rq", rq), ("output", call.arg("output"))]
    if kernel == "pe_arm_fc_s8":
        tail = _i32(o["n"] * o["h"] * o["w"], i["c"], o["c"], p["input_offset"], out_off,
                    act["min"], act["max"])
    else:
        f = s("filter_dims")
        st, pad = p["stride"].values, p["padding"].values
        common = (f["h"], f["w"], st["h"], st["w"], pad["h"], pad["w"])
        if kernel == "pe_arm_conv_s8":
            dil = p["dilation"].values
            tail = _i32(o["n"], i["h"], i["w"], i["c"], o["h"], o["w"], o["c"], *common,
                        dil["h"], dil["w"], p["input_offset"], out_off, act["min"], act["max"])
        else:
            tail = _i32(o["n"], i["h"], i["w"], i["c"], o["h"], o["w"], *common,
                        p["input_offset"], out_off, act["min"], act["max"], mode)
    return replace(call, kernel=kernel, args=tuple(head + tail))


def out_of_line(graph: Graph, op: Op, batch: int = 1, target: Target | None = None
                ) -> KernelCall | None:
    """The out-of-line form of the arm record of ``op`` (ref-style structs), or None."""
    builder = OUT_OF_LINE.get(op.type)
    call = builder(graph, op, batch, target or Target()) if builder is not None else None
    return None if call is None else replace(call, backend="arm")


# -- builders -------------------------------------------------------------------------------------
def conv_scratch(k_h: int, k_w: int, in_c: int) -> int:
    """pe_conv2d_s8_arm_scratch: two int16 columns of k_h * k_w * in_c rounded up to 4, and a
    staging row of as many bytes when in_c is not a multiple of four."""
    k4 = (k_h * k_w * in_c + 3) & ~3
    return 2 * k4 * 2 + (k4 if in_c % 4 else 0)


def depthwise_scratch(out_h: int, out_w: int, k_h: int, k_w: int, s_h: int, s_w: int) -> int:
    """pe_depthwise_conv2d_s8_arm_scratch: one padded int16 plane plus two spare values."""
    return (((out_h - 1) * s_h + k_h) * ((out_w - 1) * s_w + k_w) + 2) * 2


def fc_scratch(depth: int) -> int:
    return ((depth + 3) & ~3) * 2


def _conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    w = view.input(1)
    assert w is not None
    out_c, k_h, k_w, k_c = (int(v) for v in w.shape)
    if view.shape(view.x())[3] != k_c:
        return None                                   # grouped: ref
    rq = _rq_arg(ref, out_c)
    if rq is None:
        return None
    return replace(ref, kernel="pe_conv2d_s8" + SUFFIX, args=_insert_after(
        ref.args, "quant", ("rq", rq)), scratch_bytes=conv_scratch(k_h, k_w, k_c))


def _depthwise_conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    if int(view.attr("depth_multiplier", 1)) != 1 or \
            tuple(int(v) for v in view.attr("dilation", (1, 1))) != (1, 1):
        return None
    ref = forward_call(graph, op, batch)
    w = view.input(1)
    assert w is not None
    _, k_h, k_w, chans = (int(v) for v in w.shape)
    if k_h * ((k_w + 1) // 2) > DW_MAX_PAIRS:
        return None
    rq = _rq_arg(ref, chans)
    if rq is None:
        return None
    _, out_h, out_w, _ = view.shape(view.out())
    s_h, s_w = (int(v) for v in view.attr("stride"))
    return replace(ref, kernel="pe_depthwise_conv2d_s8" + SUFFIX,
                   args=_insert_after(ref.args, "quant", ("rq", rq)),
                   scratch_bytes=depthwise_scratch(out_h, out_w, k_h, k_w, s_h, s_w),
                   inplace=(view.x().name,))


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
    rq = _rq_arg(ref, units)
    if rq is None:
        return None
    args = tuple(("rq", rq) if n == "quant" else (n, a) for n, a in ref.args)
    return replace(ref, kernel="pe_fully_connected_s8" + SUFFIX, args=args,
                   scratch_bytes=fc_scratch(depth))


def add_tables(params: dict) -> np.ndarray:
    """TFLM's rescaled inputs of an int8 ADD for every byte value: 256 values of input 1
    (indexed by the byte as unsigned), then 256 of input 2."""
    x = np.arange(256, dtype=np.int64)
    x = np.where(x >= 128, x - 256, x)
    out = []
    for k in (1, 2):
        shifted = nx.wrap_int32((x + params[f"input{k}_offset"]) << params["left_shift"])
        out.append(nx.multiply_by_quantized_multiplier(
            shifted, params[f"input{k}_multiplier"], params[f"input{k}_shift"]))
    return np.concatenate(out)


def _add(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = same_dims_call(graph, op, batch)
    if ref is None:
        return None
    params = ref.arg("params").value.values
    words = requant_words(np.array([params["output_multiplier"]]),
                          np.array([params["output_shift"]]))
    rq: ArrayArg | NullArg = (NullArg("const int32_t *") if words is None
                              else ArrayArg(int32_array("rq", words)))
    d_out = ref.arg("output_dims").value.values
    size = int(np.prod([d_out[k] for k in "nhwc"], dtype=np.int64))
    args = (("params", ref.arg("params")),
            ("tables", ArrayArg(int32_array("tables", add_tables(params)))),
            ("rq", rq), ("size", ScalarArg("int32_t", size)),
            ("input1", ref.arg("input1")), ("input2", ref.arg("input2")),
            ("output", ref.arg("output")))
    assert isinstance(args[0][1], StructArg)
    return replace(ref, kernel="pe_add_s8" + SUFFIX, args=args)


# -- stream_chain ---------------------------------------------------------------------------------
# the literal int32 arguments of the bodies (k0, k1, ... in body_call's order), by name
BODY_LITERALS = {
    W16_KERNEL: ("n", "in_h", "in_w", "in_c", "out_h", "out_w", "out_c", "k_h", "k_w", "s_h",
                 "s_w", "pad_h", "pad_w", "dil_h", "dil_w", "in_off"),
    "pe_arm_conv_s8": ("n", "in_h", "in_w", "in_c", "out_h", "out_w", "out_c", "k_h", "k_w",
                       "s_h", "s_w", "pad_h", "pad_w", "dil_h", "dil_w", "in_off", "out_off",
                       "act_min", "act_max"),
    "pe_arm_dw_s8": ("n", "in_h", "in_w", "chans", "out_h", "out_w", "k_h", "k_w", "s_h", "s_w",
                     "pad_h", "pad_w", "in_off", "out_off", "act_min", "act_max", "mode"),
    "pe_arm_add_s8": ("out_mult", "out_shift", "out_off", "act_min", "act_max"),
}
STREAM_FORMS = {W16_KERNEL: 0, "pe_arm_conv_s8": 1, "pe_arm_dw_s8": 2}  # PE_STREAM_ARM_*


def body_literals(call: KernelCall) -> dict[str, int]:
    """The literal arguments of a body record (``BODY_LITERALS``) by name."""
    return {name: int(call.arg(f"k{i}").value)
            for i, name in enumerate(BODY_LITERALS[call.kernel])}


def _array(arg: Arg | None, name: str, ctype: str = "int32_t") -> ConstArray:
    """A body argument as a struct field: its constant array, or an empty one (NULL) for a
    tensor, an absent pointer or no argument."""
    if isinstance(arg, ArrayArg):
        return arg.value
    return ConstArray(name, ctype, np.zeros(0, np.int32 if ctype == "int32_t" else np.int8))


def _stream_stage(call: KernelCall) -> Struct | None:
    """``pe_stream_arm_stage`` of a stage's body record (the form its op would run as)."""
    form = STREAM_FORMS.get(call.kernel)
    if form is None:
        return None
    args = dict(call.args)
    if call.kernel == W16_KERNEL:
        mode, off = int(call.arg("mode").value), 0
    elif call.kernel == "pe_arm_conv_s8":
        mode, off = int(call.arg("packed").value), body_literals(call)["out_off"]
    else:
        lit = body_literals(call)
        mode, off = lit["mode"], lit["out_off"]
    filt = args.get("filter") if call.kernel == "pe_arm_conv_s8" else None
    return Struct("pe_stream_arm_stage", {
        "form": form, "mode": mode, "output_offset": off,
        "use_bias": int(isinstance(args.get("bias"), TensorArg)),
        "words": _array(args.get("stream"), "stream"),
        "filter": _array(filt, "filter", "int8_t"),
        "ksum": _array(args.get("ksum"), "ksum"), "rq": _array(args.get("rq"), "rq")})


def _stream_bodies(graph: Graph, op: Op, batch: int, target: Target) -> tuple | None:
    """What both forms of a stream_chain record are made of: ref's record (band schedule,
    stage structs, row buffers and state), the body record each stage's own op would run
    (``body_call``: packed weight streams, folded zero points, the fast forms; with
    ``GENERIC`` the weights as they are), the residual add's body (or None) and the largest
    scratch a stage body needs in a band. None when arm declines a stage."""
    if not OpArgs(graph, op, batch).int8_io(1):
        return None
    ref = forward_call(graph, op, batch)
    chain = chain_graph(graph, op)
    plan = band_plan(row_stages(chain), int(op.attrs["band_rows"]))
    bodies: list[KernelCall] = []
    add = None
    scratch = 0
    for sop in chain.ops:
        ool = OUT_OF_LINE[sop.type](chain, sop, 1, target)
        if ool is None:
            return None
        body = body_call(ool) if GENERIC in target.features else body_call(ool, chain, target)
        if sop.type == "add":
            add = body
            continue
        if body.kernel not in STREAM_FORMS:
            return None
        need = body.scratch_bytes
        if sop.type == "depthwise_conv2d":          # its plane: the largest band's rows
            lit = body_literals(body)
            need = depthwise_scratch(plan.max_rows[len(bodies)], lit["out_w"], lit["k_h"],
                                     lit["k_w"], lit["s_h"], lit["s_w"])
        scratch = max(scratch, need)
        bodies.append(body)
    return ref, bodies, add, scratch


def _stream_params(ref: KernelCall, scratch: int) -> tuple[tuple, int]:
    """ref's arguments with the stage bodies' scratch after its own; the total scratch."""
    offset = -(-ref.scratch_bytes // 16) * 16          # after the row buffers and state
    p = ref.arg("params").value
    params = Struct(p.ctype, {**p.values, "kernel_scratch_offset": offset,
                              "kernel_scratch_bytes": scratch})
    args = tuple((n, StructArg(params)) if n == "params" else (n, a) for n, a in ref.args)
    return args, offset + scratch


def stream_out_of_line(graph: Graph, op: Op, batch: int = 1, target: Target | None = None
                       ) -> KernelCall | None:
    """The out-of-line stream_chain record (pe_stream_chain_s8_arm: the stage bodies with
    run-time shapes, their constants in pe_stream_arm_stage structs), or None."""
    made = _stream_bodies(graph, op, batch, target or Target())
    if made is None:
        return None
    ref, bodies, add, scratch = made
    stages = [_stream_stage(b) for b in bodies]
    lit = body_literals(add) if add is not None else {}
    params = Struct("pe_stream_arm_params", {
        "add_tables": _array(add.arg("tables") if add else None, "tables"),
        "add_rq": _array(add.arg("rq") if add else None, "rq"),
        "add_multiplier": lit.get("out_mult", 0), "add_shift": lit.get("out_shift", 0),
        "add_offset": lit.get("out_off", 0),
        "add_activation": Struct("pe_activation", {"min": lit.get("act_min", 0),
                                                   "max": lit.get("act_max", 0)})})
    args, total = _stream_params(ref, scratch)
    args = _insert_after(args, "stages", ("arm", StructArg(params)))
    args = _insert_after(args, "arm", ("arm_stages",
                                        StructArrayArg("pe_stream_arm_stage", tuple(stages))))
    return replace(ref, kernel="pe_stream_chain_s8" + SUFFIX, args=args, scratch_bytes=total,
                   backend="arm")


# the band-dependent arguments of a stage body, as expressions of pe_stream_call *c
_BAND_ARGS = {"ctx": ExprArg("const pe_context *", "c->ctx"),
              "input": ExprArg("const int8_t *", "c->input"),
              "output": ExprArg("int8_t *", "c->output")}
_BAND_LITERALS = {"in_h": "c->in_dims.h", "out_h": "c->out_dims.h", "pad_h": "c->pad_h"}


def _stage_case(body: KernelCall) -> KernelCall:
    """A stage body's record as a case of the stage function: the band's rows, padding,
    buffers and scratch from the call, everything else as the layer's literals."""
    names = {f"k{i}": n for i, n in enumerate(BODY_LITERALS[body.kernel])}
    args = []
    for n, a in body.args:
        if n in _BAND_ARGS:
            a = _BAND_ARGS[n]
        elif names.get(n) in _BAND_LITERALS:
            a = ExprArg("int32_t", _BAND_LITERALS[names[n]])
        args.append((n, a))
    return replace(body, args=tuple(args))


def _add_case(body: KernelCall, chain_first: bool) -> KernelCall:
    """The residual add's body as the stage function's last case: the chain's rows in place."""
    rows = {"input1": "c->output" if chain_first else "c->input",
            "input2": "c->input" if chain_first else "c->output"}
    args = []
    for n, a in body.args:
        if n in rows:
            a = ExprArg("const int8_t *", rows[n])
        elif n == "output":
            a = ExprArg("int8_t *", "c->output")
        elif n == "size":
            a = ExprArg("int32_t", "c->size")
        args.append((n, a))
    return replace(body, args=tuple(args))


def _stream_chain(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """stream_chain as a generated model runs it: pe_stream_chain_s8_arm_fn over a stage
    function the model defines (FunctionArg), whose case k calls stage k's arm body with every
    shape, offset and clamp a literal but the band's rows, padding and buffers (what a layer's
    specialised code would be, in bands), the last the residual add's; ``GENERIC``: the
    out-of-line form. None (ref) when arm declines a stage."""
    if GENERIC in target.features:
        return stream_out_of_line(graph, op, batch, target)
    made = _stream_bodies(graph, op, batch, target)
    if made is None:
        return None
    ref, bodies, add, scratch = made
    cases = [_stage_case(b) for b in bodies]
    if add is not None:
        cases.append(_add_case(add, int(op.attrs["residual"]["order"]) == 0))
    args, total = _stream_params(ref, scratch)
    fn = FunctionArg("pe_stream_fn", "const pe_stream_call *c", "c->index", tuple(cases))
    keep = ("ctx", "params", "stages", "input_dims", "input", "output_dims", "output")
    args = tuple((n, a) for n, a in args if n in keep)
    args = _insert_after(args, "stages", ("fn", fn))
    return replace(ref, kernel="pe_stream_chain_s8_arm_fn", args=args, scratch_bytes=total)


OUT_OF_LINE: dict[str, Builder] = {
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise_conv2d,
    "fully_connected": _fully_connected,
    "add": _add,
}


def _specialised(builder: Builder) -> Builder:
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        call = builder(graph, op, batch, target)
        if call is None or GENERIC in target.features:
            return call
        return body_call(call, graph, target)
    return build


# -- fp32 backward ----------------------------------------------------------------------------------
GRAD_OB = 64                        # PE_ARM_OB in pe_train_f32_arm.c


def _fp32_train(graph: Graph, op: Op, batch: int) -> KernelCall | None:
    """The ref record of an fp32 backward op (None for the int8 backward's)."""
    ref = train_kernel_call(graph, op, batch)
    return ref if ref.kernel.endswith("_f32") else None


def _struct(ref: KernelCall, name: str) -> dict:
    return ref.arg(name).value.values


def _tile(value) -> tuple[int, int]:
    return int(value.values["h"]), int(value.values["w"])


def _pointwise(ref: KernelCall, dims: str) -> bool:
    """A 1x1 convolution with stride 1, no padding and dilation 1 over the same positions."""
    p = _struct(ref, "params")
    f = _struct(ref, dims)
    return ((int(f["h"]), int(f["w"])) == (1, 1) and _tile(p["stride"]) == (1, 1)
            and _tile(p["padding"]) == (0, 0) and _tile(p["dilation"]) == (1, 1))


def _grad_input(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = _fp32_train(graph, op, batch)
    if ref is None:
        return None
    dy, dx = _struct(ref, "dy_dims"), _struct(ref, "dx_dims")
    scratch = min(int(dy["c"]), GRAD_OB) * 8 * 4
    if op.type == "conv2d_grad_input":
        if int(_struct(ref, "filter_dims")["c"]) != int(dx["c"]):
            return None                                   # grouped: ref
        if not _pointwise(ref, "filter_dims"):
            scratch += (int(dx["w"]) * 2 + 3) & ~3        # output column per input column
    return replace(ref, kernel=ref.kernel + SUFFIX, scratch_bytes=scratch)


def _pool_conv_grad(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """The fused head backward as the pointwise input gradient, a block of output channels'
    dy rows made at a time (scratch: the w_r block, the pool's gradient over its count, the
    block's dy rows)."""
    ref = _fp32_train(graph, op, batch)
    if ref is None:
        return None
    dx, n_out = _struct(ref, "dx_dims"), int(ref.arg("n_out").value)
    rows = int(dx["n"]) * int(dx["h"]) * int(dx["w"])
    return replace(ref, kernel=ref.kernel + SUFFIX, args=(("ctx", ContextArg()), *ref.args),
                   scratch_bytes=4 * (8 * GRAD_OB + int(dx["n"]) * n_out
                                      + rows * min(n_out, GRAD_OB)))


def _grad_weight(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = _fp32_train(graph, op, batch)
    if ref is None:
        return None
    x = _struct(ref, "x_dims")
    if op.type == "conv2d_grad_weight" and (not _pointwise(ref, "dw_dims") or
                                             int(_struct(ref, "dw_dims")["c"]) != int(x["c"])):
        return None
    return replace(ref, kernel=ref.kernel + SUFFIX,
                   scratch_bytes=4 * ((int(x["c"]) + 7) & ~7) * 4)


def _dw_grad_input(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = _fp32_train(graph, op, batch)
    if ref is None:
        return None
    p, f = _struct(ref, "params"), _struct(ref, "filter_dims")
    k_h, k_w = int(f["h"]), int(f["w"])
    if int(p["ch_mult"]) != 1 or _tile(p["dilation"]) != (1, 1):
        return None
    dx, dy = _struct(ref, "dx_dims"), _struct(ref, "dy_dims")
    in_w = int(dx["w"])
    scratch = k_h * k_w * 8 * 4 + 2 * in_w * 2
    pad_h = _tile(p["padding"])[0]
    same = _tile(p["stride"]) == (1, 1) and all(int(dx[k]) == int(dy[k]) for k in "nhwc")
    if not (same and pad_h < k_h):
        return replace(ref, kernel=ref.kernel + SUFFIX, scratch_bytes=scratch)
    # dx may be written over dy: a ring of the dy rows still to be read (k_h - pad_h rows of
    # eight channels) joins the scratch
    return replace(ref, kernel=ref.kernel + SUFFIX,
                   scratch_bytes=scratch + (k_h - pad_h) * in_w * 8 * 4,
                   inplace=(ref.arg("dy").tensor,))


def _avg_pool_grad(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """Windows that do not overlap (each position in at most one), either backward mode (int8:
    a row of C bytes of scratch)."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel not in ("pe_avg_pool2d_grad_f32", "pe_avg_pool2d_grad_s8"):
        return None
    f = _struct(ref, "filter_dims")
    s_h, s_w = _tile(_struct(ref, "params")["stride"])
    if s_h < int(f["h"]) or s_w < int(f["w"]):
        return None                       # overlapping windows: sums of several taps, ref
    scratch = 0 if ref.kernel.endswith("_f32") else (int(_struct(ref, "dx_dims")["c"]) + 3) & ~3
    return replace(ref, kernel=ref.kernel + SUFFIX, scratch_bytes=scratch)


def _same_args(*kernels: str) -> Builder:
    """A builder for training kernels that arm runs with ref's arguments under ref's name plus
    "_arm" (``kernels``: the ref kernels it takes; the rest stay ref)."""
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        ref = train_kernel_call(graph, op, batch)
        return replace(ref, kernel=ref.kernel + SUFFIX) if ref.kernel in kernels else None
    return build


def _first(*builders: Builder) -> Builder:
    """The record of the first of ``builders`` that takes the op."""
    def build(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
        return next((c for b in builders if (c := b(graph, op, batch, target)) is not None),
                    None)
    return build


def _grad_input_s8(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """The int8 backward's input gradient of a pointwise conv or an FC layer (pe_grad_s8_arm.c:
    dy's rows are an FC's positions) with an even number of input channels: the transposed
    weights as a raw int16 stream, in flash for frozen weights (twice their bytes; the int8
    weights themselves are then not referenced: NULL), built in the scratch at run time when
    training changes them; scratch two int16 columns and the int32 sums."""
    ref = train_kernel_call(graph, op, batch)
    fc = ref.kernel == "pe_fully_connected_grad_input_s8"
    if not fc and (ref.kernel != "pe_conv2d_grad_input_s8" or
                   not _pointwise(ref, "filter_dims")):
        return None
    dy, dx, f = _struct(ref, "dy_dims"), _struct(ref, "dx_dims"), _struct(ref, "filter_dims")
    w = graph.tensors[ref.arg("filter").tensor]
    o_n, c_n = int(f["n"]), int(f["c"])
    pre = _prescale_arg(ref)
    if pre is None or c_n % 2 or (not fc and c_n != int(dx["c"])):
        return None
    positions = int(dy["n"]) if fc else int(dx["n"]) * int(dx["h"]) * int(dx["w"])
    k8 = (o_n + 7) & ~7
    scratch = 2 * k8 * 2 + (positions + 1) * c_n * 4
    stream: Arg
    args = ref.args
    if w.data is None or w.name in mutable_tensors(graph):
        stream = NullArg("const int32_t *")             # built at run time, in the scratch
        scratch += c_n // 2 * (16 + 4 * k8)
    else:
        stream = ArrayArg(int32_array("stream", raw_stream(
            np.asarray(w.data, np.int8).reshape(o_n, c_n).T)))
        args = tuple((n, NullArg("const int8_t *")) if n == "filter" else (n, a)
                     for n, a in args)
    args = _insert_after(args, "quant", ("stream", stream))
    return replace(ref, kernel=ref.kernel + SUFFIX, scratch_bytes=scratch,
                   args=_insert_after(args, "stream", ("pre", pre)))


def prescale_words(multiplier: np.ndarray, shift: np.ndarray, b: int) -> np.ndarray | None:
    """pe_grad_s8_arm.c's words {m, c, e, s, z} per output channel of an int8 input gradient's
    prescale MBQM(dy << b, M_o, k_o): e = max(-k, 0), c = 2^(e-1) (0 for e = 0), s = b +
    max(k, 0) + 1, z = -1 when e > 0 (the sign fix's mask) else 0; None when some channel is
    outside that form (k > 1, e > 30, m outside [0, 2^31))."""
    m = np.asarray(multiplier, np.int64).reshape(-1)
    k = np.asarray(shift, np.int64).reshape(-1)
    if m.size == 0 or np.any(k > 1) or np.any(-k > 30) or np.any(m < 0) or \
            np.any(m >= 1 << 31):
        return None
    e = np.maximum(-k, 0)
    c = np.where(e > 0, np.left_shift(np.int64(1), np.maximum(e - 1, 0)), 0)
    s = int(b) + np.maximum(k, 0) + 1
    z = np.where(e > 0, -1, 0)
    return np.stack([m, c, e, s, z], axis=1).reshape(-1)


def _prescale_arg(ref: KernelCall) -> Arg | None:
    """The prescale's words of an int8 input gradient; None (the op stays on ref) when a
    channel is outside their form."""
    q = _struct(ref, "quant")
    words = prescale_words(q["multiplier"].values, q["shift"].values, int(q["prescale_shift"]))
    return None if words is None else ArrayArg(int32_array("pre", words))


def _dw_grad_input_s8(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """The int8 backward's depthwise input gradient (multiplier 1, dilation 1): scattered
    into int32 sums (scratch: one per dx value, and an int16 row of prescaled dy)."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel != "pe_depthwise_conv2d_grad_input_s8":
        return None
    p, dx = _struct(ref, "params"), _struct(ref, "dx_dims")
    pre = _prescale_arg(ref)
    if pre is None or int(p["ch_mult"]) != 1 or _tile(p["dilation"]) != (1, 1):
        return None
    total = int(dx["n"]) * int(dx["h"]) * int(dx["w"]) * int(dx["c"])
    return replace(ref, kernel=ref.kernel + SUFFIX,
                   scratch_bytes=total * 4 + ((int(dx["c"]) + 3) & ~3) * 2,
                   args=_insert_after(ref.args, "quant", ("pre", pre)))


def _grad_weight_s8(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """The int8 backward's pointwise weight gradient over the trained channels, accumulated in
    dw position by position (scratch: an int16 row of x + offset)."""
    ref = train_kernel_call(graph, op, batch)
    if ref.kernel != "pe_conv2d_grad_weight_s8" or not _pointwise(ref, "dw_dims") or \
            int(_struct(ref, "dw_dims")["c"]) != int(_struct(ref, "x_dims")["c"]):
        return None
    return replace(ref, kernel=ref.kernel + SUFFIX,
                   scratch_bytes=(int(_struct(ref, "x_dims")["c"]) * 2 + 3) & ~3)


def _merge_rows(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    """The merge of a partial trainable tensor's parts a word at a time (rows of a multiple
    of 4 bytes)."""
    ref = train_kernel_call(graph, op, batch)
    return replace(ref, kernel=ref.kernel + SUFFIX) \
        if int(ref.arg("row_size").value) % 4 == 0 else None


TRAIN_BUILDERS: dict[str, Builder] = {
    # SGD without momentum, master copies or accumulation in one loop per channel (ref
    # behind it for the rest): fp32 on int8 weights, int8 mode on int8 weights and int32 biases
    "sgd_update": _same_args("pe_sgd_update_f32_s8", "pe_sgd_update_s8_s8",
                             "pe_sgd_update_s8_s32"),
    # masks: eight values a step with SSUB8/SEL; masked gradients with bitwise ANDs
    "mask_grad": _same_args("pe_mask_grad_s8", "pe_mask_grad_f32"),
    "act_mask": _same_args("pe_act_mask_s8"),
    # int8 bias gradients: column sums four channels a step (SXTB16, SADD16)
    "bias_grad": _same_args("pe_bias_grad_s8"),
    # int8 gradient sums (residual blocks) with exponents at most 16 apart
    "grad_add": _same_args("pe_grad_add_s8"),
    "conv2d_grad_input": _first(_grad_input, _grad_input_s8),
    "fully_connected_grad_input": _first(_grad_input, _grad_input_s8),
    "conv2d_grad_weight": _first(_grad_weight, _grad_weight_s8),
    "fully_connected_grad_weight": _grad_weight,
    "depthwise_conv2d_grad_input": _first(_dw_grad_input, _dw_grad_input_s8),
    "avg_pool2d_grad": _avg_pool_grad,
    "pool_conv_grad": _pool_conv_grad,
    # partial trainable weights: the two parts merged a word at a time
    "merge_channels": _merge_rows,
}

BUILDERS: dict[str, Builder] = {**{k: _specialised(b) for k, b in OUT_OF_LINE.items()},
                                "stream_chain": _stream_chain, **TRAIN_BUILDERS}

ARM = Backend(
    name="arm",
    summary="pockengine's own int8 kernels for Cortex-M with the DSP extension "
            "(runtime_c/kernels/arm; exact portable C elsewhere)",
    builders=BUILDERS, kernel_dir="arm", archs=("cortex-m", "host"), needs=("dsp", "mve"))
