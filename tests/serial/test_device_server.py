"""The protocol server (pe_proto.c + pe_checkpoint.c) on the host with a toy model, built with
ASan/UBSan and driven through pipes: every command, exactly-once training, the link cache,
malformed frames, checkpoints across restarts and power cuts, a noisy link."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from codegen.errors import PockError
from codegen.serial import protocol as P
from codegen.serial.fault_proxy import FaultInjector, FaultyLink
from codegen.serial.framing import Frame, FrameDecoder, encode_frame
from codegen.serial.session import eval_over_serial, train_over_serial
from codegen.serial.transport import LinkError

from .helpers import Server, train_with_kills

N_IN, N_CLASSES = 16, 4


def data(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (n, N_IN)).astype(np.int8),
            rng.integers(0, N_CLASSES, n).astype(np.int64))


@pytest.fixture(scope="module")
def reference(proto_host):
    """A clean run: params_sha256 after 2 epochs of data() with seed 3, and the per-step
    losses."""
    with Server(proto_host) as s:
        r = train_over_serial(s.device, data(), epochs=2, seed=3)
    assert r["applied"] == 80 and r["resumed_from"] == 0
    return r


def test_info_and_chunked_describe(proto_host, tmp_path):
    with Server(proto_host, "--max-body", "128", "--storage", str(tmp_path / "ck")) as s:
        info = s.device.info()
        assert (info.protocol, info.max_body, info.input_bytes, info.output_bytes) == \
            (2, 128, 16, 4)
        assert info.training and info.loss == "cross_entropy" and info.storage
        assert (info.export_bytes, info.state_bytes, info.num_classes) == (272, 292, 4)
        assert info.board == "host-toy" and info.model_hash.startswith(b"pockengine-toy")
        assert info.describe_bytes > 128
        desc = s.device.describe()
        assert desc["training"]["parameters"] == ["w", "b"]
        assert s.device.counters["requests"] >= 4      # DESCRIBE took several chunks


def test_training_is_exactly_once(proto_host, reference):
    x, y = data()
    order = np.concatenate([np.random.default_rng(3).permutation(40) for _ in range(2)])
    with Server(proto_host) as s:
        d = s.device
        d.info()
        run = 0x1234
        for k in range(10):
            st, r = d.train(run, k + 1, x[order[k]].tobytes(), int(y[order[k]]))
            assert st == P.ST_OK and r.last_seq == k + 1
        # an old sample again: not applied; the last one again: its loss
        st, r = d.train(run, 4, x[order[3]].tobytes(), int(y[order[3]]))
        assert st == P.ST_DUPLICATE and r.last_seq == 10 and np.isnan(r.loss)
        st, r = d.train(run, 10, x[order[9]].tobytes(), int(y[order[9]]))
        assert st == P.ST_DUPLICATE and not np.isnan(r.loss)
        # a gap and another run are refused
        st, r = d.train(run, 12, x[0].tobytes(), 0)
        assert st == P.ST_SEQ_GAP and r.next_seq == 11
        st, r = d.train(run + 1, 11, x[0].tobytes(), 0)
        assert st == P.ST_RUN_MISMATCH
        # bad labels and lengths change nothing
        m = d.request(P.CMD_TRAIN, P.train_body(run, 11, x[0].tobytes(), 7))
        assert m.status == P.ST_BAD_ARGUMENT
        m = d.request(P.CMD_TRAIN, P.train_body(run, 11, x[0].tobytes()[:-1], 1))
        assert m.status == P.ST_BAD_LENGTH
        stats = d.stats()
        assert stats["train_applied"] == 10 and stats["train_duplicates"] == 2
        assert stats["train_rejected"] == 4
    # the device now resumes the reference run from sample 11 ... only if the run id matches:
    # here it is another run id, so a streamed run must be refused


def test_duplicate_request_answered_from_cache(proto_host):
    x, y = data(2)
    with Server(proto_host) as s:
        d = s.device
        d.info()
        frame = encode_frame(P.request(P.CMD_TRAIN, 77, P.train_body(5, 1, x[0].tobytes(),
                                                                     int(y[0]))))
        d.link.write(frame + frame)
        dec, msgs = FrameDecoder(), []
        deadline = time.monotonic() + 5
        while len(msgs) < 2 and time.monotonic() < deadline:   # (late PARTs of INFO: not ours)
            msgs += [ev for ev in dec.feed(d.link.read(4096))
                     if isinstance(ev, Frame) and P.parse_message(ev.payload).seq == 77]
        assert len(msgs) == 2 and msgs[0].payload == msgs[1].payload
        stats = d.stats()
        assert stats["resent"] == 1 and stats["train_applied"] == 1


def _junk(rng: random.Random) -> bytes:
    """One malformed transmission: random bytes, a bad CRC, a cut frame, a wrong length field,
    an oversize frame, a response-typed frame, a wrong version or an unknown command."""
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))
    good = P.request(P.CMD_INFO, rng.randrange(1 << 16), body)
    kind = rng.randrange(8)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    if kind == 1:
        f = bytearray(encode_frame(good))
        f[rng.randrange(1, len(f) - 1)] ^= 1 << rng.randrange(8)
        return bytes(f)
    if kind == 2:
        f = encode_frame(good)
        return f[:rng.randrange(1, len(f) - 1)] + b"\x00"
    if kind == 3:           # a request cut short (its body shorter than the command's)
        return encode_frame(P.request(P.CMD_TRAIN, 9, body[:rng.randrange(0, 20)]))
    if kind == 4:
        return encode_frame(bytes(rng.randrange(256) for _ in range(rng.randrange(300, 3000))))
    if kind == 5:
        return encode_frame(P.response(P.CMD_INFO, 3, 0, body))
    if kind == 6:
        return encode_frame(P.HEADER.pack(9, P.CMD_INFO, 0, 4) + body)
    return encode_frame(P.request(rng.choice([0, 0x0E, 0x30, 0x7F]), 5, body))


def test_malformed_frames_are_rejected_and_the_server_keeps_serving(proto_host):
    rng = random.Random(11)
    x, y = data(3)
    with Server(proto_host, "--max-body", "160") as s:
        d = s.device
        info = d.info()
        d.train(9, 1, x[0].tobytes(), int(y[0]))
        before = d.get_params()
        for i in range(400):
            d.link.write(_junk(rng))
            if i % 20 == 19:
                assert d.info().last_seq == 1          # still serving, nothing applied
        d.link.write(b"\x00")
        assert d.info().max_body == info.max_body
        assert d.get_params() == before
        st = d.stats()
        assert st["crc_errors"] > 20 and st["oversize"] > 20 and st["bad_header"] > 20
        assert st["train_applied"] == 1
        code, err = s.close()
    assert code == 0, err[-2000:]


def test_infer_eval_and_params(proto_host, tmp_path):
    x, y = data(30)
    with Server(proto_host) as s:
        d = s.device
        d.info()
        outs = [np.frombuffer(d.infer(v.tobytes()), np.int8) for v in x]
        r = eval_over_serial(d, (x, y))
        assert r["predictions"] == [int(o.argmax()) for o in outs]
        assert r["correct"] == sum(int(o.argmax() == t) for o, t in zip(outs, y, strict=True))
        assert r["device_total"] == 30 and r["device_correct"] == r["correct"]
        p = bytearray(d.get_params())
        assert len(p) == 272
        p[0:4] = (1000).to_bytes(4, "little")
        d.set_params(bytes(p))
        assert d.get_params() == bytes(p)
        m = d.request(P.CMD_SET_PARAMS, (0).to_bytes(4, "little") + (5).to_bytes(4, "little")
                      + b"abc")
        assert m.status == P.ST_BAD_ARGUMENT
        m = d.request(P.CMD_INFER, b"short")
        assert m.status == P.ST_BAD_LENGTH


def test_checkpoints_survive_restarts(proto_host, reference, tmp_path):
    ck = tmp_path / "ck.bin"
    x, y = data()
    with Server(proto_host, "--storage", str(ck)) as s:
        r = train_over_serial(s.device, (x[:20], y[:20]), epochs=1, seed=1,
                              checkpoint_every=5)
        assert r["checkpoint_generation"] >= 4
    with Server(proto_host, "--storage", str(ck)) as s:
        info = s.device.info()
        assert info.restored and info.last_seq == 20 and info.checkpoint_seq == 20
        r2 = train_over_serial(s.device, (x[:20], y[:20]), epochs=1, seed=1)
        assert r2["applied"] == 0 and r2["params_sha256"] == r["params_sha256"]
        with pytest.raises(PockError, match="another run.*--restart"):
            train_over_serial(s.device, data(), epochs=2, seed=3)
        r3 = train_over_serial(s.device, data(), epochs=2, seed=3, restart=True)
        assert r3["params_sha256"] == reference["params_sha256"]
        s.device.reset(factory=True)
    with Server(proto_host, "--storage", str(ck)) as s:
        info = s.device.info()
        assert not info.restored and info.last_seq == 0 and info.checkpoint_generation == 0


def test_power_cuts_while_checkpointing(proto_host, reference, tmp_path):
    """The process dies in the middle of the k-th storage write (k = 1 .. 40, covering the
    invalidation, state and header writes of several saves); each time the restarted server
    restores an intact checkpoint, streaming resumes, and the end result is the reference."""
    for k in range(1, 41, 3):
        ck = tmp_path / f"ck{k}.bin"
        cuts = 0
        while True:
            args = ["--storage", str(ck)] + (["--crash-after-writes", str(k)] if cuts == 0
                                              else [])
            s = Server(proto_host, *args)
            try:
                r = train_over_serial(s.device, data(), epochs=2, seed=3, checkpoint_every=4)
                s.close()
                break
            except LinkError:
                code, err = s.close()
                assert code == 3, err[-2000:]
                cuts += 1
        assert cuts == 1
        assert r["params_sha256"] == reference["params_sha256"], k
        assert r["resumed_from"] % 4 == 0


def test_kills_at_random_points_resume_to_the_same_result(proto_host, tmp_path):
    """SIGKILL at 8 random points of the run (right after a sample's answer, at random sample
    counts); every restart resumes from the newest checkpoint and the final parameters equal
    an uninterrupted run."""
    big = data(200, seed=4)
    with Server(proto_host) as s:
        clean = train_over_serial(s.device, big, epochs=2, seed=5)
    ck = tmp_path / "ck.bin"
    r, kills, resumes = train_with_kills(
        lambda life: Server(proto_host, "--storage", str(ck)), big,
        random.Random(7).sample(range(5, 395), 8), epochs=2, seed=5, checkpoint_every=7)
    assert kills == 8
    assert r["params_sha256"] == clean["params_sha256"]
    assert sum(1 for v in resumes[1:] if v) >= 3     # restarts resumed mid-run
    assert all(v % 7 == 0 or v == 400 for v in resumes if v)   # ... from a checkpoint


def test_noisy_link(proto_host, reference):
    """1% of bytes corrupted, 2% of frames dropped, 2% duplicated, both directions."""
    def wrap(link):
        return FaultyLink(link, FaultInjector(0.01, 0.02, 0.02, seed=1),
                          FaultInjector(0.01, 0.02, 0.02, seed=2))

    with Server(proto_host, timeout=0.3, retries=100, wrap=wrap) as s:
        r = train_over_serial(s.device, data(), epochs=2, seed=3)
        faults = (s.device.link.tx.counts, s.device.link.rx.counts)
    assert r["params_sha256"] == reference["params_sha256"]
    assert r["loss"] == reference["loss"]
    assert r["link"]["retransmissions"] > 10
    assert all(c.corrupted_bytes and c.dropped and c.duplicated for c in faults)
    assert r["device"]["crc_errors"] > 0 and r["device"]["resent"] > 0


def test_mse_targets(proto_host):
    x, _ = data(12)
    t = np.random.default_rng(1).integers(-100, 100, (12, 4)).astype(np.int8)
    with Server(proto_host, "--mse") as s:
        info = s.device.info()
        assert info.loss == "mse" and info.target_bytes == 4
        r = train_over_serial(s.device, (x, t), epochs=1, seed=0)
        assert r["applied"] == 12 and r["online_accuracy"] is None
        e = eval_over_serial(s.device, (x, t))
        outs = [np.frombuffer(s.device.infer(v.tobytes()), np.int8).astype(int) for v in x]
        assert e["squared_error"] == sum(int(((o - tt) ** 2).sum())
                                         for o, tt in zip(outs, t.astype(int), strict=True))
