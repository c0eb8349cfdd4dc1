"""User data files (.npz with x/y, .npy arrays) and their fit to a model's input."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from .errors import PockError
from .ir import Graph


def load_npy(path: str | Path) -> np.ndarray:
    p = Path(path)
    try:
        arr = np.load(p, allow_pickle=False)
    except FileNotFoundError:
        raise PockError(f"{p}: no such file") from None
    except (ValueError, OSError, EOFError) as e:
        raise PockError(f"{p}: not a readable .npy array ({e})") from None
    if not isinstance(arr, np.ndarray):
        raise PockError(f"{p}: expected a .npy array, got an .npz archive")
    return arr


def load_npz(path: str | Path, need_y: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Read `x` (N, ...) and optional `y` (N,) from an .npz file."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise PockError(f"{p}: expected an .npz archive with arrays 'x' and 'y'")
            if "x" not in z.files:
                raise PockError(f"{p}: no array 'x' in the archive (has {sorted(z.files)})")
            x = z["x"]
            y = z["y"] if "y" in z.files else None
    except FileNotFoundError:
        raise PockError(f"{p}: no such file") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise PockError(f"{p}: not a readable .npz archive ({e})") from None
    if need_y and y is None:
        raise PockError(f"{p}: no array 'y' (labels) in the archive")
    if y is not None and (y.ndim < 1 or len(y) != len(x)):
        raise PockError(f"{p}: 'x' has {len(x)} samples but 'y' has shape {list(y.shape)}")
    return x, y


def fit_input(graph: Graph, x: np.ndarray, what: str = "input") -> np.ndarray:
    """Bring a batch (axis 0) to the IR input's layout and dtype.

    Accepts the IR's own layout (NHWC) or, for models imported from NCHW ONNX, the original
    NCHW layout. Float data for an int8 input is quantized with the input's scale and zero point
    (round half away from zero, saturated); int8 data for a float input is rejected.
    """
    t = graph.tensors[graph.inputs[0]]
    want = tuple(t.shape[1:])
    x = np.asarray(x)
    if x.ndim == len(want):            # a single sample without batch axis
        x = x[None]
    if tuple(x.shape[1:]) != want:
        nchw = graph.metadata.get("input_layouts", {}).get(t.name) == "NHWC"  # was NCHW
        if nchw and x.ndim == 4 and tuple(x.shape[1:]) == (want[2], want[0], want[1]):
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        else:
            raise PockError(f"{what} has shape {list(x.shape)}, model input {t.name!r} expects "
                            f"[N, {', '.join(map(str, want))}]")
    if t.dtype == "int8":
        if x.dtype == np.int8:
            return x
        if not np.issubdtype(x.dtype, np.floating):
            raise PockError(f"{what} has dtype {x.dtype}, model input {t.name!r} is int8 "
                            "(give int8 or float32 data)")
        q = t.quant
        v = x.astype(np.float64) / q.s
        v = np.sign(v) * np.floor(np.abs(v) + 0.5) + q.zp
        return np.clip(v, -128, 127).astype(np.int8)
    if t.dtype == "float32":
        if not np.issubdtype(x.dtype, np.floating):
            raise PockError(f"{what} has dtype {x.dtype}, model input {t.name!r} is float32")
        return x.astype(np.float32)
    raise PockError(f"model input {t.name!r} has unsupported dtype {t.dtype}")
