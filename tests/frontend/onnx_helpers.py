"""Helpers for ONNX-based tests (importer, quantizer): export, onnxruntime runs, QDQ models.

- ``export_torch(model, *shapes)``: a PyTorch module -> ONNX bytes (legacy exporter, opset 13).
- ``make_onnx(nodes, inputs, outputs, inits)``: a hand-built model (for ops/attributes PyTorch
  does not emit, e.g. asymmetric Conv pads, Gemm transB=0) -> bytes.
- ``run_ort(model_bytes, *inputs)``: onnxruntime outputs, one sample at a time.
- ``quantize_qdq(model_bytes, calib, ...)``: onnxruntime ``quantize_static`` in QDQ format.
- ``quantize_input(x, qdict)`` / ``dequantize_output(y, qdict)``: float <-> int8 with the
  parameters a QDQ import records in ``graph.metadata["input_quant"]`` / ``["output_quant"]``.
- ``golden_float(graph, *nchw_inputs)``: run the golden model on NCHW data (inputs transposed to
  NHWC, 4-D outputs transposed back to NCHW) for comparison with onnxruntime.
"""

from __future__ import annotations

import io
import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tests.digits_cnn import nchw_to_nhwc


def nhwc_to_nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def to_ir_layout(x: np.ndarray) -> np.ndarray:
    """An ONNX-layout array as the IR wants it (4-D: NCHW -> NHWC)."""
    return nchw_to_nhwc(x) if x.ndim == 4 else x


def from_ir_layout(x: np.ndarray) -> np.ndarray:
    return nhwc_to_nchw(x) if x.ndim == 4 else x


def export_torch(model: Any, *shapes: tuple[int, ...], opset: int = 13, **kwargs: Any) -> bytes:
    """Export an eval-mode PyTorch module with the legacy (TorchScript) exporter."""
    import torch

    model = model.eval()
    args = tuple(torch.zeros(s) for s in shapes)
    names = [f"x{i}" for i in range(len(shapes))] if len(shapes) > 1 else ["x"]
    buf = io.BytesIO()
    with warnings.catch_warnings():          # the legacy exporter's deprecation notices
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, buf, dynamo=False, opset_version=opset,
                          input_names=names, output_names=["y"], **kwargs)
    return buf.getvalue()


def make_onnx(nodes: list, inputs: list, outputs: list, inits: list = (), opset: int = 13
              ) -> bytes:
    """Serialize a hand-built graph (onnx.helper nodes / value infos / initializers)."""
    from onnx import helper

    g = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 9)          # what the installed onnxruntime accepts
    return m.SerializeToString()


def ort_session(model_bytes: bytes) -> Any:
    """A single-threaded CPU session with graph optimizations off.

    Off, because onnxruntime's optimizer fuses QDQ groups into integer kernels whose results
    depend on the CPU: on x86 without AVX-VNNI its u8 x s8 GEMM sums pairs of products with
    ``vpmaddubsw``, which saturates at int16 (seen here: outputs off by up to 61 quantization
    steps on an AVX2-only EPYC, exact on a VNNI machine). Unfused, a QDQ model runs as
    DequantizeLinear -> float op -> QuantizeLinear — the format's defined meaning — the same
    on every machine up to float rounding. Float models are unaffected by the setting apart from
    summation order."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])


def run_ort(model_bytes: bytes, *inputs: np.ndarray, batched: bool = False
            ) -> list[np.ndarray]:
    """Outputs of onnxruntime for NCHW inputs (batch on axis 0, run one sample at a time
    unless ``batched``: models exported with a fixed batch of 1 need that)."""
    sess = ort_session(model_bytes)
    names = [i.name for i in sess.get_inputs()]
    if batched:
        return sess.run(None, dict(zip(names, inputs)))
    n = inputs[0].shape[0]
    runs = [sess.run(None, {k: v[i:i + 1] for k, v in zip(names, inputs)}) for i in range(n)]
    return [np.concatenate([r[j] for r in runs]) for j in range(len(runs[0]))]


def golden_float(graph: Any, *inputs: np.ndarray) -> list[np.ndarray]:
    """Golden outputs for ONNX-layout inputs, returned in ONNX layout."""
    from codegen import golden

    outs = golden.run(graph, *(to_ir_layout(x.astype(np.float32)) for x in inputs))
    return [from_ir_layout(np.asarray(o)) for o in outs]


def quantize_input(x: np.ndarray, qdict: dict[str, Any]) -> np.ndarray:
    """Float -> int8 as ONNX QuantizeLinear does (round half to even, saturate)."""
    q = np.rint(x.astype(np.float32) / np.float32(qdict["scale"])) + int(qdict["zero_point"])
    return np.clip(q, -128, 127).astype(np.int8)


def dequantize_output(y: np.ndarray, qdict: dict[str, Any]) -> np.ndarray:
    return ((y.astype(np.int32) - int(qdict["zero_point"])) * np.float32(qdict["scale"])
            ).astype(np.float32)


class ArrayCalibrationReader:
    """An onnxruntime ``CalibrationDataReader`` over arrays (one sample per call)."""

    def __init__(self, input_names: list[str], *arrays: np.ndarray) -> None:
        self.names = input_names
        self.arrays = arrays
        self.i = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.i >= len(self.arrays[0]):
            return None
        feed = {n: a[self.i:self.i + 1].astype(np.float32) for n, a in zip(self.names,
                                                                            self.arrays)}
        self.i += 1
        return feed

    def rewind(self) -> None:
        self.i = 0


def quantize_qdq(model_bytes: bytes, *calib: np.ndarray, per_channel: bool = True,
                 activation_type: str = "int8", weight_type: str = "int8") -> bytes:
    """onnxruntime ``quantize_static`` (QuantFormat.QDQ) of a float model -> QDQ model bytes.

    ``calib``: one NCHW float array per model input (samples on axis 0).
    ``activation_type`` / ``weight_type``: "int8" (QInt8) or "uint8" (QUInt8).
    """
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    types = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}

    class Reader(ArrayCalibrationReader, CalibrationDataReader):
        pass

    names = [i.name for i in ort_session(model_bytes).get_inputs()]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        src.write_bytes(model_bytes)
        level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)   # "consider pre-processing" warnings
        try:
            quantize_static(str(src), str(dst), Reader(names, *calib),
                            quant_format=QuantFormat.QDQ, per_channel=per_channel,
                            activation_type=types[activation_type],
                            weight_type=types[weight_type])
        finally:
            logging.getLogger().setLevel(level)
        return dst.read_bytes()
