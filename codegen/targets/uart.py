"""The address of an emulator's UART on a TCP socket, as ``sim --uart``, Renode's scripts and
the serial links (``serial.transport``, which re-exports it) spell it."""

from __future__ import annotations

import re

from ..errors import PockError

TCP_FORMS = "tcp:HOST:PORT or socket://HOST:PORT (e.g. tcp:127.0.0.1:4444)"


def tcp_address(address: str, what: str = "--port") -> tuple[str, int, str]:
    """(host, port, the rest) of ``tcp:HOST:PORT[,options]`` (QEMU's spelling) or
    ``socket://HOST:PORT[?options]`` (pyserial's): either is accepted wherever an emulator's
    UART is named. An empty host is 127.0.0.1. A one-line PockError names ``what`` for
    anything else, and for a port outside 1..65535 (port 0, "any free port", cannot be used:
    the port the emulator got would not be known)."""
    text = address.strip()
    m = re.fullmatch(r"(?:tcp:|socket://)(\[[^\]]*\]|[^:,/?]*):([^,?/]*)([,?].*)?", text)
    if m is None:
        raise PockError(f"{what} {address!r}: expected {TCP_FORMS}")
    host, port, rest = m.group(1) or "127.0.0.1", m.group(2), m.group(3) or ""
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        why = " (port 0, any free port, cannot be told to the client)" if port == "0" else ""
        raise PockError(f"{what} {address!r}: port {port!r} is not a TCP port (1..65535)"
                        + why)
    if rest[:1] == ("?" if text.startswith("tcp:") else ","):   # QEMU uses ",", pyserial "?"
        raise PockError(f"{what} {address!r}: expected {TCP_FORMS}")
    return host, int(port), rest
