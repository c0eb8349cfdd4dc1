"""Backward rules: one per forward op, in one table (``GRAD_RULES``).

A rule receives the builder, the forward op and ``dz``, the gradient with respect to the op's
output *before* its fused activation (the builder has already applied the activation mask).
It emits the ops that compute the gradients of the inputs that need one (``b.requires``) and,
for a trainable layer, the weight/bias gradients and their updates, in the order of
docs/training.md: grad_input (reads the old weight), grad_weight, weight update, bias_grad,
bias update. Rules never read a forward activation they do not need: a bias-only layer reads
none, ReLU reads only its mask.

Adding an op = a rule here + a kernel in codegen/golden/train_kernels.py + its C kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..errors import SpecError
from ..golden.numerics import activation_range
from ..ir import OP_SPECS, Op, weight_axis
from .spec import LayerUpdate

# A gradient: (tensor, exponent tensor or None). The exponent exists in int8 mode only.
Grad = tuple[str, str | None]


class Backward(Protocol):
    """What a rule may ask of the backward builder (``train.build.Backward``, which imports
    this table; the rules do not import it back)."""

    def requires(self, name: str) -> bool: ...

    def layer(self, op: Op) -> LayerUpdate | None: ...

    def shape(self, name: str) -> tuple[int, ...]: ...

    def attrs(self, op: Op, *copied: str) -> dict[str, Any]: ...

    def new_grad(self, like: str, *, channels: Sequence[int] | None = None, axis: int = 0,
                 accumulator: bool = False, shape: tuple[int, ...] | None = None,
                 tag: str = "grad") -> Grad: ...

    def emit(self, op_type: str, inputs: Sequence[str | Grad], outputs: Sequence[str | Grad],
             attrs: dict[str, Any], side_of: Op | None = None) -> Op: ...

    def give(self, name: str, grad: Grad) -> None: ...

    def through_activation(self, op: Op, activation: str, dy: Grad) -> Grad: ...

    def update(self, op: Op, param: str, grad: Grad, *, x: str, kind: str,
               channels: tuple[int, ...] | None, axis: int) -> None: ...


Rule = Callable[[Backward, Op, Grad], None]


def _copied(grad_type: str, op: Op) -> tuple[str, ...]:
    """The forward attributes a backward op carries (besides forward, mode): those of its
    required attributes (ir.ops.TRAINING_OP_SPECS) that the forward op has."""
    fwd = OP_SPECS[op.type].attrs
    return tuple(a for a in OP_SPECS[grad_type].attrs if a in fwd)


def _layer(b: Backward, op: Op, dz: Grad) -> None:
    """conv2d, depthwise_conv2d, fully_connected."""
    x, w = op.inputs[0], op.inputs[1]
    bias = op.inputs[2] if len(op.inputs) > 2 else ""
    update = b.layer(op)
    attrs = b.attrs(op, *_copied(f"{op.type}_grad_input", op))
    if b.requires(x):
        dx = b.new_grad(x)
        b.emit(f"{op.type}_grad_input", [dz, w], [dx], attrs)
        b.give(x, dx)
    if update is not None and update.weight:
        axis = weight_axis(op.type)
        dw = b.new_grad(w, channels=update.channels, axis=axis, accumulator=True)
        b.emit(f"{op.type}_grad_weight", [x, dz], [dw], {**attrs, "channels": update.channels})
        b.update(op, w, dw, x=x, kind="weight", channels=update.channels, axis=axis)
    if update is not None and update.bias:
        db = b.new_grad(bias, accumulator=True)
        b.emit("bias_grad", [dz], [db], b.attrs(op))
        b.update(op, bias, db, x=x, kind="bias", channels=None, axis=0)


def _avg_pool(b: Backward, op: Op, dz: Grad) -> None:
    dx = b.new_grad(op.inputs[0])
    b.emit("avg_pool2d_grad", [dz], [dx], b.attrs(op, *_copied("avg_pool2d_grad", op)))
    b.give(op.inputs[0], dx)


def _max_pool(b: Backward, op: Op, dz: Grad) -> None:
    x = op.inputs[0]
    dx = b.new_grad(x)
    b.emit("max_pool2d_grad", [dz, x], [dx], b.attrs(op, *_copied("max_pool2d_grad", op)))
    b.give(x, dx)


def _add(b: Backward, op: Op, dz: Grad) -> None:
    out = b.shape(op.outputs[0])
    for i, x in enumerate(op.inputs):
        if not b.requires(x):
            continue
        if b.shape(x) == out:
            b.give(x, dz)                     # identity: the same gradient tensor
        else:
            dx = b.new_grad(x)
            b.emit("add_grad", [dz], [dx], {**b.attrs(op), "input": i})
            b.give(x, dx)


def _mul(b: Backward, op: Op, dz: Grad) -> None:
    for i, x in enumerate(op.inputs):
        if b.requires(x):
            dx = b.new_grad(x)
            b.emit("mul_grad", [dz, op.inputs[1 - i]], [dx], {**b.attrs(op), "input": i})
            b.give(x, dx)


def _unary(grad_type: str) -> Rule:
    """Ops whose input gradient depends on dz only (and attributes)."""

    def rule(b: Backward, op: Op, dz: Grad) -> None:
        x = op.inputs[0]
        dx = b.new_grad(x)
        b.emit(grad_type, [dz], [dx], b.attrs(op, *_copied(grad_type, op)))
        b.give(x, dx)

    return rule


def _softmax(b: Backward, op: Op, dz: Grad) -> None:
    x, y = op.inputs[0], op.outputs[0]
    dx = b.new_grad(x)
    b.emit("softmax_grad", [dz, y], [dx], b.attrs(op, *_copied("softmax_grad", op)))
    b.give(x, dx)


def _concat(b: Backward, op: Op, dz: Grad) -> None:
    axis, begin = op.attrs["axis"], 0
    for x in op.inputs:
        if b.requires(x):
            dx = b.new_grad(x)
            b.emit("concat_grad", [dz], [dx], {**b.attrs(op, *_copied("concat_grad", op)),
                                               "begin": begin})
            b.give(x, dx)
        begin += b.shape(x)[axis]


def _identity(b: Backward, op: Op, dz: Grad) -> None:
    """quantize / dequantize: the gradient passes unchanged (same tensor)."""
    b.give(op.inputs[0], dz)


def _relu(b: Backward, op: Op, dz: Grad) -> None:
    """Standalone relu / relu6: a mask of the output, as for a fused activation."""
    b.give(op.inputs[0], b.through_activation(op, op.type, dz))


def _stream_chain(b: Backward, op: Op, dz: Grad) -> None:
    """A stream_chain op (codegen.stream) holds frozen ops only: no gradient flows through
    it. The stream pass fuses ops the backward does not reach, so a training graph built on
    a streamed graph only gets here when the chain lies between trainable layers."""
    if b.requires(op.inputs[0]):
        stages = ", ".join(st["op"] for st in op.attrs["stages"])
        raise SpecError(f"op {op.name!r} streams {stages} in row bands and has no backward; "
                        "build the training graph from the model before streaming it")


GRAD_RULES: dict[str, Rule] = {
    "conv2d": _layer,
    "depthwise_conv2d": _layer,
    "fully_connected": _layer,
    "avg_pool2d": _avg_pool,
    "max_pool2d": _max_pool,
    "add": _add,
    "mul": _mul,
    "reshape": _unary("reshape_grad"),
    "softmax": _softmax,
    "mean": _unary("mean_grad"),
    "pad": _unary("pad_grad"),
    "concat": _concat,
    "quantize": _identity,
    "dequantize": _identity,
    "relu": _relu,
    "relu6": _relu,
    "stream_chain": _stream_chain,
}


def mask_bounds(activation: str, scale: float, zero_point: int) -> tuple[int, int]:
    """(lo, hi) of ``act_mask``: the int8 clamp of a fused activation (incl. saturation)."""
    return activation_range(activation, scale, zero_point)
