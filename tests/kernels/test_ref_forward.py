"""C forward kernels vs the golden model, bit for bit: the portable kernels
(runtime_c/kernels/ref), the native backend's on each of its code paths (AVX-512, AVX2,
portable), the arm backend's portable C and, where CMSIS-NN is checked out, the CMSIS-NN
backend's (its plain C paths on the host; tests/backends runs its DSP and Helium paths on
emulated cores).

The kernels are compiled once per session (gcc -O2, UBSan aborting on the first report; an
ASan+UBSan build runs in a subprocess; clang and arm-none-eabi-gcc compile them too) and called
through ctypes with the records of codegen.backends (ref_args; cmsis_nn before ref), on random
single-op graphs (tests/kernels/cases.py, tests/backends/cmsis_cases.py) and on the shared int8
models op by op.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codegen import golden
from codegen.backends import STRUCTS, KernelCall, Target, kernel_call, kernel_calls
from codegen.errors import ModelError
from codegen.frontend import load_model
from codegen.golden import numerics as nx
from codegen.ir import Graph, QuantParams, Role, Tensor
from tests.backends import arm_cases, cmsis_cases, native_cases
from tests.backends.arm_helpers import FORMS, arm_record
from tests.backends.cmsis_helpers import cmsis_record
from tests.backends.native_helpers import FORMS as NATIVE_FORMS
from tests.backends.native_helpers import native_or_ref
from tests.frontend.single_op import single_op_graph

from .c_runner import (
    INCLUDES,
    KERNELS_DIR,
    STRICT_FLAGS,
    RefKernels,
    build_library,
    compile_objects,
    have,
    sanitizer_flags,
    struct_type,
)
from .cases import CASES, check_case, iter_cases, mismatches

N_CASES = 1000                      # random cases per op (each 1-3 samples)
N_MODEL_INPUTS = 100
INT8_MODELS = ["kws_ref_model.tflite", "pretrainedResnet_quant.tflite", "vww_96_int8.tflite",
               "ad01_int8.tflite"]
ROOT = Path(__file__).resolve().parents[2]


def _model_path(name: str) -> Path:
    for base in (Path("/work/shared/models"), ROOT.parent / "shared" / "models"):
        if (base / name).is_file():
            return base / name
    pytest.skip(f"shared model {name} not found in /work/shared/models or ../shared/models")


# -- per-op random cases -------------------------------------------------------------------------
BACKEND_OPS = ([("ref", op) for op in sorted(CASES)]
               + [("cmsis-nn", op) for op in sorted(cmsis_cases.OPS)]
               + [(form, op) for form in FORMS for op in sorted(arm_cases.OPS)]
               + [(form, op) for form in NATIVE_FORMS for op in sorted(native_cases.OPS)])
# the CMSIS-NN kernels the host's cases must reach (plain C paths: no Helium depthwise-as-conv)
CMSIS_HOST_PATHS = {
    "conv2d": {"conv-1x1_fast", "conv-1x1", "conv-1xn", "conv-im2col"},
    "depthwise_conv2d": {"dw-3x3", "dw-opt", "dw-generic"},
    "fully_connected": {"fc-per-channel", "fc-per-tensor"},
    "softmax": {"softmax-int8", "softmax-int16"},
}


# the arm paths the host's cases must reach (the same C as on the cores, portable intrinsics)
ARM_HOST_PATHS = {
    "conv2d": {"conv-c4", "conv-c-any-tail", "conv-c4-odd-pixels", "conv-c4-odd-c",
               "conv-c-any-tail-odd-pixels-odd-c"},
    "depthwise_conv2d": {"dw-3x3-s1", "dw-3x3-s2", "dw-generic"},
    "fully_connected": {"fc-quads", "fc-quads-rest-tail", "fc-rest-tail"},
    "add": {"add-rq"},
}


# the native paths every code path's cases must reach
NATIVE_HOST_PATHS = {
    "conv2d": {"conv-packed-rows-whole-pair-blocks", "conv-packed-rows-tail-c-tail",
               "conv-runtime-rows-whole", "conv-runtime-rows-tail-c-tail-pair-blocks",
               "conv-packed-rows-tail"},
    "depthwise_conv2d": {"dw-packed", "dw-packed-tail", "dw-runtime", "dw-runtime-tail",
                         "dw-packed-flat", "dw-runtime-flat"},
    "fully_connected": {"fc-direct", "conv-packed-rows-tail-c-tail"},
    "add": {"add"},
    "avg_pool2d": {"avg_pool2d"},
}


def _backend_cases(backend: str, op_type: str):
    if backend in NATIVE_FORMS:
        return native_cases.iter_cases(op_type, N_CASES)
    if backend == "ref":
        return ((g, f, None) for g, f in iter_cases(op_type, N_CASES))
    if backend in FORMS:
        return arm_cases.iter_cases(op_type, N_CASES)
    return cmsis_cases.iter_cases(op_type, N_CASES)


def _record_and_path(backend: str, graph, batch):
    if backend in NATIVE_FORMS:
        rec = native_or_ref(graph, graph.ops[0], batch)
        return ((rec, native_cases.path(graph, batch)) if rec.backend == "native"
                else (None, None))
    if backend in FORMS:
        rec = arm_record(graph, graph.ops[0], batch, form=backend)
        return rec, (arm_cases.path(graph, batch) if rec is not None else None)
    rec = cmsis_record(graph, graph.ops[0], batch)
    return rec, (cmsis_cases.path(graph, batch, Target()) if rec is not None else None)


@pytest.mark.parametrize(("backend", "op_type"), BACKEND_OPS,
                         ids=[f"{b}-{op}" for b, op in BACKEND_OPS])
def test_op_matches_golden(kernels: RefKernels, backend: str, op_type: str) -> None:
    """Every case the backend accepts equals the golden model; CMSIS-NN and arm decline a
    minority (ref takes those) and reach each of their kernel paths."""
    bad_cases, values, first, declined, paths = 0, 0, None, 0, set()
    for i, (graph, feeds, batch) in enumerate(_backend_cases(backend, op_type)):
        if batch is not None:
            rec, where = _record_and_path(backend, graph, batch)
            if rec is None:
                declined += 1
                continue
            paths.add(where)
        bad, n = check_case(kernels, graph, feeds)
        values += n
        if bad:
            bad_cases += 1
            first = first or (i, graph.ops[0].attrs, {t: graph.tensors[t].shape
                                                      for t in graph.ops[0].inputs if t})
    assert bad_cases == 0, (f"{backend} {op_type}: {bad_cases} of {N_CASES - declined} cases "
                            f"differ from the golden model ({values} values compared); "
                            f"first: {first}")
    assert declined < N_CASES // 2, f"{backend} declined {declined} of {N_CASES} {op_type}"
    want = ARM_HOST_PATHS if backend in FORMS else \
        NATIVE_HOST_PATHS if backend in NATIVE_FORMS else CMSIS_HOST_PATHS
    assert want.get(op_type, set()) <= paths or backend == "ref", want.get(op_type, set()) - paths


def test_cases_cover_the_parameter_space() -> None:
    """The cases test_op_matches_golden runs reach what the kernels must be general in."""
    seen: dict[str, set] = {k: set() for k in ("stride", "dilation", "mult", "act", "groups",
                                               "kernel", "pad", "odd_c", "per_tensor", "float",
                                               "batch")}
    for op_type in ("conv2d", "depthwise_conv2d"):
        for g, feeds in iter_cases(op_type, N_CASES):
            op = g.ops[0]
            seen["float"].add(g.tensors[op.inputs[0]].dtype)
            seen["batch"].add(feeds[op.inputs[0]].shape[0])
            w, x = g.tensors[op.inputs[1]], g.tensors[op.inputs[0]]
            seen["stride"].update(op.attrs["stride"])
            seen["dilation"].update(op.attrs["dilation"])
            seen["act"].add(op.attrs["activation"])
            seen["kernel"].update(w.shape[1:3])
            top, bottom, left, right = op.attrs["padding"]
            seen["pad"].add("asym" if (top, left) != (bottom, right) else
                            "none" if top == left == 0 else "sym")
            seen["odd_c"].add(x.shape[3] % 2)
            if w.quant is not None:
                seen["per_tensor"].add(w.quant.scale.size == 1)
            if op_type == "depthwise_conv2d":
                seen["mult"].add(op.attrs["depth_multiplier"])
            else:
                seen["groups"].add(x.shape[3] // w.shape[3])
    assert {1, 2, 3} <= seen["stride"] and {1, 2} <= seen["dilation"]
    assert {1, 2, 3} <= seen["mult"] and {1, 2, 3} <= seen["groups"]
    assert set(seen["act"]) == {"none", "relu", "relu6", "relu_n1_to_1"}
    assert {1, 2, 3, 4} <= seen["kernel"] and seen["pad"] == {"asym", "none", "sym"}
    assert seen["odd_c"] == {0, 1} and seen["per_tensor"] == {True, False}
    assert seen["float"] == {"int8", "float32"} and seen["batch"] == {1, 2}


def test_quantize_edge_values(ref_lib: RefKernels) -> None:
    """Exact ties (round half away from zero), saturation, infinities and NaN."""
    q = QuantParams(np.float32(0.25), 3)
    special = [0.125, -0.125, 0.375, -0.375, 1e30, -1e30, np.inf, -np.inf, np.nan, 0.0, -0.0,
               31.875, -32.125, 3e9, -3e9, 1e-40]
    v = np.array(special + list(np.arange(-40, 40) * 0.125), np.float32)
    x = Tensor("x", (1, v.size), "float32", Role.ACTIVATION)
    g = single_op_graph("quantize", [x], Tensor("y", (1, v.size), "int8", Role.ACTIVATION, q),
                        {})
    with np.errstate(invalid="ignore"):
        want = golden.run(g, v[None])[0]
    got = ref_lib.run_graph(g, {"x": v[None]})[0]
    assert np.array_equal(got, want), (got, want)


# -- whole models --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["ref", "cmsis-nn", *FORMS, *NATIVE_FORMS])
@pytest.mark.parametrize("name", INT8_MODELS)
def test_model_op_by_op_matches_golden(kernels: RefKernels, name: str, backend: str) -> None:
    graph = load_model(_model_path(name))
    t = graph.tensors[graph.inputs[0]]
    x = np.random.default_rng(11).integers(-128, 128, size=(N_MODEL_INPUTS,) + t.shape[1:],
                                           dtype=np.int8)
    want = golden.execute(graph, {graph.inputs[0]: x}, keep_all=True)
    env = {graph.inputs[0]: x}
    for i, op in enumerate(graph.ops):
        env[op.outputs[0]] = kernels.run_op(graph, i, env, N_MODEL_INPUTS)
        bad = mismatches(op.type, env[op.outputs[0]], want[op.outputs[0]])
        assert bad == 0, f"{name}: op {i} {op.name!r} ({op.type}): {bad} values differ"
    out = env[graph.outputs[0]]
    assert np.array_equal(out, golden.run(graph, x)[0])
    assert len(np.unique(out)) > 2          # not a comparison of saturated outputs


# -- requantization and fixed-point primitives ----------------------------------------------------
@pytest.fixture(scope="session")
def primitives(build_root: Path) -> ctypes.CDLL:
    out = build_root / "primitives"
    out.mkdir()
    harness = Path(__file__).with_name("primitives_harness.c")
    lib = out / "libprimitives.so"
    flags = sanitizer_flags("gcc", "undefined", out)
    subprocess.run(["gcc", *STRICT_FLAGS, "-O2", "-fPIC", "-shared", *flags, *INCLUDES,
                    str(harness), "-o", str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def _c(lib: ctypes.CDLL, fn: str, *arrays: np.ndarray, outputs: int = 1) -> list[np.ndarray]:
    n = arrays[0].size
    ins = [np.ascontiguousarray(a, dtype=a.dtype) for a in arrays]
    outs = [np.zeros(n, np.int32) for _ in range(outputs)]
    getattr(lib, fn)(ctypes.c_int32(n), *[a.ctypes.data_as(ctypes.c_void_p) for a in ins + outs])
    return [o.astype(np.int64) for o in outs]


def _int32_samples(rng: np.random.Generator, n: int) -> np.ndarray:
    edges = np.array([nx.INT32_MIN, nx.INT32_MIN + 1, -1, 0, 1, nx.INT32_MAX - 1, nx.INT32_MAX,
                      1 << 30, -(1 << 30), 12345, -12345], dtype=np.int64)
    wide = rng.integers(nx.INT32_MIN, nx.INT32_MAX, size=n // 2, endpoint=True)
    small = rng.integers(-(1 << 20), 1 << 20, size=n - n // 2 - edges.size)
    return np.concatenate([edges, wide, small]).astype(np.int32)


def test_requant_primitives_match_golden(primitives: ctypes.CDLL) -> None:
    rng = np.random.default_rng(3)
    n = 400_000
    a, b = _int32_samples(rng, n), rng.permutation(_int32_samples(rng, n))
    got, = _c(primitives, "t_srdhm", a, b)
    assert np.array_equal(got, nx.sat_rounding_doubling_high_mul(a, b))
    e = rng.integers(0, 36, size=n).astype(np.int32)
    got, = _c(primitives, "t_rdbpot", a, e)
    assert np.array_equal(got, nx.rounding_divide_by_pot(a, e))
    # Multipliers and shifts as quantize_multiplier makes them, over scale ratios 2^-40..2^8.
    ms = [nx.quantize_multiplier(float(d)) for d in 2.0 ** rng.uniform(-40, 8, size=4000)]
    idx = rng.integers(0, len(ms), size=n)
    m = np.array([ms[i][0] for i in idx], np.int32)
    s = np.array([ms[i][1] for i in idx], np.int32)
    got, = _c(primitives, "t_mbqm", a, m, s)
    assert np.array_equal(got, nx.multiply_by_quantized_multiplier(a, m, s))
    ls = rng.integers(0, 31, size=n).astype(np.int32)
    got, = _c(primitives, "t_mbqm_gt_one", a, m, ls)
    want = np.array([nx.multiply_by_quantized_multiplier_greater_than_one(int(x), int(mm), int(ll))
                     for x, mm, ll in zip(a[:2000], m[:2000], ls[:2000])])
    assert np.array_equal(got[:2000], want)


def test_fixedpoint_primitives_match_golden(primitives: ctypes.CDLL) -> None:
    rng = np.random.default_rng(4)
    neg = np.concatenate([[0, -1, nx.INT32_MIN, -(1 << 26), -(1 << 24)],
                          rng.integers(nx.INT32_MIN, 0, size=200_000),
                          -rng.integers(0, 1 << 27, size=100_000)]).astype(np.int32)
    got, = _c(primitives, "t_exp_q5_26", neg)
    assert np.array_equal(got, nx.exp_on_negative_values(neg, 5))
    pos = np.concatenate([[1, 2, 1 << 19, nx.INT32_MAX],
                          rng.integers(1, nx.INT32_MAX, size=100_000, endpoint=True),
                          rng.integers(1 << 19, 1 << 31, size=100_000)]).astype(np.int32)
    got, bits = _c(primitives, "t_reciprocal", pos, outputs=2)
    want, want_bits = nx.get_reciprocal(pos, 12)
    assert np.array_equal(got, want) and np.array_equal(bits, want_bits)
    u = np.concatenate([[0, 1, 0xFFFFFFFF], rng.integers(0, 1 << 32, size=50_000)]).astype(np.uint32)
    got, = _c(primitives, "t_clz", u)
    assert np.array_equal(got, nx.count_leading_zeros_u32(u.astype(np.int64)))


# -- the interface: structs, prototypes, records --------------------------------------------------
def _prototypes() -> dict[str, list[tuple[str, str]]]:
    """Kernel prototypes of pe_kernels.h: name -> [(parameter C type, name)]."""
    text = (KERNELS_DIR / "pe_kernels.h").read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    protos = {}
    for name, params in re.findall(r"void\s+(pe_\w+)\s*\(([^)]*)\)\s*;", text):
        out = []
        for p in params.split(","):
            m = re.match(r"(.*?)(\w+)$", " ".join(p.split()))
            assert m, p
            out.append((m.group(1).replace(" ", ""), m.group(2)))
        protos[name] = out
    return protos


def _all_calls() -> list[KernelCall]:
    calls = []
    for build in CASES.values():
        rng = np.random.default_rng(5)
        for _ in range(60):
            graph, batch = build(rng)
            calls.append(kernel_call(graph, graph.ops[0], batch))
    for name in INT8_MODELS:
        path = next((b / name for b in (Path("/work/shared/models"), ROOT.parent / "shared"
                                        / "models") if (b / name).is_file()), None)
        if path is not None:
            calls.extend(kernel_calls(load_model(path)))
    return calls


def test_records_match_header_prototypes() -> None:
    protos = _prototypes()
    assert len(protos) >= 30
    used = set()
    for call in _all_calls():
        assert call.kernel in protos, f"{call.kernel} is not declared in pe_kernels.h"
        want = protos[call.kernel]
        got = [(arg.ctype.replace(" ", ""), name) for name, arg in call.args]
        assert got == want, f"{call.kernel}: record {got} != header {want}"
        used.add(call.kernel)
    # every declared forward kernel is reachable from some IR op
    assert used == set(protos), f"never called: {sorted(set(protos) - used)}"


def test_struct_layouts_match_header(build_root: Path) -> None:
    """ctypes mirrors built from codegen.backends.STRUCTS == the C structs, field by field."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "pe_kernels.h"',
             "int main(void) {"]
    for name, fields in STRUCTS.items():
        lines.append(f'  printf("{name} %u\\n", (unsigned)sizeof({name}));')
        for fname, _ in fields:
            lines.append(f'  printf("{name}.{fname} %u\\n", (unsigned)offsetof({name}, {fname}));')
    lines += ["  return 0;", "}"]
    src = build_root / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = build_root / "layout"
    subprocess.run(["gcc", *STRICT_FLAGS, *INCLUDES, str(src), "-o", str(exe)], check=True)
    c_layout = dict(line.split() for line in subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.splitlines())
    for name, fields in STRUCTS.items():
        cls = struct_type(name)
        assert int(c_layout[name]) == ctypes.sizeof(cls), name
        for fname, _ in fields:
            assert int(c_layout[f"{name}.{fname}"]) == getattr(cls, fname).offset, (name, fname)


def test_record_contents_for_a_conv() -> None:
    """The record carries precomputed numbers only: offsets, top/left pad, Q31 multipliers."""
    rng = np.random.default_rng(9)
    graph, _ = CASES["conv2d"](rng)
    while graph.tensors["x"].dtype != "int8" or graph.tensors["w"].quant.scale.size == 1:
        graph, _ = CASES["conv2d"](rng)
    op = graph.ops[0]
    call = kernel_call(graph, op)
    assert call.kernel == "pe_conv2d_s8" and call.op == "op" and call.scratch_bytes == 0
    params = call.arg("params").value.values
    assert params["input_offset"] == -graph.tensors["x"].quant.zp
    assert params["output_offset"] == graph.tensors["y"].quant.zp
    top, _, left, _ = op.attrs["padding"]
    assert (params["padding"].values["h"], params["padding"].values["w"]) == (top, left)
    arrays = dict(call.const_arrays())
    assert set(arrays) == {"quant_multiplier", "quant_shift"}
    w = graph.tensors["w"]
    real = (np.float64(graph.tensors["x"].quant.s) * w.quant.scale.astype(np.float64)
            / np.float64(graph.tensors["y"].quant.s))
    m, s = nx.quantize_multipliers(real)
    assert arrays["quant_multiplier"].values.dtype == np.int32
    assert np.array_equal(arrays["quant_multiplier"].values, m)
    assert np.array_equal(arrays["quant_shift"].values, s)
    assert call.tensors() == ("x", "w", "b", "y") or call.tensors() == ("x", "w", "y")


def test_unsupported_ops_raise_model_error() -> None:
    q = QuantParams(np.float32(0.05), 0)
    x = Tensor("x", (1, 4), "int16", Role.ACTIVATION, q)
    g = single_op_graph("relu", [x], Tensor("y", (1, 4), "int16", Role.ACTIVATION, q), {})
    with pytest.raises(ModelError, match="no ref kernel"):
        kernel_call(g, g.ops[0])
    a = Tensor("x0", (1, 2, 1, 2, 1, 2), "int8", Role.ACTIVATION, q)
    b = Tensor("x1", (1, 1, 2, 1, 2, 1), "int8", Role.ACTIVATION, q)
    y = Tensor("y", (1, 2, 2, 2, 2, 2), "int8", Role.ACTIVATION, q)
    g = single_op_graph("add", [a, b], y, {"activation": "none"})
    with pytest.raises(ModelError, match="more than 4 dimensions"):
        kernel_call(g, g.ops[0])
    empty = Graph()
    from codegen.ir import Op
    with pytest.raises(ModelError, match="no portable C kernel"):
        kernel_call(empty, Op("bias_grad", "g", ("dy",), ("db",), {"forward": "f",
                                                                  "mode": "fp32"}))


# -- other compilers and sanitizers ---------------------------------------------------------------
def test_clang_builds_and_matches(build_root: Path) -> None:
    if not have("clang"):
        pytest.skip("clang is not installed")
    out = build_root / "clang"
    out.mkdir()
    lib = RefKernels(build_library("clang", out, ["-O2", "-Wconversion", "-Wshadow"]))
    for op_type in CASES:
        for graph, feeds in iter_cases(op_type, 40, seed=77):
            assert check_case(lib, graph, feeds)[0] == 0, op_type


CROSS_TARGETS = {
    "cortex-m4f": ("arm-none-eabi-gcc", "arm-none-eabi-nm", "__aeabi_",
                   ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]),
    "cortex-m0-freestanding": ("arm-none-eabi-gcc", "arm-none-eabi-nm", "__aeabi_",
                               ["-mcpu=cortex-m0", "-mthumb", "-ffreestanding"]),
    "hexagon-v67-freestanding": ("clang", "llvm-nm", "__hexagon_",
                                 ["--target=hexagon", "-mv67", "-ffreestanding",
                                  "-nostdlibinc"]),
}


@pytest.mark.parametrize("target", sorted(CROSS_TARGETS))
def test_cross_compiles_without_libc(build_root: Path, target: str) -> None:
    """The kernels build for Cortex-M (gcc) and Hexagon (clang, no C library headers) and
    reference nothing but the compiler's runtime helpers: no libc, no libm, no malloc."""
    cc, nm_tool, helper_prefix, flags = CROSS_TARGETS[target]
    if not have(cc) or not have(nm_tool):
        pytest.skip(f"{cc} or {nm_tool} is not installed")
    out = build_root / f"cross_{target}"
    try:
        objs = compile_objects(cc, out, ["-O2", "-Wconversion", *flags])
    except RuntimeError as e:
        if "hexagon" in target and "unknown target" in str(e).lower():
            pytest.skip(f"{cc} has no Hexagon target")
        raise
    nm = subprocess.run([nm_tool, *map(str, objs)], check=True, capture_output=True,
                        text=True).stdout
    symbols = [line.split() for line in nm.splitlines() if len(line.split()) >= 2]
    defined = {s[-1] for s in symbols if s[-2] != "U"}
    undefined = {s[-1] for s in symbols if s[-2] == "U"} - defined
    assert {u for u in undefined if not u.startswith(helper_prefix)} == set(), undefined
    if target == "cortex-m0-freestanding":
        # No FPU: float arithmetic would show as soft-float calls. int8 kernels do none.
        for obj in objs:
            if obj.stem.endswith("_s8"):
                nm = subprocess.run([nm_tool, "-u", str(obj)], check=True, capture_output=True,
                                    text=True).stdout
                floats = re.findall(r"__aeabi_(?:[fd]\w+|\w*2[fd]\b)", nm)
                assert not floats, f"{obj.name} uses float arithmetic: {floats}"


def test_asan_ubsan_subprocess(build_root: Path) -> None:
    """The cases and two models under AddressSanitizer + UBSan (out-of-bounds reads/writes of
    the NumPy buffers would abort)."""
    if not have("gcc"):
        pytest.skip("gcc is not installed")
    out = build_root / "gcc_asan"
    out.mkdir()
    flags = sanitizer_flags("gcc", "address,undefined", out)
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], check=False,
                             capture_output=True,
                             text=True).stdout.strip()
    if not flags or not os.path.isabs(libasan):
        pytest.skip("gcc cannot build AddressSanitizer shared objects here")
    lib = build_library("gcc", out, ["-O1", *flags])
    models = []
    for name in ("kws_ref_model.tflite", "pretrainedResnet_quant.tflite"):
        for base in (Path("/work/shared/models"), ROOT.parent / "shared" / "models"):
            if (base / name).is_file():
                models.append(str(base / name))
                break
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "tests.kernels.asan_check", str(lib), "60",
                           *models], check=False, env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "MISMATCH" not in proc.stdout
