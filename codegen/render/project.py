"""Render a lowered program into the files of a standalone C project (in memory).

``render_project(lowered, source, prefix=...)`` returns ``{relative path: bytes}``: the
generated sources (``<p>_model.h/.c``, ``<p>_weights.h/.c``), the host harness
(``main_host.c``), ``Makefile`` and ``CMakeLists.txt``, the kernel runtime copied from
``data_dir('runtime_c')`` (so the project builds on its own), ``model.tflite`` (the int8 graph
the code comes from, for ``pull`` without ``--model``: ``codegen/model_store.py``) and
``pockengine.json``, the manifest that marks the directory as pockengine output. Same input,
same bytes.

A device project has the device harness (``main_device.c``, ``<p>_data.c``: ``make``) instead
of the host one and, for a board with a ``uart`` section, the serial harness too
(``main_serial.c``, ``runtime/serial/``, the UART driver: ``make serial``; ``serial_harness``).

Every project also exports the model as a library for a build of one's own (host and board
projects alike): ``pockengine.cmake`` (the CMake target ``<p>_model``; a board project's
``CMakeLists.txt`` is only that library) and ``model.mk`` (Makefile variables
``<P>_MODEL_SRCS``, ``_INCLUDES``, ``_CFLAGS``, ...): the model and the kernels it calls,
never the harness, startup code, board runtime or linker script.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..backends import BACKENDS, KernelCall
from ..backends.sources import source_index
from ..board import Board
from ..data import TensorSpec
from ..errors import PockError
from ..model_store import MODEL_FILE, model_file
from ..partial import export_name
from ..resources import data_dir
from .device import FIRMWARE_SUFFIX, DeviceData, board_files, data_files, data_records
from .environment import render
from .names import check_identifiers, check_prefix
from .records import Lowered, RecordBuilder, SourceInfo, op_phase
from .serial_harness import MAIN_SERIAL, harness_files, has_serial
from .serial_harness import make_records as serial_make_records
from .serial_harness import runtime_files as serial_runtime_files

GENERATOR = f"pockengine {__version__}"
MANIFEST = "pockengine.json"
KERNEL_DIR = "kernels"
BOARD_DIR = "board"        # a board file of the user's own, copied into the project
# Flags every generated project is built with (the contract; -Wvla: no VLAs).
C_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla",
           "-ffp-contract=off")
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g",
                  "-fno-omit-frame-pointer")
# The library export (pockengine.cmake, model.mk): what the model's sources need in any build
# (C99; no contracted multiply-adds, or float training is not bit-exact), the warnings they are
# clean of (C_FLAGS: with -Werror), and the language level of third-party sources.
LIBRARY_REQUIRED_FLAGS = ("-std=c99", "-ffp-contract=off")
LIBRARY_WARNINGS = ("-Wall", "-Wextra", "-pedantic", "-Wvla")
THIRD_PARTY_FLAGS = ("-std=gnu99", "-ffp-contract=off")
LIBRARY_FILES = ("pockengine.cmake", "model.mk")


@dataclass(frozen=True)
class RenderedProject:
    files: dict[str, bytes]
    manifest: dict[str, Any]
    identifiers: tuple[str, ...]


def runtime_files(calls: Iterable[KernelCall] | None = None) -> dict[str, bytes]:
    """The kernels the calls need (every kernel without ``calls``) and all kernel headers, as
    project-relative paths: the closure of the called functions over runtime_c/kernels."""
    root = data_dir("runtime_c") / "kernels"
    index = source_index(root)
    if calls is None:
        needed = sorted(root.rglob("*.c"))
    else:
        kernels = sorted({k for c in calls for k in c.callees()})
        missing = index.missing(kernels)
        if missing:
            raise ValueError(f"kernels {missing} are defined nowhere in {root}")
        needed = index.closure(kernels)
    headers = sorted(root.rglob("*.h"))
    out: dict[str, bytes] = {}
    for path in headers + needed:
        out[f"{KERNEL_DIR}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    return out


def third_party_sources(calls: Iterable[KernelCall], runtime: Mapping[str, bytes]
                        ) -> list[dict[str, Any]]:
    """For each third-party library the chosen kernels use: its make variable, the checkout
    (the default the Makefile falls back to), include dirs and the sources the project's
    kernel files need from it (relative to the checkout), for the Makefile and CMake file."""
    out = []
    used = {c.backend for c in calls}
    for name in sorted(used):
        tp = BACKENDS[name].third_party if name in BACKENDS else None
        if tp is None:
            continue
        root = tp.root()
        if root is None:
            raise PockError(f"backend {name}: " + tp.missing_reason())
        idents: set[str] = set()
        for path, text in runtime.items():
            if path.startswith(f"{KERNEL_DIR}/{BACKENDS[name].kernel_dir}/"):
                idents |= set(re.findall(r"\b[A-Za-z_]\w*\b", text.decode("utf-8", "replace")))
        files: set[Path] = set()
        for d in tp.source_dirs:
            files.update(source_index(root / d).closure(sorted(idents)))
        out.append({"var": tp.make_var, "name": tp.name, "root": str(root), "env": tp.env,
                    "include_dirs": list(tp.include_dirs),
                    "sources": sorted(f.relative_to(root).as_posix() for f in files)})
    return out


def runtime_identifiers(files: dict[str, bytes]) -> set[str]:
    """Identifiers the kernel runtime's code defines or uses, comments and strings left out
    (a generated name must not be one)."""
    names: set[str] = set()
    for text in files.values():
        code = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", " ",
                      text.decode("utf-8", "replace"), flags=re.DOTALL)
        names.update(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", code))
    return names


def render_project(lowered: Lowered, source: SourceInfo, *, prefix: str = "pe",
                   board: Board | None = None, data: DeviceData | None = None,
                   board_file: bytes | None = None,
                   stack_measured: int | None = None) -> RenderedProject:
    """The project's files. ``board``: a device board (None or an ``arch: host`` board: the
    host harness); a device project embeds ``data`` (default: none, the firmware then only
    initialises and reports) and carries the board's runtime, linker script and Makefile.
    ``board_file``: the bytes of the board's YAML file when it is not the catalogue's (a
    board file of the user's own): copied to ``board/<name>.yaml`` and recorded in the
    manifest (``board_file``), so that ``build`` and ``sim`` find the board without it.
    ``stack_measured``: the stack high-water mark the board's ``stack`` was sized from
    (``compile --stack auto``), recorded as the manifest's ``device.stack_measured_bytes``."""
    check_prefix(prefix)
    device = board is not None and board.arch != "host"
    builder = RecordBuilder(lowered, prefix)
    ctx = builder.build(source, GENERATOR)
    calls = lowered.all_calls()
    runtime = runtime_files(calls)
    third_party = third_party_sources(calls, runtime)
    identifiers = list(builder.identifiers)
    model_sources = [f"{prefix}_model.c", f"{prefix}_weights.c"]
    kernel_sources = sorted(p for p in runtime if p.endswith(".c"))
    kernel_dirs = sorted({str(Path(p).parent) for p in runtime} - {KERNEL_DIR})
    build_ctx = {
        "binary": f"{prefix}_host", "cflags": list(C_FLAGS),
        "sanitize_flags": list(SANITIZE_FLAGS),
        "include_dirs": [".", KERNEL_DIR, *kernel_dirs], "third_party": third_party,
        "model_sources": model_sources, "kernel_sources": kernel_sources,
        "host_sources": ["main_host.c"],
        "cmake_warnings": [f for f in C_FLAGS if f != "-std=c99"],
        "lib_include_dirs": [".", KERNEL_DIR, *kernel_dirs],
        "lib_required": list(LIBRARY_REQUIRED_FLAGS), "lib_warnings": list(LIBRARY_WARNINGS),
        "lib_third_party": list(THIRD_PARTY_FLAGS),
        # CMake sets the language level as a target property (C_STANDARD)
        "lib_cmake_options": [f for f in LIBRARY_REQUIRED_FLAGS + LIBRARY_WARNINGS
                              if not f.startswith("-std=")],
        "lib_cmake_third_party": [f for f in THIRD_PARTY_FLAGS if not f.startswith("-std=")],
        "lib_board_cflags": [], "board_name": "host",
    }
    ctx.update(build_ctx)
    ctx["kernel_headers"] = sorted(Path(p).name for p in runtime
                                   if re.fullmatch(rf"{KERNEL_DIR}/pe_\w*kernels\.h", p))
    model_c = "model_train.c.j2" if ctx["train"] is not None else "model.c.j2"
    text = {
        f"{prefix}_model.h": render("model.h.j2", **ctx),
        f"{prefix}_model.c": render(model_c, **ctx),
        f"{prefix}_weights.h": render("weights.h.j2", **ctx),
        f"{prefix}_weights.c": render("weights.c.j2", **ctx),
    }
    files: dict[str, bytes] = {}
    foreign = dict(runtime)
    serial_runtime: dict[str, bytes] = {}
    device_info = None
    if device:
        assert board is not None
        if data is None:
            data = DeviceData.empty(tuple(lowered.infer.graph.tensors[
                lowered.infer.graph.inputs[0]].shape))
        bf = board_files(board, prefix)
        ctx.update({"binary": f"{prefix}{FIRMWARE_SUFFIX}", "board": bf.records,
                    "include_dirs": ctx["include_dirs"] + list(bf.include_dirs),
                    "device_sources": ["main_device.c", f"{prefix}_data.c"],
                    "lib_board_cflags": list(bf.records["cflags"]), "board_name": board.name,
                    "serial": None})
        if has_serial(board):
            # the third harness (serial_harness): main_serial.c is rendered below, once the
            # manifest it describes is complete; its runtime is known now
            serial_runtime = serial_runtime_files(board)
            ctx["serial"] = serial_make_records(board)
        _, data_idents = data_records(prefix, data, ctx["banner"])
        identifiers += data_idents
        text["main_device.c"] = render("main_device.c.j2", **ctx)
        text["Makefile"] = render("Makefile_board.j2", **ctx)
        text["CMakeLists.txt"] = render("CMakeLists_library.txt.j2", **ctx)
        files.update(data_files(prefix, data, ctx["banner"]))
        files.update(bf.files)
        foreign.update(bf.files)
        device_info = _device_manifest(board, data, ctx)
        if stack_measured is not None:     # compile --stack auto: what the stack was sized from
            device_info["stack_measured_bytes"] = int(stack_measured)
        if board_file is not None:
            files[board_file_path(board.name)] = board_file
    else:
        text["main_host.c"] = render("main_host.c.j2", **ctx)
        text["Makefile"] = render("Makefile.j2", **ctx)
        text["CMakeLists.txt"] = render("CMakeLists.txt.j2", **ctx)
    for name in LIBRARY_FILES:
        text[name] = render(f"{name}.j2", **ctx)
    check_identifiers(identifiers, runtime_identifiers(foreign),
                      serial=runtime_identifiers(serial_runtime))
    files.update({k: v.encode() for k, v in text.items()})
    files.update(runtime)
    # the graph the code comes from, for pull without --model (codegen/model_store.py)
    model_bytes, model_record = model_file(lowered.infer.graph)
    if model_bytes is not None:
        files[MODEL_FILE] = model_bytes
    # the serial harness: its file names go into the manifest, its main_serial.c describes
    # the manifest (DESCRIBE) and hashes the model files
    serial_names = [MAIN_SERIAL, *serial_runtime] if serial_runtime else []
    manifest = _manifest(lowered, source, prefix, ctx,
                         sorted(set(files) | set(serial_names)) + [MANIFEST])
    manifest["model_file"] = model_record
    if device_info is not None:
        manifest["device"] = device_info
        if board_file is not None:
            manifest["board_file"] = board_file_path(board.name)
    manifest_bytes = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    if serial_runtime:
        assert board is not None
        # from the manifest as a reader of the project sees it (what the serial stage would
        # render for the project on disk: the same bytes)
        serial = harness_files(json.loads(manifest_bytes), text, board, ctx["banner"])
        assert sorted(serial) == sorted(serial_names)
        files.update(serial)
    files[MANIFEST] = manifest_bytes
    return RenderedProject(files, manifest, tuple(identifiers))


def board_file_path(name: str) -> str:
    """Where a project keeps the copy of its own board file (the name is the file's stem, as
    ``board.load_board_file`` requires)."""
    return f"{BOARD_DIR}/{name}.yaml"


def _device_manifest(board: Board, data: DeviceData, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"arch": board.arch, "cpu": board.cpu, "emulator": board.emulator,
            "budget": {"sram_bytes": board.sram_budget, "flash_bytes": board.flash_budget},
            "stack_bytes": board.stack, "linker_script": ctx["board"]["linker_script"],
            "ops_binary": f"build-ops/{ctx['binary']}", "data": data.summary()}


def _cost(lg: Any, call: KernelCall) -> dict[str, Any]:
    """The chosen kernel's price and where it came from (measured | static), when the lowering
    compared candidates."""
    model = getattr(lg.lowering, "cost", None) if lg.lowering is not None else None
    if model is None or not hasattr(model, "source"):
        return {}
    op = lg.graph.op_by_name(call.op)
    price = model(op, call)
    return {"instructions": None if price is None else round(price),
            "cost_source": model.source(op, call)}


def _manifest(lowered: Lowered, source: SourceInfo, prefix: str, ctx: dict[str, Any],
              files: list[str]) -> dict[str, Any]:
    infer, train = lowered.infer, lowered.train
    tr = ctx["train"]
    training = None
    if train is not None and tr is not None:
        meta = train.graph.metadata["training"]
        ops = {op.name: op for op in train.graph.ops}
        training = {
            "loss": meta["loss"], "backward": meta["mode"],
            "optimizer": meta["optimizer"]["name"], "spec": source.spec,
            "num_classes": tr["label"]["classes"] if tr["label"] else 0,
            "target_bytes": tr["target"]["bytes"] if tr["target"] else 0,
            "target_shape": (list(train.graph.tensors[meta["loss_input"]].shape)
                             if tr["target"] else None),
            "parameters": [export_name(e) for e in meta["parameters"]],
            "export_bytes": ctx["params"]["export_bytes"],
            "arena_bytes": train.plan.arena_bytes,
            "lower_bound_bytes": train.plan.lower_bound_bytes,
            "steps": len(train.calls),
            "ops": [{"op": c.op, "kernel": c.kernel, "backend": c.backend,
                     "scratch_bytes": c.scratch_bytes, "phase": op_phase(ops[c.op]),
                     **_cost(train, c)} for c in train.calls],
        }
    return {
        "generator": "pockengine", "version": __version__, "prefix": prefix,
        "board": source.board, "backend": lowered.backend, "chain": list(lowered.chain),
        "third_party": [{k: t[k] for k in ("name", "var", "env", "sources")}
                        for t in ctx["third_party"]],
        "model": {"name": source.model_name, "sha256": source.model_sha256,
                  "calibration_sha256": source.calib_sha256},
        "input": {k: ctx["input"][k] for k in ("bytes", "shape", "zero_point")} | {
            "tensor": infer.graph.inputs[0],
            "scale": float(infer.graph.tensors[infer.graph.inputs[0]].quant.s)
            if infer.graph.tensors[infer.graph.inputs[0]].quant else 1.0,
            "dtype": infer.graph.tensors[infer.graph.inputs[0]].dtype,
            "nchw": TensorSpec.of(infer.graph).nchw},
        "output": {k: ctx["output"][k] for k in ("bytes", "shape", "zero_point")} | {
            "tensor": infer.graph.outputs[0],
            "scale": float(infer.graph.tensors[infer.graph.outputs[0]].quant.s)
            if infer.graph.tensors[infer.graph.outputs[0]].quant else 1.0,
            "dtype": infer.graph.tensors[infer.graph.outputs[0]].dtype, "nchw": False},
        "memory": {"arena_bytes": ctx["arena_bytes"], "params_bytes": ctx["params_bytes"],
                   "infer_arena_bytes": infer.plan.arena_bytes,
                   "infer_lower_bound_bytes": infer.plan.lower_bound_bytes,
                   "constant_bytes": ctx["constant_bytes"],
                   "param_image_bytes": ctx["image_bytes"],
                   "stream": {"infer": infer.stream,
                              "train": train.stream if train is not None else None}},
        "training": training,
        "kernels": ctx["kernels"],
        "ops": [{"op": c.op, "kernel": c.kernel, "backend": c.backend,
                 "scratch_bytes": c.scratch_bytes, **_cost(infer, c)} for c in infer.calls],
        "binary": f"build/{ctx['binary']}",
        "files": files,
    }
