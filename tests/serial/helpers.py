"""Shared by the serial tests: host builds of the device-side C (with sanitizers), the protocol
server on pipes, and a clean reference run to compare against."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Self

from codegen.resources import data_dir
from codegen.serial.client import Device
from codegen.serial.transport import PipeLink

HERE = Path(__file__).parent
C_DIR = HERE / "c"
SERIAL_DIR = data_dir("runtime_c") / "runtime" / "serial"
HOST_FLAGS = ("-std=c99", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-g",
              "-O1")
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer")
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
SERVER_SOURCES = ("pe_frame.c", "pe_proto.c", "pe_checkpoint.c", "pe_storage_file.c")
UNIT_SOURCES = ("pe_frame.c", "pe_checkpoint.c", "pe_storage_ram.c")


def sanitizers_work(cc: str, tmp: Path) -> bool:
    """Whether ``cc`` can build and run an ASan/UBSan program here."""
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp / f"probe_{cc}"
    r = subprocess.run([cc, *SANITIZE, str(src), "-o", str(exe)], capture_output=True,
                       check=False)
    if r.returncode != 0:
        return False
    return subprocess.run([str(exe)], env=os.environ | SAN_ENV, check=False).returncode == 0


def build(cc: str, out: Path, main: str, sources: tuple[str, ...], *,
          sanitize: bool = True) -> Path:
    """Compile tests/serial/c/<main> with the given runtime sources; returns the executable."""
    if shutil.which(cc) is None:
        raise FileNotFoundError(cc)
    out.mkdir(parents=True, exist_ok=True)
    exe = out / f"{Path(main).stem}_{cc}{'_san' if sanitize else ''}"
    extra = [str(C_DIR / "toy_model.c")] if main == "proto_host.c" else []
    cmd = [cc, *HOST_FLAGS, *(SANITIZE if sanitize else ()), f"-I{SERIAL_DIR}", f"-I{C_DIR}",
           str(C_DIR / main), *extra, *(str(SERIAL_DIR / s) for s in sources), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}\n{r.stderr}")
    return exe


class Server:
    """proto_host on pipes, with a Device talking to it."""

    def __init__(self, exe: Path, *args: str, timeout: float = 2.0, retries: int = 50,
                 wrap=None):
        self.proc = subprocess.Popen([str(exe), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=os.environ | SAN_ENV)
        link = PipeLink(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        self.device = Device(wrap(link) if wrap else link, timeout=timeout, retries=retries)
        self._closed: tuple[int, str] | None = None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close(self) -> tuple[int, str]:
        """End the server (EOF on stdin); its exit status and stderr (idempotent)."""
        if self._closed is not None:
            return self._closed
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        self._closed = (self.proc.returncode, err)
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TcpDevice:
    """proto_host behind a TCP port, like QEMU's ``-serial tcp:...,server``: one server process
    per connection (same checkpoint file), ``kill()`` ends it and the listening socket like a
    killed emulator, ``start()`` brings both back on the same port."""

    def __init__(self, exe: Path, *args: str, port: int = 0):
        import socket

        self.exe, self.args = exe, args
        probe = socket.socket()
        probe.bind(("127.0.0.1", port))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener = None
        self._proc = None
        self._thread = None
        self._lock = __import__("threading").Lock()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def start(self) -> TcpDevice:
        import socket
        import threading

        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(self.address)
        ls.listen(1)
        self._listener = ls
        self._thread = threading.Thread(target=self._serve, args=(ls,), daemon=True)
        self._thread.start()
        return self

    def _serve(self, ls) -> None:
        import select
        import socket

        while True:
            try:
                conn, _ = ls.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            proc = subprocess.Popen([str(self.exe), *self.args], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=os.environ | SAN_ENV)
            with self._lock:
                self._proc = proc
            out = proc.stdout.fileno()
            try:
                while True:
                    r, _, _ = select.select([conn, out], [], [], 0.2)
                    if conn in r:
                        data = conn.recv(4096)
                        if not data:
                            break
                        proc.stdin.write(data)
                        proc.stdin.flush()
                    if out in r:
                        data = os.read(out, 4096)
                        if not data:
                            break
                        conn.sendall(data)
            except OSError:
                pass
            conn.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass

    def kill(self) -> None:
        """SIGKILL the server process and close the port (a power cut of the emulator)."""
        if self._listener is not None:
            import socket

            try:        # wakes the accept() of the serving thread (close alone does not)
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGKILL)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def stop(self) -> None:
        self.kill()


def train_with_kills(start: Callable[[int], Server], data, cuts: list[int],
                     **train_kw) -> tuple[dict, int, list[int | None]]:
    """Stream a training run to servers from ``start(life)`` (same checkpoint file), killing
    the server right after the answer of each sample count in ``cuts`` (a power cut) and
    starting the next one, until a run finishes. Returns the result, the kills and the
    sample each life resumed from."""
    from codegen.serial.session import train_over_serial
    from codegen.serial.transport import LinkError

    cuts = sorted(cuts)
    kills = 0
    resumes: list[int | None] = []
    for life in range(len(cuts) + 2):
        s = start(life)

        def progress(done, _total, _fields, s=s):
            if cuts and done >= cuts[0]:
                cuts.pop(0)
                s.kill()

        try:
            r = train_over_serial(s.device, data, progress=progress, **train_kw)
            s.close()
            return r, kills, resumes
        except LinkError:
            s.close()
            kills += 1
        finally:
            resumes.append(s.device.last_info.last_seq if s.device.last_info else None)
    raise AssertionError(f"training did not finish in {len(resumes)} lives")
