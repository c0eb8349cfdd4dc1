"""Data files for the fuzz campaign: .npz archives and .npy arrays, good and bad.

``data_file(rng, path, sample_shape, classes, marker)`` writes a file that is valid (a few
samples of the right shape with labels in range), nearly valid or hostile: NaN and
infinities at random places, object arrays whose unpickling would create the marker file,
0-d and 1-d ``x``, other dtypes (bool, complex, strings, datetimes, structured, float16/64,
integers), wrong shapes, labels out of range / of the wrong type / of another length, a
missing ``x``, extra members, truncated archives, damaged headers, headers that declare more
data than the file holds, a small zip bomb and random bytes.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np


class _Touch:
    """Unpickling this creates ``path`` (the campaign checks that it never happens)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def good_xy(rng: np.random.Generator, shape: tuple[int, ...], classes: int, n: int = 4,
            int8: bool = False) -> tuple[np.ndarray, np.ndarray]:
    if int8:
        x = rng.integers(-128, 128, size=(n, *shape), dtype=np.int8)
    else:
        x = rng.random((n, *shape), dtype=np.float32)
    return x, rng.integers(0, max(1, classes), size=n).astype(np.int64)


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", method) as z:
        for name, blob in members.items():
            z.writestr(name, blob)


def data_file(rng: np.random.Generator, path: Path, shape: tuple[int, ...], classes: int,
              marker: str, npy: bool = False) -> str:
    """Write ``path``; returns what kind of file it is."""
    x, y = good_xy(rng, shape, classes, int(rng.integers(1, 6)), int8=rng.random() < 0.2)
    kind = int(rng.integers(22))
    what = "good"
    if kind in (0, 1, 2):
        x = x.astype(np.float32)
        flat = x.reshape(-1)
        for _ in range(int(rng.integers(1, 4))):
            flat[int(rng.integers(flat.size))] = [np.nan, np.inf, -np.inf][int(rng.integers(3))]
        what = "nan/inf"
    elif kind == 3:
        x = np.array([_Touch(marker)] * len(x), dtype=object)
        what = "object x"
    elif kind == 4:
        y = np.array([_Touch(marker)] * len(y), dtype=object)
        what = "object y"
    elif kind == 5:
        x = np.array(float(rng.random()))
        what = "0-d x"
    elif kind == 6:
        x = x.reshape(-1)
        what = "1-d x"
    elif kind == 7:
        dt = [np.bool_, np.complex64, "U3", "datetime64[s]", [("a", "<f4"), ("b", "<i4")],
              np.float16, np.float64, np.int64, np.uint8, np.int32, "S2", "V4"]
        d = dt[int(rng.integers(len(dt)))]
        try:
            x = np.zeros(x.shape, dtype=d)
        except TypeError:
            x = np.zeros(x.shape, dtype=np.float64)
        what = f"dtype {np.dtype(d)}"
    elif kind == 8:
        x = rng.random((len(x), *[int(rng.integers(0, 5)) for _ in
                                  range(int(rng.integers(0, 5)))]), dtype=np.float32)
        what = "shape"
    elif kind == 9:
        y = [y.astype(np.float32), y[:-1], y.reshape(-1, 1), y + classes, y - classes,
             np.array(2**40, np.int64).repeat(len(y)), np.zeros(len(y), np.uint64) - 1,
             np.array([], np.int64), y.astype(np.int8)][int(rng.integers(9))]
        what = "labels"
    elif kind == 10:
        x = np.transpose(x, (0, *range(x.ndim - 1, 0, -1))) if x.ndim == 4 else x
        what = "layout"
    elif kind == 11:
        x = x[:0]
        y = y[:0]
        what = "no samples"
    if npy or (kind in (20, 21) and rng.random() < 0.3):
        if kind >= 12:
            blob = _npy_bytes(x)
            if kind >= 16:
                blob = _damage_npy(blob, rng)
                what = "damaged npy"
            path.write_bytes(blob)
        else:
            path.write_bytes(_npy_bytes(x))
        return f"npy {what}"
    members = {"x.npy": _npy_bytes(x), "y.npy": _npy_bytes(y)}
    if kind == 12:
        del members["x.npy"]
        what = "no x"
    elif kind == 13:
        members["extra.npy"] = _npy_bytes(np.array([_Touch(marker)], dtype=object))
        members["../../escape.npy"] = _npy_bytes(np.zeros(2))
        what = "extra members"
    elif kind == 14:
        members["x.npy"] = _damage_npy(members["x.npy"], rng)
        what = "damaged x header"
    elif kind == 15:
        members["x"] = members.pop("x.npy")[: int(rng.integers(0, 20))]
        what = "x without .npy"
    elif kind == 16:
        big = np.zeros(int(rng.integers(1, 8)) * 2**20, np.uint8)
        members["x.npy"] = _npy_bytes(big)
        _zip(path, members, zipfile.ZIP_DEFLATED)
        return "zip bomb (small)"
    elif kind == 17:
        _zip(path, members)
        raw = path.read_bytes()
        path.write_bytes(raw[: int(rng.integers(len(raw)))])
        return "truncated zip"
    elif kind == 18:
        _zip(path, members)
        raw = bytearray(path.read_bytes())
        for _ in range(int(rng.integers(1, 10))):
            raw[int(rng.integers(len(raw)))] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(raw))
        return "flipped zip"
    elif kind == 19:
        path.write_bytes(rng.integers(0, 256, size=int(rng.integers(0, 600)),
                                      dtype=np.uint8).tobytes())
        return "random bytes"
    elif kind == 20:
        members["x.npy"] = _declares_more(x)
        what = "header declares more"
    _zip(path, members)
    return what


def _declares_more(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.lib.format.dtype_to_descr(x.dtype), "fortran_order": False,
              "shape": (2**40, *x.shape[1:])})
    return buf.getvalue() + x.tobytes()[:64]


def _damage_npy(blob: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(blob)
    choice = int(rng.integers(5))
    if choice == 0:
        return bytes(b[: int(rng.integers(len(b)))])
    if choice == 1:
        end = min(len(b), 128)
        for _ in range(int(rng.integers(1, 6))):
            b[int(rng.integers(6, end))] = int(rng.integers(32, 127))
        return bytes(b)
    if choice == 2:
        return blob.replace(b"'shape': (", b"'shape': (-5, ", 1)
    if choice == 3:
        return blob.replace(b"'descr': '", b"'descr': '|O", 1)
    return blob.replace(b"'shape': (", b"'shape': (999999999999, 99999999, ", 1)
