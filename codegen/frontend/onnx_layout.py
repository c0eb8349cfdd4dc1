"""NCHW (ONNX) <-> NHWC (IR) layout helpers for the ONNX importer.

Rule used throughout the importer: every 4-D activation is stored NHWC in the IR; tensors of
any other rank keep their ONNX shape. ONNX shapes and axes are NCHW; these helpers translate
shapes, axes, constants and reshapes between the two worlds.
"""

from __future__ import annotations

import numpy as np

NCHW_TO_NHWC = (0, 2, 3, 1)          # transpose permutation of data
NHWC_AXIS = (0, 3, 1, 2)             # ONNX (NCHW) axis a -> IR (NHWC) axis NHWC_AXIS[a]
# Reshape checks simulate element order on index arrays up to this many elements.
_SIMULATE_LIMIT = 1 << 22


def ir_shape(onnx_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The IR shape of an activation with this ONNX shape (4-D: NCHW -> NHWC)."""
    if len(onnx_shape) == 4:
        n, c, h, w = onnx_shape
        return (n, h, w, c)
    return tuple(onnx_shape)


def ir_axis(axis: int, rank: int) -> int:
    """The IR axis of ONNX axis ``axis`` (already normalised to 0..rank-1)."""
    return NHWC_AXIS[axis] if rank == 4 else axis


def to_ir_array(arr: np.ndarray) -> np.ndarray:
    """ONNX-layout data -> IR-layout data (4-D arrays are transposed to NHWC)."""
    return np.ascontiguousarray(arr.transpose(NCHW_TO_NHWC)) if arr.ndim == 4 else arr


def broadcast_constant(arr: np.ndarray, act_rank: int) -> np.ndarray | None:
    """A constant operand of a binary op with an activation of rank ``act_rank``, in IR layout.

    Returns None when the constant has a higher rank than the activation (not supported). For a
    4-D (NHWC) activation the constant is padded to rank 4, transposed, and its leading 1-dims
    are dropped, so a per-channel (1, C, 1, 1) constant becomes (C,).
    """
    if arr.ndim > act_rank:
        return None
    if act_rank != 4:
        return arr
    arr4 = arr.reshape((1,) * (4 - arr.ndim) + arr.shape).transpose(NCHW_TO_NHWC)
    shape = list(arr4.shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return np.ascontiguousarray(arr4).reshape(shape)


def layout_free(onnx_shape: tuple[int, ...]) -> bool:
    """True if NCHW and NHWC orders coincide in memory (not 4-D, or C == 1, or H*W == 1)."""
    if len(onnx_shape) != 4:
        return True
    _, c, h, w = onnx_shape
    return c == 1 or h * w == 1


def reshape_is_plain(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """Whether an ONNX reshape src -> dst is a plain memory reshape between the IR shapes."""
    if layout_free(src) and layout_free(dst):
        return True
    n = int(np.prod(src, dtype=np.int64))
    if n > _SIMULATE_LIMIT:
        return False
    idx = np.arange(n, dtype=np.int64).reshape(src)
    want = to_ir_array(idx.reshape(dst))
    got = to_ir_array(idx).reshape(ir_shape(dst))
    return bool(np.array_equal(want, got))


def same_order(onnx_axes: list[int], shape: tuple[int, ...], rank: int) -> bool:
    """For axes kept by a reduction: does ONNX order equal IR order, ignoring size-1 dims?"""
    big = [a for a in onnx_axes if shape[a] != 1]
    return big == sorted(big, key=lambda a: ir_axis(a, rank))


def chw_to_hwc_columns(w: np.ndarray, c: int, h: int, wd: int) -> np.ndarray:
    """Permute the columns of a (O, C*H*W) matrix into (O, H*W*C) order."""
    o = w.shape[0]
    return np.ascontiguousarray(w.reshape(o, c, h, wd).transpose(0, 2, 3, 1).reshape(o, -1))
