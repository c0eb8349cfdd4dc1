"""The CMSIS-NN backend (Cortex-M with DSP or MVE): forward int8 kernels of Arm's CMSIS-NN.

CMSIS-NN enters the project only as the git submodule ``third_party/CMSIS-NN`` (v7.0.0); a user
with a checkout of their own points ``POCKENGINE_CMSIS_NN`` at it (or passes ``CMSIS_NN=...`` to
the generated Makefile). Without a checkout the backend is unavailable: ``--backend cmsis-nn``
is a one-line error and ``auto`` falls back to ref.

The records call thin wrappers in ``runtime_c/kernels/cmsis_nn`` that keep the ref kernels'
signatures (``pe_<op>_s8_cmsis``; FC takes one extra argument, the kernel sums) and translate to
CMSIS-NN's structs. Each builder starts from the ref record of the op (``ref_args``: the same
multipliers, shifts, offsets, clamps and dims, computed once from the golden model's numerics),
checks it against what CMSIS-NN v7.0.0 computes bit-exactly like TFLM's reference kernels and
returns None for everything else (the next backend of the chain, ref, takes it):

- conv2d through ``arm_convolve_wrapper_s8`` (1x1 stride 1 / strided 1x1 / 1xN / im2col paths,
  dilation and groups): declines shapes beyond CMSIS-NN's 16-bit index arithmetic, 1x1 convs
  with bottom/right padding (the 1x1 kernels assume none), grouped convs the wrapper's buffer
  query sizes as 1x1 / 1xN (it would hand ``arm_convolve_s8`` a buffer that is too small), and
  on MVE the 1xN configurations its Helium path computes wrongly (padding that is not TFLite
  SAME, windows longer than the row, right-padded windows that read stale buffer bytes);
- depthwise through ``arm_depthwise_conv_wrapper_s8`` (any depth multiplier, dilation; the
  3x3 kernel only where every window's middle column is inside the input, which it assumes);
- fully connected: ``arm_fully_connected_s8`` (per-tensor) and
  ``arm_fully_connected_per_channel_s8``; on MVE the kernel sums (bias + input offset x row
  sums of the weights, ``arm_vector_sum_s8``) are computed here into a constant array in flash
  when weights and bias are constants, and by the wrapper into scratch when training changes
  them;
- average / max pooling (``arm_avgpool_s8``, ``arm_max_pool_s8``): max pooling declines when a
  window lies entirely in the padding (CMSIS-NN leaves that output unwritten, TFLM writes the
  clamped int8 minimum);
- add / mul (``arm_elementwise_add_s8`` / ``_mul_s8``): element-wise only, CMSIS-NN does not
  broadcast, so any broadcast declines;
- softmax int8 -> int8 / int16 (``arm_softmax_s8``, ``arm_softmax_s8_s16``).

Scratch sizes are the formulas of the linked version's ``*_get_buffer_size`` functions for the
target core (MVE, DSP, or neither: the host), written out below and tested against the compiled
functions (tests/backends).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..golden import numerics as nx
from ..ir import Graph, Op
from .base import Backend, Builder, Target, ThirdParty
from .kernel_call import ArrayArg, ConstArray, KernelCall, NullArg
from .params import OpArgs, int32_array, mutable_tensors
from .ref_args import forward_call, same_dims_call

CMSIS_NN_SOURCES = ThirdParty(
    name="CMSIS-NN", make_var="CMSIS_NN", env="POCKENGINE_CMSIS_NN",
    default="third_party/CMSIS-NN", marker="Include/arm_nnfunctions.h",
    include_dirs=("Include",), source_dirs=("Source",))

SUFFIX = "_cmsis"
MVE, DSP, PLAIN = "mve", "dsp", "c"         # the code paths CMSIS-NN compiles for a core
UINT16_MAX = 0xFFFF
INT16_MAX = 0x7FFF
CH_IN_BLOCK_MVE = 124                       # arm_nnsupportfunctions.h
# A depthwise conv with one input channel and more output channels than this runs as a
# convolution on MVE (arm_nnsupportfunctions.h: 1 with GCC and clang, 8 with Arm Compiler 6,
# which pockengine does not use).
DW_TO_CONV_THRESHOLD = 1


def core(target: Target) -> str:
    """Which of CMSIS-NN's code paths a target's compiler flags select (``__ARM_FEATURE_MVE``,
    ``__ARM_FEATURE_DSP`` follow from -mcpu): mve, dsp, or c (plain C: the host)."""
    if "mve" in target.features:
        return MVE
    if "dsp" in target.features:
        return DSP
    return PLAIN


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


# -- geometry -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvGeometry:
    """A convolution's shapes and window, CMSIS-NN's view (batch n, NHWC, filter k_h x k_w x
    k_c per output channel, padding top/bottom/left/right)."""

    n: int
    in_h: int
    in_w: int
    in_c: int
    k_h: int
    k_w: int
    k_c: int
    out_h: int
    out_w: int
    out_c: int
    stride_h: int = 1
    stride_w: int = 1
    pad_top: int = 0
    pad_bottom: int = 0
    pad_left: int = 0
    pad_right: int = 0
    dil_h: int = 1
    dil_w: int = 1

    @classmethod
    def of(cls, view: OpArgs, depthwise: bool = False) -> ConvGeometry:
        x, w, out = view.x(), view.input(1), view.out()
        assert w is not None
        n, in_h, in_w, in_c = view.shape(x)
        _, out_h, out_w, out_c = view.shape(out)
        if depthwise:
            _, k_h, k_w, _ = w.shape
            k_c = 1
        else:
            _, k_h, k_w, k_c = w.shape
        sh, sw = (int(v) for v in view.attr("stride"))
        dh, dw = (int(v) for v in view.attr("dilation", (1, 1)))
        top, bottom, left, right = (int(v) for v in view.attr("padding"))
        return cls(int(n), int(in_h), int(in_w), int(in_c), int(k_h), int(k_w), int(k_c),
                   int(out_h), int(out_w), int(out_c), sh, sw, top, bottom, left, right, dh, dw)

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, f) for f in self.__dataclass_fields__)


def _fits(limit: int, *values: int) -> bool:
    return all(0 <= int(v) <= limit for v in values)


# -- scratch: CMSIS-NN v7.0.0's *_get_buffer_size, per core ---------------------------------------
def conv_buffer_branch(g: ConvGeometry) -> str:
    """The branch ``arm_convolve_wrapper_s8_get_buffer_size`` takes (it does not look at the
    channels): 1x1_fast, 1x1, 1xn or im2col."""
    if g.pad_left == 0 and g.pad_top == 0 and g.k_w == 1 and g.k_h == 1 and \
            g.dil_w == 1 and g.dil_h == 1:
        return "1x1_fast" if g.stride_w == 1 and g.stride_h == 1 else "1x1"
    if g.in_h == 1 and g.dil_w == 1 and g.k_h == 1 and (g.stride_w * g.in_c) % 4 == 0:
        return "1xn"
    return "im2col"


def conv_kernel_branch(g: ConvGeometry) -> str:
    """The kernel ``arm_convolve_wrapper_s8`` dispatches to (its tests include input channels
    == filter channels: grouped convolutions always take the im2col kernel)."""
    branch = conv_buffer_branch(g)
    return branch if branch == "im2col" or g.in_c == g.k_c else "im2col"


def convolve_s8_buffer_size(core_: str, g: ConvGeometry) -> int:
    """arm_convolve_s8_get_buffer_size (input channels, not filter channels)."""
    if core_ == MVE:
        col = (g.in_c * g.k_w * g.k_h + 15) // 16
        return 4 * col * 16
    rhs_cols = g.k_w * g.k_h * g.in_c
    rem = rhs_cols % 4
    aligned = rhs_cols + 4 - rem if rem else rhs_cols
    return 2 * aligned * 2


@dataclass(frozen=True)
class OneByN:
    """The split of arm_convolve_1_x_n_s8's Helium path: output columns with left padding,
    without padding and with right padding."""

    total_pad: int
    asym_pad: int
    left: int
    none: int
    right: int

    @classmethod
    def of(cls, g: ConvGeometry) -> OneByN:
        total = (g.out_w - 1) * g.stride_w + g.k_w - g.in_w
        asym = _cmod(total, 2)
        pad, s = g.pad_left, g.stride_w
        right = max(1, _cdiv(pad + asym + s - 1, s)) if pad + asym != 0 else 0
        left = max(1, _cdiv(pad + s - 1, s)) if pad != 0 else 0
        return cls(total, asym, left, max(g.out_w - (right + left), 0), right)

    def splits(self, g: ConvGeometry) -> bool:
        """False: the columns do not add up and the kernel falls back to arm_convolve_s8."""
        return self.left + self.none + self.right == g.out_w


def convolve_1_x_n_buffer_size(core_: str, g: ConvGeometry) -> int:
    if core_ != MVE:
        return convolve_s8_buffer_size(core_, g)
    sp = OneByN.of(g)
    if not sp.splits(g):
        return convolve_s8_buffer_size(core_, g)
    pad_size_left = g.pad_left * g.in_c
    pad_size_right = sp.right * g.in_c if sp.asym_pad else pad_size_left
    num_elem_left = g.k_w * g.in_c
    return max(num_elem_left + pad_size_left, num_elem_left - g.in_c + pad_size_right)


def convolve_wrapper_buffer_size(core_: str, g: ConvGeometry) -> int:
    """arm_convolve_wrapper_s8_get_buffer_size. The 1x1 stride-1 kernel's DSP buffer exists
    only with Arm Compiler 6; with GCC and clang it is 0 like every other 1x1 case."""
    branch = conv_buffer_branch(g)
    if branch in ("1x1_fast", "1x1"):
        return 0
    if branch == "1xn":
        return convolve_1_x_n_buffer_size(core_, g)
    return convolve_s8_buffer_size(core_, g)


def depthwise_as_conv(g: ConvGeometry) -> ConvGeometry:
    """The convolution the MVE wrapper runs a one-input-channel depthwise conv as (filter
    1 x h x w x C transposed to C x h x w x 1)."""
    return replace(g, k_c=g.in_c)


def depthwise_runs_as_conv(core_: str, g: ConvGeometry) -> bool:
    return core_ == MVE and g.in_c == 1 and g.out_c > DW_TO_CONV_THRESHOLD


def depthwise_path(core_: str, g: ConvGeometry) -> str:
    """The kernel arm_depthwise_conv_wrapper_s8 dispatches to: conv, 3x3, opt or generic."""
    if depthwise_runs_as_conv(core_, g):
        return "conv"
    if g.in_c == g.out_c and g.n == 1 and g.dil_w == 1 and g.dil_h == 1:
        if core_ != MVE and g.k_w == 3 and g.k_h == 3 and g.pad_top <= 1 and g.pad_left <= 1:
            return "3x3"
        return "opt"
    return "generic"


def depthwise_opt_buffer_size(core_: str, g: ConvGeometry) -> int:
    if core_ == MVE:
        return 4 * CH_IN_BLOCK_MVE * g.k_w * g.k_h
    if core_ == DSP:
        return g.in_c * g.k_w * g.k_h * 2
    return 0


def depthwise_wrapper_buffer_size(core_: str, g: ConvGeometry) -> int:
    """arm_depthwise_conv_wrapper_s8_get_buffer_size."""
    path = depthwise_path(core_, g)
    if path == "conv":
        return (convolve_wrapper_buffer_size(MVE, depthwise_as_conv(g))
                + g.out_c * g.k_h * g.k_w)
    return depthwise_opt_buffer_size(core_, g) if path == "opt" else 0


def fully_connected_buffer_size(core_: str, units: int) -> int:
    """arm_fully_connected_s8_get_buffer_size: the kernel sums on MVE."""
    return units * 4 if core_ == MVE else 0


def avgpool_buffer_size(core_: str, out_w: int, channels: int) -> int:
    """arm_avgpool_s8_get_buffer_size."""
    del out_w
    return channels * 4 if core_ == DSP else 0


# -- what the builders check ----------------------------------------------------------------------
def mve_1xn_exact(g: ConvGeometry) -> bool:
    """Whether arm_convolve_1_x_n_s8's Helium path computes this convolution (one input row,
    filter 1 x k, dilation 1, channels split evenly) like TFLM. It handles the columns in three
    runs: left-padded ones from a buffer of ``pad`` pad values and the first k input columns,
    unpadded ones straight from the input, right-padded ones from a buffer of k-1 input columns
    and pad values; it ignores the vertical direction. Exact when:

    - the output is one row with no vertical padding;
    - the horizontal padding is TFLite's SAME split of a non-negative total (otherwise it
      returns an error without writing, or for a negative total pads a column it should read);
    - the left-padded windows end inside the row (their buffer holds only k columns);
    - the first right-padded window ends exactly one column past the row (the buffer's k-1
      input columns are those its windows read) and the last one stays inside the buffer's
      pad values (beyond them lie stale bytes).
    A split that does not add up falls back to arm_convolve_s8, which is exact.
    """
    if g.out_h != 1 or g.pad_top or g.pad_bottom:
        return False
    sp = OneByN.of(g)
    if sp.total_pad < 0 or 2 * g.pad_left + sp.asym_pad != sp.total_pad:
        return False
    if not sp.splits(g):
        return True
    s, k = g.stride_w, g.k_w
    if sp.left and (sp.left - 1) * s - g.pad_left + k > g.in_w:
        return False
    if sp.right:
        pad_right = g.pad_left + sp.asym_pad
        n_pads = sp.right if sp.asym_pad else g.pad_left
        if (pad_right - 1) % s or (sp.right - 1) * s + 1 > n_pads:
            return False
    return True


def _conv_limits_ok(g: ConvGeometry) -> bool:
    """Shapes within CMSIS-NN's 16-bit index arithmetic (uint16 sizes, int16 window origins in
    the DSP depthwise kernel, a uint16 column count of k_h x k_w x k_c)."""
    return (_fits(UINT16_MAX, *g.values(), g.k_h * g.k_w * g.k_c)
            and _fits(INT16_MAX, g.in_h, g.in_w, g.out_h * g.stride_h, g.out_w * g.stride_w))


def conv_declines(core_: str, g: ConvGeometry) -> str | None:
    """Why the CMSIS-NN convolution wrapper is not exact for ``g`` on ``core_``, or None."""
    if not _conv_limits_ok(g):
        return "shape beyond CMSIS-NN's 16-bit index arithmetic"
    kernel = conv_kernel_branch(g)
    if kernel != conv_buffer_branch(g):
        return "grouped convolution that the buffer query sizes as a 1x1 / 1xN one"
    if kernel in ("1x1_fast", "1x1") and (g.pad_bottom or g.pad_right):
        return "1x1 convolution with bottom/right padding"
    if kernel == "1xn" and core_ == MVE and not mve_1xn_exact(g):
        return "1xN convolution the Helium path does not compute exactly"
    return None


def depthwise_declines(core_: str, g: ConvGeometry) -> str | None:
    if depthwise_runs_as_conv(core_, g):
        return conv_declines(core_, depthwise_as_conv(g))
    if not _conv_limits_ok(g):
        return "shape beyond CMSIS-NN's 16-bit index arithmetic"
    if depthwise_path(core_, g) == "3x3":
        last_middle = (g.out_w - 1) * g.stride_w - g.pad_left + 1
        if last_middle > g.in_w - 1:
            return "3x3 depthwise window whose middle column is padding"
    return None


def _replace_bias_if_none(ref: KernelCall, n_out: int) -> KernelCall:
    """arm_convolve_s8 advances the bias pointer per group even when it is NULL: give grouped
    convolutions without a bias zeros instead."""
    if not isinstance(ref.arg("bias"), NullArg):
        return ref
    zeros = ArrayArg(int32_array("bias", np.zeros(n_out, np.int64)))
    return replace(ref, args=tuple((n, zeros if n == "bias" else a) for n, a in ref.args))


def _record(ref: KernelCall, kernel: str, scratch: int) -> KernelCall:
    return replace(ref, kernel=kernel + SUFFIX, scratch_bytes=int(scratch))


# -- builders -------------------------------------------------------------------------------------
def _conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    g = ConvGeometry.of(view)
    c = core(target)
    if conv_declines(c, g) is not None:
        return None
    if g.in_c != g.k_c:
        ref = _replace_bias_if_none(ref, g.out_c)
    return _record(ref, ref.kernel, convolve_wrapper_buffer_size(c, g))


def _depthwise_conv2d(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    g = ConvGeometry.of(view, depthwise=True)
    c = core(target)
    if depthwise_declines(c, g) is not None:
        return None
    return _record(ref, ref.kernel, depthwise_wrapper_buffer_size(c, g))


def kernel_sums(weight: np.ndarray, bias: np.ndarray | None, input_offset: int) -> np.ndarray:
    """arm_vector_sum_s8 with filter offset 0: bias[i] + input_offset * sum_j w[i, j], in int32
    with C's wrap-around."""
    w = np.asarray(weight, dtype=np.int64).reshape(weight.shape[0], -1)
    sums = w.sum(axis=1) * int(input_offset)
    if bias is not None:
        sums = sums + np.asarray(bias, dtype=np.int64)
    return nx.wrap_int32(sums).astype(np.int32)


def _fully_connected(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io(2):
        return None
    ref = forward_call(graph, op, batch)
    w, b = view.input(1), view.input(2)
    assert w is not None
    units, depth = w.shape
    rows = ref.arg("input_dims").value.values["n"]
    if not _fits(UINT16_MAX, units, depth, rows):
        return None
    c = core(target)
    scratch = 0
    sums: ArrayArg | NullArg = NullArg("const int32_t *")
    if c == MVE:
        mutable = mutable_tensors(graph)
        if w.name in mutable or (b is not None and b.name in mutable):
            scratch = fully_connected_buffer_size(c, units)   # the wrapper sums at run time
        else:
            offset = ref.arg("params").value.values["input_offset"]
            sums = ArrayArg(ConstArray("kernel_sum", "int32_t", kernel_sums(
                w.data, None if b is None else b.data, offset)))
    args = list(ref.args)
    at = next(i for i, (n, _) in enumerate(args) if n == "quant") + 1
    args.insert(at, ("kernel_sum", sums))
    return replace(_record(ref, ref.kernel, scratch), args=tuple(args))


def pool_window_misses_input(size: int, out: int, k: int, stride: int, pad: int) -> bool:
    """Whether some window of a pooling lies entirely in the padding."""
    return any(o * stride - pad >= size or o * stride - pad + k <= 0 for o in range(out))


def _pool(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if not view.int8_io():
        return None
    ref = forward_call(graph, op, batch)
    d_in = ref.arg("input_dims").value.values
    d_out = ref.arg("output_dims").value.values
    fh, fw = (int(v) for v in view.attr("filter"))
    sh, sw = (int(v) for v in view.attr("stride"))
    top, _, left, _ = (int(v) for v in view.attr("padding"))
    if not _fits(INT16_MAX, *d_in.values(), *d_out.values(), fh, fw, sh, sw, top, left):
        return None
    if op.type == "max_pool2d":
        if pool_window_misses_input(d_in["h"], d_out["h"], fh, sh, top) or \
                pool_window_misses_input(d_in["w"], d_out["w"], fw, sw, left):
            return None
        scratch = 0
    else:
        scratch = avgpool_buffer_size(core(target), d_out["w"], d_in["c"])
    return _record(ref, ref.kernel, scratch)


def _elementwise(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    ref = same_dims_call(graph, op, batch)   # CMSIS-NN's element-wise kernels do not broadcast
    if ref is None:
        return None
    if op.type == "add" and ref.arg("params").value.values["left_shift"] < 16:
        return None                      # its DSP path packs (x + offset) in 16 bits
    return _record(ref, ref.kernel, 0)


def _softmax(graph: Graph, op: Op, batch: int, target: Target) -> KernelCall | None:
    view = OpArgs(graph, op, batch)
    if view.x().dtype != "int8" or view.out().dtype not in ("int8", "int16"):
        return None
    ref = forward_call(graph, op, batch)
    if ref.arg("params").value.values["input_left_shift"] > 30:
        return None                      # CMSIS-NN computes 1 << shift in int32
    return _record(ref, ref.kernel, 0)


BUILDERS: dict[str, Builder] = {
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise_conv2d,
    "fully_connected": _fully_connected,
    "avg_pool2d": _pool,
    "max_pool2d": _pool,
    "add": _elementwise,
    "mul": _elementwise,
    "softmax": _softmax,
}

CMSIS_NN = Backend(
    name="cmsis-nn",
    summary="Arm CMSIS-NN v7.0.0 forward int8 kernels (Cortex-M with DSP or MVE)",
    builders=BUILDERS, kernel_dir="cmsis_nn", archs=("cortex-m", "host"),
    needs=("dsp", "mve"), third_party=CMSIS_NN_SOURCES)

