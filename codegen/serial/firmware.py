"""The serial firmware of a compiled device project, and running it under QEMU.

The serial harness is part of a device project (``codegen/render/serial_harness.py``): for a
board with a ``uart`` section, ``pockengine compile`` writes ``main_serial.c``
(templates/main_serial.c.j2: the protocol server of runtime/serial on the board's UART,
checkpoints through semihosting), the serial runtime and the board's UART driver, and the
project's Makefile builds them with ``make serial`` (the data-harness sources swapped for the
serial ones) into ``build-serial/<prefix>_firmware.elf``. Its pure pieces (``describe``,
``model_hash``, ``max_body``, ``transfer_bytes``, the constants) live there and are
re-exported here.

``build_serial_firmware`` runs ``make serial`` (a project compiled before the harness was
part of it gets its files rendered here with ``serial_files`` and the same make variables);
``start_serial_firmware`` runs it on the board's emulator with the UART on a TCP port
(``-serial tcp:HOST:PORT,server=on,wait=off``) and the checkpoint file in a working directory
that outlives the emulator, so killing and restarting QEMU is a power cut; ``sim_uart`` is
``pockengine sim DIR --uart tcp:HOST:PORT``.

Checkpoint storage under QEMU: the mps2 machines have no persistent flash (their "flash" is
RAM and QEMU 7.2 offers no pflash or -drive for them), so slots live in a host file through
Arm semihosting (SYS_OPEN / SYS_SEEK / SYS_WRITE / SYS_READ): QEMU performs them as host
file calls, unbuffered, so a SIGKILL loses nothing that was reported saved.
"""

from __future__ import annotations

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
from ..render.names import check_identifiers, make_assignment
from ..render.output import Project, open_project
from ..render.project import runtime_identifiers
from ..render.serial_harness import (  # noqa: F401  (re-exported)
    BOARD_NAME,
    BUILD_DIR,
    CHECKPOINT_FILE,
    MAIN_SERIAL,
    MAX_FRAME_BODY,
    MIN_MAX_BODY,
    READY,
    SERIAL_RUNTIME,
    board_problem,
    describe,
    file_names,
    generated_identifiers,
    harness_files,
    make_records,
    max_body,
    model_hash,
    transfer_bytes,
)
from ..targets import compiler, emulator_available, size_report, toolchain_available
from ..targets.build import first_error
from ..targets.emulator import qemu_arm_command
from ..toolchain.make import BuildError, find_make, run_make
from .transport import tcp_address

_BOARD_NAME = BOARD_NAME


def _board(project: Project) -> Any:
    board = project.board_record()
    if "device" not in project.manifest or board.arch == "host":
        raise PockError(f"{project.dir}: compiled for {project.board}; the serial firmware "
                        "needs a device board (compile with --board BOARD)")
    problem = board_problem(board)
    if problem is not None:
        raise PockError(problem)
    return board


def _generated_texts(project: Project) -> dict[str, bytes]:
    p = project.prefix
    return {name: (project.dir / name).read_bytes()
            for name in (f"{p}_model.h", f"{p}_model.c", f"{p}_weights.h", f"{p}_weights.c")}


def serial_files(project: Project) -> dict[str, bytes]:
    """main_serial.c, the serial runtime and the UART driver of a project on disk,
    project-relative: what ``pockengine compile`` writes into a device project (the same
    bytes), rendered from the project's manifest and model files."""
    board = _board(project)
    texts = _generated_texts(project)
    files = harness_files(project.manifest, texts, board, banner_of(project))
    _check_clashes(project, files, texts)
    return files


def _check_clashes(project: Project, files: dict[str, bytes],
                   texts: dict[str, bytes] | None = None) -> None:
    """No identifier of the generated model (its prefix) is also one of the serial runtime
    (what ``render_project`` checks when it renders the harness, for a project on disk)."""
    texts = texts if texts is not None else _generated_texts(project)
    runtime = {rel: blob for rel, blob in files.items() if rel.startswith("runtime/")}
    try:
        check_identifiers(generated_identifiers(project.prefix, texts),
                          serial=runtime_identifiers(runtime))
    except PockError as e:
        raise PockError(f"{project.dir}: {e}") from None


def _has_harness(project: Project) -> bool:
    """Whether ``pockengine compile`` wrote the serial harness into the project (its manifest
    lists main_serial.c, its Makefile has the ``serial`` target)."""
    listed = project.manifest.get("files")
    return isinstance(listed, list) and MAIN_SERIAL in listed


@dataclass(frozen=True)
class SerialFirmware:
    project: Project
    board: Any
    elf: Path
    sizes: dict[str, int] = field(default_factory=dict)


def build_serial_firmware(project: Project | str | Path, *, trace: bool = False
                          ) -> SerialFirmware:
    """Build the project's serial firmware with ``make serial`` (in build-serial/; with
    ``trace``, in build-serial-trace/ with ``PE_SERIAL_TRACE``: a console line for every
    sample applied, checkpoint saved and state restored). The project's serial files are used
    as written; a file of theirs that is missing is written again, and a project compiled
    before the harness was part of it gets them here (built with the same make variables
    as ``make serial``). The project's model (``model.tflite``) is copied into the local cache
    under the firmware's model hash, so that ``pull`` finds it without ``--model`` from
    anywhere (``codegen/model_store.py``)."""
    proj = project if isinstance(project, Project) else open_project(project)
    board = _board(proj)
    ok, why = toolchain_available(board)
    if not ok:
        raise BuildError(f"{proj.dir}: cannot build for {board.name}: {why}")
    make = find_make("to build the firmware")
    current = _has_harness(proj)
    if not current or not all((proj.dir / rel).is_file() for rel in file_names(board)):
        files = serial_files(proj)
        for rel, blob in files.items():
            path = proj.dir / rel
            if current and path.is_file():
                continue                       # the project's own, as written
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_bytes() != blob:
                path.write_bytes(blob)
    rec = make_records(board)
    build_dir = rec["build_dir"] + ("-trace" if trace else "")
    cc = make_assignment("CC", compiler(board))
    if current:
        args = [cc, "serial"] + (["SERIAL_TRACE=1"] if trace else [])
    else:
        # a Makefile without the serial target: the variables it would set
        cflags = rec["cflags"] + ([rec["trace_define"]] if trace else [])
        args = [cc, f"BUILD={build_dir}", f"DEVICE_SRCS={' '.join(rec['sources'])}",
                f"CFLAGS={' '.join(cflags)}"]
    out = proj.dir / build_dir
    status, log, _ = run_make(make, proj.dir, args, log_dir=out)
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
