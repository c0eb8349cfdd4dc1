"""The serial firmware of a compiled device project, and running it under QEMU.

``serial_files(project)`` renders ``main_serial.c`` (templates/main_serial.c.j2: the protocol
server of runtime/serial on the board's UART, checkpoints through semihosting) and adds the
serial runtime and the board's UART driver; ``build_serial_firmware`` writes them into the
project and builds ``build-serial/<prefix>_firmware.elf`` with the project's own Makefile (the
data-harness sources swapped for the serial ones). ``start_serial_firmware`` runs it on the
board's emulator with the UART on a TCP port (``-serial tcp:HOST:PORT,server=on,wait=off``)
and the checkpoint file in a working directory that outlives the emulator, so killing and
restarting QEMU is a power cut; ``sim_uart`` is ``pockengine sim DIR --uart tcp:HOST:PORT``.

Checkpoint storage under QEMU: the mps2 machines have no persistent flash (their "flash" is
RAM and QEMU 7.2 offers no pflash or -drive for them), so slots live in a host file through
Arm semihosting (SYS_OPEN / SYS_SEEK / SYS_WRITE / SYS_READ): QEMU performs them as host
file calls, unbuffered, so a SIGKILL loses nothing that was reported saved.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PockError
from ..model_store import cache_model
from ..render.embed import banner_of
from ..render.environment import render
from ..render.names import comment_text
from ..render.output import Project, open_project
from ..resources import data_dir
from ..targets import compiler, emulator_available, size_report, toolchain_available
from ..targets.build import UART_SOURCES, first_error
from ..targets.emulator import qemu_arm_command
from ..toolchain.make import BuildError, find_make, run_make
from .transport import tcp_address

SERIAL_RUNTIME = ("pe_frame.h", "pe_frame.c", "pe_proto.h", "pe_proto.c", "pe_checkpoint.h",
                  "pe_checkpoint.c", "pe_storage.h", "pe_storage_semihosting.c",
                  "pe_storage_flash.c")
BUILD_DIR = "build-serial"
CHECKPOINT_FILE = "pe_checkpoint.bin"
MIN_MAX_BODY = 1024
MAX_FRAME_BODY = 1024
READY = "@pe:serial ready"
_BOARD_NAME = re.compile(r"[A-Za-z0-9._+-]{1,32}")


def _rows(data: bytes, per_row: int = 16) -> list[str]:
    return [", ".join(f"0x{b:02x}" for b in data[i:i + per_row]) + ","
            for i in range(0, len(data), per_row)]


def model_hash(project: Project) -> bytes:
    """What identifies a build's model for its checkpoints: sha256 of the generated model
    header, code and weights."""
    h = hashlib.sha256()
    for name in (f"{project.prefix}_model.h", f"{project.prefix}_model.c",
                 f"{project.prefix}_weights.c"):
        h.update((project.dir / name).read_bytes())
    return h.digest()


def describe(project: Project) -> dict[str, Any]:
    """The DESCRIBE blob: what the host needs to fit data and to pull parameters."""
    m = project.manifest
    tr = m.get("training")
    training = None
    if tr:
        training = {k: tr.get(k) for k in ("loss", "spec", "optimizer", "backward",
                                           "parameters", "num_classes", "target_bytes",
                                           "target_shape", "export_bytes")}
    return {"format": 1, "generator": f"{m.get('generator')} {m.get('version')}",
            "board": m.get("board"), "prefix": m.get("prefix"), "model": m.get("model"),
            "input": m.get("input"), "output": m.get("output"), "training": training}


def max_body(project: Project) -> int:
    """Frame bodies big enough for an INFER answer and an EVAL of one record's results, at
    least 256 bytes, and for a TRAIN with its sample and target up to 1 KiB: larger samples
    are staged in pieces (PUT/EXEC) in the transfer buffer instead of needing a frame."""
    m = project.manifest
    n_in, n_out = int(m["input"]["bytes"]), int(m["output"]["bytes"])
    target = int((m.get("training") or {}).get("target_bytes") or 0)
    need = max(MIN_MAX_BODY, 24 + n_out, min(MAX_FRAME_BODY, 16 + n_in + target))
    return (need + 15) // 16 * 16


def transfer_bytes(project: Project) -> int:
    """The transfer buffer: the parameter export (GET/SET_PARAMS) or the largest request that
    is staged (command byte + TRAIN with sample and target, EVAL of one record, INFER)."""
    m = project.manifest
    n_in, n_out = int(m["input"]["bytes"]), int(m["output"]["bytes"])
    target = int((m.get("training") or {}).get("target_bytes") or 0)
    export = int((m.get("training") or {}).get("export_bytes") or 0)
    return max(export, 1 + max(16 + n_in + target, 8 + n_in, 4 + n_in + n_out))


def _board(project: Project) -> Any:
    board = project.board_record()
    if "device" not in project.manifest or board.arch == "host":
        raise PockError(f"{project.dir}: compiled for {project.board}; the serial firmware "
                        "needs a device board (compile with --board BOARD)")
    if board.uart is None:
        raise PockError(f"board {board.name} has no uart section: the serial protocol needs "
                        "the board's UART")
    if not _BOARD_NAME.fullmatch(board.name):
        raise PockError(f"board name {board.name!r}: the serial firmware embeds it in C (INFO) "
                        "and needs 1 to 32 letters, digits, '.', '_', '+' or '-'")
    return board


def serial_files(project: Project) -> dict[str, bytes]:
    """main_serial.c, the serial runtime and the UART driver, project-relative."""
    board = _board(project)
    m = project.manifest
    p = project.prefix
    blob = json.dumps(describe(project), sort_keys=True, separators=(",", ":")).encode()
    state = int(m["memory"]["params_bytes"])
    slot = (64 + state + 255) // 256 * 256
    # names from the model file (tensors, the model's own name) end up in this comment:
    # comment_text makes any text inert there (no comment delimiters, no trigraphs)
    comment = comment_text(json.dumps(describe(project), sort_keys=True))
    serial = {
        "board": board.name, "max_body": max_body(project), "slot_bytes": slot,
        "xfer_bytes": transfer_bytes(project),
        "checkpoint_file": CHECKPOINT_FILE, "hash_rows": _rows(model_hash(project)),
        "describe_rows": _rows(blob), "describe_bytes": len(blob),
        "describe_comment": [comment[i:i + 90] for i in range(0, len(comment), 90)],
    }
    files = {"main_serial.c": render("main_serial.c.j2", p=p, P=p.upper(),
                                     banner=banner_of(project), serial=serial).encode()}
    root = data_dir("runtime_c") / "runtime"
    for name in SERIAL_RUNTIME:
        files[f"runtime/serial/{name}"] = (root / "serial" / name).read_bytes()
    driver = UART_SOURCES[board.uart["type"]]
    files[driver] = (data_dir("runtime_c") / driver).read_bytes()
    files["runtime/uart/pe_uart.h"] = (root / "uart" / "pe_uart.h").read_bytes()
    _check_clashes(project, files)
    return files


def _check_clashes(project: Project, files: dict[str, bytes]) -> None:
    """No identifier of the generated model (its prefix) is also one of the serial runtime."""
    p, P = project.prefix, project.prefix.upper()
    ident = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
    strip = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.DOTALL)

    def names(text: str) -> set[str]:
        return set(ident.findall(strip.sub(" ", text)))

    generated = set()
    for name in (f"{p}_model.h", f"{p}_model.c", f"{p}_weights.h", f"{p}_weights.c"):
        generated |= {n for n in names((project.dir / name).read_text())
                      if n.startswith((p + "_", P + "_"))}
    runtime = set()
    for rel, blob in files.items():
        if rel.startswith("runtime/"):
            runtime |= names(blob.decode("utf-8", "replace"))
    clash = sorted(generated & runtime)
    if clash:
        raise PockError(f"{project.dir}: generated identifiers clash with the serial runtime: "
                        f"{', '.join(clash[:5])} (compile with another --prefix)")


@dataclass(frozen=True)
class SerialFirmware:
    project: Project
    board: Any
    elf: Path
    sizes: dict[str, int] = field(default_factory=dict)


def build_serial_firmware(project: Project | str | Path, *, trace: bool = False
                          ) -> SerialFirmware:
    """Write the serial sources into the project and build them with its Makefile (in
    build-serial/; with ``trace``, in build-serial-trace/ with ``PE_SERIAL_TRACE``: a console
    line for every sample applied, checkpoint saved and state restored). The project's model
    (``model.tflite``) is copied into the local cache under the firmware's model hash, so that
    ``pull`` finds it without ``--model`` from anywhere (``codegen/model_store.py``)."""
    proj = project if isinstance(project, Project) else open_project(project)
    board = _board(proj)
    ok, why = toolchain_available(board)
    if not ok:
        raise BuildError(f"{proj.dir}: cannot build for {board.name}: {why}")
    make = find_make("to build the firmware")
    files = serial_files(proj)
    for rel, blob in files.items():
        path = proj.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != blob:
            path.write_bytes(blob)
    sources = ["main_serial.c"] + [f"runtime/serial/{n}" for n in SERIAL_RUNTIME
                                   if n.endswith(".c")]
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
    build_dir = BUILD_DIR
    if trace:
        build_dir = BUILD_DIR + "-trace"
        defines.append("-DPE_SERIAL_TRACE=1")
    out = proj.dir / build_dir
    status, log, _ = run_make(make, proj.dir,
                              [f"CC={compiler(board)}", f"BUILD={build_dir}",
                               f"DEVICE_SRCS={' '.join(sources)}",
                               f"CFLAGS=-Iruntime/serial {' '.join(defines)}"], log_dir=out)
    if status != 0:
        raise BuildError(f"{proj.dir}: serial firmware build for {board.name} failed: "
                         f"{first_error(log)} (log: {out / 'build.log'})", log)
    elf = out / Path(proj.manifest["binary"]).name
    cache_model(proj, model_hash(proj))     # pull finds the model by the device's hash
    rep = size_report(elf)
    sizes = {"flash_bytes": rep.flash_bytes, "sram_bytes": rep.sram_total_bytes}
    if sizes["sram_bytes"] > board.sram_budget or sizes["flash_bytes"] > board.flash_budget:
        raise PockError(f"{elf.name} (serial): needs {sizes['sram_bytes'] / 1024:.1f} KiB SRAM "
                        f"and {sizes['flash_bytes'] / 1024:.1f} KiB flash, board {board.name} "
                        f"has {board.sram_budget // 1024} KiB and "
                        f"{board.flash_budget // 1024} KiB")
    return SerialFirmware(proj, board, elf, sizes)


# -- running under QEMU -------------------------------------------------------------------------
def qemu_serial_spec(uart: str) -> tuple[str, str, int]:
    """``tcp:HOST:PORT[,opts]`` or ``socket://HOST:PORT`` -> (QEMU -serial spec, host, port);
    a port outside 1..65535 is a one-line error."""
    host, port, opts = tcp_address(uart, "--uart")
    if opts and not re.fullmatch(r"(?:,[^,]+)+", opts):
        raise PockError(f"--uart {uart!r}: expected tcp:HOST:PORT[,OPTION=VALUE...] or "
                        "socket://HOST:PORT")
    have = {o.split("=")[0] for o in opts.split(",") if o}
    extra = [o for o in ("server=on", "wait=off", "nodelay=on") if o.split("=")[0] not in have]
    return f"tcp:{host}:{port}{opts}" + "".join("," + o for o in extra), host, port


@dataclass
class RunningFirmware:
    """A serial firmware under QEMU: ``url`` for pyserial, ``kill()`` is a power cut."""

    proc: subprocess.Popen
    host: str
    port: int
    log: Path
    work_dir: Path
    command: tuple[str, ...]

    @property
    def url(self) -> str:
        return f"socket://{self.host}:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.is_file() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def wait_ready(self, timeout: float = 30.0) -> str:
        """The firmware's ready line (it has restored its checkpoint and serves)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output()
            for line in text.splitlines():
                if line.startswith(READY):
                    return line
                if line.startswith(("@pe:error", "@pe:fault")):
                    raise PockError(f"serial firmware failed: {line}")
            if self.proc.poll() is not None:
                raise PockError(f"QEMU exited with status {self.proc.returncode} before the "
                                f"firmware was ready: {text.strip()[-300:]!r}")
            time.sleep(0.02)
        raise PockError(f"the serial firmware did not report ready within {timeout:g} s")


def start_serial_firmware(fw: SerialFirmware, uart: str, work_dir: str | Path, *,
                          ready_timeout: float = 30.0) -> RunningFirmware:
    """Run the firmware on its board's emulator (QEMU), UART on ``uart`` (tcp:HOST:PORT),
    with ``work_dir`` as the emulator's working directory (the checkpoint file's home)."""
    board = fw.board
    ok, why = emulator_available(board)
    if not ok:
        raise PockError(why)
    if board.emulator != "qemu-system-arm":
        raise PockError(f"board {board.name}: the serial firmware runs under QEMU here "
                        f"({board.emulator} is not supported for --uart)")
    spec, host, port = qemu_serial_spec(uart)
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    cmd = qemu_arm_command(board, fw.elf.resolve(), uart=spec, uart_console=False, plugin=None)
    log = work / "serial-console.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    run = RunningFirmware(proc, host, port, log, work, tuple(cmd))
    try:
        run.wait_ready(ready_timeout)
    except BaseException:
        run.kill()
        raise
    return run


def _terminate_as_interrupt() -> None:
    """SIGTERM ends ``sim --uart`` like Ctrl-C (so the emulator is stopped, not orphaned)."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def sim_uart(project: Project | str | Path, uart: str, *, timeout: float | None = None,
             work_dir: str | Path | None = None, log: Any = None) -> int:
    """``pockengine sim DIR --uart tcp:HOST:PORT``: build, start and serve until the emulator
    ends, ``timeout`` seconds pass or Ctrl-C. Checkpoints: ``work_dir`` (default the project)
    / pe_checkpoint.bin."""
    qemu_serial_spec(uart)              # a bad address fails before the build, not after
    fw = build_serial_firmware(project)
    work = Path(work_dir) if work_dir is not None else fw.project.dir
    run = start_serial_firmware(fw, uart, work)
    say = log or (lambda s: None)
    _terminate_as_interrupt()
    say(f"serving the pockengine serial protocol of {fw.elf.name} ({fw.board.name}) on "
        f"{run.url} (checkpoints: {work / CHECKPOINT_FILE}); Ctrl-C stops")
    try:
        run.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:
        run.kill()
    return 0
