"""The host end of the serial protocol: requests with retransmission, and the commands.

``Device(port)`` opens a pyserial port (or takes any link, see ``transport``) and sends one
request at a time (stop-and-wait). A request is retransmitted with the same sequence number
when its answer does not come in time, when the device NACKs a damaged frame, or when a
damaged frame arrives while waiting (most likely the answer); the device answers a repeated
request from its cache without running it again. The timeout adapts to the measured round
trip of each command (3 x smoothed RTT + 50 ms, at least ``min_timeout``, doubled after each
timeout of the same request, at most ``timeout``; only first attempts are measured).
With ``reconnect`` > 0 a dropped link (an emulator killed and restarted, a cable replugged) is
reopened for up to that many seconds and the request retransmitted.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable
from typing import Any, Self

from ..errors import PockError
from . import protocol as P
from .framing import Frame, FrameDecoder, crc32, encode_frame
from .transport import DEFAULT_BAUD, Link, LinkDown, LinkError, open_port

READ_SLICE = 0.02


class DeviceError(PockError):
    """The device answered, but refused: the message names the command and the status."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _link_errors() -> tuple[type[BaseException], ...]:
    import serial

    return (LinkDown, serial.SerialException, OSError)


class Device:
    """A device speaking the pockengine protocol on ``port``."""

    def __init__(self, port: str | Link, *, baudrate: int = DEFAULT_BAUD, timeout: float = 2.0,
                 min_timeout: float = 0.05, retries: int = 50, reconnect: float = 0.0,
                 log: Callable[[str], None] | None = None):
        self.port = port if isinstance(port, str) else getattr(port, "name", "link")
        self._url = port if isinstance(port, str) else None
        self.baudrate = baudrate
        self.timeout, self.min_timeout = float(timeout), float(min_timeout)
        self.retries, self.reconnect = int(retries), float(reconnect)
        self.log = log
        self.link: Any = self._open_url(port, first=True) if isinstance(port, str) else port
        self.decoder = FrameDecoder()
        self.seq = random.randrange(0x10000)
        self.max_body = P.MIN_BODY
        self._srtt: dict[tuple[int, int], float] = {}
        self.counters = {"requests": 0, "retransmissions": 0, "timeouts": 0, "nacks": 0,
                         "damaged": 0, "stale": 0, "reconnects": 0}
        self.last_info: P.Info | None = None

    # -- link --------------------------------------------------------------------------------
    def close(self) -> None:
        with contextlib.suppress(Exception):   # closing a dead link
            self.link.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_url(self, url: str, *, first: bool = False, why: str = "") -> Any:
        """Open ``url``, retrying for up to ``reconnect`` seconds (a device restarting; at
        first only for socket:// URLs: an emulator still starting, while a missing serial
        device is reported at once)."""
        deadline = time.monotonic() + self.reconnect
        while True:
            try:
                return open_port(url, self.baudrate, READ_SLICE)
            except LinkError as e:
                if time.monotonic() > deadline or (first and not url.startswith("socket://")):
                    if first:
                        raise
                    raise LinkError(f"{self.port}: link lost ({why}) and not back within "
                                    f"{self.reconnect:g} s ({e})") from None
            time.sleep(0.1)

    def _reopen(self, why: str) -> None:
        if self.reconnect <= 0 or self._url is None:
            raise LinkError(f"{self.port}: link lost ({why})")
        self.close()
        self.link = self._open_url(self._url, why=why)
        self.decoder.reset()
        self.counters["reconnects"] += 1
        if self.log:
            self.log(f"{self.port}: reconnected ({why})")

    def _write(self, data: bytes) -> None:
        self.link.write(data)

    def _read(self) -> bytes:
        if getattr(self.link, "partial_reads", False):
            return self.link.read(1 << 16)
        b = self.link.read(1)
        if not b:
            return b""
        out = bytearray(b)
        while True:
            n = getattr(self.link, "in_waiting", 0)
            if not n:
                return bytes(out)
            out += self.link.read(n)

    # -- requests ----------------------------------------------------------------------------
    def _rto(self, key: tuple[int, int], backoff: float) -> float:
        s = self._srtt.get(key)
        if s is None:
            return self.timeout
        return min(self.timeout, max(self.min_timeout, 3.0 * s + 0.05) * backoff)

    def request(self, cmd: int, body: bytes = b"", *, flags: int = 0,
                timeout: float | None = None) -> P.Message:
        """Send a request and return its answer (any status); LinkError if none comes."""
        self.seq = (self.seq + 1) & 0xFFFF
        seq = self.seq
        frame = encode_frame(P.request(cmd, seq, body, flags))
        key = (cmd, flags)
        errors = _link_errors()
        self.counters["requests"] += 1
        backoff = 1.0
        for attempt in range(self.retries + 1):
            if attempt:
                self.counters["retransmissions"] += 1
            wait = timeout if timeout is not None else self._rto(key, backoff)
            t0 = time.monotonic()
            try:
                self._write(frame)
                got = self._await(cmd, seq, t0 + wait)
            except errors as e:
                self._reopen(str(e) or type(e).__name__)
                continue
            if isinstance(got, P.Message):
                if attempt == 0:
                    rtt = time.monotonic() - t0
                    s = self._srtt.get(key)
                    self._srtt[key] = rtt if s is None else 0.875 * s + 0.125 * rtt
                return got
            if got == "timeout":
                self.counters["timeouts"] += 1
                backoff *= 2.0          # the device may be slower this time (Karn: no sample)
        raise LinkError(f"{self.port}: no answer to {P.command_name(cmd)} after "
                        f"{self.retries + 1} attempts (is the device running the pockengine "
                        "serial firmware?)")

    def _await(self, cmd: int, seq: int, deadline: float) -> P.Message | str:
        """The response to (cmd, seq); else "nack" or "damaged" (retransmit now) when such a
        frame came instead, or "timeout"."""
        while True:
            trouble = None
            for ev in self.decoder.feed(self._read()):
                m = P.parse_message(ev.payload) if isinstance(ev, Frame) else None
                if m is None:
                    self.counters["damaged"] += 1
                    trouble = trouble or "damaged"
                elif m.is_nack:
                    self.counters["nacks"] += 1
                    trouble = "nack"
                elif m.type == (cmd | P.TYPE_RESPONSE) and m.seq == seq:
                    return m
                else:
                    self.counters["stale"] += 1
            if trouble is not None:
                return trouble
            if time.monotonic() >= deadline:
                return "timeout"

    def call(self, cmd: int, body: bytes = b"", *, ok: tuple[int, ...] = (P.ST_OK,),
             timeout: float | None = None) -> P.Message:
        """``request`` that raises DeviceError unless the status is in ``ok``."""
        m = self.request(cmd, body, timeout=timeout)
        if m.status not in ok:
            raise DeviceError(f"{self.port}: {P.command_name(cmd)} refused: "
                              f"{P.status_name(m.status)}", m.status)
        return m

    # -- commands ----------------------------------------------------------------------------
    def info(self) -> P.Info:
        m = self.call(P.CMD_INFO)
        try:
            info = P.parse_info(m.body)
        except ValueError as e:
            raise DeviceError(f"{self.port}: unreadable INFO answer ({e})") from None
        if info.protocol != P.VERSION:
            raise DeviceError(f"{self.port}: device speaks protocol version {info.protocol}, "
                              f"this host {P.VERSION}")
        self.max_body = max(P.MIN_BODY, info.max_body)
        self.last_info = info
        return info

    def train(self, run_id: int, sample_seq: int, x: bytes, label: int = 0,
              target: bytes = b"", *, predict: bool = False, checkpoint: bool = False
              ) -> tuple[int, P.TrainReply]:
        """One TRAIN request: (status, reply). Statuses other than ok, duplicate, seq gap and
        run mismatch raise DeviceError."""
        flags = (P.TRAIN_PREDICT if predict else 0) | (P.TRAIN_CHECKPOINT if checkpoint else 0)
        m = self.request(P.CMD_TRAIN, P.train_body(run_id, sample_seq, x, label, target,
                                                   flags),
                         timeout=self.timeout if checkpoint else None)
        if m.status not in (P.ST_OK, P.ST_DUPLICATE, P.ST_SEQ_GAP, P.ST_RUN_MISMATCH):
            detail = ""
            if m.status == P.ST_MODEL_ERROR and len(m.body) >= 28:
                detail = f" (model returned {P.parse_train(m.body).model_rc})"
            raise DeviceError(f"{self.port}: TRAIN of sample {sample_seq} refused: "
                              f"{P.status_name(m.status)}{detail}", m.status)
        return m.status, P.parse_train(m.body)

    def infer(self, x: bytes) -> bytes:
        return self.call(P.CMD_INFER, x).body

    def eval(self, records: list[bytes], *, reset: bool = False, targets: bool = False
             ) -> P.EvalReply:
        m = self.call(P.CMD_EVAL, P.eval_body(records, reset=reset, targets=targets))
        return P.parse_eval(m.body)

    def get_params(self, attempts: int = 3) -> bytes:
        """The exported parameters (GET_PARAMS in chunks, halved while a noisy link needs
        retransmissions; the device snapshots them at offset 0 and reports the snapshot's
        CRC-32 in every chunk)."""
        biggest = min(self.max_body - 12, 0xFFFF)
        chunk = biggest
        for _ in range(attempts):
            data = bytearray()
            crcs = set()
            total = None
            while total is None or len(data) < total:
                before = self.counters["retransmissions"]
                m = self.call(P.CMD_GET_PARAMS, len(data).to_bytes(4, "little")
                              + chunk.to_bytes(2, "little"))
                # a noisy link: smaller chunks get through more often (and grow back)
                chunk = max(32, chunk // 2) if self.counters["retransmissions"] - before > 1 \
                    else min(biggest, chunk + chunk // 4 + 1)
                c = P.parse_params_chunk(m.body)
                if c.offset != len(data) or (total is not None and c.total != total):
                    raise DeviceError(f"{self.port}: GET_PARAMS answered offset {c.offset} "
                                      f"of {c.total}, asked {len(data)}")
                total = c.total
                crcs.add(c.crc)
                if not c.data and len(data) < total:
                    raise DeviceError(f"{self.port}: GET_PARAMS returned no bytes at offset "
                                      f"{len(data)} of {total}")
                data += c.data
            if len(crcs) == 1 and crc32(bytes(data)) == crcs.pop():
                return bytes(data)
        raise DeviceError(f"{self.port}: the parameters kept changing while being read "
                          f"(CRC mismatch {attempts} times)")

    def set_params(self, data: bytes) -> P.SetReply:
        chunk = self.max_body - 8
        offset = 0
        reply = None
        while offset < len(data) or reply is None:
            piece = data[offset:offset + chunk]
            m = self.request(P.CMD_SET_PARAMS, offset.to_bytes(4, "little")
                             + len(data).to_bytes(4, "little") + piece)
            if m.status != P.ST_OK:
                r = P.parse_set(m.body) if len(m.body) >= 13 else None
                if m.status == P.ST_BAD_ARGUMENT and r is not None and r.total == len(data) \
                        and offset:
                    offset = 0          # the device restarted in between: start over
                    continue
                raise DeviceError(f"{self.port}: SET_PARAMS refused: "
                                  f"{P.status_name(m.status)}"
                                  + (f" (device expects {r.total} bytes)" if r else ""),
                                  m.status)
            reply = P.parse_set(m.body)
            offset += len(piece)
        if not reply.committed or reply.crc != crc32(data):
            raise DeviceError(f"{self.port}: SET_PARAMS did not commit the parameters")
        return reply

    def describe(self) -> dict[str, Any] | None:
        """The firmware's description of its model (JSON), or None if it has none."""
        blob = bytearray()
        total = None
        while total is None or len(blob) < total:
            m = self.call(P.CMD_DESCRIBE, len(blob).to_bytes(4, "little")
                          + min(self.max_body - 8, 0xFFFF).to_bytes(2, "little"))
            c = P.parse_describe_chunk(m.body)
            total = c.total
            if c.offset != len(blob) or (not c.data and len(blob) < total):
                raise DeviceError(f"{self.port}: DESCRIBE answered offset {c.offset}, asked "
                                  f"{len(blob)}")
            blob += c.data
        if not blob:
            return None
        try:
            return json.loads(blob.decode())
        except ValueError as e:
            raise DeviceError(f"{self.port}: unreadable model description ({e})") from None

    def checkpoint(self) -> P.CheckpointReply:
        m = self.call(P.CMD_CHECKPOINT, timeout=self.timeout)
        return P.parse_checkpoint(m.body)

    def stats(self) -> P.Stats:
        return P.parse_stats(self.call(P.CMD_STATS).body)

    def reset(self, factory: bool = False) -> P.CheckpointReply:
        m = self.call(P.CMD_RESET, bytes([P.RESET_FACTORY if factory else P.RESET_RESTORE]),
                      timeout=self.timeout)
        return P.parse_checkpoint(m.body)
