"""The intermediate representation: tensors, ops and the graph that holds them.

Conventions (shared by every stage):
- Layout is NHWC for activations (TFLite's). The ONNX importer converts NCHW models to NHWC.
- Weight layouts are TFLite's: conv2d OHWI, depthwise_conv2d 1HW(C*M), fully_connected (O, I).
- Quantization: ``real = scale * (q - zero_point)``; per-channel when ``axis`` is not None
  (weights: symmetric, zero point 0; biases: int32 with scale s_in * s_w[c]).
- Tensor values (``Tensor``) and ops (``Op``) are immutable; a ``Graph`` is rebuilt by a stage,
  or edited with the helper methods by the stage that owns it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelError

DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool", "bit")
# Elements per tensor, at most (16 Mi: 64 MiB of float32, far beyond any microcontroller):
# every importer's graph is verified against it, so no shape in a file can make a later
# stage allocate gigabytes.
MAX_ELEMENTS = 2**24
# "bit": packed booleans (activation masks of the training graph), 1 bit per element, never
# constant data; ``Tensor.nbytes`` is ceil(n / 8).


class Role(str, enum.Enum):
    ACTIVATION = "activation"
    WEIGHT = "weight"
    BIAS = "bias"
    CONSTANT = "constant"      # other constant data (e.g. lookup tables, shape vectors)
    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer_state"


@dataclass(frozen=True, eq=False)
class QuantParams:
    """Affine quantization: real = scale * (q - zero_point). Per-channel along ``axis``."""

    scale: np.ndarray                 # float32, shape (1,) per-tensor or (C,) per-channel
    zero_point: np.ndarray            # int64, same shape as scale
    axis: int | None = None           # None: per-tensor

    def __post_init__(self) -> None:
        scale = np.atleast_1d(np.asarray(self.scale, dtype=np.float32))
        zp = np.atleast_1d(np.asarray(self.zero_point, dtype=np.int64))
        if zp.size == 1 and scale.size > 1:
            zp = np.repeat(zp, scale.size)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "zero_point", zp)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    @property
    def s(self) -> float:
        """The per-tensor scale as a Python float (float32 value)."""
        return float(self.scale[0])

    @property
    def zp(self) -> int:
        """The per-tensor zero point."""
        return int(self.zero_point[0])

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, QuantParams) and self.axis == other.axis
                and np.array_equal(self.scale, other.scale)
                and np.array_equal(self.zero_point, other.zero_point))

    def __repr__(self) -> str:
        if self.axis is None:
            return f"QuantParams(scale={self.s:.6g}, zp={self.zp})"
        return f"QuantParams(per-channel axis={self.axis}, {self.scale.size} scales)"


@dataclass(frozen=True, eq=False)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: Role = Role.ACTIVATION
    quant: QuantParams | None = None
    data: np.ndarray | None = None    # constant data (weights, biases, constants)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.data is not None:
            if self.dtype == "bit":
                raise ValueError(f"tensor {self.name!r}: dtype 'bit' cannot hold constant data")
            arr = np.asarray(self.data, dtype=self.dtype)
            arr.setflags(write=False)
            object.__setattr__(self, "data", arr)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        if self.dtype == "bit":
            return (self.size + 7) // 8
        return self.size * np.dtype(self.dtype).itemsize

    def replace(self, **changes: Any) -> Tensor:
        return dataclasses.replace(self, **changes)


def free_name(base: str, used: Container[str]) -> str:
    """``base``, or ``base_<k>`` with the first k >= 1 that ``used`` does not hold."""
    name, k = base, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    return name


@dataclass(frozen=True, eq=False)
class Op:
    type: str                          # one of ops.OP_SPECS
    name: str
    inputs: tuple[str, ...]            # tensor names; "" for an absent optional input
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", dict(self.attrs))

    def replace(self, **changes: Any) -> Op:
        return dataclasses.replace(self, **changes)


@dataclass
class Graph:
    """Ops in a valid execution order, tensors by name, graph inputs/outputs by name."""

    name: str = "model"
    tensors: dict[str, Tensor] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)   # e.g. source format, input layout

    # -- construction -----------------------------------------------------------------------
    def add_tensor(self, tensor: Tensor) -> Tensor:
        if tensor.name in self.tensors:
            raise ValueError(f"duplicate tensor name {tensor.name!r}")
        self.tensors[tensor.name] = tensor
        return tensor

    def unique_name(self, base: str) -> str:
        return free_name(base, self.tensors.keys() | {op.name for op in self.ops})

    def add_op(self, op: Op) -> Op:
        self.ops.append(op)
        return op

    def copy(self) -> Graph:
        return Graph(self.name, dict(self.tensors), list(self.ops), list(self.inputs),
                     list(self.outputs), dict(self.metadata))

    # -- queries ----------------------------------------------------------------------------
    def tensor(self, name: str) -> Tensor:
        return self.tensors[name]

    def producer(self, name: str) -> Op | None:
        for op in self.ops:
            if name in op.outputs:
                return op
        return None

    def consumers(self, name: str) -> list[Op]:
        return [op for op in self.ops if name in op.inputs]

    def op_by_name(self, name: str) -> Op:
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(name)

    def constants(self) -> Iterable[Tensor]:
        return (t for t in self.tensors.values() if t.is_const)

    def prune(self) -> Graph:
        """Drop ops whose outputs reach no graph output, and tensors nothing refers to.

        Ops without outputs (the training graph's update ops, which mutate their inputs) are
        side effects and always kept."""
        needed = set(self.outputs)
        kept: list[Op] = []
        for op in reversed(self.ops):
            if not op.outputs or needed.intersection(op.outputs):
                kept.append(op)
                needed.update(i for i in op.inputs if i)
        kept.reverse()
        used = set(self.inputs) | set(self.outputs)
        for op in kept:
            used.update(op.inputs)
            used.update(op.outputs)
        tensors = {n: t for n, t in self.tensors.items() if n in used}
        return Graph(self.name, tensors, kept, list(self.inputs), list(self.outputs),
                     dict(self.metadata))


@dataclass(frozen=True)
class OpView:
    """An op together with its graph: typed access to its tensors and attributes.

    Stages that work op by op (golden kernels, kernel call records) subclass it.
    """

    graph: Graph
    op: Op

    def input(self, i: int) -> Tensor | None:
        if i >= len(self.op.inputs) or not self.op.inputs[i]:
            return None
        return self.graph.tensors[self.op.inputs[i]]

    def x(self) -> Tensor:
        t = self.input(0)
        assert t is not None
        return t

    def out(self) -> Tensor:
        return self.graph.tensors[self.op.outputs[0]]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.op.attrs.get(name, default)

    def error(self, message: str) -> ModelError:
        return ModelError(f"op {self.op.name!r} ({self.op.type}): {message}")

    def quant(self, t: Tensor) -> tuple[float, int]:
        """Per-tensor (scale, zero point) of a quantized tensor; scale is the float32 value."""
        q = t.quant
        if q is None:
            raise self.error(f"tensor {t.name!r} ({t.dtype}) has no quantization parameters")
        if q.scale.size != 1:
            raise self.error(f"tensor {t.name!r} must be quantized per tensor, has "
                             f"{q.scale.size} scales")
        return float(q.scale[0]), int(q.zero_point[0])
