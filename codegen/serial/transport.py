"""Byte links to a device: pyserial ports (``/dev/ttyUSB0``, ``COM3``, ``socket://HOST:PORT``,
``rfc2217://...``, ``loop://``) and a pipe pair (a host-built server in tests).

Every link offers what the client needs of a pyserial port: ``read(n)`` (at most n bytes,
waiting at most ``timeout`` seconds), ``write(data)``, ``close()`` and a settable ``timeout``.
A link that dropped raises :class:`LinkDown` (or pyserial's ``SerialException``) from read or
write.
"""

from __future__ import annotations

import os
import select
import socket
from typing import Any, Protocol

from ..errors import PockError

# an emulator's UART address: defined with the emulators, still importable from here
from ..targets.uart import TCP_FORMS, tcp_address  # noqa: F401

DEFAULT_BAUD = 115200


class LinkError(PockError):
    """The link to the device failed (cannot open, or no answer after every retry)."""


class LinkDown(OSError):
    """The other end closed the link (an emulator was killed, a cable pulled)."""


class Link(Protocol):
    timeout: float | None

    def read(self, n: int) -> bytes: ...

    def write(self, data: bytes) -> Any: ...

    def close(self) -> None: ...



def port_url(port: str) -> str:
    """The pyserial URL of a ``--port``: ``tcp:HOST:PORT`` becomes ``socket://HOST:PORT``;
    socket:// URLs have their port checked; device paths (/dev/ttyUSB0, COM3) and other URLs
    pass through."""
    if port.strip().startswith(("tcp:", "socket://")):
        host, number, rest = tcp_address(port)
        if rest.startswith(","):
            raise PockError(f"--port {port!r}: QEMU options ({rest[1:]}) belong to sim --uart, "
                            f"not to a port to connect to")
        return f"socket://{host}:{number}{rest}"
    return port


def open_port(port: str, baudrate: int = DEFAULT_BAUD, timeout: float = 0.05, **kw: Any) -> Any:
    """A pyserial port for a device path or URL (socket://HOST:PORT or tcp:HOST:PORT for
    emulators)."""
    import serial  # pyserial, to open a port; --help imports this module

    port = port_url(port)
    try:
        link = serial.serial_for_url(port, baudrate=baudrate, timeout=timeout,
                                     write_timeout=10.0, **kw)
    except (serial.SerialException, OSError, ValueError) as e:
        raise LinkError(f"{port}: cannot open ({_reason(e)})") from None
    sock = getattr(link, "_socket", None)       # socket://: small frames, no Nagle delays
    if sock is not None:
        import socket  # lazy: --help imports this module

        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
    return link


def read_socket(sock: Any, timeout: float) -> bytes:
    """The bytes waiting on a socket (pyserial's socket:// reads byte by byte when asked
    for 'what is there'): at most ``timeout`` seconds for the first; LinkDown when closed."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        return b""
    try:
        data = sock.recv(1 << 16)
    except BlockingIOError:
        return b""
    if not data:
        raise LinkDown("the other end closed the connection")
    return data


def _reason(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


class PipeLink:
    """A link over two file descriptors (e.g. a subprocess's stdout and stdin). ``read(n)``
    returns what is there (up to n bytes) as soon as anything is."""

    partial_reads = True

    def __init__(self, read_fd: int, write_fd: int, timeout: float = 0.05):
        self.read_fd, self.write_fd = read_fd, write_fd
        self.timeout: float | None = timeout
        self.closed = False

    def read(self, n: int) -> bytes:
        if self.closed:
            raise LinkDown("link closed")
        ready, _, _ = select.select([self.read_fd], [], [], self.timeout)
        if not ready:
            return b""
        data = os.read(self.read_fd, n)
        if not data:
            raise LinkDown("the other end closed the pipe")
        return data

    def write(self, data: bytes) -> int:
        if self.closed:
            raise LinkDown("link closed")
        view = memoryview(data)
        while view:
            try:
                k = os.write(self.write_fd, view)
            except BrokenPipeError:
                raise LinkDown("the other end closed the pipe") from None
            view = view[k:]
        return len(data)

    def close(self) -> None:
        self.closed = True


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (for an emulator's UART)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
