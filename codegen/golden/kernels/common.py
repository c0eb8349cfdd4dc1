"""Shared pieces of the golden kernels: op views, quantization lookups, window slicing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import ModelError
from ...ir import OpView as IROpView

# A prepared kernel: called with the values of the op's inputs (None for an absent optional
# input; activations carry the batch on axis 0, constants are their stored data), returns the
# op's output with the batch on axis 0.
Kernel = Callable[..., np.ndarray]


@dataclass(frozen=True)
class OpView(IROpView):
    """The IR op view plus the golden kernels' constant and quantization lookups."""

    def const(self, i: int) -> np.ndarray:
        t = self.input(i)
        if t is None or t.data is None:
            name = self.op.inputs[i] if i < len(self.op.inputs) else "?"
            raise self.error(f"input {i} ({name!r}) must be a constant tensor")
        return t.data


    def unsupported_dtype(self, dtype: str) -> ModelError:
        return self.error(f"the golden model has no {dtype} kernel for this op")


def dtype_limits(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def batched(shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    """A graph shape (batch 1 on axis 0) with the batch size ``n`` put in."""
    if shape and shape[0] == 1:
        return (n,) + tuple(shape[1:])
    return tuple(shape)


def pad_hw(x: np.ndarray, padding: tuple[int, int, int, int], value) -> np.ndarray:
    """Pad axes 1 and 2 of an NHWC array by (top, bottom, left, right) with ``value``."""
    top, bottom, left, right = padding
    if not (top or bottom or left or right):
        return x
    return np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=value)


def tap(xp: np.ndarray, fy: int, fx: int, out_hw: tuple[int, int], stride: tuple[int, int],
        dilation: tuple[int, int]) -> np.ndarray:
    """The strided view of a padded NHWC array that kernel tap (fy, fx) reads."""
    oh, ow = out_hw
    sh, sw = stride
    y0, x0 = fy * dilation[0], fx * dilation[1]
    return xp[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw, :]


def im2col(xp: np.ndarray, kernel: tuple[int, int], out_hw: tuple[int, int],
           stride: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """Patches of a padded NHWC array: (N, OH, OW, KH * KW * C), ordered (ky, kx, c)."""
    n, c = xp.shape[0], xp.shape[3]
    kh, kw = kernel
    oh, ow = out_hw
    if (kh, kw) == (1, 1):
        cols = tap(xp, 0, 0, out_hw, stride, dilation)
        return cols.reshape(n, oh, ow, c)
    cols = np.empty((n, oh, ow, kh, kw, c), dtype=xp.dtype)
    for fy in range(kh):
        for fx in range(kw):
            cols[:, :, :, fy, fx, :] = tap(xp, fy, fx, out_hw, stride, dilation)
    return cols.reshape(n, oh, ow, kh * kw * c)


def pair(value, name: str, view: OpView) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in value)
    except (TypeError, ValueError):
        raise view.error(f"attribute {name} must be a pair of integers, got {value!r}") from None
    return a, b


def quad(value, name: str, view: OpView) -> tuple[int, int, int, int]:
    try:
        a, b, c, d = (int(v) for v in value)
    except (TypeError, ValueError):
        raise view.error(f"attribute {name} must be 4 integers, got {value!r}") from None
    return a, b, c, d
