"""Run a firmware image on its board's emulator and collect what it reports.

``run_on_emulator(board, elf, timeout)`` -> ``RunResult``:
  qemu-system-arm  -M <machine> -kernel elf, semihosting to stdout (or the UART to stdout for a
                   UART-console build), the instruction-count plugin loaded
  qemu-hexagon     elf, the plugin loaded (counts are packets)
  native           the host executable
  renode           .resc/.robot written next to the ELF; runs only where ``renode`` is on PATH,
                   otherwise ``EmulatorUnavailable`` (a PockError) says so and where the
                   scripts are
The firmware's own output is ``stdout``; the runtime's protocol lines (``@pe:exit <status>
stack=<bytes>``, ``@pe:fault ...``) are parsed into fields and kept out of it.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ..board import Board
from ..errors import PockError
from .elf import read_elf
from .profile import build_plugin, parse_counts, plugin_args
from .renode import run_renode, write_renode_scripts
from .result import RunResult, parse_output, wait_for_line  # noqa: F401  (re-exported)


class EmulatorUnavailable(PockError):
    """The board's emulator is not installed here (the message says what to install)."""


EMULATOR_BINARIES = {"qemu-system-arm": "qemu-system-arm", "qemu-hexagon": "qemu-hexagon",
                     "renode": "renode"}


def emulator_available(board: Board) -> tuple[bool, str]:
    """(True, '') or (False, the reason a run must be skipped)."""
    binary = EMULATOR_BINARIES.get(board.emulator)
    if binary is None:
        return True, ""
    if shutil.which(binary) is None:
        hint = {"renode": "install Renode (https://renode.io) to run this board",
                "qemu-system-arm": "install qemu-system-arm",
                "qemu-hexagon": "install qemu-user (it provides qemu-hexagon)"}[board.emulator]
        return False, f"{binary} is not on PATH ({hint})"
    return True, ""


def qemu_arm_command(board: Board, elf: Path, *, uart: str | None, uart_console: bool,
                     plugin: list[str] | None) -> list[str]:
    serial_index = (board.uart or {}).get("qemu_serial", 0)
    cmd = ["qemu-system-arm", "-M", board.run["machine"], "-display", "none",
           "-monitor", "none"]
    if "cpu" in board.run:
        cmd += ["-cpu", board.run["cpu"]]
    serial = "stdio" if uart_console else (uart or "null")
    cmd += ["-serial", "null"] * serial_index + ["-serial", serial]
    if uart_console:
        cmd += ["-semihosting-config", "enable=on,target=native"]
    else:
        cmd += ["-chardev", "stdio,id=pe_console",
                "-semihosting-config", "enable=on,target=native,chardev=pe_console"]
    if plugin:
        cmd += ["-plugin", ",".join(plugin)]
    cmd += list(board.run.get("args", ())) + ["-kernel", str(elf)]
    return cmd


def run_on_emulator(board: Board, elf: str | Path, timeout: float = 60.0,
                    uart: str | None = None, *, profile: bool = True,
                    work_dir: str | Path | None = None, console: str | None = None,
                    args: Sequence[str] = (),
                    on_line: Callable[[str], None] | None = None) -> RunResult:
    """Run ``elf`` on ``board``'s emulator for at most ``timeout`` seconds.

    ``uart``: where the board's serial peripheral goes (QEMU: a -serial spec such as
    ``tcp:127.0.0.1:4444,server=on,wait=off``; Renode: ``tcp:PORT``), for the serial protocol.
    ``profile``: count instructions (QEMU boards). ``console``: the console the image was built
    with when it differs from the board's (``'uart'``). ``args``: program arguments (host).
    ``work_dir``: where the plugin and its output go (default: next to the ELF).
    ``on_line``: called with every line the program prints as it prints it (progress), QEMU
    and host runs.
    """
    elf = Path(elf)
    if not elf.is_file():
        raise PockError(f"{elf}: no such firmware image")
    ok, why = emulator_available(board)
    if not ok:
        if board.emulator == "renode":
            resc, robot = write_renode_scripts(board, elf, Path(work_dir or elf.parent),
                                               timeout=timeout)
            why += f"; scripts written: {resc}, {robot}"
        raise EmulatorUnavailable(why)
    work = Path(work_dir) if work_dir is not None else elf.parent
    work.mkdir(parents=True, exist_ok=True)

    if board.emulator == "renode":
        return run_renode(board, elf, work, timeout=timeout, uart=uart)

    counts_file = work / f"{elf.stem}.insn.txt"
    plugin: list[str] | None = None
    if profile and board.emulator in ("qemu-system-arm", "qemu-hexagon"):
        counts_file.unlink(missing_ok=True)
        plugin = [str(build_plugin(work)), *plugin_args(read_elf(elf), counts_file)]

    if board.emulator == "qemu-system-arm":
        uart_console = (console or board.console_kind) == "uart"
        cmd = qemu_arm_command(board, elf, uart=uart, uart_console=uart_console, plugin=plugin)
    elif board.emulator == "qemu-hexagon":
        cmd = ["qemu-hexagon"] + (["-plugin", ",".join(plugin)] if plugin else [])
        cmd += list(board.run.get("args", ())) + [str(elf), *args]
    else:
        cmd = [str(elf.resolve()), *args]

    stdout, stderr, code, timed_out = _run(cmd, timeout, on_line)
    result = parse_output(board.name, stdout, code, timed_out)
    counts = None
    if plugin and counts_file.is_file() and not timed_out:
        counts = parse_counts(counts_file.read_text())
    return RunResult(
        board=board.name, stdout=result["stdout"], exit_code=result["exit_code"],
        instructions=counts.total if counts else None,
        phases=counts.phases if counts else {},
        unbalanced_marks=counts.unbalanced if counts else 0, stack_bytes=result["stack"],
        fault=result["fault"], timed_out=timed_out, command=tuple(cmd), raw_stdout=stdout,
        stderr=stderr)


def _run(cmd: list[str], timeout: float, on_line: Callable[[str], None] | None = None
         ) -> tuple[str, str, int | None, bool]:
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as e:
        raise PockError(f"cannot run {cmd[0]} ({e.strerror or e})") from None
    if on_line is not None:
        return _run_streaming(proc, timeout, on_line)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    code = None if timed_out else proc.returncode
    return (out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code, timed_out)


def _run_streaming(proc: subprocess.Popen, timeout: float, on_line: Callable[[str], None]
                   ) -> tuple[str, str, int | None, bool]:
    """``_run`` handing each stdout line to ``on_line`` as it arrives (reader threads keep
    both pipes drained; the timeout still applies)."""
    out: list[str] = []
    err: list[bytes] = []

    def pump_out() -> None:
        for raw in proc.stdout:                     # type: ignore[union-attr]
            line = raw.decode("utf-8", "replace")
            out.append(line)
            on_line(line)

    def pump_err() -> None:
        err.append(proc.stderr.read())              # type: ignore[union-attr]

    threads = [threading.Thread(target=pump_out, daemon=True),
               threading.Thread(target=pump_err, daemon=True)]
    for t in threads:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        timed_out = True
    for t in threads:
        t.join()
    code = None if timed_out else proc.returncode
    return "".join(out), b"".join(err).decode("utf-8", "replace"), code, timed_out
