"""Kernel call records: what a generated C program passes to one kernel, as plain data.

A :class:`KernelCall` names the C function and lists its arguments in C order. Each argument
is one of

- :class:`ContextArg`  the scratch context (``const pe_context *``);
- :class:`StructArg`   a constant parameter struct passed by address (``const pe_dims *``,
                       ``const pe_conv_params *``, ...);
- :class:`TensorArg`   an IR tensor's data (activation buffer, weight or bias array);
- :class:`TensorListArg` an array of tensor data pointers (concatenation's inputs);
- :class:`StructArrayArg` a constant array of parameter structs of one type, by address
                       (``const pe_stream_stage *``);
- :class:`ArrayArg`    a constant array computed at compile time (``const int32_t *``);
- :class:`ScalarArg`   a number passed by value (element counts);
- :class:`FunctionArg` a function the generated code defines (from call records) and passes by
                       address, e.g. a stream_chain's stage function;
- :class:`ExprArg`     within a FunctionArg's calls: a C expression of its parameters;
- :class:`NullArg`     an absent optional pointer (no bias).

Struct field values are ints, floats (``inf`` for "no clamp"), nested :class:`Struct` values
(by value) or :class:`ConstArray` (a pointer to a constant array). :data:`STRUCTS` mirrors the
C typedefs of ``runtime_c/kernels/pe_kernels.h`` field by field (a test checks the layouts),
so a renderer can emit designated initialisers and a test harness can build ``ctypes``
structures from the same table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Union

import numpy as np

_I32 = "int32_t"
_TILE = (("w", _I32), ("h", _I32))
_ACT = "pe_activation"
_ACT_F32 = "pe_activation_f32"

# C struct typedefs of pe_kernels.h: name -> ((field, C type), ...) in declaration order.
STRUCTS: dict[str, tuple[tuple[str, str], ...]] = {
    "pe_context": (("buf", "void *"), ("size", _I32)),
    "pe_dims": (("n", _I32), ("h", _I32), ("w", _I32), ("c", _I32)),
    "pe_tile": _TILE,
    "pe_activation": (("min", _I32), ("max", _I32)),
    "pe_activation_f32": (("min", "float"), ("max", "float")),
    "pe_per_channel_quant": (("multiplier", "const int32_t *"), ("shift", "const int32_t *")),
    "pe_per_tensor_quant": (("multiplier", _I32), ("shift", _I32)),
    "pe_conv_params": (("input_offset", _I32), ("output_offset", _I32), ("stride", "pe_tile"),
                       ("padding", "pe_tile"), ("dilation", "pe_tile"), ("activation", _ACT)),
    "pe_dw_conv_params": (("input_offset", _I32), ("output_offset", _I32), ("ch_mult", _I32),
                          ("stride", "pe_tile"), ("padding", "pe_tile"),
                          ("dilation", "pe_tile"), ("activation", _ACT)),
    "pe_fc_params": (("input_offset", _I32), ("filter_offset", _I32), ("output_offset", _I32),
                     ("activation", _ACT)),
    "pe_pool_params": (("stride", "pe_tile"), ("padding", "pe_tile"), ("activation", _ACT)),
    "pe_conv_params_f32": (("stride", "pe_tile"), ("padding", "pe_tile"),
                           ("dilation", "pe_tile"), ("activation", _ACT_F32)),
    "pe_dw_conv_params_f32": (("ch_mult", _I32), ("stride", "pe_tile"), ("padding", "pe_tile"),
                              ("dilation", "pe_tile"), ("activation", _ACT_F32)),
    "pe_fc_params_f32": (("activation", _ACT_F32),),
    "pe_pool_params_f32": (("stride", "pe_tile"), ("padding", "pe_tile"),
                           ("activation", _ACT_F32)),
    "pe_add_params": (("input1_offset", _I32), ("input1_multiplier", _I32),
                      ("input1_shift", _I32), ("input2_offset", _I32),
                      ("input2_multiplier", _I32), ("input2_shift", _I32),
                      ("left_shift", _I32), ("output_offset", _I32),
                      ("output_multiplier", _I32), ("output_shift", _I32),
                      ("activation", _ACT)),
    "pe_mul_params": (("input1_offset", _I32), ("input2_offset", _I32), ("output_offset", _I32),
                      ("output_multiplier", _I32), ("output_shift", _I32),
                      ("activation", _ACT)),
    "pe_requant_params": (("input_offset", _I32), ("output_offset", _I32),
                          ("multiplier", _I32), ("shift", _I32), ("activation", _ACT)),
    "pe_softmax_params": (("input_multiplier", _I32), ("input_left_shift", _I32),
                          ("diff_min", _I32)),
    "pe_softmax_params_f32": (("beta", "float"),),
    "pe_mean_params": (("input_offset", _I32), ("output_offset", _I32), ("multiplier", _I32),
                       ("shift", _I32)),
    "pe_pad_params": (("before", "pe_dims"), ("pad_value", _I32)),
    "pe_pad_params_f32": (("before", "pe_dims"), ("pad_value", "float")),
    "pe_concat_params": (("outer_size", _I32), ("activation", _ACT)),
    "pe_concat_params_f32": (("outer_size", _I32), ("activation", _ACT_F32)),
    "pe_affine_params_f32": (("scale", "float"), ("zero_point", _I32)),
    "pe_stream_stage": (("kind", _I32), ("params", "pe_dw_conv_params"),
                        ("quant", "pe_per_channel_quant"), ("filter_dims", "pe_dims"),
                        ("output_dims", "pe_dims"), ("window", _I32),
                        ("buffer_offset", _I32), ("buffer_rows", _I32)),
    "pe_stream_params": (("num_stages", _I32), ("band_rows", _I32), ("residual", _I32),
                         ("state_offset", _I32), ("kernel_scratch_offset", _I32),
                         ("kernel_scratch_bytes", _I32), ("add", "pe_add_params")),
    "pe_stream_arm_stage": (("form", _I32), ("mode", _I32), ("output_offset", _I32),
                            ("use_bias", _I32), ("words", "const int32_t *"),
                            ("filter", "const int8_t *"), ("ksum", "const int32_t *"),
                            ("rq", "const int32_t *")),
    "pe_stream_arm_params": (("add_tables", "const int32_t *"), ("add_rq", "const int32_t *"),
                             ("add_multiplier", _I32), ("add_shift", _I32),
                             ("add_offset", _I32), ("add_activation", _ACT)),
    # training kernels (runtime_c/kernels/pe_train_kernels.h)
    "pe_conv_grad_params": (("stride", "pe_tile"), ("padding", "pe_tile"),
                            ("dilation", "pe_tile")),
    "pe_dw_conv_grad_params": (("ch_mult", _I32), ("stride", "pe_tile"), ("padding", "pe_tile"),
                               ("dilation", "pe_tile")),
    "pe_grad_input_quant": (("multiplier", "const int32_t *"), ("shift", "const int32_t *"),
                            ("prescale_shift", _I32), ("output_multiplier", _I32),
                            ("output_shift", _I32)),
    "pe_conv_grad_weight_params": (("input_offset", _I32), ("stride", "pe_tile"),
                                   ("padding", "pe_tile"), ("dilation", "pe_tile")),
    "pe_conv_grad_weight_params_f32": (("input_offset", _I32), ("input_scale", "float"),
                                       ("stride", "pe_tile"), ("padding", "pe_tile"),
                                       ("dilation", "pe_tile")),
    "pe_dw_conv_grad_weight_params": (("input_offset", _I32), ("ch_mult", _I32),
                                      ("stride", "pe_tile"), ("padding", "pe_tile"),
                                      ("dilation", "pe_tile")),
    "pe_dw_conv_grad_weight_params_f32": (("input_offset", _I32), ("input_scale", "float"),
                                          ("ch_mult", _I32), ("stride", "pe_tile"),
                                          ("padding", "pe_tile"), ("dilation", "pe_tile")),
    "pe_fc_grad_weight_params": (("input_offset", _I32),),
    "pe_fc_grad_weight_params_f32": (("input_offset", _I32), ("input_scale", "float")),
    "pe_pool_grad_params": (("stride", "pe_tile"), ("padding", "pe_tile")),
    "pe_avg_pool_grad_params": (("stride", "pe_tile"), ("padding", "pe_tile"),
                                ("recip_bits", _I32)),
    "pe_cross_entropy_params_f32": (("scale", "float"), ("beta", "float")),
    "pe_cross_entropy_params": (("softmax", "pe_softmax_params"), ("beta_multiplier", _I32),
                                ("beta_shift", _I32)),
    "pe_mse_params_f32": (("scale", "float"),),
    "pe_mse_params": (("loss_scale", "float"), ("multiplier", _I32), ("shift", _I32)),
    "pe_mul_grad_params_f32": (("other_offset", _I32), ("other_scale", "float"),
                               ("reduce", _I32)),
    "pe_mul_grad_params": (("other_offset", _I32), ("multiplier", _I32), ("shift", _I32)),
    "pe_mean_grad_params_f32": (("count", "float"),),
    "pe_pad_grad_params": (("before", "pe_dims"),),
    "pe_concat_grad_params": (("outer_size", _I32), ("dy_inner_size", _I32),
                              ("dx_inner_size", _I32), ("offset", _I32)),
    "pe_softmax_grad_params_f32": (("y_offset", _I32), ("y_scale", "float"), ("beta", "float")),
    "pe_softmax_grad_params": (("y_offset", _I32), ("beta_multiplier", _I32),
                               ("beta_shift", _I32)),
    "pe_update_dims": (("outer", _I32), ("channels", _I32), ("inner", _I32), ("count", _I32),
                       ("lo", _I32), ("hi", _I32)),
    "pe_sgd_params_f32": (("lr", "float"), ("momentum", "float"), ("accumulate", _I32)),
    "pe_sgd_params": (("momentum_q15", _I32), ("master_frac_bits", _I32)),
    "pe_adam_params_f32": (("lr", "float"), ("beta1", "float"), ("beta2", "float"),
                           ("eps", "float"), ("accumulate", _I32)),
    "pe_step_counter_params": (("accumulate", _I32), ("schedule", _I32), ("lr", "float"),
                               ("gamma", "float"), ("step_size", _I32),
                               ("warmup_steps", _I32), ("total_steps", _I32),
                               ("min_lr", "float"), ("beta1", "float"), ("beta2", "float")),
}

# IR dtype -> C element type.
C_TYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "float32": "float",
           "uint8": "uint8_t", "bit": "uint8_t"}      # "bit": packed masks, LSB first


@dataclass(frozen=True, eq=False)
class ConstArray:
    """A constant array computed at compile time (multipliers, shifts, sizes)."""

    name: str                         # role within the call, e.g. "multiplier"
    ctype: str                        # element type, e.g. "int32_t"
    values: np.ndarray                # 1-D

    def __post_init__(self) -> None:
        arr = np.ascontiguousarray(np.asarray(self.values).reshape(-1))
        arr.setflags(write=False)
        object.__setattr__(self, "values", arr)


FieldValue = Union[int, float, "Struct", ConstArray]


@dataclass(frozen=True, eq=False)
class Struct:
    """A value of one of the C structs in :data:`STRUCTS` (every field given)."""

    ctype: str
    values: Mapping[str, FieldValue]

    def __post_init__(self) -> None:
        fields = STRUCTS.get(self.ctype)
        if fields is None:
            raise ValueError(f"unknown kernel struct {self.ctype!r}")
        names = [name for name, _ in fields]
        if sorted(names) != sorted(self.values):
            raise ValueError(f"{self.ctype}: fields {sorted(self.values)}, expected {names}")
        object.__setattr__(self, "values", {name: self.values[name] for name in names})

    def items(self) -> Iterator[tuple[str, str, FieldValue]]:
        """(field name, field C type, value) in declaration order."""
        for name, ctype in STRUCTS[self.ctype]:
            yield name, ctype, self.values[name]

    def arrays(self) -> Iterator[ConstArray]:
        for _, _, value in self.items():
            if isinstance(value, ConstArray):
                yield value
            elif isinstance(value, Struct):
                yield from value.arrays()


@dataclass(frozen=True)
class ContextArg:
    ctype: str = "const pe_context *"


@dataclass(frozen=True, eq=False)
class _ConstObjectArg:
    """A pointer to a static const object: a struct or an array."""

    value: Struct | ConstArray

    @property
    def ctype(self) -> str:
        return f"const {self.value.ctype} *"


@dataclass(frozen=True, eq=False)
class StructArg(_ConstObjectArg):
    value: Struct


@dataclass(frozen=True, eq=False)
class StructArrayArg:
    """A pointer to a static const array of structs of type ``struct`` (one per element of
    ``values``, at least one)."""

    struct: str
    values: tuple[Struct, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if not self.values or any(v.ctype != self.struct for v in self.values):
            raise ValueError(f"a struct array needs one or more {self.struct} values")

    @property
    def ctype(self) -> str:
        return f"const {self.struct} *"


@dataclass(frozen=True)
class TensorArg:
    tensor: str                       # IR tensor name
    ctype: str                        # "const int8_t *" (read) or "int8_t *" (written)
    offset: int = 0                   # elements past the tensor's start (a block of it)

    @property
    def writes(self) -> bool:
        return not self.ctype.startswith("const ")


@dataclass(frozen=True)
class TensorListArg:
    tensors: tuple[str, ...]
    ctype: str                        # "const int8_t *const *"


@dataclass(frozen=True, eq=False)
class ArrayArg(_ConstObjectArg):
    value: ConstArray


@dataclass(frozen=True)
class ScalarArg:
    ctype: str
    value: int | float


@dataclass(frozen=True)
class NullArg:
    ctype: str


@dataclass(frozen=True)
class ExprArg:
    """An argument of a call inside a FunctionArg: a C expression of the function's
    parameters (e.g. ``c->in_dims.h``)."""

    ctype: str
    expr: str


@dataclass(frozen=True, eq=False)
class FunctionArg:
    """A function the generated code defines and passes by address, ``void f(params)``: when
    ``select`` (a C expression of the parameters) is k it makes the call ``cases[k]``, whose
    arguments may be ExprArgs of the parameters; the kernel calls it back."""

    ctype: str                          # the function pointer type
    params: str                         # its parameter list, e.g. "const pe_stream_call *c"
    select: str
    cases: tuple[KernelCall, ...]


Arg = (ContextArg | StructArg | StructArrayArg | TensorArg | TensorListArg | ArrayArg | ScalarArg
       | NullArg | ExprArg | FunctionArg)


@dataclass(frozen=True, eq=False)
class KernelCall:
    """One kernel invocation: C function name and (parameter name, argument) in C order, plus
    the facts the scheduler and planner read (scratch, in-place permission, aliases: see
    ``codegen.schedule.storage``) and the backend that chose it."""

    kernel: str
    op: str                           # the IR op's name
    args: tuple[tuple[str, Arg], ...]
    scratch_bytes: int = 0            # size of ctx->buf the kernel needs (planned in the arena)
    may_alias: tuple[tuple[str, str], ...] = field(default=())   # (input, output) that may
                                                                 # share memory (reshape)
    inplace: tuple[str, ...] = ()     # inputs the kernel may write its output over
    backend: str = "ref"              # the backend whose builder made the record
    macs: int = 0                     # multiply-accumulates of the call (cost model)
    outline: bool = False             # the kernel is an always-inline body: the model calls
                                      # it from a function of its own (bounded functions)

    def arg(self, name: str) -> Arg:
        for arg_name, arg in self.args:
            if arg_name == name:
                return arg
        raise KeyError(name)

    def const_arrays(self) -> list[tuple[str, ConstArray]]:
        """Every constant array the call needs, with a name unique within the call."""
        out: list[tuple[str, ConstArray]] = []
        for arg_name, arg in self.args:
            if isinstance(arg, ArrayArg):
                out.append((arg_name, arg.value))
            elif isinstance(arg, StructArg):
                out.extend((f"{arg_name}_{a.name}", a) for a in arg.value.arrays())
            elif isinstance(arg, StructArrayArg):
                out.extend((f"{arg_name}{k}_{a.name}", a) for k, v in enumerate(arg.values)
                           for a in v.arrays())
            elif isinstance(arg, FunctionArg):
                out.extend((f"{arg_name}{k}_{n}", a) for k, c in enumerate(arg.cases)
                           for n, a in c.const_arrays())
        return out

    def callees(self) -> tuple[str, ...]:
        """The kernel and the kernels the functions it is passed call (FunctionArg cases)."""
        nested = [k for _, arg in self.args if isinstance(arg, FunctionArg)
                  for c in arg.cases for k in c.callees()]
        return (self.kernel, *dict.fromkeys(nested))

    def tensors(self) -> tuple[str, ...]:
        """The IR tensors the call reads or writes, in argument order."""
        names: list[str] = []
        for _, arg in self.args:
            if isinstance(arg, TensorArg):
                names.append(arg.tensor)
            elif isinstance(arg, TensorListArg):
                names.extend(arg.tensors)
            elif isinstance(arg, FunctionArg):
                names.extend(t for c in arg.cases for t in c.tensors())
        return tuple(names)
