"""The host end of the serial protocol: requests with retransmission, and the commands.

``Device(port)`` opens a pyserial port (or takes any link, see ``transport``) and sends one
frame at a time (stop-and-wait). A frame is retransmitted with the same sequence number when
its answer does not come in time, when the device NACKs a damaged frame, or when a damaged
frame arrives while waiting (most likely the answer); the device answers a repeated request
from its cache without running it again. The timeout adapts to the measured round trip of
each command (smoothed RTT + 4 x its mean deviation, as TCP's, at least ``min_timeout``,
doubled after each timeout of the same frame until something answers, at most ``timeout``).

A noisy link degrades gracefully instead of failing: a :class:`FrameSizer` estimates the
byte error rate from how often exchanges fail and sets the frame size (requests and the reply
limit every request carries) that moves the most data per attempt; a request larger than that
is staged in pieces (PUT) and run by EXEC, a response larger than the reply limit comes in
PART frames (the rest fetched with FETCH), and a frame that the link can no longer carry is
rebuilt smaller (every request is safe to repeat: TRAIN by its sample number, staging and
reads by their offsets). The retry budget is per frame (``retries``); ``deadline`` seconds
without a single answer end the session with a one-line :class:`LinkError`.
With ``reconnect`` > 0 a dropped link (an emulator killed and restarted, a cable replugged) is
reopened for up to that many seconds and the frame retransmitted.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Self

from ..errors import PockError
from . import protocol as P
from .framing import TAIL, Frame, FrameDecoder, crc32, encode_frame, wire_bytes
from .transport import (
    DEFAULT_BAUD,
    Link,
    LinkDown,
    LinkError,
    open_port,
    port_url,
    read_socket,
)

READ_SLICE = 0.005                  # a read waits at most this long (then the clock is checked)
REPLY_MAX = 255 * P.REPLY_UNIT      # the largest reply limit a request can state
WINDOW = 16                         # PARTs a FETCH asks for at once


class DeviceError(PockError):
    """The device answered, but refused: the message names the command and the status."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _Redo(Exception):
    """The current frame is too large for the link now, or the answer it started was lost:
    build it (and what depends on it) again."""


def _link_errors() -> tuple[type[BaseException], ...]:
    import serial  # pyserial, once a link is open; --help imports this module

    return (LinkDown, serial.SerialException, OSError)


class FrameSizer:
    """How large frames may be on this link.

    Every attempt of an exchange (a request and its answer: ``wire`` bytes on the line in both
    directions) is recorded as a success or a failure (NACK, damaged answer, timeout). If each
    byte is damaged with probability ``e``, an attempt of ``w`` bytes gets through with
    ``(1 - e) ** w``; ``e`` is estimated so that over the last ``window`` attempts (weighed by
    ``decay`` per attempt of age) the expected number of successes equals the observed one
    (plus ``prior`` pseudo-attempts of a link on which ``start`` is the right size, so that
    the first frames are modest). A frame carrying
    ``d`` data bytes gets through with about ``(1 - e) ** d`` times the overheads, so the data
    moved per attempt, ``d * (1 - e) ** d``, is largest at ``d = 1 / -ln(1 - e)``: the frame
    size is that plus ``overhead`` (headers), within ``[lo, hi]``. A clean link reaches ``hi``
    after a few exchanges, a noisy one shrinks within a few failures.
    """

    def __init__(self, hi: int, *, lo: int = P.MIN_REPLY, start: int = 64, window: int = 64,
                 decay: float = 0.9, prior: float = 1.0, overhead: int = 12):
        self.lo, self.overhead, self.decay = lo, overhead, decay
        self.hi = max(lo, hi)
        self._prior_w = 2.0 * start
        self._prior_n = prior
        self._prior_ok = prior * (1.0 - 1.0 / max(1, start - overhead)) ** self._prior_w
        self._attempts: deque[tuple[bool, float]] = deque(maxlen=window)
        self.error_rate = self._estimate()
        self.smallest = self.largest = self.size

    def _estimate(self) -> float:
        """The byte error rate whose expected successes match the observed ones (recent
        attempts weigh more: ``decay`` per attempt)."""
        n = len(self._attempts)
        weights = [self.decay ** (n - 1 - i) for i in range(n)]
        ok = self._prior_ok + sum(k for k, (good, _) in zip(weights, self._attempts,
                                                               strict=True) if good)
        ws = [(k, w) for k, (_, w) in zip(weights, self._attempts, strict=True)]

        def expected(e: float) -> float:
            q = math.log1p(-e)
            return (self._prior_n * math.exp(q * self._prior_w)
                    + sum(k * math.exp(q * w) for k, w in ws))

        lo, hi = 0.0, 0.5
        if expected(hi) >= ok:
            return hi
        for _ in range(30):                 # expected() falls as e grows
            mid = 0.5 * (lo + hi)
            if expected(mid) > ok:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    @property
    def size(self) -> int:
        """The largest frame payload (header + body) to send, and to ask for."""
        e = self.error_rate
        best = self.hi if e <= 1e-9 else self.overhead + 1.0 / -math.log1p(-e)
        return int(min(self.hi, max(self.lo, best)))

    def set_hi(self, hi: int) -> None:
        self.hi = max(self.lo, hi)
        self.largest = min(self.largest, self.hi)

    def record(self, ok: bool, wire: int) -> None:
        self._attempts.append((ok, float(wire)))
        self.error_rate = self._estimate()
        size = self.size
        self.smallest = min(self.smallest, size)
        self.largest = max(self.largest, size)


class Device:
    """A device speaking the pockengine protocol on ``port``."""

    def __init__(self, port: str | Link, *, baudrate: int = DEFAULT_BAUD, timeout: float = 2.0,
                 min_timeout: float = 0.03, retries: int = 1000, deadline: float = 30.0,
                 reconnect: float = 0.0, frame: int | None = None,
                 log: Callable[[str], None] | None = None):
        self.port = port if isinstance(port, str) else getattr(port, "name", "link")
        self._url = port_url(port) if isinstance(port, str) else None
        self.baudrate = baudrate
        self.timeout, self.min_timeout = float(timeout), float(min_timeout)
        self.retries, self.deadline, self.reconnect = int(retries), float(deadline), \
            float(reconnect)
        self.log = log
        self.link: Any = self._open_url(self._url, first=True) if self._url is not None \
            else port
        if not isinstance(port, str):
            with contextlib.suppress(Exception):
                self.link.timeout = READ_SLICE
        self.decoder = FrameDecoder()
        self.seq = random.randrange(0x10000)
        self.max_body = P.MIN_BODY
        self.stage_bytes = 0
        self.fixed_frame = frame            # tests: no adaptation, this frame size
        self.sizer = FrameSizer(P.HEADER_BYTES + P.MIN_BODY)
        self._rtt: dict[Any, tuple[float, float]] = {}     # smoothed RTT, mean deviation
        self._rtt_any: tuple[float, float] | None = None
        self._reply_size: dict[Any, int] = {}
        self._last_answer = time.monotonic()
        self._describe: tuple[bytes, dict[str, Any] | None] | None = None
        self._params: bytes | None = None       # the last parameters read
        self.counters = {"requests": 0, "frames": 0, "retransmissions": 0, "timeouts": 0,
                         "nacks": 0, "damaged": 0, "stale": 0, "reconnects": 0, "staged": 0,
                         "parts": 0, "rebuilt": 0}
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
        self._last_answer = time.monotonic()    # a fresh link gets a fresh deadline
        if self.log:
            self.log(f"{self.port}: reconnected ({why})")

    def _write(self, data: bytes) -> None:
        self.link.write(data)

    def _read(self) -> bytes:
        if getattr(self.link, "partial_reads", False):
            return self.link.read(1 << 16)
        sock = getattr(self.link, "_socket", None)
        if sock is not None:                # socket://: what is there, as soon as it is
            return read_socket(sock, READ_SLICE)
        b = self.link.read(1)
        if not b:
            return b""
        out = bytearray(b)
        while True:
            n = getattr(self.link, "in_waiting", 0)
            if not n:
                return bytes(out)
            out += self.link.read(n)

    # -- frames ------------------------------------------------------------------------------
    @property
    def frame_size(self) -> int:
        """The frame payload limit in force (requests, and the reply limit they carry)."""
        return self.fixed_frame or self.sizer.size

    def _rto(self, key: Any, backoff: float, slow: float | None = None) -> float:
        """How long to wait for an answer; ``slow``: what a command that may take long
        (a checkpoint) waits until its round trip is known."""
        r = self._rtt.get(key)
        if r is None and slow is not None:      # a checkpoint: flash may take a while
            fast = 3.0 * sum(self._rtt_any) + 0.25 if self._rtt_any else slow
            return min(self.timeout, min(slow, fast) * backoff)
        if r is not None:
            base = r[0] + 4.0 * r[1]
        elif self._rtt_any is not None:         # a new command: the link's round trip, and
            base = 3.0 * sum(self._rtt_any) + 0.1   # room for the device to do its work
        else:
            return self.timeout
        return min(self.timeout, max(self.min_timeout, base) * backoff)

    def _sample_rtt(self, key: Any, rtt: float) -> None:
        """A round trip of ``key`` (None: of the link only)."""
        for k in dict.fromkeys((key, None)):
            r = self._rtt.get(k) if k is not None else self._rtt_any
            if r is None:
                r = (rtt, rtt / 2.0)
            else:
                r = (0.875 * r[0] + 0.125 * rtt, 0.75 * r[1] + 0.25 * abs(rtt - r[0]))
            if k is None:
                self._rtt_any = r
            else:
                self._rtt[k] = r

    def _reply_limit(self, size: int) -> int | None:
        hi = P.HEADER_BYTES + self.max_body
        return None if size >= hi else P.reply_limit(min(size, REPLY_MAX))

    def _frame(self, cmd: int, body: bytes, *, key: Any = None, timeout: float | None = None,
               shrinkable: bool = True) -> P.Message:
        """One request frame until its answer (a response, the first PART of one, or a
        refusal). ``key`` names the round trip to learn (default: the command), ``timeout``
        the wait until it is known. Raises _Redo when the link's frame size has dropped well
        below this frame (its reply limit, and its request unless not ``shrinkable``: the
        caller builds it again), LinkError when its retry budget or the deadline is spent."""
        key = cmd if key is None else key
        size = self.frame_size
        limit = self._reply_limit(size)
        self.seq = (self.seq + 1) & 0xFFFF
        seq = self.seq
        payload = P.request(cmd, seq, body, limit)
        frame = encode_frame(payload) + TAIL
        expect = self._reply_size.get(key, limit or size)
        if limit is not None:
            expect = min(expect, limit)
        baked = max(len(payload) if shrinkable else 0, expect)
        lost_wire = len(frame) + wire_bytes(expect)
        errors = _link_errors()
        self.counters["frames"] += 1
        backoff = 1.0
        timed_out = False
        for attempt in range(self.retries + 1):
            if time.monotonic() - self._last_answer > self.deadline:
                raise LinkError(f"{self.port}: no answer from the device for "
                                f"{self.deadline:g} s ({P.command_name(cmd)}, {attempt} "
                                f"attempts; {self._summary()})")
            if attempt:
                self.counters["retransmissions"] += 1
            wait = self._rto(key, backoff, timeout)
            t0 = time.monotonic()
            try:
                self._write(frame)
                got = self._await(seq, t0 + wait)
            except errors as e:
                self._reopen(str(e) or type(e).__name__)
                continue
            if isinstance(got, tuple):
                m, wire = got
                now = time.monotonic()
                self._last_answer = now
                self.sizer.record(True, len(frame) + wire)
                self._reply_size[key] = (P.parse_part(m.body).total if m.is_part
                                         else P.HEADER_BYTES + len(m.body))
                if not timed_out or key not in self._rtt:
                    # after a timeout the answer may be to an earlier copy (Karn); but a
                    # command without any sample must learn one (a noisy link rarely
                    # answers a frame without a timeout somewhere)
                    self._sample_rtt(key, now - t0)
                return m
            self.sizer.record(False, lost_wire)
            if got == "timeout":
                self.counters["timeouts"] += 1
                backoff *= 2.0          # the device may be slower this time
                timed_out = True
            else:
                backoff = 1.0           # it answers (damaged or NACK): not slow, unlucky
            if (self.fixed_frame is None and attempt >= 2 and baked > P.MIN_REPLY
                    and baked > self.sizer.size + P.REPLY_UNIT):
                self.counters["rebuilt"] += 1
                raise _Redo
        raise LinkError(f"{self.port}: no answer to {P.command_name(cmd)} after "
                        f"{self.retries + 1} attempts (is the device running the pockengine "
                        f"serial firmware? {self._summary()})")

    def _summary(self) -> str:
        c = self.counters
        return (f"{c['retransmissions']} retransmissions, {c['nacks']} NACKs, "
                f"{c['timeouts']} timeouts, frames of {self.frame_size} bytes")

    def _await(self, seq: int, deadline: float) -> tuple[P.Message, int] | str:
        """The answer to frame ``seq`` (with its wire size); else "nack" or "damaged"
        (retransmit now) when such a frame came instead, or "timeout"."""
        sent = time.monotonic()
        while True:
            trouble = None
            for ev in self.decoder.feed(self._read()):
                if not isinstance(ev, Frame):
                    if ev.raw >= P.QUIET_BYTES:     # shorter: noise between frames
                        self.counters["damaged"] += 1
                        trouble = trouble or "damaged"
                    continue
                m = P.parse_message(ev.payload)
                if m is not None and m.version != P.VERSION:
                    self._other_version(m.version)
                if m is None:
                    self.counters["damaged"] += 1
                    trouble = trouble or "damaged"
                elif m.is_nack:
                    self.counters["nacks"] += 1
                    trouble = "nack"
                elif m.seq == seq and m.type & P.TYPE_RESPONSE:
                    return m, wire_bytes(len(ev.payload))
                else:
                    self.counters["stale"] += 1
            if trouble is not None:
                self._sample_rtt(None, time.monotonic() - sent)  # the link's round trip
                return trouble
            if time.monotonic() >= deadline:
                return "timeout"

    def _other_version(self, theirs: int) -> None:
        """A frame with a good CRC in another protocol version (byte 0 of every version's
        frames is the version; version 1 answered a request it could not read with a NACK or
        status 16, in its own 8-byte header): the device runs older or newer firmware."""
        raise DeviceError(f"{self.port}: the device speaks serial protocol version {theirs}, "
                          f"this pockengine speaks version {P.VERSION}: rebuild and flash its "
                          "firmware with this pockengine (pockengine sim DIR --uart ... "
                          "rebuilds it)", P.ST_BAD_VERSION)

    # -- messages ----------------------------------------------------------------------------
    def request(self, cmd: int, body: bytes = b"", *, timeout: float | None = None,
                key: Any = None) -> P.Message:
        """Send a request of any size and return its whole answer (any status): staged with
        PUT + EXEC if it does not fit the link's frames, reassembled from PARTs if the answer
        did not. ``timeout``: the wait until the round trip of ``key`` (default: the command)
        is known, for requests that may take long. LinkError if the link gives up."""
        key = cmd if key is None else key
        self.counters["requests"] += 1
        self._last_answer = time.monotonic()    # the deadline counts while we ask
        stageable = cmd in P.STAGEABLE and self.stage_bytes > len(body)
        for _ in range(self.retries + 1):
            try:
                if stageable and self._stage_pays(cmd, body):
                    m = self._staged(cmd, body, timeout, key)
                else:
                    m = self._frame(cmd, body, key=key, timeout=timeout,
                                    shrinkable=stageable)
                return self._whole(m)
            except _Redo:
                continue
        raise LinkError(f"{self.port}: {P.command_name(cmd)} kept being interrupted "
                        f"({self.retries + 1} times; {self._summary()})")

    def _stage_pays(self, cmd: int, body: bytes) -> bool:
        """Stage a request (PUT pieces, then EXEC) rather than send it whole: when it does
        not fit the frames in force, or when its pieces and the EXEC are expected to take
        fewer attempts than one frame carrying the request out and its answer back."""
        size = self.frame_size
        if P.HEADER_BYTES + len(body) > size:
            return True
        q = math.log1p(-min(0.5, self.sizer.error_rate))
        answer = wire_bytes(min(size, self._reply_size.get(cmd, size)))
        whole = math.exp(-q * (wire_bytes(P.HEADER_BYTES + len(body)) + answer))
        room = max(8, size - P.HEADER_BYTES - 4)
        pieces, last = divmod(1 + len(body), room)
        ack = wire_bytes(P.HEADER_BYTES + 4)
        staged = (pieces * math.exp(-q * (wire_bytes(P.HEADER_BYTES + 4 + room) + ack))
                  + (math.exp(-q * (wire_bytes(P.HEADER_BYTES + 4 + last) + ack)) if last
                     else 0.0)
                  + math.exp(-q * (wire_bytes(P.HEADER_BYTES + 8) + answer)))
        return staged < whole

    def _staged(self, cmd: int, body: bytes, timeout: float | None, key: Any) -> P.Message:
        """Stage ``cmd, body`` in pieces (PUT at increasing offsets; the device says where it
        is after a restart) and run it (EXEC with its length and CRC)."""
        msg = bytes([cmd]) + body
        self.counters["staged"] += 1
        for _ in range(self.retries + 1):
            offset = 0
            while offset < len(msg):
                room = max(8, self.frame_size - P.HEADER_BYTES - 4)
                piece = msg[offset:offset + room]
                try:
                    m = self._frame(P.CMD_PUT, P.put_body(offset, piece))
                except _Redo:
                    continue                # the same offset in smaller pieces
                if m.status not in (P.ST_OK, P.ST_SEQ_GAP) or len(m.body) < 4:
                    raise DeviceError(f"{self.port}: PUT of a {P.command_name(cmd)} request "
                                      f"({len(msg)} bytes) refused: "
                                      f"{P.status_name(m.status)}", m.status)
                offset = P.parse_put(m.body)    # ok: offset + piece; gap: where it is
            m = self._frame(P.CMD_EXEC, P.exec_body(msg), key=(P.CMD_EXEC, key),
                            timeout=timeout, shrinkable=False)
            if m.type == P.CMD_EXEC | P.TYPE_RESPONSE and m.status == P.ST_SEQ_GAP:
                continue                    # the device lost the staged bytes (a restart)
            if m.type == P.CMD_EXEC | P.TYPE_RESPONSE:
                raise DeviceError(f"{self.port}: EXEC of a staged {P.command_name(cmd)} "
                                  f"refused: {P.status_name(m.status)}", m.status)
            return m
        raise LinkError(f"{self.port}: the device kept losing a staged "
                        f"{P.command_name(cmd)} request ({self._summary()})")

    def _whole(self, m: P.Message) -> P.Message:
        """``m``, or the response whose first PART it is: the rest comes in FETCH windows
        (the missing PARTs among WINDOW from the first gap, back to back)."""
        if not m.is_part:
            return m
        first = P.parse_part(m.body)
        if first.offset != 0 or not first.data or first.total > 0xFFFF:
            raise _Redo
        buf, have = bytearray(first.total), bytearray(first.total)
        self._place(buf, have, first)
        fetches = {m.seq}
        idle = 0
        while have.find(0) >= 0:
            if self._fetch_window(m.seq, buf, have, fetches):
                idle = 0
            else:
                idle += 1
                if idle > self.retries:
                    raise LinkError(f"{self.port}: no answer to FETCH after {idle} attempts "
                                    f"({self._summary()})")
        whole = P.parse_message(bytes(buf))
        if whole is None or whole.seq != m.seq or whole.is_part:
            raise _Redo
        return whole

    @staticmethod
    def _place(buf: bytearray, have: bytearray, part: P.Part) -> int:
        """Put a PART into the response being assembled; how many bytes were new."""
        end = min(len(buf), part.offset + len(part.data))
        new = end - part.offset - have[part.offset:end].count(1)
        buf[part.offset:end] = part.data[:end - part.offset]
        have[part.offset:end] = b"\x01" * (end - part.offset)
        return max(0, new)

    def _fetch_window(self, seq0: int, buf: bytearray, have: bytearray, fetches: set[int]
                      ) -> int:
        """One FETCH of the response to ``seq0``: the PARTs still missing among WINDOW from
        the first gap; those that come intact are placed (also late ones of an earlier FETCH
        of it). Returns the new bytes; _Redo if the device no longer has the response."""
        size = self.frame_size
        limit = self._reply_limit(size)
        room = len(buf) if limit is None else limit - P.PART_HEADER_BYTES
        gap = have.find(0)
        expected = [o for o in range(gap, min(len(buf), gap + WINDOW * room), room)
                    if have.find(0, o, o + room) >= 0]
        mask = sum(1 << ((o - gap) // room) for o in expected)
        self.seq = (self.seq + 1) & 0xFFFF
        seq = self.seq
        fetches.add(seq)
        # a few missing PARTs on a noisy line: each of them several times in the window
        rounds = max(1, min(WINDOW // len(expected), round(4 * self.sizer.error_rate * room)))
        frame = encode_frame(P.request(P.CMD_FETCH, seq, P.fetch_body(seq0, gap, mask, rounds),
                                       limit)) + TAIL
        # twice where a frame often breaks (the device serves one copy): a window is lost
        # only if both are
        copies = 2 if self.sizer.error_rate * len(frame) > 0.2 else 1
        frame *= copies
        self.counters["frames"] += 1
        if time.monotonic() - self._last_answer > self.deadline:
            raise LinkError(f"{self.port}: no answer from the device for {self.deadline:g} s "
                            f"(FETCH; {self._summary()})")
        t0 = time.monotonic()
        try:
            self._write(frame)
        except _link_errors() as e:
            self._reopen(str(e) or type(e).__name__)
            return 0
        rto = self._rto(P.CMD_FETCH, 1.0)
        wait = t0 + rto
        # the device sends the PARTs back to back (after what it was still sending): once
        # bytes came and the line is quiet for a while, the window is over (its last PART
        # was lost or broken) - no need to wait for the timeout
        quiet = max(0.008, min(rto, 0.5 * self._rtt_any[0] if self._rtt_any else rto))
        heard = None
        arrived: dict[int, int] = {}        # offset -> intact copies of this window
        new = 0
        nacks = 0
        outcome = "timeout"
        try:
            while outcome == "timeout":
                now = time.monotonic()
                if now >= wait or (heard is not None and now - heard > quiet):
                    break
                data = self._read()
                if data:
                    heard = time.monotonic()            # (noise of a lost PART too)
                for ev in self.decoder.feed(data):
                    m = P.parse_message(ev.payload) if isinstance(ev, Frame) else None
                    if m is not None and m.version != P.VERSION:
                        self._other_version(m.version)
                    if m is None or m.seq not in fetches:
                        self.counters["stale" if m is not None else "damaged"] += 1
                        if m is not None and m.is_nack:
                            self.counters["nacks"] += 1
                            nacks += 1
                            if nacks >= copies and not arrived:
                                outcome = "nack"        # the FETCH was damaged
                        continue
                    if not m.is_part:
                        raise _Redo                     # gone: a restart, another request
                    part = P.parse_part(m.body)
                    if part.total != len(buf) or part.offset >= len(buf):
                        raise _Redo
                    self._last_answer = time.monotonic()
                    new += self._place(buf, have, part)
                    if m.seq == seq:
                        arrived[part.offset] = arrived.get(part.offset, 0) + 1
                if expected[-1] in arrived and (rounds == 1 or arrived.keys() >= set(expected)):
                    outcome = "done"
        except _link_errors() as e:
            self._reopen(str(e) or type(e).__name__)
        part_wire = wire_bytes(P.PART_HEADER_BYTES + room)
        if arrived:                 # the FETCH got through: each PART copy is an attempt
            for o in expected:
                got = min(rounds, arrived.get(o, 0))
                for k in range(rounds):
                    self.sizer.record(k < got, part_wire)
        else:                       # it did not (or every PART broke): one failure
            self.sizer.record(False, len(frame) // copies + part_wire)
        self.counters["parts"] += len(arrived)
        if outcome == "done":
            self._sample_rtt(P.CMD_FETCH, time.monotonic() - t0)
        elif outcome == "timeout" and heard is None:
            self.counters["timeouts"] += 1
        if not new:
            self.counters["retransmissions"] += 1
        return new

    def call(self, cmd: int, body: bytes = b"", *, ok: tuple[int, ...] = (P.ST_OK,),
             timeout: float | None = None) -> P.Message:
        """``request`` that raises DeviceError unless the status is in ``ok``."""
        m = self.request(cmd, body, timeout=timeout)
        if m.status not in ok:
            raise DeviceError(f"{self.port}: {P.command_name(cmd)} refused: "
                              f"{P.status_name(m.status)}", m.status)
        return m

    def link_report(self) -> dict[str, Any]:
        """Link counters and the frame sizes the link went through."""
        return dict(self.counters) | {"frame_bytes": self.frame_size,
                                      "frame_bytes_min": self.sizer.smallest,
                                      "frame_bytes_max": self.sizer.largest,
                                      "byte_error_rate": round(self.sizer.error_rate, 5)}

    # -- commands ----------------------------------------------------------------------------
    def info(self) -> P.Info:
        m = self.call(P.CMD_INFO)
        try:
            info = P.parse_info(m.body)
        except ValueError as e:
            raise DeviceError(f"{self.port}: unreadable INFO answer ({e})") from None
        self.max_body = max(P.MIN_BODY, info.max_body)
        self.stage_bytes = info.stage_bytes
        self.sizer.set_hi(P.HEADER_BYTES + self.max_body)
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
                         timeout=self.timeout if checkpoint else None,
                         key=(P.CMD_TRAIN, "checkpoint") if checkpoint else None)
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

    def _room(self, fixed: int) -> int:
        """Data bytes a chunked write sends: what fits the frames in force."""
        return max(8, min(self.max_body, self.frame_size - P.HEADER_BYTES) - fixed)

    def get_params(self, attempts: int = 3) -> bytes:
        """The exported parameters (GET_PARAMS in chunks; the device snapshots them at offset
        0 and reports the snapshot's CRC-32 in every chunk). Parameters read before in this
        session are not read again if the snapshot's CRC is theirs (one short request)."""
        last = self._params
        if last is not None:
            c = P.parse_params_chunk(self.call(P.CMD_GET_PARAMS, bytes(6)).body)
            if c.total == len(last) and c.crc == crc32(last):
                return last
        for _ in range(attempts):
            data = bytearray()
            crcs = set()
            total = None
            while total is None or len(data) < total:
                want = min(self.max_body - 12, 0xFFFF)  # in PARTs if the frames are small
                m = self.call(P.CMD_GET_PARAMS, len(data).to_bytes(4, "little")
                              + want.to_bytes(2, "little"))
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
                self._params = bytes(data)
                return self._params
        raise DeviceError(f"{self.port}: the parameters kept changing while being read "
                          f"(CRC mismatch {attempts} times)")

    def set_params(self, data: bytes) -> P.SetReply:
        offset = 0
        reply = None
        gaps = 0
        self.counters["requests"] += 1
        self._last_answer = time.monotonic()
        while offset < len(data) or reply is None:
            piece = data[offset:offset + self._room(8)]
            try:                            # each piece is cut for the frames in force
                m = self._whole(self._frame(P.CMD_SET_PARAMS, offset.to_bytes(4, "little")
                                            + len(data).to_bytes(4, "little") + piece))
            except _Redo:
                continue
            r = P.parse_set(m.body) if len(m.body) >= 13 else None
            if m.status != P.ST_OK:
                if m.status == P.ST_BAD_ARGUMENT and r is not None and r.total == len(data) \
                        and gaps < self.retries:
                    gaps += 1               # a piece sent again, a restart: where it is
                    offset, reply = r.filled, None
                    continue
                raise DeviceError(f"{self.port}: SET_PARAMS refused: "
                                  f"{P.status_name(m.status)}"
                                  + (f" (device expects {r.total} bytes)" if r else ""),
                                  m.status)
            reply = r
            offset += len(piece)
        if not reply.committed or reply.crc != crc32(data):
            raise DeviceError(f"{self.port}: SET_PARAMS did not commit the parameters")
        return reply

    def describe(self) -> dict[str, Any] | None:
        """The firmware's description of its model (JSON), or None if it has none; read
        once per model (the INFO model hash names it)."""
        info = self.last_info or self.info()
        if self._describe is not None and self._describe[0] == info.model_hash:
            return self._describe[1]
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
        desc = None
        if blob:
            try:
                desc = json.loads(blob.decode())
            except ValueError as e:
                raise DeviceError(f"{self.port}: unreadable model description ({e})") from None
        self._describe = (info.model_hash, desc)
        return desc

    def checkpoint(self) -> P.CheckpointReply:
        m = self.call(P.CMD_CHECKPOINT, timeout=self.timeout)
        return P.parse_checkpoint(m.body)

    def stats(self) -> P.Stats:
        return P.parse_stats(self.call(P.CMD_STATS).body)

    def reset(self, factory: bool = False) -> P.CheckpointReply:
        m = self.call(P.CMD_RESET, bytes([P.RESET_FACTORY if factory else P.RESET_RESTORE]),
                      timeout=self.timeout)
        return P.parse_checkpoint(m.body)
