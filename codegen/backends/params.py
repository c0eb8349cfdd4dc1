"""Backend-neutral parameter math: what every backend's call records are made of.

Shapes as ``pe_dims`` (rank < 4 padded with leading 1s), windows, clamp bounds, the int8
output stage of conv / depthwise / FC (TFLM's QuantizeMultiplier through the golden model's
``numerics``), broadcast / reduction / padding collapse to 4-D, int8 softmax constants. The
numbers are those of ``codegen.golden`` (the oracle) and NUMERICS.md; a backend that needs a
number of its own derives it from these, never re-derives them.

:class:`OpArgs` is an op with its graph and batch: typed access to its tensors plus the
helpers above. ``batch`` > 1 scales the leading batch dimension of non-constant tensors whose
first dimension is 1 (as the golden model batches); generated firmware uses batch 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ..errors import ModelError
from ..golden import numerics as nx
from ..golden.kernels.conv import output_multipliers
from ..ir import Graph, Op, OpView, Tensor
from .kernel_call import C_TYPES, Arg, ConstArray, KernelCall, NullArg, Struct, TensorArg

ADD_LEFT_SHIFT = 20                   # TFLM int8 ADD
SOFTMAX_SCALED_DIFF_INTEGER_BITS = 5  # TFLM int8 SOFTMAX: differences in Q5.26
INF = float("inf")
B = TypeVar("B")                      # a kernel table's builder


@dataclass(frozen=True)
class OpArgs(OpView):
    """An op with its graph and batch: typed access to tensors and precomputation helpers."""

    batch: int = 1

    def shape(self, t: Tensor) -> tuple[int, ...]:
        """The tensor's shape with the batch put in (non-constant, leading dimension 1)."""
        if t.shape and t.shape[0] == 1 and not t.is_const:
            return (self.batch,) + t.shape[1:]
        return t.shape

    def int8_io(self, n_inputs: int = 1) -> bool:
        """Whether the first ``n_inputs`` inputs (all present) and the output are int8."""
        ins = [self.input(i) for i in range(n_inputs)]
        return all(t is not None and t.dtype == "int8" for t in ins) and self.out().dtype == "int8"

    def dtypes(self, *allowed: tuple[str, ...]) -> tuple[str, ...]:
        """Check (input dtype, ..., output dtype) against the allowed combinations."""
        ins = [t.dtype for t in (self.input(i) for i in range(len(self.op.inputs)))
               if t is not None]
        got = tuple(ins[:len(allowed[0]) - 1]) + (self.out().dtype,)
        if got not in allowed:
            raise self.error(f"no ref kernel for dtypes {' x '.join(got[:-1])} -> {got[-1]}")
        return got


# -- argument builders --------------------------------------------------------------------------
def dims(shape: Sequence[int]) -> Struct:
    """A ``pe_dims`` for a shape of rank <= 4 (leading 1s added)."""
    s = tuple(int(d) for d in shape)
    if len(s) > 4:
        raise ValueError(f"shape {list(s)} has more than 4 dimensions")
    s = (1,) * (4 - len(s)) + s
    return Struct("pe_dims", dict(zip("nhwc", s)))


def tile(h: int, w: int) -> Struct:
    return Struct("pe_tile", {"w": int(w), "h": int(h)})


def activation(lo: int, hi: int) -> Struct:
    return Struct("pe_activation", {"min": int(lo), "max": int(hi)})


def activation_f32(name: str) -> Struct:
    lo, hi = nx.float_activation_range(name)
    return Struct("pe_activation_f32", {"min": float(lo), "max": float(hi)})


def tensor_arg(t: Tensor, write: bool = False) -> TensorArg:
    ctype = C_TYPES[t.dtype]
    return TensorArg(t.name, f"{ctype} *" if write else f"const {ctype} *")


def int32_array(name: str, values) -> ConstArray:
    arr = np.asarray(values, dtype=np.int64).reshape(-1)
    if arr.size and (arr.min() < nx.INT32_MIN or arr.max() > nx.INT32_MAX):
        raise ValueError(f"{name}: value outside int32")
    return ConstArray(name, "int32_t", arr.astype(np.int32))


def call(view: OpArgs, kernel: str, args: Sequence[tuple[str, Arg]],
         may_alias: tuple[tuple[str, str], ...] = (), inplace: Sequence[str] = ()
         ) -> KernelCall:
    """A ref-style record (no scratch) for ``view``'s op."""
    return KernelCall(kernel, view.op.name, tuple(args), 0, may_alias, tuple(inplace))


def size_of(view: OpArgs, t: Tensor) -> int:
    n = int(np.prod(view.shape(t), dtype=np.int64))
    if n > nx.INT32_MAX:
        raise view.error(f"tensor {t.name!r} has {n} elements, more than int32 indexing allows")
    return n


def check_int32_sizes(view: OpArgs) -> None:
    for name in view.op.inputs + view.op.outputs:
        if name:
            size_of(view, view.graph.tensors[name])


def portable_builder(builders: Mapping[str, B], op: Op) -> B:
    """The builder of ``op`` in a table of the portable kernels; ModelError if it has none."""
    builder = builders.get(op.type)
    if builder is None:
        raise ModelError(f"op {op.name!r} ({op.type}): no portable C kernel for this op")
    return builder


def output_stage(view: OpArgs, n_out: int, fc: bool
                  ) -> tuple[np.ndarray, np.ndarray, int, int, int, int]:
    """(multipliers, shifts, input offset, output offset, clamp lo, clamp hi) of an int8
    conv / FC, exactly as the golden model's _integer_setup computes them."""
    x, w, out = view.x(), view.input(1), view.out()
    assert w is not None
    s_in, zp_in = view.quant(x)
    s_out, zp_out = view.quant(out)
    if w.quant is None or w.dtype != "int8":
        raise view.error(f"weight {w.name!r} must be int8 with quantization parameters")
    if np.any(w.quant.zero_point != 0):
        raise view.error(f"weight {w.name!r} must be symmetric (zero point 0)")
    w_scales = w.quant.scale
    if w_scales.size not in (1, n_out):
        raise view.error(f"weight has {w_scales.size} scales for {n_out} output channels")
    m, s = output_multipliers(s_in, w_scales, s_out, w_scales.size, fc)
    b = view.input(2)
    if b is not None:
        if b.dtype != "int32" or b.data is None:
            raise view.error(f"bias {b.name!r} must be a constant int32 tensor")
        if b.size != n_out:
            raise view.error(f"bias has {b.size} values for {n_out} output channels")
    lo, hi = nx.activation_range(view.attr("activation", "none"), s_out, zp_out)
    return m, s, -zp_in, zp_out, lo, hi


def bias_arg(view: OpArgs, ctype: str) -> Arg:
    b = view.input(2)
    return NullArg(f"const {ctype} *") if b is None else tensor_arg(b)


def window_attrs(view: OpArgs) -> dict[str, Struct]:
    sh, sw = (int(v) for v in view.attr("stride"))
    dh, dw = (int(v) for v in view.attr("dilation", (1, 1)))
    top, _, left, _ = (int(v) for v in view.attr("padding"))
    return {"stride": tile(sh, sw), "padding": tile(top, left), "dilation": tile(dh, dw)}


def per_channel(m: np.ndarray, s: np.ndarray, n_out: int) -> Struct:
    return Struct("pe_per_channel_quant", {
        "multiplier": int32_array("multiplier", np.broadcast_to(m, (n_out,))),
        "shift": int32_array("shift", np.broadcast_to(s, (n_out,)))})


def broadcast_dims(shape_a: Sequence[int], shape_b: Sequence[int], shape_out: Sequence[int]
                   ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """Collapse a numpy broadcast to 4-D: (a, b, out) shapes, or None if it needs more.

    Output dimensions of 1 are dropped; adjacent dimensions where each input is either full
    in both or broadcast in both merge into one.
    """
    r = len(shape_out)
    a = (1,) * (r - len(shape_a)) + tuple(shape_a)
    b = (1,) * (r - len(shape_b)) + tuple(shape_b)
    runs: list[list[int]] = []          # [a_full, b_full, size]
    for da, db, do in zip(a, b, shape_out):
        if do == 1:
            continue
        pattern = [int(da == do), int(db == do)]
        if runs and runs[-1][:2] == pattern:
            runs[-1][2] *= do
        else:
            runs.append(pattern + [do])
    if len(runs) > 4:
        return None
    runs = [[1, 1, 1]] * (4 - len(runs)) + runs
    return (tuple(r_[2] if r_[0] else 1 for r_ in runs),
            tuple(r_[2] if r_[1] else 1 for r_ in runs),
            tuple(r_[2] for r_ in runs))


def softmax_params_s8(s_in: float, beta: float,
                      error: Callable[[str], ModelError] = ModelError) -> Struct:
    """``pe_softmax_params`` of TFLM's int8 softmax (int8 or int16 output) for input scale
    ``s_in`` and ``beta`` (float32 of the attribute)."""
    bits = SOFTMAX_SCALED_DIFF_INTEGER_BITS
    real = min(beta * s_in * float(1 << (31 - bits)), float(2**31 - 1))
    multiplier, left_shift = nx.quantize_multiplier(real)
    if left_shift < 0:
        raise error(f"input scale {s_in:g} x beta {beta:g} is too small for int8 softmax")
    max_input_rescaled = (1.0 * ((1 << bits) - 1) * (1 << (31 - bits)) / (1 << left_shift))
    return Struct("pe_softmax_params", {"input_multiplier": multiplier,
                                        "input_left_shift": left_shift,
                                        "diff_min": -math.floor(max_input_rescaled)})


def collapse_reduction(shape: Sequence[int], reduced: Sequence[bool]
                       ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(input dims, output dims) of a reduction collapsed to 4-D, or None if impossible.

    Dimensions of size 1 are dropped, adjacent dimensions with the same reduce flag merge;
    reduced dimensions are 1 in the output.
    """
    runs: list[list[int]] = []            # [reduced, size]
    for d, r in zip(shape, reduced):
        if d == 1:
            continue
        if runs and runs[-1][0] == int(r):
            runs[-1][1] *= d
        else:
            runs.append([int(r), d])
    if len(runs) > 4:
        return None
    runs = [[0, 1]] * (4 - len(runs)) + runs
    return tuple(s for _, s in runs), tuple(1 if r else s for r, s in runs)


def collapse_padding(shape: Sequence[int], pads: Sequence[tuple[int, int]]
                     ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]] | None:
    """(shape, pads) of a padding collapsed to at most 4 dimensions, or None.

    A dimension merges into the one before it when it is not padded itself.
    """
    s = [int(d) for d in shape]
    p = [(int(a), int(b)) for a, b in pads]
    i = len(s) - 1
    while len(s) > 4 and i > 0:
        if p[i] == (0, 0):
            inner = s.pop(i)
            p.pop(i)
            s[i - 1] *= inner
            p[i - 1] = (p[i - 1][0] * inner, p[i - 1][1] * inner)
        i = min(i - 1, len(s) - 1)
    if len(s) > 4:
        return None
    return (1,) * (4 - len(s)) + tuple(s), ((0, 0),) * (4 - len(p)) + tuple(p)




MUTABLE = "mutable_tensors"      # metadata of an inference graph compiled beside training


def mutable_tensors(graph: Graph) -> frozenset[str]:
    """Tensors a training graph changes at run time (its trainable parameters and whatever an
    update op writes), and for an inference graph compiled beside a training graph the ones
    that graph changes (``metadata["mutable_tensors"]``, see ``pipeline.beside_training``):
    nothing computed from them can be baked into flash."""
    from ..golden.training import trainable_parameters  # lazy: --help imports this module

    names = set(graph.metadata.get(MUTABLE, ()))
    names.update(trainable_parameters(graph))
    for op in graph.ops:
        names.update(n for n in op.attrs.get("updates", ()) or () if n)
    return frozenset(names)
