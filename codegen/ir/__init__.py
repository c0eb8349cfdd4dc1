"""Intermediate representation: Graph, Tensor, Op, QuantParams, Role, op specs and verifier."""

from .graph import DTYPES, MAX_ELEMENTS, Graph, Op, OpView, QuantParams, Role, Tensor, free_name
from .ops import (
    ACTIVATIONS,
    FORWARD_OPS,
    OP_SPECS,
    PARAMETRIC_OPS,
    conv_out_size,
    int8_output_params,
    same_padding,
    weight_axis,
)
from .verify import verify

__all__ = ["ACTIVATIONS", "DTYPES", "FORWARD_OPS", "MAX_ELEMENTS", "OP_SPECS", "PARAMETRIC_OPS",
           "Graph", "Op", "OpView", "QuantParams", "Role", "Tensor", "conv_out_size",
           "free_name", "int8_output_params", "same_padding", "verify", "weight_axis"]
