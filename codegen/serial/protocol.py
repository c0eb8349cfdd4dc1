"""The pockengine serial protocol's messages (docs/serial-protocol.md), host side.

Mirrors ``runtime_c/runtime/serial/pe_proto.h`` (a test checks that every constant here equals
the C header's): version 2 has a 5-byte header ``version, type, reply limit (requests) or
status (responses), seq (u16)``, then the body (the rest of the frame); all fields
little-endian. Requests are built by ``request()``; the ``parse_*`` functions turn response
bodies into dataclasses.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, field

VERSION = 2
HEADER = struct.Struct("<BBBH")
HEADER_BYTES = HEADER.size            # 5
PART_HEADER_BYTES = HEADER_BYTES + 4  # + u16 offset, u16 total
REPLY_UNIT = 8                        # the reply limit counts 8-byte units (0: no limit)
MIN_REPLY = 16
MIN_BODY = 128
HASH_BYTES = 32
QUIET_BYTES = 3                       # damaged pieces shorter than this are line noise

# commands
CMD_INFO = 0x01
CMD_TRAIN = 0x02
CMD_INFER = 0x03
CMD_EVAL = 0x04
CMD_GET_PARAMS = 0x05
CMD_SET_PARAMS = 0x06
CMD_CHECKPOINT = 0x07
CMD_STATS = 0x08
CMD_RESET = 0x09
CMD_DESCRIBE = 0x0A
CMD_PUT = 0x0B
CMD_EXEC = 0x0C
CMD_FETCH = 0x0D
TYPE_RESPONSE = 0x80
TYPE_PART = 0xFE
TYPE_NACK = 0xFF
STAGEABLE = (CMD_TRAIN, CMD_INFER, CMD_EVAL)   # the requests that may be staged (PUT, EXEC)

COMMAND_NAMES = {CMD_INFO: "INFO", CMD_TRAIN: "TRAIN", CMD_INFER: "INFER", CMD_EVAL: "EVAL",
                 CMD_GET_PARAMS: "GET_PARAMS", CMD_SET_PARAMS: "SET_PARAMS",
                 CMD_CHECKPOINT: "CHECKPOINT", CMD_STATS: "STATS", CMD_RESET: "RESET",
                 CMD_DESCRIBE: "DESCRIBE", CMD_PUT: "PUT", CMD_EXEC: "EXEC",
                 CMD_FETCH: "FETCH"}

# statuses (a NACK's reason is one of the NACK_*)
ST_OK = 0
ST_DUPLICATE = 1
ST_SEQ_GAP = 2
ST_RUN_MISMATCH = 3
ST_BAD_VERSION = 16
ST_UNKNOWN_COMMAND = 17
ST_BAD_LENGTH = 18
ST_BAD_ARGUMENT = 19
ST_UNSUPPORTED = 20
ST_MODEL_ERROR = 21
ST_STORAGE_ERROR = 22
NACK_CRC = 32
NACK_COBS = 33
NACK_OVERSIZE = 34
NACK_SHORT = 35
NACK_HEADER = 36

STATUS_NAMES = {ST_OK: "ok", ST_DUPLICATE: "duplicate", ST_SEQ_GAP: "sequence gap",
                ST_RUN_MISMATCH: "run mismatch", ST_BAD_VERSION: "bad protocol version",
                ST_UNKNOWN_COMMAND: "unknown command", ST_BAD_LENGTH: "bad length",
                ST_BAD_ARGUMENT: "bad argument", ST_UNSUPPORTED: "unsupported",
                ST_MODEL_ERROR: "model error", ST_STORAGE_ERROR: "storage error",
                NACK_CRC: "bad CRC", NACK_COBS: "bad COBS", NACK_OVERSIZE: "oversize frame",
                NACK_SHORT: "short frame", NACK_HEADER: "bad header"}

# flags
TRAIN_PREDICT = 0x01
TRAIN_CHECKPOINT = 0x02
EVAL_RESET = 0x01
EVAL_TARGETS = 0x02
RESET_RESTORE = 0
RESET_FACTORY = 1
MODEL_TRAINING = 0x01
MODEL_CROSS_ENTROPY = 0x02
MODEL_MSE = 0x04
DEVICE_STORAGE = 0x01
DEVICE_RESTORED = 0x02

NAN_BITS = 0x7FC00000
STATS_FIELDS = ("frames_ok", "crc_errors", "cobs_errors", "oversize", "short_frames",
                "bad_header", "resent", "nacks", "train_applied", "train_duplicates",
                "train_rejected", "checkpoints", "checkpoint_errors", "last_seq", "steps",
                "checkpoint_generation", "last_loss_bits", "eval_total", "eval_correct",
                "staged", "parts")


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status, f"status {status}")


def command_name(cmd: int) -> str:
    return COMMAND_NAMES.get(cmd & 0x7F, f"command 0x{cmd:02x}")


@dataclass(frozen=True)
class Message:
    """A decoded frame: header fields and body (``status`` is a request's reply limit)."""

    type: int
    status: int
    seq: int
    body: bytes
    version: int = VERSION

    @property
    def is_nack(self) -> bool:
        return self.type == TYPE_NACK

    @property
    def is_part(self) -> bool:
        return self.type == TYPE_PART

    @property
    def command(self) -> int:
        return self.type & 0x7F


def reply_byte(limit: int | None) -> int:
    """The header byte of a reply limit in bytes (None: no limit)."""
    if limit is None:
        return 0
    return max(MIN_REPLY // REPLY_UNIT, min(255, limit // REPLY_UNIT))


def reply_limit(limit: int | None) -> int | None:
    """The reply limit a device applies for ``limit`` (what ``reply_byte`` can say)."""
    b = reply_byte(limit)
    return None if b == 0 else b * REPLY_UNIT


def request(cmd: int, seq: int, body: bytes = b"", reply: int | None = None) -> bytes:
    """A request's payload (header + body), to be framed; ``reply`` is the largest response
    frame payload the host takes (bytes, rounded down to 8; None: no limit)."""
    return HEADER.pack(VERSION, cmd, reply_byte(reply), seq & 0xFFFF) + body


def response(cmd: int, seq: int, status: int, body: bytes = b"") -> bytes:
    """A response's payload (used by tests and simulators)."""
    return HEADER.pack(VERSION, cmd | TYPE_RESPONSE, status, seq & 0xFFFF) + body


def parse_message(payload: bytes) -> Message | None:
    """The header and body of a payload, or None if it is shorter than a header."""
    if len(payload) < HEADER_BYTES:
        return None
    version, typ, status, seq = HEADER.unpack_from(payload)
    return Message(typ, status, seq, bytes(payload[HEADER_BYTES:]), version)


def bits_to_float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


# -- bodies -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Info:
    protocol: int
    model_flags: int
    max_body: int
    arena_bytes: int
    state_bytes: int
    export_bytes: int
    input_bytes: int
    output_bytes: int
    target_bytes: int
    num_classes: int
    last_seq: int
    steps: int
    run_id: int
    checkpoint_generation: int
    checkpoint_seq: int
    describe_bytes: int
    stage_bytes: int            # the largest request that can be staged (PUT/EXEC), 0: none
    device_flags: int
    model_hash: bytes
    board: str

    @property
    def training(self) -> bool:
        return bool(self.model_flags & MODEL_TRAINING)

    @property
    def loss(self) -> str | None:
        if self.model_flags & MODEL_CROSS_ENTROPY:
            return "cross_entropy"
        if self.model_flags & MODEL_MSE:
            return "mse"
        return None

    @property
    def storage(self) -> bool:
        return bool(self.device_flags & DEVICE_STORAGE)

    @property
    def restored(self) -> bool:
        return bool(self.device_flags & DEVICE_RESTORED)

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["model_hash"] = self.model_hash.hex()
        d["loss"] = self.loss
        return d


_INFO = struct.Struct("<BBH14IBB")


def parse_info(body: bytes) -> Info:
    if len(body) < _INFO.size + HASH_BYTES:
        raise ValueError(f"INFO body of {len(body)} bytes (need at least "
                         f"{_INFO.size + HASH_BYTES})")
    f = _INFO.unpack_from(body)
    n = f[-1]
    h = body[_INFO.size:_INFO.size + HASH_BYTES]
    board = body[_INFO.size + HASH_BYTES:_INFO.size + HASH_BYTES + n]
    if len(board) != n:
        raise ValueError("INFO body: board name cut short")
    return Info(*f[:-1], model_hash=bytes(h), board=board.decode("ascii", "replace"))


def info_body(info: Info) -> bytes:
    """Inverse of parse_info (for simulators and tests)."""
    name = info.board.encode()[:32]
    return _INFO.pack(info.protocol, info.model_flags, info.max_body, info.arena_bytes,
                      info.state_bytes, info.export_bytes, info.input_bytes, info.output_bytes,
                      info.target_bytes, info.num_classes, info.last_seq, info.steps,
                      info.run_id, info.checkpoint_generation, info.checkpoint_seq,
                      info.describe_bytes, info.stage_bytes, info.device_flags,
                      len(name)) + info.model_hash + name


_TRAIN_REQ = struct.Struct("<IIB3xi")


def train_body(run_id: int, sample_seq: int, x: bytes, label: int = 0, target: bytes = b"",
               flags: int = 0) -> bytes:
    return _TRAIN_REQ.pack(run_id, sample_seq, flags, label) + x + target


@dataclass(frozen=True)
class TrainReply:
    sample_seq: int
    next_seq: int           # the device's last applied sample + 1
    loss_bits: int
    prediction: int         # argmax before the update (-1: not asked)
    steps: int
    checkpoint_generation: int
    model_rc: int
    run_id: int

    @property
    def loss(self) -> float:
        return bits_to_float(self.loss_bits)

    @property
    def last_seq(self) -> int:
        return self.next_seq - 1


_TRAIN_REPLY = struct.Struct("<IIIiIIiI")


def parse_train(body: bytes) -> TrainReply:
    return TrainReply(*_TRAIN_REPLY.unpack_from(_need(body, _TRAIN_REPLY.size, "TRAIN")))


def eval_body(records: list[bytes], *, reset: bool, targets: bool) -> bytes:
    flags = (EVAL_RESET if reset else 0) | (EVAL_TARGETS if targets else 0)
    return struct.pack("<BBH", flags, len(records), 0) + b"".join(records)


def eval_record(x: bytes, label: int = 0, target: bytes | None = None) -> bytes:
    return x + target if target is not None else struct.pack("<i", label) + x


@dataclass(frozen=True)
class EvalReply:
    total: int
    correct: int
    squared_error: int
    results: tuple[int, ...]    # argmax (labels) or squared int8 error (targets) per sample


def parse_eval(body: bytes) -> EvalReply:
    total, correct, hi, lo, count = struct.unpack_from("<IIIIB", _need(body, 20, "EVAL"))
    if len(body) < 20 + 4 * count:
        raise ValueError(f"EVAL body of {len(body)} bytes for {count} results")
    results = struct.unpack_from(f"<{count}I", body, 20)
    return EvalReply(total, correct, (hi << 32) | lo, results)


@dataclass(frozen=True)
class Chunk:
    offset: int
    total: int
    crc: int
    data: bytes


def parse_params_chunk(body: bytes) -> Chunk:
    offset, total, crc = struct.unpack_from("<III", _need(body, 12, "GET_PARAMS"))
    return Chunk(offset, total, crc, bytes(body[12:]))


def parse_describe_chunk(body: bytes) -> Chunk:
    offset, total = struct.unpack_from("<II", _need(body, 8, "DESCRIBE"))
    return Chunk(offset, total, 0, bytes(body[8:]))


@dataclass(frozen=True)
class Part:
    offset: int
    total: int
    data: bytes


def parse_part(body: bytes) -> Part:
    offset, total = struct.unpack_from("<HH", _need(body, 4, "PART"))
    return Part(offset, total, bytes(body[4:]))


def put_body(offset: int, data: bytes) -> bytes:
    return struct.pack("<I", offset) + data


def parse_put(body: bytes) -> int:
    """PUT (and a refused EXEC): the bytes the device has staged."""
    return struct.unpack_from("<I", _need(body, 4, "PUT"))[0]


def exec_body(message: bytes) -> bytes:
    """EXEC of a staged message (u8 command, body): its length and CRC-32."""
    return struct.pack("<II", len(message), zlib.crc32(message) & 0xFFFFFFFF)


def fetch_body(seq: int, offset: int, mask: int = 1, rounds: int = 1) -> bytes:
    """FETCH: the PARTs of the cached response to request ``seq`` at ``offset + i * room``
    (room: the reply limit less the PART header) for every bit ``i`` set in ``mask``, all of
    them ``rounds`` (1..16) times over."""
    return struct.pack("<HHHB", seq & 0xFFFF, offset, mask, rounds)


@dataclass(frozen=True)
class SetReply:
    filled: int
    total: int
    crc: int
    committed: bool


def parse_set(body: bytes) -> SetReply:
    filled, total, crc, committed = struct.unpack_from("<IIIB", _need(body, 13, "SET_PARAMS"))
    return SetReply(filled, total, crc, bool(committed))


@dataclass(frozen=True)
class CheckpointReply:
    generation: int
    last_seq: int
    steps: int
    rc: int
    slot: int
    restored: bool


def parse_checkpoint(body: bytes) -> CheckpointReply:
    g, seq, steps, rc, slot, restored = struct.unpack_from("<IIIiBB",
                                                           _need(body, 18, "CHECKPOINT"))
    return CheckpointReply(g, seq, steps, rc, slot, bool(restored))


@dataclass(frozen=True)
class Stats:
    values: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, key: str) -> int:
        return self.values[key]

    @property
    def last_loss(self) -> float:
        return bits_to_float(self.values.get("last_loss_bits", NAN_BITS))


def parse_stats(body: bytes) -> Stats:
    n = len(body) // 4
    vals = struct.unpack_from(f"<{n}I", body)
    names = list(STATS_FIELDS) + [f"field{i}" for i in range(len(STATS_FIELDS), n)]
    return Stats(dict(zip(names, vals, strict=False)))


def _need(body: bytes, n: int, what: str) -> bytes:
    if len(body) < n:
        raise ValueError(f"{what} body of {len(body)} bytes (need {n})")
    return body


def is_nan_bits(bits: int) -> bool:
    return math.isnan(bits_to_float(bits))
