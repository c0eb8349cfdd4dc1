"""Backend lowering: IR ops -> kernel call records, along a board's chain of backends.

A backend (``base.Backend``) is a table op type -> builder returning a ``KernelCall`` or None,
plus the C it needs; ``registry`` lists the backends and gives a board its chain;
``lowering.lower_graph`` picks one record per op (pins, cost, chain order); ``params`` holds the
parameter math every backend shares; ``ref_args`` / ``train_args`` build the portable kernels'
records (forward / training ops); ``sources`` finds the C files the chosen kernels need.
"""

from .base import Backend, Target, ThirdParty
from .kernel_call import (
    C_TYPES,
    STRUCTS,
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
    TensorListArg,
)
from .lowering import Choice, Lowering, lower_graph
from .registry import (
    BACKENDS,
    CHOICES,
    REF,
    Chain,
    chain_for,
    get_backend,
    kernel_call,
    kernel_calls,
)
from .train_args import TRAIN_CALL_BUILDERS, train_kernel_call

__all__ = ["BACKENDS", "CHOICES", "C_TYPES", "REF", "STRUCTS", "TRAIN_CALL_BUILDERS", "ArrayArg",
           "Backend", "Chain", "Choice", "ConstArray", "ContextArg", "ExprArg", "FunctionArg",
           "KernelCall", "Lowering",
           "NullArg", "ScalarArg", "Struct", "StructArg", "StructArrayArg", "Target",
           "TensorArg", "TensorListArg",
           "ThirdParty", "chain_for", "get_backend", "kernel_call", "kernel_calls",
           "lower_graph", "train_kernel_call"]
