"""The op set: one record per op type (inputs, attributes, and the facts about the op that
several stages need: weight axis, shared quantization, ...) — the contract between stages.

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
- stream_chain: a chain of int8 conv2d / depthwise_conv2d ops (and the residual add that may
  end it) run in bands of output rows, made by the stream pass (``codegen.stream``) from
  forward ops the backward does not reach; inputs (x, w_0, b_0, ..., w_n-1, b_n-1), attrs
  stages, residual, band_rows (``codegen.ir.stream`` says what each holds). Never in a model
  file: the writers expand it into its ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .graph import QuantParams

ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1")


@dataclass(frozen=True)
class OpSpec:
    """An op type: arity, required attributes and the facts about it that several stages
    need, read from here by each of them (the stages' own per-op tables are checked against
    OP_SPECS by tests/test_op_tables.py)."""

    min_inputs: int
    max_inputs: int
    n_outputs: int
    attrs: tuple[str, ...]            # required attributes
    grad_outputs: int = 0             # outputs followed by an int32 exponent in int8 mode
    # Output-channel axis of the weight (input 1) of a layer with parameters (conv OHWI: 0,
    # depthwise 1HW(C*M): 3, FC (O, I): 0): per-channel quantization, the bias length,
    # trained channel subsets. None: the op has no weight (PARAMETRIC_OPS are the others).
    weight_axis: int | None = None
    # int8: the output has the input's scale and zero point (the kernel copies or compares
    # values and does not requantize; TFLM requires equal parameters).
    shares_quant: bool = False
    # A standalone relu / relu6 after this op may become its fused ``activation``.
    fusable_activation: bool = False
    # A standalone activation: the op applies the activation its type names (ACTIVATIONS).
    is_activation: bool = False
    # int8: the fixed (scale, zero point) of the output (TFLM's int8 softmax: 1/256, -128).
    int8_output: tuple[float, int] | None = None


STREAM_MAX_STAGES = 32          # stages of one stream_chain op (its inputs: x and 2 per stage)
_CONV_ATTRS = ("stride", "dilation", "padding", "activation")
_POOL_ATTRS = ("filter", "stride", "padding", "activation")

OP_SPECS: dict[str, OpSpec] = {
    "conv2d": OpSpec(2, 3, 1, _CONV_ATTRS, weight_axis=0, fusable_activation=True),
    "depthwise_conv2d": OpSpec(2, 3, 1, _CONV_ATTRS + ("depth_multiplier",), weight_axis=3,
                               fusable_activation=True),
    "fully_connected": OpSpec(2, 3, 1, ("activation", "keep_num_dims"), weight_axis=0,
                              fusable_activation=True),
    "avg_pool2d": OpSpec(1, 1, 1, _POOL_ATTRS, shares_quant=True),
    "max_pool2d": OpSpec(1, 1, 1, _POOL_ATTRS, shares_quant=True),
    "add": OpSpec(2, 2, 1, ("activation",), fusable_activation=True),
    "mul": OpSpec(2, 2, 1, ("activation",), fusable_activation=True),
    "reshape": OpSpec(1, 1, 1, ("shape",), shares_quant=True),
    "softmax": OpSpec(1, 1, 1, ("beta",), int8_output=(1.0 / 256, -128)),
    "mean": OpSpec(1, 1, 1, ("axes", "keep_dims")),
    "pad": OpSpec(1, 1, 1, ("pads",), shares_quant=True),
    "concat": OpSpec(1, 64, 1, ("axis", "activation")),
    "quantize": OpSpec(1, 1, 1, ()),
    "dequantize": OpSpec(1, 1, 1, ()),
    "relu": OpSpec(1, 1, 1, (), is_activation=True),
    "relu6": OpSpec(1, 1, 1, (), is_activation=True),
    "stream_chain": OpSpec(3, 1 + 2 * STREAM_MAX_STAGES, 1, ("stages", "residual", "band_rows")),
}
# The forward (inference) ops, in OP_SPECS order; the training ops follow below.
FORWARD_OPS: tuple[str, ...] = tuple(OP_SPECS)

# -- training ops (docs/training.md is their contract) ---------------------------------------
# Gradients are float32 in fp32 mode. In int8 mode every gradient tensor is int8 (weight and
# bias gradients int32) with a companion int32 (1,) exponent tensor (value = q * 2**e) placed
# right after it, in the inputs and in the outputs: (dy, dy_exp, ...) -> (dx, dx_exp). In fp32
# mode the exponent slots are simply absent (not ""). ``grad_outputs`` counts the outputs that
# gain an exponent in int8 mode. The update ops use a fixed layout of UPDATE_INPUTS with "" for
# absent inputs.
_FWD = ("forward", "mode")
UPDATE_INPUTS = ("param", "grad", "qas", "grad_exp", "qas_shift", "buf1", "buf2", "pows",
                 "master", "lr", "accum", "step", "saturated")
_UPDATE_ATTRS = ("updates", "mode", "lr", "channels", "channel_axis", "accumulate")
TRAINING_OP_SPECS: dict[str, OpSpec] = {
    "act_mask": OpSpec(1, 1, 1, ("lo", "hi")),                              # y -> mask (bit)
    "mask_grad": OpSpec(2, 3, 1, ("mode",), 1),                             # dy,[e],mask
    "softmax_cross_entropy": OpSpec(3, 3, 2, ("mode", "beta"), 1),          # logits,label,table
    "mse_loss": OpSpec(2, 2, 2, ("mode",), 1),                              # y,target
    "conv2d_grad_input": OpSpec(2, 3, 1, _FWD + _CONV_ATTRS, 1),            # dy,[e],w
    "conv2d_grad_weight": OpSpec(2, 3, 1, _FWD + _CONV_ATTRS + ("channels",), 1),  # x,dy,[e]
    "depthwise_conv2d_grad_input": OpSpec(2, 3, 1, _FWD + _CONV_ATTRS + ("depth_multiplier",),
                                          1),
    "depthwise_conv2d_grad_weight": OpSpec(2, 3, 1, _FWD + _CONV_ATTRS
                                           + ("depth_multiplier", "channels"), 1),
    "fully_connected_grad_input": OpSpec(2, 3, 1, _FWD, 1),                 # dy,[e],w
    "fully_connected_grad_weight": OpSpec(2, 3, 1, _FWD + ("channels",), 1),  # x,dy,[e]
    "bias_grad": OpSpec(1, 2, 1, _FWD, 1),                                  # dy,[e]
    "avg_pool2d_grad": OpSpec(1, 2, 1, _FWD + _POOL_ATTRS, 1),              # dy,[e]
    "max_pool2d_grad": OpSpec(2, 3, 1, _FWD + _POOL_ATTRS, 1),              # dy,[e],x
    "add_grad": OpSpec(1, 2, 1, _FWD + ("input",), 1),                      # dy,[e]
    "mul_grad": OpSpec(2, 3, 1, _FWD + ("input",), 1),                      # dy,[e],other
    "mean_grad": OpSpec(1, 2, 1, _FWD + ("axes", "keep_dims"), 1),
    "pad_grad": OpSpec(1, 2, 1, _FWD + ("pads",), 1),
    "concat_grad": OpSpec(1, 2, 1, _FWD + ("axis", "begin"), 1),
    "reshape_grad": OpSpec(1, 2, 1, _FWD, 1),
    "softmax_grad": OpSpec(2, 3, 1, _FWD + ("beta",), 1),                   # dy,[e],y
    "grad_add": OpSpec(2, 4, 1, ("mode",), 1),                              # g1,[e1],g2,[e2]
    # fp32 only (codegen.pool_grads): a global average pool's gradient g [N,1,1,O] through the
    # ReLU mask [N,H,W,O] of the 1x1 conv (weight [O,1,1,C]) before it -> dx [N,H,W,C], db [O]
    "pool_conv_grad": OpSpec(3, 3, 2, ("forward", "mode")),                 # g,mask,w
    "sgd_update": OpSpec(3, len(UPDATE_INPUTS), 0, _UPDATE_ATTRS + ("momentum",)),
    "adam_update": OpSpec(3, len(UPDATE_INPUTS), 0, _UPDATE_ATTRS + ("beta1", "beta2", "eps")),
    "step_counter": OpSpec(1, 3, 0, ("updates", "accumulate", "schedule")),  # step,[lr],[pows]
    # trained rows, frozen rows -> the whole weight (codegen.partial); attrs channels (the
    # trained ones, ascending), axis (0)
    "merge_channels": OpSpec(2, 2, 1, ("channels", "axis")),
}
# The update ops of one parameter each, with the UPDATE_INPUTS slots; with the step counter,
# the ops that mutate their inputs and have no outputs (UPDATE_OPS).
PARAM_UPDATE_OPS = ("sgd_update", "adam_update")
UPDATE_OPS = PARAM_UPDATE_OPS + ("step_counter",)
OP_SPECS.update(TRAINING_OP_SPECS)

# Ops with weights (the layers a training spec can name): those with a weight_axis.
PARAMETRIC_OPS = tuple(t for t, s in OP_SPECS.items() if s.weight_axis is not None)


def weight_axis(op_type: str) -> int:
    """The output-channel axis of the weight (input 1) of a parametric op (OpSpec.weight_axis);
    ValueError for an op without a weight."""
    axis = OP_SPECS[op_type].weight_axis
    if axis is None:
        raise ValueError(f"{op_type} has no weight")
    return axis


def int8_output_params(op_type: str) -> QuantParams | None:
    """The int8 output parameters an op type requires (OpSpec.int8_output), else None."""
    fixed = OP_SPECS[op_type].int8_output
    if fixed is None:
        return None
    return QuantParams(np.array([fixed[0]], np.float32), np.array([fixed[1]], np.int64))


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
