"""Build C kernels into a shared library and run kernel call records through ctypes.

Used by the kernel tests in-process (gcc, UBSan) and by ``python -m tests.kernels.asan_check``
in a subprocess that preloads the AddressSanitizer runtime. The ref kernels by default; a
library of another backend's kernels passes its sources and the function that makes its
records (``RefKernels(path, record=...)``), and a record's scratch is handed to the kernel as a
``pe_context`` over a buffer of ``scratch_bytes``.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from codegen.backends import (
    STRUCTS,
    ArrayArg,
    ContextArg,
    KernelCall,
    NullArg,
    ScalarArg,
    Struct,
    StructArg,
    StructArrayArg,
    TensorArg,
    TensorListArg,
    kernel_call,
)
from codegen.golden.kernels.common import batched
from codegen.ir import Graph, Op
from codegen.resources import data_dir

KERNELS_DIR = data_dir("runtime_c") / "kernels"
REF_SOURCES = sorted((KERNELS_DIR / "ref").glob("*.c"))
STRICT_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off"]
INCLUDES = [f"-I{KERNELS_DIR}", f"-I{KERNELS_DIR / 'ref'}"]


def compile_objects(cc: str, out_dir: Path, flags: Sequence[str] = (),
                    sources: Sequence[Path] = REF_SOURCES, includes: Sequence[str] = INCLUDES,
                    strict: Sequence[str] = STRICT_FLAGS) -> list[Path]:
    """Compile ``sources`` (every ref source) with ``cc`` and the strict flags (raises with the
    log)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    objs = []
    procs = []
    for src in sources:
        obj = out_dir / (src.stem + ".o")
        cmd = [cc, *strict, *flags, *includes, "-c", str(src), "-o", str(obj)]
        procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True)))
        objs.append(obj)
        if len(procs) >= 4:
            _wait(procs.pop(0))
    for p in procs:
        _wait(p)
    return objs


def _wait(item) -> None:
    cmd, proc = item
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out}")


def build_library(cc: str, out_dir: Path, flags: Sequence[str] = (),
                  objects: Sequence[Path] = ()) -> Path:
    """A shared library of all ref kernels built with ``cc`` (plus prebuilt ``objects``)."""
    objs = compile_objects(cc, out_dir / "obj", ["-fPIC", *flags]) + list(objects)
    lib = out_dir / "libpe_kernels.so"
    cmd = [cc, "-shared", *flags, "-o", str(lib), *map(str, objs)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return lib


def sanitizer_flags(cc: str, sanitizers: str, tmp: Path) -> list[str]:
    """``-fsanitize=...`` flags if ``cc`` can link them into a shared object, else []."""
    flags = [f"-fsanitize={sanitizers},float-cast-overflow", "-fno-sanitize-recover=all", "-g",
             "-fno-omit-frame-pointer"]
    probe = tmp / "probe.c"
    probe.write_text("int pe_probe(int x) { return x + 1; }\n")
    try:
        subprocess.run([cc, "-shared", "-fPIC", *flags, str(probe), "-o",
                        str(tmp / "probe.so")], check=True, capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return []
    return flags


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


# -- ctypes mirrors of the parameter structs ----------------------------------------------------
_SCALARS = {"int32_t": ctypes.c_int32, "float": ctypes.c_float}
_STRUCT_TYPES: dict[str, type[ctypes.Structure]] = {}


def struct_type(name: str) -> type[ctypes.Structure]:
    """The ctypes Structure for a pe_* struct of codegen.backends.STRUCTS."""
    if name not in _STRUCT_TYPES:
        fields = []
        for fname, ctype in STRUCTS[name]:
            if ctype in _SCALARS:
                fields.append((fname, _SCALARS[ctype]))
            elif ctype.endswith("*"):
                fields.append((fname, ctypes.c_void_p))
            else:
                fields.append((fname, struct_type(ctype)))
        _STRUCT_TYPES[name] = type(name, (ctypes.Structure,), {"_fields_": fields})
    return _STRUCT_TYPES[name]


def _struct_value(value: Struct, keep: list) -> ctypes.Structure:
    cls = struct_type(value.ctype)
    obj = cls()
    for fname, ctype, v in value.items():
        if isinstance(v, Struct):
            setattr(obj, fname, _struct_value(v, keep))
        elif hasattr(v, "values") and hasattr(v, "ctype"):      # ConstArray (empty: NULL)
            arr = np.ascontiguousarray(v.values)
            keep.append(arr)
            setattr(obj, fname, arr.ctypes.data if arr.size else None)
        elif ctype == "float":
            setattr(obj, fname, float(v))
        else:
            setattr(obj, fname, int(v))
    return obj


Record = Callable[[Graph, Op, int], KernelCall]


class RefKernels:
    """The kernels of one shared library, callable with KernelCall records (``record`` makes
    an op's record: the ref kernels' by default)."""

    def __init__(self, path: Path, record: Record = kernel_call):
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.record = record

    def call(self, call: KernelCall, values: Mapping[str, np.ndarray]) -> None:
        """Run ``call``; ``values`` holds every tensor it names (outputs are written)."""
        fn = getattr(self.lib, call.kernel)
        keep: list = []
        argv: list = []
        argtypes: list = []
        for _, arg in call.args:
            if isinstance(arg, ContextArg) and call.scratch_bytes > 0:
                buf = np.full(call.scratch_bytes, 0xA5, np.uint8)   # stale bytes show
                ctx = struct_type("pe_context")(buf.ctypes.data, call.scratch_bytes)
                keep += [buf, ctx]
                argv.append(ctypes.addressof(ctx))
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, ContextArg | NullArg):
                argv.append(None)
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, StructArg):
                obj = _struct_value(arg.value, keep)
                keep.append(obj)
                argv.append(ctypes.addressof(obj))
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, StructArrayArg):
                objs = (struct_type(arg.struct) * len(arg.values))(
                    *[_struct_value(v, keep) for v in arg.values])
                keep.append(objs)
                argv.append(ctypes.addressof(objs))
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, TensorArg):
                arr = values[arg.tensor]
                assert arr.flags.c_contiguous
                argv.append(arr.ctypes.data)
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, TensorListArg):
                ptrs = (ctypes.c_void_p * len(arg.tensors))(
                    *[values[t].ctypes.data for t in arg.tensors])
                keep.append(ptrs)
                argv.append(ctypes.addressof(ptrs))
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, ArrayArg):
                arr = np.ascontiguousarray(arg.value.values)
                keep.append(arr)
                argv.append(arr.ctypes.data)
                argtypes.append(ctypes.c_void_p)
            elif isinstance(arg, ScalarArg):
                argv.append(arg.value)
                argtypes.append(_SCALARS[arg.ctype])
            else:
                raise TypeError(f"unknown argument {arg!r}")
        fn.argtypes = argtypes
        fn.restype = None
        fn(*argv)

    def run_op(self, graph: Graph, op_index: int, env: dict[str, np.ndarray],
               batch: int) -> np.ndarray:
        """Run one op of ``graph`` on the tensors of ``env`` (batch on axis 0); its output."""
        op = graph.ops[op_index]
        call = self.record(graph, op, batch)
        values = dict(env)
        for name in call.tensors():
            if name not in values and name not in op.outputs:
                t = graph.tensors[name]
                if t.data is None:
                    raise KeyError(f"no value for tensor {name!r}")
                values[name] = np.ascontiguousarray(t.data)
        out_t = graph.tensors[op.outputs[0]]
        shape = out_t.shape if out_t.is_const else batched(out_t.shape, batch)
        out = np.full(shape, 0x5A if out_t.dtype != "float32" else np.nan, dtype=out_t.dtype)
        values[op.outputs[0]] = out
        self.call(call, values)
        return out

    def run_graph(self, graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run a forward graph op by op through the C kernels; the graph outputs."""
        env = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
        batch = next(iter(env.values())).shape[0] if env else 1
        for i, op in enumerate(graph.ops):
            env[op.outputs[0]] = self.run_op(graph, i, env, batch)
        return [env[name] for name in graph.outputs]
