"""The host's protocol constants equal the device's (pe_proto.h, pe_frame.h)."""

from __future__ import annotations

import re

from codegen.serial import protocol as P

from .helpers import SERIAL_DIR

NAMES = {
    "PE_PROTO_VERSION": P.VERSION, "PE_PROTO_HEADER_BYTES": P.HEADER_BYTES,
    "PE_PROTO_PART_HEADER_BYTES": P.PART_HEADER_BYTES, "PE_PROTO_REPLY_UNIT": P.REPLY_UNIT,
    "PE_PROTO_MIN_REPLY": P.MIN_REPLY, "PE_PROTO_QUIET_BYTES": P.QUIET_BYTES,
    "PE_PROTO_MIN_BODY": P.MIN_BODY, "PE_PROTO_HASH_BYTES": P.HASH_BYTES,
    "PE_TYPE_RESPONSE": P.TYPE_RESPONSE, "PE_TYPE_PART": P.TYPE_PART,
    "PE_TYPE_NACK": P.TYPE_NACK,
}


def _defines() -> dict[str, int]:
    out = {}
    for line in (SERIAL_DIR / "pe_proto.h").read_text().splitlines():
        m = re.match(r"#define (PE_\w+) \(?(-?(?:0x)?[0-9A-Fa-f]+)u?\)?", line)
        if m:
            out[m.group(1)] = int(m.group(2), 0)
    return out


def test_constants_match_the_c_header():
    c = _defines()
    checked = 0
    for cname, value in c.items():
        for prefix, py_prefix in (("PE_CMD_", "CMD_"), ("PE_ST_", "ST_"), ("PE_NACK_", "NACK_"),
                                  ("PE_TRAIN_", "TRAIN_"), ("PE_EVAL_", "EVAL_"),
                                  ("PE_RESET_", "RESET_"), ("PE_MODEL_", "MODEL_"),
                                  ("PE_DEVICE_", "DEVICE_")):
            if cname.startswith(prefix):
                py = py_prefix + cname[len(prefix):]
                assert getattr(P, py) == value, cname
                checked += 1
        if cname in NAMES:
            assert NAMES[cname] == value, cname
            checked += 1
    assert checked >= 47
    # every host command has a C twin
    for name in dir(P):
        if name.startswith("CMD_"):
            assert "PE_" + name in c, name
