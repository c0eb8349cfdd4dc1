"""User data files (.npz with x/y, .npy arrays) and their fit to a model's input."""

from __future__ import annotations

import math
import struct
import tokenize
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PockError, PockWarning, brief, plural
from .ir import Graph
from .ir.verify import nonfinite

NPZ_CONTENTS = ("an .npz archive with 'x' (N, ...) float or int8 samples and 'y' (N,) integer "
                "labels (loss mse: targets), e.g. numpy.savez(path, x=x, y=y)")
NPY_CONTENTS = "a .npy array of float or int8 samples (N, ...), e.g. numpy.save(path, x)"


def check_numeric(a: np.ndarray, what: str, contents: str) -> None:
    """PockError unless ``a`` holds numbers (integers or floats: not text, booleans, complex
    numbers, dates or records), saying what the file must contain."""
    if a.dtype.kind not in "iuf":
        raise PockError(f"{what} has dtype {brief(str(a.dtype), 60, False)}, not numbers; "
                        f"expected {contents}")


def check_finite(a: np.ndarray, what: str) -> None:
    """PockError naming ``what``, the count and the first index if a float array holds NaN
    or an infinity (quantized, NaN would become 0 and infinities +-127/-128, silently)."""
    bad = nonfinite(a)
    if bad:
        raise PockError(f"{what} has {bad}")


def _header(f: Any, size: int, what: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a .npy header, checked before any data is read: no object arrays
    (loading them would unpickle), and no more data declared than the file holds (numpy
    would allocate the declared size first)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError, RecursionError,
            MemoryError, tokenize.TokenError) as e:        # numpy parses the header text
        raise PockError(f"{what}: not a readable .npy array ({brief(e, 120, quote=False)})"
                        ) from None
    if dtype.hasobject:
        raise PockError(f"{what}: holds Python objects (dtype {brief(str(dtype), 60, False)}); "
                        "only numeric arrays are read (object arrays would be unpickled)")
    need = math.prod(shape) * dtype.itemsize
    if need > size - f.tell():
        raise PockError(f"{what}: the header declares shape {brief(list(shape), 60, False)} "
                        f"{dtype} ({need} bytes), the file holds {max(0, size - f.tell())}")
    return shape, dtype


def load_npy(path: str | Path) -> np.ndarray:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            if f.read(4) == b"PK\x03\x04":
                raise PockError(f"{p}: this is an .npz archive; expected {NPY_CONTENTS}")
            f.seek(0)
            _header(f, p.stat().st_size, str(p))
            f.seek(0)
            arr = np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise PockError(f"{p}: no such file") from None
    except (ValueError, OSError, EOFError) as e:
        raise PockError(f"{p}: not a readable .npy array ({brief(e, 120, quote=False)})"
                        ) from None
    check_numeric(arr, str(p), NPY_CONTENTS)
    check_finite(arr, str(p))
    return arr


def load_npz(path: str | Path, need_y: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Read `x` (N, ...) and optional `y` (N,) from an .npz file (never unpickling: object
    arrays are refused; NaN and infinities too)."""
    p = Path(path)
    arrays: dict[str, np.ndarray] = {}
    try:
        with open(p, "rb") as f:
            magic = f.read(6)
            if magic[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):     # not a zip archive
                kind = "this is a .npy array" if magic == b"\x93NUMPY" else "not a zip archive"
                raise PockError(f"{p}: {kind}; expected {NPZ_CONTENTS}")
        z = np.load(p, allow_pickle=False)
        with z:
            if "x" not in z.files:
                raise PockError(f"{p}: no array 'x' in the archive (has "
                                f"{brief(sorted(z.files), 120, False)}); expected "
                                f"{NPZ_CONTENTS}")
            for key in ("x", "y"):
                if key in z.files:
                    member = f"{key}.npy" if f"{key}.npy" in z.zip.namelist() else key
                    with z.zip.open(member) as f:
                        _header(f, z.zip.getinfo(member).file_size, f"{p} '{key}'")
                    arrays[key] = z[key]
    except FileNotFoundError:
        raise PockError(f"{p}: no such file") from None
    except (ValueError, OSError, EOFError, KeyError, NotImplementedError, RuntimeError,
            struct.error, zipfile.BadZipFile, zlib.error, tokenize.TokenError) as e:
        raise PockError(f"{p}: not a readable .npz archive ({brief(e, 120, quote=False)})"
                        ) from None
    x, y = arrays["x"], arrays.get("y")
    if x.ndim < 1:
        raise PockError(f"{p}: 'x' is a single value (shape []); expected samples on axis 0")
    check_numeric(x, f"{p} 'x'", NPZ_CONTENTS)
    if y is not None:
        check_numeric(y, f"{p} 'y'", NPZ_CONTENTS)
    if need_y and y is None:
        raise PockError(f"{p}: no array 'y' (labels) in the archive")
    if y is not None and (y.ndim < 1 or len(y) != len(x)):
        raise PockError(f"{p}: 'x' has {len(x)} samples but 'y' has shape {list(y.shape)}")
    check_finite(x, f"{p} 'x'")
    if y is not None:
        check_finite(y, f"{p} 'y'")
    return x, y


def data_arrays(data: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(x, y or None) of a data argument: an .npz path, a mapping with ``x`` (and ``y``) or
    an (x, y) tuple."""
    if isinstance(data, (str, Path)):
        return load_npz(data)
    if isinstance(data, tuple):
        x, y = data
    else:
        if "x" not in data:
            raise PockError(f"{what}: no array 'x'")
        x, y = data["x"], data.get("y")
    return np.asarray(x), None if y is None else np.asarray(y)


@dataclass(frozen=True)
class TensorSpec:
    """What data fitting needs to know of a model input or output: shape (with the batch
    axis), dtype, per-tensor quantization and whether the model came from NCHW ONNX (then
    NCHW data is accepted and transposed). Built from a graph or from a project manifest,
    so ``pockengine sim --data`` fits data exactly as ``compile`` / ``fit`` do."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int = 0
    nchw: bool = False

    @classmethod
    def of(cls, graph: Graph, name: str | None = None) -> TensorSpec:
        """The graph's (first) input, or the tensor ``name``."""
        t = graph.tensors[graph.inputs[0] if name is None else name]
        q = t.quant
        nchw = graph.metadata.get("input_layouts", {}).get(t.name) == "NHWC"  # was NCHW
        return cls(t.name, tuple(int(d) for d in t.shape), t.dtype,
                   None if q is None else q.s, 0 if q is None else q.zp, nchw)

    def as_dict(self) -> dict[str, Any]:
        return {"tensor": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "scale": self.scale, "zero_point": self.zero_point, "nchw": self.nchw}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TensorSpec:
        return cls(str(d["tensor"]), tuple(int(v) for v in d["shape"]), str(d["dtype"]),
                   None if d.get("scale") is None else float(d["scale"]),
                   int(d.get("zero_point", 0)), bool(d.get("nchw", False)))


def quantize_values(x: np.ndarray, scale: float, zero_point: int,
                    what: str | None = None) -> np.ndarray:
    """Float values -> int8 with TFLite's rounding (half away from zero), saturated. With
    ``what`` (the data, for the message), values that saturate are counted and reported as a
    :class:`~codegen.errors.PockWarning`: they are outside what the quantization can hold."""
    v = np.asarray(x).astype(np.float64) / scale
    v = np.sign(v) * np.floor(np.abs(v) + 0.5) + zero_point
    if what is not None and v.size:
        clipped = int(np.count_nonzero((v < -128) | (v > 127)))
        if clipped:
            lo, hi = (-128 - zero_point) * scale, (127 - zero_point) * scale
            warnings.warn(f"{what}: {clipped:,} of {v.size:,} values "
                          f"({100 * clipped / v.size:.3g} %) are outside [{lo:.6g}, {hi:.6g}], "
                          f"the range of its int8 quantization (scale {scale:.6g}, zero point "
                          f"{zero_point}), and were clipped to it", PockWarning, stacklevel=3)
    return np.clip(v, -128, 127).astype(np.int8)


def fit_input(graph: Graph, x: np.ndarray, what: str = "input") -> np.ndarray:
    """Bring a batch (axis 0) to the IR input's layout and dtype.

    Accepts the IR's own layout (NHWC) or, for models imported from NCHW ONNX, the original
    NCHW layout. Float data for an int8 input is quantized with the input's scale and zero point
    (round half away from zero, saturated); int8 data for a float input is rejected.
    """
    return fit_to(TensorSpec.of(graph), x, what)


def fit_to(t: TensorSpec, x: np.ndarray, what: str = "input") -> np.ndarray:
    """``fit_input`` for a :class:`TensorSpec` (no graph needed)."""
    want = tuple(t.shape[1:])
    x = np.asarray(x)
    given = list(x.shape)                # for messages: the shape as the user gave it
    check_finite(x, what)
    if x.ndim == len(want):            # a single sample without batch axis
        x = x[None]
    if tuple(x.shape[1:]) != want:
        if t.nchw and x.ndim == 4 and tuple(x.shape[1:]) == (want[2], want[0], want[1]):
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        else:
            hint = ""
            if len(given) >= 1 and math.prod(given[1:]) == math.prod(want):
                hint = (f" ({plural(given[0], 'sample')} of {given[1:]}? reshape to "
                        f"{[given[0], *want]})")
            raise PockError(f"{what} has shape {given}, model input {t.name!r} expects "
                            f"[N, {', '.join(map(str, want))}]{hint}")
    if t.dtype == "int8":
        if x.dtype == np.int8:
            return x
        if not np.issubdtype(x.dtype, np.floating):
            raise PockError(f"{what} has dtype {x.dtype}, model input {t.name!r} is int8 "
                            "(give int8 or float32 data)")
        return quantize_values(x, t.scale, t.zero_point, f"{what} (model input {t.name!r})")
    if t.dtype == "float32":
        if not np.issubdtype(x.dtype, np.floating):
            raise PockError(f"{what} has dtype {x.dtype}, model input {t.name!r} is float32")
        x = x.astype(np.float32)
        check_finite(x, f"{what} (as float32)")
        return x
    raise PockError(f"model input {t.name!r} has unsupported dtype {t.dtype}")


def fit_targets(out: TensorSpec, loss: str, x: np.ndarray, y: Any, what: str) -> np.ndarray:
    """Class labels (cross-entropy: int64, checked against the output's classes) or int8
    targets of the output's shape (MSE; float targets are quantized with the output's
    parameters; no ``y``: the input itself, as for autoencoders)."""
    if loss == "cross_entropy":
        if y is None:
            raise PockError(f"{what}: no labels 'y' for the cross_entropy loss")
        y = np.asarray(y)
        if y.ndim != 1 or y.dtype.kind not in "iu":      # not bool, not timedelta64
            raise PockError(f"{what}: labels 'y' must be integers of shape [N], got "
                            f"{y.dtype} {list(y.shape)}")
        n_classes = out.shape[-1]
        if len(y) and (y.min() < 0 or y.max() >= n_classes):
            raise PockError(f"{what}: labels range {int(y.min())}..{int(y.max())}, the model "
                            f"has {n_classes} classes")
        return y.astype(np.int64)
    size = int(np.prod(out.shape[1:]))
    tgt = x if y is None else np.asarray(y)
    if tgt.ndim < 1 or tgt[:1].size != size:
        raise PockError(f"{what}: loss mse needs targets shaped like the model output "
                        f"{list(out.shape[1:])} per sample, got {list(tgt.shape)}")
    if tgt.dtype.kind not in "iuf":
        raise PockError(f"{what}: loss mse needs numeric targets (float, or int8 in the "
                        f"output's quantization), got {brief(str(tgt.dtype), 60, False)}")
    check_finite(tgt, f"{what} targets")
    if tgt.dtype != np.int8:
        tgt = quantize_values(tgt.reshape(len(tgt), *out.shape[1:]), out.scale,
                              out.zero_point, f"{what} targets (model output {out.name!r})")
    if tuple(tgt.shape[1:]) != tuple(out.shape[1:]):
        raise PockError(f"{what}: targets have shape {list(tgt.shape)}, model output "
                        f"{out.name!r} is {list(out.shape)}")
    return tgt


def sample_order(n: int, epochs: int, *, shuffle: bool = True, seed: int = 0) -> np.ndarray:
    """The sample index of every step, as ``golden.training.fit`` visits them: a fresh
    ``default_rng(seed)`` permutation per epoch (or file order)."""
    rng = np.random.default_rng(seed)
    parts = [rng.permutation(n) if shuffle else np.arange(n) for _ in range(int(epochs))]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
