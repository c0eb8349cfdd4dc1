"""Backend lowering: IR ops -> kernel call records (kernel name, parameters, constant arrays).

``ref_args.kernel_call(graph, op)`` targets the portable C kernels of runtime_c/kernels/ref,
forward ops directly and training ops through ``train_args.train_kernel_call``;
other backends (CMSIS-NN, HVX) reuse the same records and signatures (pe_kernels.h).
"""

from .kernel_call import (
    C_TYPES,
    STRUCTS,
    ArrayArg,
    ConstArray,
    ContextArg,
    KernelCall,
    NullArg,
    ScalarArg,
    Struct,
    StructArg,
    TensorArg,
    TensorListArg,
)
from .ref_args import kernel_call, kernel_calls
from .train_args import TRAIN_CALL_BUILDERS, train_kernel_call

__all__ = ["C_TYPES", "STRUCTS", "TRAIN_CALL_BUILDERS", "ArrayArg", "ConstArray", "ContextArg",
           "KernelCall", "NullArg", "ScalarArg", "Struct", "StructArg", "TensorArg",
           "TensorListArg", "kernel_call", "kernel_calls", "train_kernel_call"]
