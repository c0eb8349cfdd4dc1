"""A noisy cable in software: a TCP proxy (and a link wrapper) that corrupts bytes and drops,
duplicates and delays whole frames, in both directions, from a seeded random generator.

    with FaultProxy(("127.0.0.1", qemu_port), corrupt=0.01, drop=0.02, duplicate=0.02) as p:
        train_over_serial(Device(p.url), ...)        # p.url == "socket://127.0.0.1:<port>"

The stream is cut into units at every 0x00 (the frame delimiter): a unit is dropped with
probability ``drop``, sent twice with probability ``duplicate``, held back for up to
``max_delay`` seconds with probability ``delay`` (the line stalls: what follows waits too,
as on a UART), and each of its bytes (delimiter included) is replaced by a different random
value with probability ``corrupt``.
When the client disconnects the proxy drops the upstream connection too and waits for the
next client; when the upstream end goes away (an emulator killed) it closes the client.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self


@dataclass
class FaultCounts:
    units: int = 0
    dropped: int = 0
    duplicated: int = 0
    delayed: int = 0
    corrupted_bytes: int = 0


@dataclass
class FaultInjector:
    """The faults of one direction; ``segments(bytes)`` returns what goes on, as (seconds to
    stall first, bytes) pieces, ``process(bytes)`` the bytes alone (partial units are held
    until their delimiter arrives)."""

    corrupt: float = 0.01
    drop: float = 0.0
    duplicate: float = 0.0
    seed: int = 0
    delay: float = 0.0
    max_delay: float = 0.2
    counts: FaultCounts = field(default_factory=FaultCounts)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._held = bytearray()

    def process(self, data: bytes) -> bytes:
        return b"".join(b for _, b in self.segments(data))

    def segments(self, data: bytes) -> list[tuple[float, bytes]]:
        self._held += data
        out: list[tuple[float, bytes]] = []
        while True:
            end = self._held.find(0)
            if end < 0:
                return out
            unit = bytes(self._held[:end + 1])
            del self._held[:end + 1]
            stall = 0.0
            if self.delay and self.rng.random() < self.delay:
                stall = self.rng.uniform(0.0, self.max_delay)
                self.counts.delayed += 1
            piece = self._unit(unit)
            if stall or not out:
                out.append((stall, piece))
            else:
                out[-1] = (out[-1][0], out[-1][1] + piece)

    def _unit(self, unit: bytes) -> bytes:
        c = self.counts
        c.units += 1
        r = self.rng.random()
        if r < self.drop:
            c.dropped += 1
            return b""
        copies = 2 if r < self.drop + self.duplicate else 1
        if copies == 2:
            c.duplicated += 1
        out = bytearray()
        for _ in range(copies):
            b = bytearray(unit)
            if self.corrupt > 0:
                for i in range(len(b)):
                    if self.rng.random() < self.corrupt:
                        b[i] ^= self.rng.randrange(1, 256)
                        c.corrupted_bytes += 1
            out += b
        return bytes(out)


def _send(segments: list[tuple[float, bytes]], write: Any) -> None:
    for stall, piece in segments:
        if stall:
            time.sleep(stall)
        if piece:
            write(piece)


class FaultyLink:
    """A link (see ``transport``) seen through two FaultInjectors: ``tx`` on what is written,
    ``rx`` on what is read."""

    def __init__(self, link: Any, tx: FaultInjector, rx: FaultInjector):
        self.link, self.tx, self.rx = link, tx, rx
        self.partial_reads = True

    @property
    def timeout(self) -> Any:
        return self.link.timeout

    @timeout.setter
    def timeout(self, v: Any) -> None:
        self.link.timeout = v

    def write(self, data: bytes) -> int:
        _send(self.tx.segments(data), self.link.write)
        return len(data)

    def read(self, n: int) -> bytes:
        out = bytearray()
        _send(self.rx.segments(self.link.read(n)), out.extend)
        return bytes(out)

    def close(self) -> None:
        self.link.close()


class FaultProxy:
    """TCP proxy from ``127.0.0.1:<port>`` to ``upstream`` with a FaultInjector per direction
    (host -> device seeded ``seed``, device -> host ``seed + 1``)."""

    def __init__(self, upstream: tuple[str, int], *, corrupt: float = 0.01, drop: float = 0.02,
                 duplicate: float = 0.02, delay: float = 0.0, max_delay: float = 0.2,
                 seed: int = 0, host: str = "127.0.0.1", port: int = 0,
                 connect_timeout: float = 30.0):
        self.upstream = upstream
        self.to_device = FaultInjector(corrupt, drop, duplicate, seed, delay, max_delay)
        self.to_host = FaultInjector(corrupt, drop, duplicate, seed + 1, delay, max_delay)
        self.connect_timeout = connect_timeout
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((host, port))
        self._server.listen(1)
        self.host, self.port = self._server.getsockname()[:2]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.connections = 0

    @property
    def url(self) -> str:
        return f"socket://{self.host}:{self.port}"

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._serve, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        try:        # shutdown wakes a thread blocked in accept(); close alone does not
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def counts(self) -> dict[str, dict[str, int]]:
        return {"to_device": vars(self.to_device.counts).copy(),
                "to_host": vars(self.to_host.counts).copy()}

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = self._connect()
            if upstream is None:
                client.close()
                continue
            for sock in (client, upstream):     # frames are small: no Nagle delays
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections += 1
            self._pump_pair(client, upstream)

    def _connect(self) -> socket.socket | None:
        deadline = time.monotonic() + self.connect_timeout
        while not self._stop.is_set():
            try:
                return socket.create_connection(self.upstream, timeout=2.0)
            except OSError:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.05)
        return None

    def _pump_pair(self, client: socket.socket, upstream: socket.socket) -> None:
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket, inj: FaultInjector) -> None:
            try:
                src.settimeout(0.2)
                while not done.is_set() and not self._stop.is_set():
                    try:
                        data = src.recv(4096)
                    except TimeoutError:
                        continue
                    if not data:
                        break
                    _send(inj.segments(data), dst.sendall)
            except OSError:
                pass
            finally:
                done.set()

        a = threading.Thread(target=pump, args=(client, upstream, self.to_device), daemon=True)
        b = threading.Thread(target=pump, args=(upstream, client, self.to_host), daemon=True)
        a.start()
        b.start()
        a.join()
        b.join()
        for s in (client, upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
