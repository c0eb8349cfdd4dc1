"""Golden kernels: one builder per IR op type.

``build_kernel(graph, op)`` checks the op's tensors, precomputes its constants (multipliers,
shifts, clamp ranges, weight matrices) and returns a :data:`Kernel`: a function of the op's
input values returning its output, batch on axis 0. int8 kernels are bit exact with TFLM's
reference kernels (NUMERICS.md); float32 kernels compute in float64 where that is cheap and
round to float32.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ModelError
from ...ir import Graph, Op
from .common import Kernel, OpView
from .conv import build_conv2d, build_depthwise_conv2d, build_fully_connected
from .elementwise import (
    build_add,
    build_dequantize,
    build_mul,
    build_quantize,
    build_relu,
    build_relu6,
)
from .pooling import build_avg_pool2d, build_max_pool2d, build_mean
from .shape import build_concat, build_pad, build_reshape
from .softmax import build_softmax
from .stream import build_stream_chain

KERNEL_BUILDERS: dict[str, Callable[[OpView], Kernel]] = {
    "conv2d": build_conv2d,
    "depthwise_conv2d": build_depthwise_conv2d,
    "fully_connected": build_fully_connected,
    "avg_pool2d": build_avg_pool2d,
    "max_pool2d": build_max_pool2d,
    "add": build_add,
    "mul": build_mul,
    "reshape": build_reshape,
    "softmax": build_softmax,
    "mean": build_mean,
    "pad": build_pad,
    "concat": build_concat,
    "quantize": build_quantize,
    "dequantize": build_dequantize,
    "relu": build_relu,
    "relu6": build_relu6,
    "stream_chain": lambda view: build_stream_chain(view, _build),
}


def _build(view: OpView) -> Kernel:
    return KERNEL_BUILDERS[view.op.type](view)


def build_kernel(graph: Graph, op: Op) -> Kernel:
    """The prepared golden kernel for ``op``; ModelError if the op cannot be executed."""
    builder = KERNEL_BUILDERS.get(op.type)
    if builder is None:
        raise ModelError(f"op {op.name!r} ({op.type}): the golden model has no kernel for it")
    return builder(OpView(graph, op))


__all__ = ["KERNEL_BUILDERS", "Kernel", "OpView", "build_kernel"]
