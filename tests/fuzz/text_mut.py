"""YAML training specs and board files for the fuzz campaign, and the hostile strings they carry.

``spec_text(rng)`` / ``board_text(rng, boards, marker)``: a document that is valid, nearly valid
(one value, key or structure perturbed) or hostile at the text level — YAML aliases and alias
bombs, merge keys, deep nesting, duplicate keys, tags (``!!python/object``...), tabs, NUL and
0xFF bytes, a BOM, huge numbers, very long strings. Hostile strings that would run a shell
command (``$(shell touch MARKER)``, ``; touch MARKER``...) name a marker file the campaign
checks afterwards. ``short_spec(rng)``: a ``--train`` short form.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import yaml

MARKER = "PE_FUZZ_MARKER"       # replaced by the case's marker path


def hostile_strings() -> list[str]:
    m = MARKER
    return [
        f"$(shell touch {m})", f"-mcpu=cortex-m4;touch {m}", f"`touch {m}`",
        f"-DX=$$(touch {m})", f"x\n\ttouch {m}", f"-mthumb\nall:\n\ttouch {m}",
        f"-mcpu=cortex-m4 && touch {m}", f"-mcpu=cortex-m4|touch {m}", f"'; touch {m}; '",
        f"-fplugin={m}", f"-Wl,--plugin={m}", f"-specs={m}", "-B/tmp", "-wrapper,touch",
        "*/ #include \"x\"", "/*", "../../x", "a\x00b", "\u202e", "x" * 5000,
        "#", "\\", "%", "-DQ=\"", "${HOME}", "@x@", ";", "-mcpu=cortex-m4 -mthumb",
        "-Wl,-Map=/etc/passwd", f"-DPE={m}", "-m", "-D", "-O9", "--target=../x",
    ]


VALUES: list[Any] = [None, True, False, 0, -1, 1, 2**31 - 1, 2**31, 2**32 + 1, 2**63,
                     10**400, -10**30, 0.5, 1e39, -1e39, float("nan"), float("inf"), 1e-50,
                     "", "all", "last 4", "last 0", "first 99999999999", "bias", "weight",
                     "both", "sgd", "adam", "momentum", "fp32", "int8", "none", "int32",
                     "mse", "cross_entropy", [], {}, [None], [1, 2], ["all"], {"a": 1},
                     "x" * 2000, "\t", "é", "256 KiB", "0 B", "1.5 KiB", "99999999999999 GiB"]

SPEC_KEYS = {
    "loss": ["cross_entropy", "mse"],
    "trainable": [[{"layers": "last 2", "params": "bias"}],
                  [{"layers": [0, -1], "params": "weight", "channels": 0.5}],
                  {"layers": "all", "params": "both"}],
    "optimizer": [{"name": "sgd", "lr": 0.01, "momentum": 0.9},
                  {"name": "adam", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
                  "momentum"],
    "schedule": [{"name": "step", "step_size": 2, "gamma": 0.5},
                 {"name": "warmup", "warmup_steps": 3},
                 {"name": "cosine", "total_steps": 20, "warmup_steps": 2, "min_lr": 0.001},
                 "constant"],
    "backward": ["fp32", "int8"],
    "master_weights": ["none", "fp32", "int32"],
    "accumulate": [1, 2],
}


def _pick(rng: np.random.Generator, seq: list) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _perturb(d: Any, rng: np.random.Generator, extra: list[Any]) -> Any:
    """Replace one value somewhere in a nested document (or add/remove a key)."""
    d = copy.deepcopy(d)
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in list(node):
                paths.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i])

    walk(d)
    if not paths:
        return _pick(rng, VALUES + extra)
    parent, key = _pick(rng, paths)
    r = rng.random()
    if r < 0.1 and isinstance(parent, dict):
        del parent[key]
    elif r < 0.2 and isinstance(parent, dict):
        parent[_pick(rng, ["colour", "1", "layers", "Name", "x" * 100])] = _pick(rng, VALUES)
    else:
        parent[key] = _pick(rng, VALUES + extra)
    return d


def _text_damage(text: str, rng: np.random.Generator) -> bytes:
    lines = text.splitlines() or [""]
    choice = int(rng.integers(12))
    if choice == 0:     # alias bomb
        bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
            f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
        key = lines[0].split(":")[0] if ":" in lines[0] else "trainable"
        return ("\n".join(bomb + [f"{key}: *a9"] + lines[1:]) + "\n").encode()
    if choice == 1:     # an alias / merge key
        return (f"base: &b {{name: x}}\nmerged:\n  <<: *b\n{text}").encode()
    if choice == 2:
        return b"[" * int(rng.integers(50, 30000)) + b"\n" + text.encode()
    if choice == 3:
        k = int(rng.integers(len(lines)))
        return ("\n".join(lines + [lines[k]]) + "\n").encode()     # duplicate key
    if choice == 4:
        p = int(rng.integers(len(text) + 1))
        return text.encode()[:p] + bytes([0xFF]) + text.encode()[p:]
    if choice == 5:
        return text.encode().replace(b" ", b"\t", 1)
    if choice == 6:
        return b"\xef\xbb\xbf" + text.encode()
    if choice == 7:
        tag = _pick(rng, ["!!python/object/apply:os.system ['touch PE_FUZZ_MARKER']",
                          "!!python/name:os.system", "!!binary aGVsbG8=", "!!set {a, b}",
                          "!!timestamp 2001-12-14", "!!float nan", "!<tag:x> y", "!!int x"])
        key = lines[0].split(":")[0] if ":" in lines[0] else "x"
        return (f"{key}: {tag}\n" + "\n".join(lines[1:]) + "\n").encode()
    if choice == 8:
        p = int(rng.integers(len(text) + 1))
        return (text[:p] + _pick(rng, ["\x00", "\x07", "\u2028", "\ud800", "{", "]", "&",
                                       "*", "|", ">", "%YAML 9.9\n", "---\n", "...\n"])
                + text[p:]).encode("utf-8", "surrogatepass")
    if choice == 9:
        return (text + "---\nsecond: document\n").encode()
    if choice == 10:
        return text.encode()[: int(rng.integers(len(text) + 1))]
    return ("x: " + "9" * int(rng.integers(10, 5000)) + "\n" + text).encode()


def spec_doc(rng: np.random.Generator) -> dict[str, Any]:
    d: dict[str, Any] = {"trainable": _pick(rng, SPEC_KEYS["trainable"])}
    for k, vals in SPEC_KEYS.items():
        if k != "trainable" and rng.random() < 0.4:
            d[k] = _pick(rng, vals)
    return d


def spec_text(rng: np.random.Generator) -> bytes:
    d = spec_doc(rng)
    r = rng.random()
    if r < 0.45:
        d = _perturb(d, rng, [])
    text = yaml.safe_dump(d, allow_unicode=True, width=10**9)
    if r > 0.75:
        return _text_damage(text, rng)
    return text.encode("utf-8", "surrogatepass")


def short_spec(rng: np.random.Generator) -> str:
    rules = ["bias:last2", "weight:last1@0.5", "bias:all", "all", "bias:0/1", "weight:-1",
             "bias:last0", "bias:last99999999999999999999", "bias:-" + "9" * 40, "x", "",
             "bias:first2", "weight:last2@" + _pick(rng, ["0", "2", "nan", "-1", "1e999"]),
             "bias:" + "a/" * int(rng.integers(1, 50)), "both:all"]
    opts = ["opt=sgd", "opt=adam", "opt=momentum", "lr=0.01", "lr=1e300", "lr=nan", "lr=0",
            "momentum=1", "accumulate=4294967297", "accumulate=" + "9" * 5000, "accumulate=2",
            "backward=int8", "master_weights=fp32", "loss=mse", "x=y", "lr", "eps=-1"]
    head = "+".join(_pick(rng, rules) for _ in range(int(rng.integers(1, 3))))
    tail = [_pick(rng, opts) for _ in range(int(rng.integers(0, 3)))]
    return ",".join([head] + tail)


def board_text(rng: np.random.Generator, boards: list[dict[str, Any]], name: str) -> bytes:
    d = copy.deepcopy(_pick(rng, boards))
    d["name"] = name
    r = rng.random()
    if r < 0.6:
        d = _perturb(d, rng, hostile_strings() + [[s] for s in hostile_strings()]
                     + [d.get("cflags", []) + [_pick(rng, hostile_strings())]])
        if isinstance(d, dict) and rng.random() < 0.2:
            d["name"] = name
    text = yaml.safe_dump(d, allow_unicode=True, width=10**9) if not isinstance(d, str) \
        else str(d)
    if r > 0.8:
        return _text_damage(text, rng)
    return text.encode("utf-8", "surrogatepass")
