"""Helpers for the code-generation and host-run tests: shared models, toolchains, graphs."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from codegen.ir import Graph, verify

MODELS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "models"
SHARED_MODELS = ("ad01_int8.tflite", "kws_ref_model.tflite", "pretrainedResnet_quant.tflite",
                 "vww_96_int8.tflite", "kws_ref_model_float32.tflite")
MALLOC_FAMILY = {"malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign",
                 "memalign", "valloc", "pvalloc"}


def model_path(name: str) -> Path:
    path = MODELS_DIR / name
    if not path.is_file():
        pytest.skip(f"shared model {path} is not available")
    return path


def shared_graph(name: str) -> Graph:
    """A shared model as the code generator takes it: int8 models as they are, the float KWS
    model quantized with 100 seeded random calibration inputs (skips if the file is absent)."""
    from codegen.frontend import load_model
    from codegen.quant import quantize

    graph = load_model(model_path(name))
    t = graph.tensors[graph.inputs[0]]
    if t.dtype == "float32":
        calib = np.random.default_rng(7).normal(0, 1, size=(100, *t.shape[1:]))
        graph = quantize(graph, calib.astype(np.float32))
    return graph


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def undefined_symbols(objects: list[Path]) -> set[str]:
    out = subprocess.run([need("nm"), "-u", *map(str, objects)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if line.strip() and not line.endswith(":")}


def defined_globals(objects: list[Path]) -> set[str]:
    out = subprocess.run([need("nm"), "-g", "--defined-only", *map(str, objects)],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if line.strip() and not line.endswith(":") and len(line.split()) == 3}


def rename_graph(g: Graph, rename: Callable[[str], str]) -> Graph:
    """The same graph with every tensor and op renamed (metadata dropped)."""
    def r(n: str) -> str:
        return rename(n) if n else n

    out = Graph(g.name, {}, [], [r(n) for n in g.inputs], [r(n) for n in g.outputs])
    for n, t in g.tensors.items():
        out.add_tensor(t.replace(name=r(n)))
    for op in g.ops:
        out.add_op(op.replace(name=rename("op:" + op.name), inputs=tuple(map(r, op.inputs)),
                              outputs=tuple(map(r, op.outputs))))
    return verify(out)


def random_int8(graph: Graph, n: int, seed: int) -> np.ndarray:
    t = graph.tensors[graph.inputs[0]]
    return np.random.default_rng(seed).integers(-128, 128, size=(n, *t.shape[1:]),
                                                dtype=np.int8)


def digits_int8() -> Graph:
    """The bundled digits CNN, quantized with the first 100 training images."""
    from codegen.data import fit_input
    from codegen.frontend import load_model
    from codegen.models import digits, path
    from codegen.quant import quantize

    g = load_model(path("digits_cnn.onnx"))
    return quantize(g, fit_input(g, digits("train")[0][:100], "calibration"))


def nasty_names(g: Graph) -> Graph:
    """``g`` renamed with names C cannot take as they are: separators, leading digits, C
    keywords, names that sanitise to the same fragment, comment terminators, trigraphs."""
    specials = ["int", "static", "1:conv/weights;int", "return", "a-b", "a_b", "A_B",
                "pe_init", "*/ oops /*", "??/", "", "conv2d", "NULL"]
    names = {n: (specials[i] if i < len(specials) else f"{i}:{n}/weights;int")
             for i, n in enumerate(sorted(g.tensors))}
    used = set()
    for k, v in list(names.items()):            # tensor names must stay distinct
        while v in used or not v:
            v = v + "'"
        used.add(v)
        names[k] = v
    return rename_graph(g, lambda n: names.get(n, f"op {n} */ while"))
