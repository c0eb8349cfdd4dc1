"""Graceful degradation of the serial link, on the host-built server (ASan/UBSan): the frame
size estimate, large requests staged in pieces (PUT/EXEC) and large answers reassembled from
PARTs (FETCH), their refusals, exactly-once training at 5 % byte corruption with kills
(counted from the server's own trace), a dead link's deadline, old firmware."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import numpy as np
import pytest

from codegen.cli import main
from codegen.serial import protocol as P
from codegen.serial.client import Device, FrameSizer
from codegen.serial.fault_proxy import FaultInjector, FaultyLink
from codegen.serial.framing import FrameDecoder, encode_frame
from codegen.serial.session import eval_over_serial, train_over_serial
from codegen.serial.transport import LinkError

from .helpers import Server, train_with_kills
from .ledger import replay

N_IN, N_CLASSES = 16, 4


def data(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (n, N_IN)).astype(np.int8),
            rng.integers(0, N_CLASSES, n).astype(np.int64))


# -- the frame size estimate -------------------------------------------------------------------
def _channel(sizer: FrameSizer, e: float, n: int, seed: int,
             rates: list[float] | None = None) -> list[int]:
    """n exchanges of two frames of the current size on a line damaging bytes with rate e."""
    rng = random.Random(seed)
    sizes = []
    for _ in range(n):
        wire = 2 * (sizer.size + 8)
        sizer.record(rng.random() < (1.0 - e) ** wire, wire)
        sizes.append(sizer.size)
        if rates is not None:
            rates.append(sizer.error_rate)
    return sizes


@pytest.mark.parametrize("e", [0.0, 0.01, 0.02, 0.05, 0.1])
def test_frame_size_settles_where_data_per_attempt_is_largest(e):
    sizer = FrameSizer(1029)
    rates: list[float] = []
    sizes = _channel(sizer, e, 600, seed=1, rates=rates)
    tail = sizes[-200:]
    if e == 0:
        assert min(tail) == 1029                   # a clean link: the device's frames
        return
    if e >= 0.1:                                   # beyond what a round trip survives
        assert max(tail) <= 32 and sizer.error_rate > 0.05
        return
    best = 12 + 1 / e                              # data per attempt d(1-e)^d peaks at 1/e
    assert 0.6 * best <= float(np.median(tail)) <= 1.5 * best
    assert 0.7 * e <= float(np.median(rates[-200:])) <= 1.4 * e


def test_frame_size_follows_a_link_that_gets_worse_and_better():
    sizer = FrameSizer(261)
    assert 40 <= sizer.size <= 80                   # a modest start (prior)
    assert _channel(sizer, 0.0, 40, seed=2)[-1] == 261
    worse = _channel(sizer, 0.05, 80, seed=3)
    first_small = next(i for i, s in enumerate(worse) if s <= 48)
    assert first_small < 50 and sizer.smallest <= 40
    assert _channel(sizer, 0.0, 60, seed=4)[-1] == 261 and sizer.largest == 261


# -- staging and parts on the server ------------------------------------------------------------
def test_small_frames_carry_every_command(proto_host, tmp_path):
    """With 24-byte frames (fixed) every request and answer is split: INFO, DESCRIBE and
    GET_PARAMS answers come in PARTs, TRAIN and EVAL requests are staged; the results equal
    those of 256-byte frames."""
    x, y = data(12)
    runs = {}
    for frame in (None, 24):
        with Server(proto_host, "--xfer-bytes", "600") as s:
            d = s.device
            d.fixed_frame = frame
            info = d.info()
            r = train_over_serial(d, (x, y), epochs=1, seed=2)
            e = eval_over_serial(d, (x, y))
            out = np.frombuffer(d.infer(x[0].tobytes()), np.int8)
            d.set_params(r["_params"][::-1])
            back = d.get_params()
            runs[frame] = (info, r, e, out, back, dict(d.counters), d.stats())
    big, small = runs[None], runs[24]
    assert small[0] == big[0] and small[0].stage_bytes == 600
    assert small[1]["params_sha256"] == big[1]["params_sha256"]
    assert small[1]["loss"] == big[1]["loss"]
    assert small[2]["predictions"] == big[2]["predictions"]
    assert np.array_equal(small[3], big[3]) and small[4] == big[4]
    c, stats = small[5], small[6]
    assert c["staged"] >= 12 + 1 and c["parts"] > 30 and big[5]["staged"] == 0
    assert stats["staged"] >= 13 and stats["parts"] > 30 and stats["train_applied"] == 12


def test_staging_and_fetch_refusals(proto_host):
    x, y = data(2)
    with Server(proto_host, "--xfer-bytes", "300") as s:
        d = s.device
        d.info()
        msg = bytes([P.CMD_TRAIN]) + P.train_body(7, 1, x[0].tobytes(), int(y[0]))
        m = d.request(P.CMD_PUT, P.put_body(0, msg[:10]))
        assert m.status == P.ST_OK and P.parse_put(m.body) == 10
        m = d.request(P.CMD_PUT, P.put_body(12, msg[12:]))        # a gap: where it is
        assert m.status == P.ST_SEQ_GAP and P.parse_put(m.body) == 10
        m = d.request(P.CMD_PUT, P.put_body(10, msg[10:]))
        assert m.status == P.ST_OK and P.parse_put(m.body) == len(msg)
        bad = bytearray(msg)
        bad[-1] ^= 1                                               # not what was staged
        m = d.request(P.CMD_EXEC, P.exec_body(bytes(bad)))
        assert m.type == P.CMD_EXEC | P.TYPE_RESPONSE and m.status == P.ST_SEQ_GAP
        m = d.request(P.CMD_EXEC, P.exec_body(msg))                # staging was dropped
        assert m.status == P.ST_SEQ_GAP and d.stats()["train_applied"] == 0
        for at in (0, 20):
            d.request(P.CMD_PUT, P.put_body(at, msg[at:at + 20]))
        m = d.request(P.CMD_EXEC, P.exec_body(msg))
        assert m.type == P.CMD_TRAIN | P.TYPE_RESPONSE and m.status == P.ST_OK
        assert P.parse_train(m.body).last_seq == 1
        m = d.request(P.CMD_EXEC, P.exec_body(msg))                # consumed: not twice
        assert m.status == P.ST_SEQ_GAP and d.stats()["train_applied"] == 1
        info = bytes([P.CMD_INFO])
        d.request(P.CMD_PUT, P.put_body(0, info))
        m = d.request(P.CMD_EXEC, P.exec_body(info))               # only TRAIN/INFER/EVAL
        assert m.type == P.CMD_EXEC | P.TYPE_RESPONSE and m.status == P.ST_BAD_ARGUMENT
        assert d.request(P.CMD_PUT, P.put_body(0, bytes(250))).status == P.ST_OK
        m = d.request(P.CMD_PUT, P.put_body(250, bytes(51)))       # beyond the buffer
        assert m.status == P.ST_BAD_LENGTH and P.parse_put(m.body) == 250
        # FETCH of an answer the device does not hold, or with a bad mask: refused
        m = d._frame(P.CMD_FETCH, P.fetch_body((d.seq + 7) & 0xFFFF, 0))
        assert m.type == P.CMD_FETCH | P.TYPE_RESPONSE and m.status == P.ST_BAD_ARGUMENT
        m = d._frame(P.CMD_FETCH, P.fetch_body(d.seq, 0, mask=0))
        assert m.status == P.ST_BAD_ARGUMENT
        assert d.stats()["train_applied"] == 1
        code, err = s.close()
    assert code == 0, err[-2000:]


def _frames(d: Device, seconds: float = 1.0) -> list[P.Message]:
    dec, out = FrameDecoder(), []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out += [P.parse_message(ev.payload) for ev in dec.feed(d.link.read(4096))
                if not isinstance(ev, Exception)]
    return out


def test_fetch_windows_and_duplicate_copies(proto_host):
    """A FETCH sends the masked PARTs, `rounds` times over; a second copy of the same FETCH
    (sent twice on a noisy line) is ignored."""
    with Server(proto_host, "--max-body", "400") as s:
        d = s.device
        d.info()
        d.fixed_frame = 24
        m = d._frame(P.CMD_INFO, b"")                  # 24-byte reply limit: a PART
        assert m.is_part and P.parse_part(m.body).total > 90
        seq0, total = m.seq, P.parse_part(m.body).total
        room = P.reply_limit(d.frame_size) - P.PART_HEADER_BYTES
        fetch = encode_frame(P.request(P.CMD_FETCH, 999, P.fetch_body(seq0, 0, 0b101, 2),
                                       d.frame_size)) + b"\x00"
        d.link.write(fetch + fetch)
        got = [P.parse_part(f.body).offset for f in _frames(d) if f is not None and f.is_part]
        assert got == [0, 2 * room] * 2 and 2 * room < total
        assert d.stats()["parts"] >= 5


def test_exactly_once_at_five_percent_with_kills(proto_host, tmp_path):
    """5 % of the bytes corrupted, 2 % of the frames dropped, 2 % duplicated and 1 %
    delayed, both directions, and the server SIGKILLed twice: the server's own trace
    shows every sample applied exactly once, in order, to the parameters it ends with."""
    x, y = data(12, seed=6)
    with Server(proto_host) as s:
        clean = train_over_serial(s.device, (x, y), epochs=1, seed=3)
    ck, trace = tmp_path / "ck.bin", tmp_path / "trace.txt"

    def start(life):
        def wrap(link):
            return FaultyLink(link, FaultInjector(0.05, 0.02, 0.02, 100 + life, 0.01, 0.05),
                              FaultInjector(0.05, 0.02, 0.02, 200 + life, 0.01, 0.05))

        return Server(proto_host, "--storage", str(ck), "--trace", str(trace), wrap=wrap,
                      timeout=1.0, retries=1000)

    # power cuts right after the answers of samples 5 and 10 (checkpoints: 3, 6, 9, 12)
    r, kills, _ = train_with_kills(start, (x, y), [5, 10], epochs=1, seed=3,
                                   checkpoint_every=3)
    ledger = replay(trace.read_text().splitlines())
    assert kills == 2 and ledger.lives >= 3
    assert ledger.lost(12) == 0 and ledger.twice() == 0 and ledger.in_order(12)
    assert ledger.applications >= 12 + 2 + 1          # 4, 5 and 10 replayed after restores
    assert r["params_sha256"] == clean["params_sha256"]
    assert r["link"]["frame_bytes_min"] < 48


def test_ledger_counts_what_the_final_state_saw():
    lines = ["@pe:trace restored seq=0 n=0"] + [f"@pe:trace applied seq={k} n={k}"
                                                for k in (1, 2, 3)]
    lines += ["@pe:trace checkpoint seq=3 n=1", "@pe:trace applied seq=4 n=4",
              "@pe:trace restored seq=3 n=1", "@pe:trace applied seq=4 n=4",
              "@pe:trace applied seq=5 n=5"]
    ok = replay(lines)
    assert ok.applied == (1, 2, 3, 4, 5) and ok.lost(5) == 0 and ok.twice() == 0
    assert ok.applications == 6 and ok.lives == 2
    doubled = replay(lines + ["@pe:trace applied seq=5 n=6"])
    assert doubled.twice() == 1 and not doubled.in_order(5)
    skipped = replay(lines[:-1] + ["@pe:trace applied seq=6 n=5"])
    assert skipped.lost(6) == 1
    reset = replay(lines + ["@pe:trace restored seq=0 n=0", "@pe:trace applied seq=1 n=1"])
    assert reset.applied == (1,) and reset.lost(5) == 4


# -- dead links and old firmware ---------------------------------------------------------------
def test_a_dead_link_ends_at_the_deadline():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    t0 = time.monotonic()
    with (Device(f"socket://127.0.0.1:{ls.getsockname()[1]}", timeout=0.2, deadline=1.0) as d,
          pytest.raises(LinkError, match=r"no answer from the device for 1 s \(INFO")):
        d.info()
    assert time.monotonic() - t0 < 5
    ls.close()


class _OldFirmware:
    """A device running version-1 firmware behind a TCP port: it answers every frame as
    pe_proto.c did (8-byte header: bad-version status for another version, a NACK for a
    frame shorter than its header)."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.port = self.ls.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            conn, _ = self.ls.accept()
        except OSError:
            return
        dec = FrameDecoder()
        while True:
            try:
                chunk = conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            for ev in dec.feed(chunk):
                if isinstance(ev, Exception):
                    continue
                f = ev.payload
                if len(f) < 8:
                    reply = struct.pack("<BBBBHH", 1, 0xFF, 0, 36, 0, 0)
                else:
                    reply = struct.pack("<BBBBHHB", 1, f[1] | 0x80, 0, 16,
                                        f[4] | f[5] << 8, 1, 1)
                conn.sendall(encode_frame(reply))


def test_an_old_firmware_is_named_on_one_line(capsys, tmp_path):
    old = _OldFirmware()
    npz = tmp_path / "d.npz"
    np.savez(npz, x=data(4)[0], y=data(4)[1])
    t0 = time.monotonic()
    status = main(["train", "--port", f"socket://127.0.0.1:{old.port}", "--data", str(npz),
                   "--reconnect", "0"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "speaks serial protocol version 1" in err and "version 2" in err
    assert time.monotonic() - t0 < 10
    old.ls.close()


def test_an_old_host_gets_a_bad_version_answer_it_can_read(proto_host):
    """A version-1 request (8-byte header) gets status 16 in version 1's layout."""
    with Server(proto_host) as s:
        s.device.link.write(encode_frame(struct.pack("<BBBBHH", 1, P.CMD_INFO, 0, 0, 0x1234,
                                                     0)))
        (m,) = [f for f in _frames(s.device, 0.5)]
    assert m is not None
    raw = P.HEADER.pack(m.version, m.type, m.status, m.seq) + m.body
    _, typ, _, status, seq, length = struct.unpack_from("<BBBBHH", raw)
    assert (typ, status, seq, length, raw[8:]) == (0x81, P.ST_BAD_VERSION, 0x1234, 1, b"\x02")


def test_noise_between_frames_is_not_nacked(proto_host):
    with Server(proto_host) as s:
        d = s.device
        d.info()
        before = d.stats()
        d.link.write(b"\x00\x17\x00\x00\x42\x99\x00")       # 1 and 2 bytes of noise
        damaged = bytearray(encode_frame(P.request(P.CMD_STATS, 5)))
        damaged[3] ^= 0x10
        d.link.write(bytes(damaged))                        # a damaged frame: NACKed
        after = d.stats()
    assert after["nacks"] == before["nacks"] + 1 and after["crc_errors"] == 1
    assert after["short_frames"] == before["short_frames"] + 2
