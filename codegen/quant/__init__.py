"""Post-training quantization (float32 IR graph -> int8 IR graph, TFLite conventions)."""

from .params import (
    activation_params,
    bias_params,
    dequantize_array,
    quantize_array,
    round_half_away,
    weight_params,
)
from .ptq import quantize

__all__ = [
    "activation_params",
    "bias_params",
    "dequantize_array",
    "quantize",
    "quantize_array",
    "round_half_away",
    "weight_params",
]
