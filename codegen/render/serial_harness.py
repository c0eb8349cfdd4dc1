"""The serial harness of a device project: ``main_serial.c`` and the serial runtime.

A device project has up to three harnesses around the same generated model: ``main_host.c``
(host projects), ``main_device.c`` (``make``: the firmware that trains on the data embedded
in flash) and, when its board has a ``uart`` section, ``main_serial.c`` (``make serial``: the
firmware that serves the pockengine serial protocol of runtime/serial on the board's UART and
trains on the samples a host streams, docs/serial-protocol.md). ``render_project`` renders it
with ``harness_files``, from what it has at render time: the manifest, the generated model
texts, the board record and the banner. The serial stage (``codegen.serial.firmware``)
builds and runs it, and renders it for projects compiled before it was part of the project.

- ``describe``: the DESCRIBE blob (what a host needs to fit data and pull parameters), from
  the manifest; ``max_body`` / ``transfer_bytes``: the frame and transfer buffer sizes;
- ``model_hash_of``: sha256 of ``<p>_model.h``, ``<p>_model.c`` and ``<p>_weights.c``: what
  identifies the model of a build for its checkpoints (INFO);
- ``runtime_files``: runtime/serial and the board's UART driver, copied into the project;
- ``make_records``: the sources and flags of the Makefile's ``serial`` target (build-serial/).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from ..board import Board
from ..errors import PockError
from ..resources import data_dir
from .board_build import UART_SOURCES
from .environment import render
from .names import comment_text

MAIN_SERIAL = "main_serial.c"
SERIAL_DIR = "runtime/serial"
UART_HEADER = "runtime/uart/pe_uart.h"
SERIAL_RUNTIME = ("pe_frame.h", "pe_frame.c", "pe_proto.h", "pe_proto.c", "pe_checkpoint.h",
                  "pe_checkpoint.c", "pe_storage.h", "pe_storage_semihosting.c",
                  "pe_storage_flash.c")
BUILD_DIR = "build-serial"
CHECKPOINT_FILE = "pe_checkpoint.bin"
MIN_MAX_BODY = 1024
MAX_FRAME_BODY = 1024
READY = "@pe:serial ready"
BOARD_NAME = re.compile(r"[A-Za-z0-9._+-]{1,32}")


def _manifest(source: Any) -> Mapping[str, Any]:
    """A manifest, or the manifest of a project (anything with ``.manifest``)."""
    return source.manifest if hasattr(source, "manifest") else source


def _rows(data: bytes, per_row: int = 16) -> list[str]:
    return [", ".join(f"0x{b:02x}" for b in data[i:i + per_row]) + ","
            for i in range(0, len(data), per_row)]


def board_problem(board: Board) -> str | None:
    """Why ``board`` cannot run the serial firmware (None: it can): it needs a device board
    with a ``uart`` section, and a name the firmware can embed in C (INFO)."""
    if board.arch == "host":
        return (f"compiled for {board.name}; the serial firmware needs a device board "
                "(compile with --board BOARD)")
    if board.uart is None:
        return (f"board {board.name} has no uart section: the serial protocol needs the "
                "board's UART")
    if not BOARD_NAME.fullmatch(board.name):
        return (f"board name {board.name!r}: the serial firmware embeds it in C (INFO) and "
                "needs 1 to 32 letters, digits, '.', '_', '+' or '-'")
    return None


def has_serial(board: Board | None) -> bool:
    """Whether a project for ``board`` gets the serial harness."""
    return board is not None and board_problem(board) is None


def model_files(prefix: str) -> tuple[str, str, str]:
    """The generated files whose bytes identify the model (``model_hash_of``)."""
    return f"{prefix}_model.h", f"{prefix}_model.c", f"{prefix}_weights.c"


def model_hash_of(prefix: str, texts: Mapping[str, str | bytes]) -> bytes:
    """What identifies a build's model for its checkpoints: sha256 of the generated model
    header, code and weights (``texts``: project-relative name -> contents)."""
    h = hashlib.sha256()
    for name in model_files(prefix):
        blob = texts[name]
        h.update(blob.encode() if isinstance(blob, str) else blob)
    return h.digest()


def model_hash(project: Any) -> bytes:
    """``model_hash_of`` a project on disk (anything with ``.dir`` and ``.prefix``)."""
    return model_hash_of(project.prefix, {name: (project.dir / name).read_bytes()
                                          for name in model_files(project.prefix)})


def describe(manifest: Any) -> dict[str, Any]:
    """The DESCRIBE blob: what the host needs to fit data and to pull parameters (from a
    manifest, or a project's)."""
    m = _manifest(manifest)
    tr = m.get("training")
    training = None
    if tr:
        training = {k: tr.get(k) for k in ("loss", "spec", "optimizer", "backward",
                                           "parameters", "num_classes", "target_bytes",
                                           "target_shape", "export_bytes")}
    return {"format": 1, "generator": f"{m.get('generator')} {m.get('version')}",
            "board": m.get("board"), "prefix": m.get("prefix"), "model": m.get("model"),
            "input": m.get("input"), "output": m.get("output"), "training": training}


def max_body(manifest: Any) -> int:
    """Frame bodies big enough for an INFER answer and an EVAL of one record's results, at
    least 256 bytes, and for a TRAIN with its sample and target up to 1 KiB: larger samples
    are staged in pieces (PUT/EXEC) in the transfer buffer instead of needing a frame."""
    m = _manifest(manifest)
    n_in, n_out = int(m["input"]["bytes"]), int(m["output"]["bytes"])
    target = int((m.get("training") or {}).get("target_bytes") or 0)
    need = max(MIN_MAX_BODY, 24 + n_out, min(MAX_FRAME_BODY, 16 + n_in + target))
    return (need + 15) // 16 * 16


def transfer_bytes(manifest: Any) -> int:
    """The transfer buffer: the parameter export (GET/SET_PARAMS) or the largest request that
    is staged (command byte + TRAIN with sample and target, EVAL of one record, INFER)."""
    m = _manifest(manifest)
    n_in, n_out = int(m["input"]["bytes"]), int(m["output"]["bytes"])
    target = int((m.get("training") or {}).get("target_bytes") or 0)
    export = int((m.get("training") or {}).get("export_bytes") or 0)
    return max(export, 1 + max(16 + n_in + target, 8 + n_in, 4 + n_in + n_out))


def runtime_files(board: Board) -> dict[str, bytes]:
    """The serial runtime, the board's UART driver and its header, project-relative."""
    root = data_dir("runtime_c")
    files = {f"{SERIAL_DIR}/{name}": (root / "runtime" / "serial" / name).read_bytes()
             for name in SERIAL_RUNTIME}
    assert board.uart is not None
    driver = UART_SOURCES[board.uart["type"]]
    files[driver] = (root / driver).read_bytes()
    files[UART_HEADER] = (root / UART_HEADER).read_bytes()
    return files


def file_names(board: Board) -> list[str]:
    """What the serial harness adds to a project (``harness_files``'s keys)."""
    return [MAIN_SERIAL, *runtime_files(board)]


def harness_files(manifest: Mapping[str, Any], texts: Mapping[str, str | bytes],
                  board: Board, banner: list[str]) -> dict[str, bytes]:
    """main_serial.c, the serial runtime and the UART driver, project-relative. ``manifest``:
    the project's (``describe``, sizes); ``texts``: the generated model files (``model_hash_of``);
    ``banner``: the project's banner lines."""
    problem = board_problem(board)
    if problem is not None:
        raise PockError(problem)
    p = str(manifest["prefix"])
    blob = json.dumps(describe(manifest), sort_keys=True, separators=(",", ":")).encode()
    state = int(manifest["memory"]["params_bytes"])
    slot = (64 + state + 255) // 256 * 256
    # names from the model file (tensors, the model's own name) end up in this comment:
    # comment_text makes any text inert there (no comment delimiters, no trigraphs)
    comment = comment_text(json.dumps(describe(manifest), sort_keys=True))
    serial = {
        "board": board.name, "max_body": max_body(manifest), "slot_bytes": slot,
        "xfer_bytes": transfer_bytes(manifest),
        "checkpoint_file": CHECKPOINT_FILE, "hash_rows": _rows(model_hash_of(p, texts)),
        "describe_rows": _rows(blob), "describe_bytes": len(blob),
        "describe_comment": [comment[i:i + 90] for i in range(0, len(comment), 90)],
    }
    files = {MAIN_SERIAL: render("main_serial.c.j2", p=p, P=p.upper(), banner=banner,
                                 serial=serial).encode()}
    files.update(runtime_files(board))
    return files


_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_CODE_NOISE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.DOTALL)


def code_identifiers(text: str) -> set[str]:
    """The identifiers of C code, comments and strings left out."""
    return set(_IDENT.findall(_CODE_NOISE.sub(" ", text)))


def generated_identifiers(prefix: str, texts: Mapping[str, str | bytes]) -> list[str]:
    """The prefixed identifiers in a project's generated model files (``texts``): what a
    project compiled before the serial harness was part of it is checked with."""
    p, P = prefix, prefix.upper()
    found: set[str] = set()
    for name in (f"{p}_model.h", f"{p}_model.c", f"{p}_weights.h", f"{p}_weights.c"):
        blob = texts[name]
        text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
        found |= {n for n in code_identifiers(text) if n.startswith((p + "_", P + "_"))}
    return sorted(found)


def make_records(board: Board) -> dict[str, Any]:
    """The ``serial`` target of a board Makefile (``Makefile_board.j2``): the project built
    in build-serial/ with ``DEVICE_SRCS`` = main_serial.c, the serial runtime and the UART
    driver (unless the console already links it) and ``CFLAGS`` = ``-Iruntime/serial`` and
    the UART's or quiet-console defines."""
    assert board.uart is not None
    sources = [MAIN_SERIAL] + [f"{SERIAL_DIR}/{n}" for n in SERIAL_RUNTIME if n.endswith(".c")]
    uart = board.uart
    if board.console_kind == "uart":
        # the console already links the UART driver (same peripheral): share it, and keep
        # the console quiet so that only frames cross the line; no semihosting on such a
        # board (a part without a debugger faults on it): no checkpoints unless the user
        # builds with PE_SERIAL_STORAGE_FLASH and a flash region
        defines = ["-DPE_SERIAL_QUIET=1", "-DPE_SERIAL_STORAGE_NONE=1"]
    else:
        sources.append(UART_SOURCES[uart["type"]])
        defines = [f"-DPE_UART_BASE=0x{uart['base']:08X}u"]
        for key, macro in (("clock_hz", "PE_UART_CLOCK_HZ"), ("tx_pin", "PE_UART_TX_PIN"),
                           ("rx_pin", "PE_UART_RX_PIN")):
            if key in uart:
                defines.append(f"-D{macro}={uart[key]}u")
    return {"sources": sources, "cflags": [f"-I{SERIAL_DIR}", *defines],
            "build_dir": BUILD_DIR, "trace_define": "-DPE_SERIAL_TRACE=1"}
