"""Model importers and the TFLite exporter: file bytes <-> ir.Graph.

``load_model(path)`` dispatches on the file's content (a TFLite flatbuffer carries the
identifier ``TFL3`` at bytes 4..8; anything else that looks like protobuf goes to the ONNX
importer). ``save_model(graph, path)`` writes a .tflite file; ``export_model(graph, path)``
(fine-tuned models: ``fit -o``, ``pull -o``) chooses by the file name: ``.onnx`` a QDQ ONNX
model (``onnx_writer``), anything else .tflite.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError
from ..ir import Graph
from .tflite_reader import read_tflite
from .tflite_writer import write_tflite

__all__ = ["export_format", "export_model", "load_model", "read_tflite", "save_model",
           "write_tflite"]


def load_model(path: str | os.PathLike) -> Graph:
    """Read a .tflite or .onnx file into an IR graph (ModelError naming the file otherwise)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise ModelError(f"{source}: is a directory, not a model file") from None
    except OSError as e:
        raise ModelError(f"{source}: cannot read ({e.strerror or e})") from None
    if not data:
        raise ModelError(f"{source}: file is empty")
    if data[4:8] == b"TFL3":
        return read_tflite(data, source)
    if _looks_like_onnx(data):
        try:
            from .onnx_reader import read_onnx  # optional: onnx
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.onnx_reader":
                raise
            raise ModelError(f"{source}: looks like ONNX, but this build has no ONNX "
                             "importer") from None
        return read_onnx(data, source)
    raise ModelError(f"{source}: not a TFLite or ONNX model (no 'TFL3' identifier at bytes 4..8 "
                     f"and not a protobuf ModelProto; starts with {data[:8].hex()})")


def save_model(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` as a .tflite flatbuffer."""
    data = write_tflite(graph)
    try:
        Path(path).write_bytes(data)
    except OSError as e:
        raise ModelError(f"{path}: cannot write ({e.strerror or e})") from None


def export_format(path: str | os.PathLike) -> str:
    """``onnx`` for a ``.onnx`` file name (any case), else ``tflite``."""
    return "onnx" if Path(path).suffix.lower() == ".onnx" else "tflite"


def export_model(graph: Graph, path: str | os.PathLike) -> str:
    """Write ``graph`` in the format its file name asks for (``export_format``): a QDQ ONNX
    model for ``.onnx``, else a .tflite flatbuffer. Returns the format."""
    fmt = export_format(path)
    if fmt == "tflite":
        save_model(graph, path)
        return fmt
    from .onnx_writer import write_onnx  # optional: onnx

    data = write_onnx(graph)
    try:
        Path(path).write_bytes(data)
    except OSError as e:
        raise ModelError(f"{path}: cannot write ({e.strerror or e})") from None
    return fmt


def _looks_like_onnx(data: bytes) -> bool:
    """A cheap plausibility check: an ONNX ModelProto is a protobuf message whose first field
    is a small field number with wire type 0 (varint, e.g. ir_version = 1) or 2 (bytes)."""
    first = data[0]
    field, wire = first >> 3, first & 7
    return 1 <= field <= 20 and wire in (0, 2)
