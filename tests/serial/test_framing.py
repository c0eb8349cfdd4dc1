"""Host framing (COBS + CRC-32): known vectors, round trips, damage, and byte-for-byte
agreement with the device's encoder (pe_frame.c)."""

from __future__ import annotations

import os
import random
import subprocess
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.serial.framing import (
    Frame,
    FrameDecoder,
    FrameError,
    cobs_decode,
    cobs_encode,
    crc32,
    decode_frame,
    encode_frame,
)

from .helpers import SAN_ENV

# the examples of Cheshire & Baker's paper / the usual COBS test vectors
VECTORS = [
    (b"", b"\x01"),
    (b"\x00", b"\x01\x01"),
    (b"\x00\x00", b"\x01\x01\x01"),
    (b"\x11\x22\x00\x33", b"\x03\x11\x22\x02\x33"),
    (b"\x11\x22\x33\x44", b"\x05\x11\x22\x33\x44"),
    (b"\x11\x00\x00\x00", b"\x02\x11\x01\x01\x01"),
    (bytes(range(1, 255)), b"\xff" + bytes(range(1, 255))),
    (bytes(range(255)), b"\x01\xff" + bytes(range(1, 255))),
    (bytes(range(1, 256)), b"\xff" + bytes(range(1, 255)) + b"\x02\xff"),
]


@pytest.mark.parametrize("raw,enc", VECTORS)
def test_cobs_vectors(raw, enc):
    assert cobs_encode(raw) == enc
    assert cobs_decode(enc) == raw


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=1200))
def test_frames_round_trip(payload):
    frame = encode_frame(payload)
    assert frame[0] == 0 and frame[-1] == 0 and 0 not in frame[1:-1]
    assert len(frame) <= len(payload) + 4 + (len(payload) + 4) // 254 + 3
    assert decode_frame(frame[1:-1]) == payload
    events = FrameDecoder().feed(frame)
    assert events == [Frame(payload, crc32(payload))]


def test_crc_is_zlib():
    for n in (0, 1, 7, 100, 1000):
        data = os.urandom(n)
        assert crc32(data) == zlib.crc32(data)


def test_damage_is_reported_and_the_stream_recovers():
    rng = random.Random(5)
    dec = FrameDecoder(max_bytes=300)
    good = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) for _ in range(50)]
    kinds = set()
    for payload in good:
        frame = bytearray(encode_frame(payload))
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 50)))
        damaged = bytearray(frame)
        damaged[rng.randrange(1, len(frame) - 1)] ^= 1 << rng.randrange(8)
        events = dec.feed(junk + bytes(damaged) + bytes(frame))
        assert events[-1] == Frame(payload, crc32(payload))
        assert not any(isinstance(e, Frame) and e.payload != payload for e in events)
        kinds |= {e.kind for e in events if isinstance(e, FrameError)}
    # an oversized frame is dropped without being buffered
    assert isinstance(dec.feed(b"\x00" + b"\x05" * 1000 + b"\x00")[0], FrameError)
    assert dec.feed(encode_frame(b"ok")) == [Frame(b"ok", crc32(b"ok"))]
    assert {"crc", "cobs"} <= kinds


def test_device_encoder_matches(serial_unit):
    """pe_frame_encode and encode_frame agree byte for byte (zeros, long runs, 254 edges)."""
    rng = random.Random(1)
    payloads = [b"", b"\x00", b"\x00" * 300, bytes(range(1, 256)) * 3]
    for n in list(range(0, 600, 7)) + [253, 254, 255, 508, 509, 510, 2000]:
        payloads.append(bytes(rng.choice((0, rng.randrange(1, 256))) for _ in range(n)))
        payloads.append(bytes(rng.randrange(1, 256) for _ in range(n)))
    text = "".join(p.hex() + "\n" for p in payloads)
    out = subprocess.run([str(serial_unit), "encode"], input=text, capture_output=True,
                         text=True, check=True, env=os.environ | SAN_ENV).stdout.split()
    assert len(out) == len(payloads)
    for p, enc in zip(payloads, out, strict=True):
        assert bytes.fromhex(enc) == encode_frame(p), p[:20]
