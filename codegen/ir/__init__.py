"""Intermediate representation: Graph, Tensor, Op, QuantParams, Role, op specs and verifier."""

from .graph import DTYPES, MAX_ELEMENTS, Graph, Op, OpView, QuantParams, Role, Tensor, free_name
from .ops import ACTIVATIONS, OP_SPECS, PARAMETRIC_OPS, conv_out_size, same_padding
from .verify import verify

__all__ = ["ACTIVATIONS", "DTYPES", "MAX_ELEMENTS", "OP_SPECS", "PARAMETRIC_OPS", "Graph", "Op",
           "OpView", "QuantParams", "Role", "Tensor", "conv_out_size", "free_name",
           "same_padding", "verify"]
