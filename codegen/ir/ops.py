"""The op set: one record per op type (inputs, attributes) — the contract between stages.

Attribute meanings (all ops NHWC):
- ``stride``: (sh, sw); ``dilation``: (dh, dw).
- ``padding``: explicit (top, bottom, left, right) in input pixels. TFLite SAME/VALID are
  converted on import (SAME: total = max((out-1)*stride + (k-1)*dil + 1 - in, 0), top = total//2);
  the TFLite writer turns them back into SAME/VALID when they match, else it emits a PAD.
- ``activation``: fused activation, one of ACTIVATIONS. For int8 ops it is applied as a clamp
  computed from the output quantization (NUMERICS.md).
- conv2d: inputs (x, weight OHWI, bias or ""), attrs stride, dilation, padding, activation.
- depthwise_conv2d: inputs (x, weight 1HW(C*M), bias or ""), attrs as conv2d + depth_multiplier.
- fully_connected: inputs (x, weight (O, I), bias or ""); x is flattened to (-1, I);
  attrs activation, keep_num_dims.
- avg_pool2d / max_pool2d: attrs filter (fh, fw), stride, padding, activation.
- add / mul: two inputs with numpy broadcasting; attrs activation.
- reshape: output shape is the output tensor's shape; attrs shape (same tuple).
- softmax: attrs beta; over the last axis.
- mean: attrs axes (tuple of non-negative ints), keep_dims.
- pad: attrs pads ((before, after) per dimension); pads with the zero point (int8) or 0.0.
- concat: attrs axis (non-negative), activation.
- quantize: float32 -> int8, or int8 -> int8 (requantize); dequantize: int8 -> float32.
- relu / relu6: standalone activations (the ONNX importer fuses them where it can).
"""

from __future__ import annotations

from dataclasses import dataclass

ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1")


@dataclass(frozen=True)
class OpSpec:
    min_inputs: int
    max_inputs: int
    n_outputs: int
    attrs: tuple[str, ...]            # required attributes


_CONV_ATTRS = ("stride", "dilation", "padding", "activation")
_POOL_ATTRS = ("filter", "stride", "padding", "activation")

OP_SPECS: dict[str, OpSpec] = {
    "conv2d": OpSpec(2, 3, 1, _CONV_ATTRS),
    "depthwise_conv2d": OpSpec(2, 3, 1, _CONV_ATTRS + ("depth_multiplier",)),
    "fully_connected": OpSpec(2, 3, 1, ("activation", "keep_num_dims")),
    "avg_pool2d": OpSpec(1, 1, 1, _POOL_ATTRS),
    "max_pool2d": OpSpec(1, 1, 1, _POOL_ATTRS),
    "add": OpSpec(2, 2, 1, ("activation",)),
    "mul": OpSpec(2, 2, 1, ("activation",)),
    "reshape": OpSpec(1, 1, 1, ("shape",)),
    "softmax": OpSpec(1, 1, 1, ("beta",)),
    "mean": OpSpec(1, 1, 1, ("axes", "keep_dims")),
    "pad": OpSpec(1, 1, 1, ("pads",)),
    "concat": OpSpec(1, 64, 1, ("axis", "activation")),
    "quantize": OpSpec(1, 1, 1, ()),
    "dequantize": OpSpec(1, 1, 1, ()),
    "relu": OpSpec(1, 1, 1, ()),
    "relu6": OpSpec(1, 1, 1, ()),
}

# Ops with weights (the layers a training spec can name).
PARAMETRIC_OPS = ("conv2d", "depthwise_conv2d", "fully_connected")


def same_padding(in_size: int, k: int, stride: int, dilation: int = 1) -> tuple[int, int, int]:
    """TFLite SAME padding along one axis: (out_size, pad_before, pad_after)."""
    eff_k = (k - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + eff_k - in_size, 0)
    return out, total // 2, total - total // 2


def conv_out_size(in_size: int, k: int, stride: int, dilation: int, before: int,
                  after: int) -> int:
    """Output size for explicit padding (floor division, as TFLite/ONNX)."""
    eff_k = (k - 1) * dilation + 1
    return (in_size + before + after - eff_k) // stride + 1
