"""The host side over TCP as it meets an emulator: pyserial ``socket://`` URLs, the fault proxy,
and reconnecting after the device end was killed and restarted."""

from __future__ import annotations

import random
import socket
import threading
import time

import numpy as np
import pytest

from codegen.serial.client import Device
from codegen.serial.fault_proxy import FaultInjector, FaultProxy
from codegen.serial.framing import encode_frame
from codegen.serial.session import train_over_serial
from codegen.serial.transport import LinkError

from .helpers import Server, TcpDevice


def data(n=60, seed=2):
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, (n, 16)).astype(np.int8), rng.integers(0, 4, n)


@pytest.fixture(scope="module")
def clean(proto_host):
    with Server(proto_host) as s:
        return train_over_serial(s.device, data(), epochs=2, seed=1)


def test_fault_injector_counts_and_keeps_frames_whole():
    inj = FaultInjector(corrupt=0.0, drop=0.5, duplicate=0.3, seed=3)
    frames = [encode_frame(bytes([i + 1]) * 10) for i in range(200)]
    out = inj.process(b"".join(frames)[:-3]) + inj.process(b"".join(frames)[-3:])
    c = inj.counts
    assert c.units == 400                         # a frame and its leading delimiter each
    assert c.dropped > 100 and c.duplicated > 50 and c.corrupted_bytes == 0
    for f in frames:
        assert out.count(f[1:]) in (0, 1, 2)


def test_train_through_tcp(proto_host, clean, tmp_path):
    dev = TcpDevice(proto_host, "--storage", str(tmp_path / "ck")).start()
    try:
        with Device(f"socket://127.0.0.1:{dev.port}", timeout=2.0) as d:
            r = train_over_serial(d, data(), epochs=2, seed=1)
        assert r["params_sha256"] == clean["params_sha256"]
    finally:
        dev.stop()


def test_fault_proxy(proto_host, clean):
    dev = TcpDevice(proto_host).start()
    try:
        with FaultProxy(dev.address, corrupt=0.01, drop=0.02, duplicate=0.02, seed=4) as px:
            with Device(px.url, timeout=0.3, retries=100) as d:
                r = train_over_serial(d, data(), epochs=2, seed=1)
            counts = px.counts()
        assert r["params_sha256"] == clean["params_sha256"]
        for direction in ("to_device", "to_host"):
            c = counts[direction]
            assert c["corrupted_bytes"] > 0 and c["dropped"] > 0 and c["duplicated"] > 0
        assert r["link"]["retransmissions"] > 0
    finally:
        dev.stop()


def test_reconnects_after_the_device_is_killed(proto_host, clean, tmp_path):
    """The device end (server process and port) is killed 5 times while training runs (at
    random samples) and comes back 0.2 s later; the client reconnects, streaming resumes from
    the restored checkpoint, and the result equals the clean run."""
    dev = TcpDevice(proto_host, "--storage", str(tmp_path / "ck")).start()
    rng = random.Random(2)
    at = sorted(rng.sample(range(20, 580), 5))
    go = threading.Event()
    kills = []

    def chaos():
        while len(kills) < 5 and go.wait(30):
            go.clear()
            dev.kill()
            kills.append(time.monotonic())
            time.sleep(0.2)
            dev.start()

    def progress(done, total, fields):
        if at and done >= at[0]:
            at.pop(0)
            go.set()

    t = threading.Thread(target=chaos, daemon=True)
    t.start()
    try:
        with Device(f"socket://127.0.0.1:{dev.port}", timeout=1.0, reconnect=20) as d:
            r = train_over_serial(d, data(600, 9), epochs=1, seed=1, checkpoint_every=10,
                                  progress=progress)
        t.join(timeout=10)
        with Server(proto_host) as s:
            want = train_over_serial(s.device, data(600, 9), epochs=1, seed=1)
        assert len(kills) == 5
        assert r["link"]["reconnects"] >= 5 and r["rewinds"] >= 1
        assert r["params_sha256"] == want["params_sha256"]
    finally:
        dev.stop()


def test_no_device_is_a_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(LinkError, match=f"socket://127.0.0.1:{port}: cannot open"):
        Device(f"socket://127.0.0.1:{port}")
    # a listener that never answers: the request gives up with a one-line error
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    with (Device(f"socket://127.0.0.1:{ls.getsockname()[1]}", timeout=0.1, retries=2) as d,
          pytest.raises(LinkError, match="no answer to INFO after 3 attempts")):
        d.info()
    ls.close()
