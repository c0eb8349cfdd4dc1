"""Unit tests of codegen.render's helpers, without compiling a model: identifiers and quoting
(names), exact C literals (literals, checked by reading them back and by a C compiler), the
output-directory rules (output), device data and its sample order (embed, device), linker
records and board build flags (linker, board_build), kernel constants (records)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codegen.board import load_board
from codegen.data import TensorSpec, sample_order
from codegen.errors import PockError, SpecError
from codegen.render import MANIFEST, Namer, RenderedProject, check_identifiers, check_prefix
from codegen.render.board_build import (
    COMMON_CFLAGS,
    board_cflags,
    board_ldflags,
    board_libs,
    compiler,
    runtime_root,
)
from codegen.render.device import DeviceData, board_files, check_data, data_files
from codegen.render.embed import device_data
from codegen.render.linker import board_digest, linker_records, render_linker_script
from codegen.render.literals import (
    INT32_MIN,
    VALUES_PER_ROW,
    array_rows,
    c_float,
    c_float_decimal,
    c_int,
)
from codegen.render.names import (
    C_KEYWORDS,
    comment_text,
    hash_comment,
    is_reserved,
    make_assignment,
    make_word,
    sanitize,
)
from codegen.render.output import check_out_dir, open_project, refuse_overwrite, write_project

INF = "PE_INF"


def _bits(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def _c_compiler() -> str:
    for cc in ("cc", "gcc", "clang"):
        if shutil.which(cc):
            return cc
    pytest.skip("no C compiler")


def _run_c(tmp_path: Path, sources: dict[str, str]) -> str:
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    exe = tmp_path / "prog"
    cmd = [_c_compiler(), "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror",
           "-I", str(tmp_path), *[str(tmp_path / n) for n in sources if n.endswith(".c")],
           "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


# -- names --------------------------------------------------------------------------------------

def test_reserved_identifiers_and_prefix_boundaries() -> None:
    for ident in ("int", "while", "_Bool", "class", "__x", "__", "_X", "_Z9"):
        assert is_reserved(ident), ident
    for ident in ("x", "_x", "_1", "x__y", "Int", "pe_int", "_"):
        assert not is_reserved(ident), ident
    # the project prefix: 1 to 16 characters, no keyword
    assert check_prefix("a" * 16) == "a" * 16 and check_prefix("a_b") == "a_b"
    with pytest.raises(PockError, match=r"prefix 'aaaaaaaaaaaaaaaaa': must be a C identifier"):
        check_prefix("a" * 17)
    with pytest.raises(PockError, match="is a C keyword"):
        check_prefix("while")
    with pytest.raises(PockError):
        check_prefix(7)                                     # not a string


def test_namer_honours_reserved_names_case_insensitively() -> None:
    n = Namer(reserved=["PE_INIT"])
    assert n("pe_init") == "pe_init_2"                      # PE_INIT is taken, in any case
    assert n("int") == "int_2" and n("while;x") == "while_2"
    assert n("a") == "a" and n("a/") == "a_2" and n("a_2") == "a_2_2"
    names = n.names()
    names["zzz"] = "zzz"                                    # a copy
    assert "zzz" not in n.names() and n.names()["a/"] == "a_2"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
@example("a" * 39 + "/b")                   # cut at 40 characters right after a separator
@example("1:conv/weights;int")
def test_sanitize_gives_a_clean_fragment(name: str) -> None:
    frag = sanitize(name)
    assert re.fullmatch(r"[A-Za-z0-9]+(_[A-Za-z0-9]+)*", frag), frag
    assert len(frag) <= 40
    if re.fullmatch(r"[A-Za-z0-9]+(_[A-Za-z0-9]+)*", name) and len(name) <= 40:
        assert frag == name                                 # clean names are kept as they are


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=25))
def test_namer_fragments_make_valid_distinct_identifiers(names: list[str]) -> None:
    n = Namer()
    frags = [n(x) for x in names]
    assert [n(x) for x in names] == frags                   # stable
    assert len({f.lower() for f in set(frags)}) == len(set(names))
    check_identifiers([f"pe_{f}" for f in set(frags)])      # valid, unreserved, unique
    assert not any(f in C_KEYWORDS for f in frags)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_comment_text_is_inert_for_any_text(text: str) -> None:
    s = comment_text(text)
    assert all(" " <= c <= "~" for c in s)
    assert "*/" not in s and "/*" not in s and "??" not in s
    assert len(s) >= len(text)
    if all(c.isalnum() and c.isascii() or c in " ,.:;_-[]()" for c in text):
        assert s == text                                    # harmless text is unchanged


def test_make_words_reach_the_shell_unchanged(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    words = ["-O2", "plain_word.c", "a b", "$HOME", "a#b", "it's", "x;y", "*.c", "$(CC)",
             'q"uote', "back\\slash", "100%"]
    for w in words[:2]:
        assert make_word(w) == w                            # plain words stay as they are
    lines = [f"V{i} = {make_word(w)}" for i, w in enumerate(words)]
    lines += ["all:"] + [f"\t@printf '%s\\n' $(V{i})" for i in range(len(words))]
    (tmp_path / "Makefile").write_text("\n".join(lines) + "\n")
    r = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == words
    with pytest.raises(ValueError, match="one line"):
        make_word("a\nb")
    assert make_assignment("CC", "gcc $X") == "CC=gcc $$X"
    with pytest.raises(ValueError):
        make_assignment("CC", "gcc\r")
    assert hash_comment("path C:\\dir\\") == "path C:\\dir"      # no line continuation
    assert hash_comment("a\nb") == "a?b"


# -- literals -----------------------------------------------------------------------------------

def test_c_float_is_the_exact_float32_value() -> None:
    """Random float32 bit patterns of every class (normal, subnormal, negative, zero) and the
    extremes: the hex literal denotes exactly the float32 (no rounding left to the compiler),
    so it reads back to the same 32 bits."""
    rng = np.random.default_rng(16)
    bits = rng.integers(0, 1 << 32, size=3000, dtype=np.uint64).astype(np.uint32)
    special = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
                        0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0x3DCCCCCD],
                       np.uint32)
    values = np.concatenate([bits, special]).view(np.float32)
    values = values[np.isfinite(values)]
    for v in values:
        text = c_float(v, INF)
        assert re.fullmatch(r"-?0x[01](\.[0-9a-f]*[1-9a-f])?p[+-]\d+f", text), text
        back = float.fromhex(text[:-1])
        assert back == float(v)                             # exact in binary64 already
        assert _bits(back) == _bits(v), (v, text)
    assert c_float(-0.0, INF).startswith("-") and _bits(float.fromhex(c_float(-0.0, INF)[:-1])) \
        == 0x80000000
    # a binary64 value is rounded to float32 first: the literal is float32(0.1), not 0.1
    assert float.fromhex(c_float(0.1, INF)[:-1]) == float(np.float32(0.1)) != 0.1


def test_c_float_infinities_and_nan() -> None:
    assert c_float(float("inf"), "ZZ_INF") == "ZZ_INF"
    assert c_float(float("-inf"), "ZZ_INF") == "(-ZZ_INF)"
    with np.errstate(over="ignore"):
        assert c_float(1e39, "ZZ_INF") == "ZZ_INF"         # beyond float32: infinite
        assert c_float(-1e39, "ZZ_INF") == "(-ZZ_INF)"
    with pytest.raises(ValueError, match="NaN"):
        c_float(float("nan"), "ZZ_INF")
    assert c_float_decimal(-0.0) == "-0.0f"                # the sign survives in decimal too
    with pytest.raises(ValueError):
        c_float_decimal(float("inf"))


@pytest.mark.parametrize(("ctype", "lo", "hi"), [("int8_t", -128, 127), ("uint8_t", 0, 255),
                                                 ("int16_t", -32768, 32767),
                                                 ("int32_t", -(2**31), 2**31 - 1)])
def test_c_int_accepts_exactly_the_range_of_its_type(ctype: str, lo: int, hi: int) -> None:
    for v in (lo, hi, max(0, lo), np.int64(hi)):
        text = c_int(v, ctype)
        assert re.fullmatch(r"-?\d+|\(-2147483647 - 1\)", text)
        assert eval(text) == int(v)                         # a constant expression, no names
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ValueError, match=f"does not fit {ctype}"):
            c_int(bad, ctype)
    # 2147483648 is not an int in C: -2147483648 would be long, the minimum is spelt around it
    assert c_int(INT32_MIN) == "(-2147483647 - 1)"


@pytest.mark.parametrize("ctype", ["int8_t", "uint8_t", "int16_t", "int32_t", "float"])
def test_array_rows_read_back_and_are_cut_into_rows(ctype: str) -> None:
    rng = np.random.default_rng(3)
    per = VALUES_PER_ROW[ctype]
    n = 3 * per + 1
    if ctype == "float":
        values = rng.normal(0, 100, n).astype(np.float32)
    else:
        info = np.iinfo(ctype[:-2])
        values = rng.integers(info.min, info.max, n, endpoint=True)
        values[:2] = info.min, info.max
    rows = array_rows(values.reshape(1, -1), ctype, INF)   # any shape: flattened
    assert len(rows) == 4
    assert all(r.endswith(",") for r in rows[:-1]) and not rows[-1].endswith(",")
    items = [s.strip() for s in " ".join(rows).split(",")]
    assert [len(r.rstrip(",").split(", ")) for r in rows] == [per, per, per, 1]
    if ctype == "float":
        back = [float.fromhex(s[:-1]) for s in items]
        assert [_bits(b) for b in back] == [_bits(v) for v in values]
    else:
        assert [eval(s) for s in items] == values.tolist()
    assert array_rows(np.zeros(0, np.int8), "int8_t", INF) == []


def test_array_rows_refuse_values_outside_their_type() -> None:
    with pytest.raises(ValueError, match="outside uint8_t"):
        array_rows(np.array([0, -1]), "uint8_t", INF)
    with pytest.raises(ValueError, match="outside int8_t"):
        array_rows(np.array([127, 128], np.int16), "int8_t", INF)
    with pytest.raises(ValueError, match="no C literal"):
        array_rows(np.zeros(2), "double", INF)


def test_literals_compile_to_the_same_bits(tmp_path: Path) -> None:
    """What a C99 compiler makes of the literals: the same float32 bits and int32 values."""
    floats = np.array([0.1, -0.0, 1.0 / 3.0, 1e-45, -1.17549435e-38, 3.4028235e38, 1e-30,
                       -2.5, 6.02e23], np.float32)
    ints = np.array([INT32_MIN, -1, 0, 2**31 - 1, 123456], np.int64)
    program = (
        "#include <stdio.h>\n#include <string.h>\n#include <stdint.h>\n"
        "static const float f[] = {\n" + "\n".join(array_rows(floats, "float", INF)) + "\n};\n"
        "static const int32_t w[] = {\n" + "\n".join(array_rows(ints, "int32_t", INF))
        + "\n};\n"
        "int main(void) {\n  unsigned i;\n  for (i = 0; i < sizeof f / sizeof f[0]; i++) {\n"
        "    uint32_t b; memcpy(&b, &f[i], 4); printf(\"%08lx\\n\", (unsigned long)b);\n  }\n"
        "  for (i = 0; i < sizeof w / sizeof w[0]; i++) printf(\"%ld\\n\", (long)w[i]);\n"
        "  return 0;\n}\n")
    out = _run_c(tmp_path, {"lit.c": program}).split()
    assert [int(s, 16) for s in out[:len(floats)]] == [_bits(v) for v in floats]
    assert [int(s) for s in out[len(floats):]] == ints.tolist()


# -- output directories -------------------------------------------------------------------------

def _manifest(prefix: str = "zz", training: object = None, files: list[str] | None = None
              ) -> dict:
    return {"generator": "pockengine", "prefix": prefix, "board": "host",
            "binary": f"{prefix}_host", "training": training, "files": files or []}


def _write_manifest(d: Path, manifest: dict) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / MANIFEST).write_text(json.dumps(manifest))


def test_refuse_overwrite(tmp_path: Path) -> None:
    refuse_overwrite(tmp_path / "new.bin", force=False)        # a new file: fine
    (tmp_path / "old.bin").write_bytes(b"x")
    with pytest.raises(PockError, match=r"old.bin: already exists \(use --force"):
        refuse_overwrite(tmp_path / "old.bin", force=False)
    refuse_overwrite(tmp_path / "old.bin", force=True)
    with pytest.raises(PockError, match="is a directory"):
        refuse_overwrite(tmp_path, force=True)                  # even with force
    with pytest.raises(PockError, match=r"cannot write: directory .*missing does not exist"):
        refuse_overwrite(tmp_path / "missing" / "f.bin", force=True)
    with pytest.raises(PockError, match="old.bin is not a directory"):
        refuse_overwrite(tmp_path / "old.bin" / "f.bin", force=True)
    assert (tmp_path / "old.bin").read_bytes() == b"x"          # nothing was written


def test_check_out_dir(tmp_path: Path) -> None:
    assert check_out_dir(tmp_path / "new", False) == tmp_path / "new"
    assert not (tmp_path / "new").exists()                      # checking creates nothing
    (tmp_path / "empty").mkdir()
    check_out_dir(tmp_path / "empty", False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(PockError, match="exists and is not a directory"):
        check_out_dir(tmp_path / "file", True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(PockError, match="not empty and was not written by pockengine"):
        check_out_dir(mine, False)
    check_out_dir(mine, True)
    # a manifest of another generator, or unreadable, does not make it pockengine output
    (mine / MANIFEST).write_text(json.dumps(_manifest() | {"generator": "other"}))
    with pytest.raises(PockError, match="not empty"):
        check_out_dir(mine, False)
    (mine / MANIFEST).write_text("{not json")
    with pytest.raises(PockError, match="not empty"):
        check_out_dir(mine, False)
    _write_manifest(mine, _manifest())
    check_out_dir(mine, False)                                  # earlier output: fine
    # earlier output of the other kind (inference vs training): refused unless forced
    infer, train = tmp_path / "infer", tmp_path / "train"
    _write_manifest(infer, _manifest())
    _write_manifest(train, _manifest(training={"loss": "mse"}))
    with pytest.raises(PockError, match=r"holds an inference project \(board host\); "
                                        "compiling a training project there replaces it"):
        check_out_dir(infer, False, training=True)
    with pytest.raises(PockError, match="holds a training project"):
        check_out_dir(train, False, training=False)
    check_out_dir(infer, False, training=False)                 # same kind: recompiled
    check_out_dir(train, False, training=True)
    check_out_dir(infer, True, training=True)                   # forced
    check_out_dir(infer, False)                                 # kind not given: no check


def test_open_project(tmp_path: Path) -> None:
    with pytest.raises(PockError, match="no such directory"):
        open_project(tmp_path / "nope")
    with pytest.raises(PockError, match="not a pockengine project"):
        open_project(tmp_path)
    _write_manifest(tmp_path, ["a", "list"])                    # type: ignore[arg-type]
    with pytest.raises(PockError, match="not a pockengine project"):
        open_project(tmp_path)
    _write_manifest(tmp_path, _manifest(training={"loss": "cross_entropy"}))
    p = open_project(str(tmp_path))
    assert (p.dir, p.prefix, p.board, p.kind, p.has_training) == (
        tmp_path, "zz", "host", "training", True)
    assert p.binary() == tmp_path / "build" / "zz_host"
    assert p.binary("build-clang") == tmp_path / "build-clang" / "zz_host"
    assert p.board_record().name == "host"
    # a board that is not in the catalogue needs the project's copy of its board file
    _write_manifest(tmp_path, _manifest() | {"board": "my-board"})
    with pytest.raises(PockError, match="'my-board', which is not in the catalogue"):
        open_project(tmp_path).board_record()
    for bad in ("../my-board.yaml", "/etc/my-board.yaml", "board/missing.yaml"):
        _write_manifest(tmp_path, _manifest() | {"board": "my-board", "board_file": bad})
        with pytest.raises(PockError, match="is missing"):
            open_project(tmp_path).board_record()


def _rendered(prefix: str, files: dict[str, bytes]) -> RenderedProject:
    manifest = _manifest(prefix, files=sorted(files) + [MANIFEST])
    files = dict(files) | {MANIFEST: json.dumps(manifest).encode()}
    return RenderedProject(files, manifest, ())


def test_write_project_keeps_unchanged_files_and_removes_stale_ones(tmp_path: Path) -> None:
    d = tmp_path / "out"
    write_project(_rendered("zz", {"zz_model.c": b"A", "sub/old.c": b"O"}), d)
    (d / "notes.txt").write_text("user file")
    (d / "build").mkdir()
    (d / "build" / "zz_model.o").write_bytes(b"obj")
    os.utime(d / "zz_model.c", ns=(10**18, 10**18))             # an old timestamp
    p = write_project(_rendered("zz", {"zz_model.c": b"A", "new.c": b"N"}), d)
    assert p.prefix == "zz" and p.dir == d
    assert (d / "zz_model.c").stat().st_mtime_ns == 10**18      # same bytes: not rewritten
    assert (d / "new.c").read_bytes() == b"N"
    assert not (d / "sub" / "old.c").exists()                   # no longer generated
    assert (d / "notes.txt").is_file() and (d / "build" / "zz_model.o").is_file()
    # another prefix: the old sources and the build directory go, user files stay
    write_project(_rendered("yy", {"yy_model.c": b"B"}), d)
    assert not (d / "zz_model.c").exists() and not (d / "build").exists()
    assert (d / "yy_model.c").read_bytes() == b"B" and (d / "notes.txt").is_file()
    assert json.loads((d / MANIFEST).read_text())["prefix"] == "yy"
    # a manifest naming files outside the project ('..') does not make them stale files
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    _write_manifest(d, _manifest(files=["../victim.txt"]))
    write_project(_rendered("zz", {"zz_model.c": b"A"}), d)
    assert victim.read_text() == "keep me"


def test_write_project_never_deletes_outside_the_project_by_absolute_path(tmp_path: Path
                                                                          ) -> None:
    d = tmp_path / "out"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    _write_manifest(d, _manifest(files=[str(victim)]))
    write_project(_rendered("zz", {"zz_model.c": b"A"}), d)
    assert victim.is_file()     # an absolute path in an earlier manifest is never removed


# -- device data --------------------------------------------------------------------------------

IN = TensorSpec("in", (1, 4), "int8", 0.5, 0)
OUT = TensorSpec("out", (1, 3), "int8", 0.25, 0)


def _xy(n: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, (n, 4)).astype(np.int8), np.arange(n) % 3


def test_sample_order_is_a_seeded_permutation_per_epoch() -> None:
    n, epochs = 7, 3
    order = sample_order(n, epochs, seed=11)
    assert order.dtype == np.int64 and order.shape == (n * epochs,)
    epochs_ = order.reshape(epochs, n)
    assert all(sorted(e) == list(range(n)) for e in epochs_)    # every sample once per epoch
    rng = np.random.default_rng(11)                             # one generator, drawn per epoch
    assert [e.tolist() for e in epochs_] == [rng.permutation(n).tolist() for _ in range(epochs)]
    assert np.array_equal(order, sample_order(n, epochs, seed=11))          # deterministic
    assert not np.array_equal(sample_order(50, 1, seed=1), sample_order(50, 1, seed=2))
    assert np.array_equal(sample_order(n, 2, shuffle=False), np.tile(np.arange(n), 2))
    assert sample_order(n, 0).shape == (0,) and sample_order(n, 0).dtype == np.int64
    # more epochs extend the order: the first epochs do not change
    assert np.array_equal(sample_order(n, 5, seed=11)[:n * epochs], order)


def test_device_data_fits_samples_and_fixes_the_order() -> None:
    x, y = _xy()
    d = device_data(IN, OUT, "cross_entropy", (x, y), {"x": x[:2], "y": y[:2]}, epochs=3,
                    seed=7)
    assert np.array_equal(d.train_x, x) and d.train_t.dtype == np.int64
    assert np.array_equal(d.order, sample_order(5, 3, seed=7)) and d.steps == 15
    s = d.summary()
    assert (s["train_samples"], s["eval_samples"], s["epochs"], s["steps"], s["seed"]) == (
        5, 2, 3, 15, 7)
    assert s["eval_labels"] and not s["eval_targets"]
    assert s["flash_bytes"] == x.nbytes + d.train_t.nbytes + 2 * 4 + 2 * 8
    in_order = device_data(IN, OUT, "cross_entropy", (x, y), epochs=2, shuffle=False)
    assert in_order.seed is None and in_order.order.tolist() == [0, 1, 2, 3, 4] * 2
    # inference only: labels of evaluation data are optional and no training steps exist
    ev = device_data(IN, OUT, None, evals=(x, y), epochs=4)
    assert ev.epochs == 0 and ev.steps == 0 and ev.eval_t.tolist() == y.tolist()
    assert device_data(IN, OUT, None, evals=(x, None)).eval_t is None
    # mse: float targets are quantized with the output's parameters
    t = device_data(IN, OUT, "mse", (x[:2], np.array([[0.25, -0.5, 0.0], [1.0, 0.0, -1.0]])))
    assert t.train_t.dtype == np.int8 and t.train_t.tolist() == [[1, -2, 0], [4, 0, -4]]
    assert d.sha256() != device_data(IN, OUT, "cross_entropy", (x, y), epochs=3,
                                     seed=8).sha256()                   # the order counts


@pytest.mark.parametrize(("loss", "train", "evals", "kw", "message"), [
    ("cross_entropy", (np.zeros((5, 5), np.int8), np.zeros(5, int)), None, {},
     r"training data x has shape \[5, 5\], model input 'in' expects \[N, 4\]"),
    ("cross_entropy", (np.zeros((2, 4), np.int8), np.array([0, 3])), None, {},
     r"training data: labels range 0..3, the model has 3 classes"),
    ("cross_entropy", (np.zeros((2, 4), np.int8), np.array([0.0, 1.0])), None, {},
     "labels 'y' must be integers of shape"),
    ("cross_entropy", (np.zeros((2, 4), np.int8), np.zeros((2, 1), int)), None, {},
     r"must be integers of shape \[N\], got int64 \[2, 1\]"),
    ("cross_entropy", (np.zeros((2, 4), np.int8), None), None, {}, "no labels 'y'"),
    ("cross_entropy", {"y": np.zeros(2, int)}, None, {}, "training data: no array 'x'"),
    ("cross_entropy", None, None, {"epochs": -1}, "epochs must be >= 0, got -1"),
    (None, (np.zeros((2, 4), np.int8), np.zeros(2, int)), None, {},
     "compiled without a training spec"),
    (None, None, (np.zeros((2, 4), np.int8), np.array([1, 9])), {},
     r"evaluation data: labels range 1..9"),
    ("mse", (np.zeros((2, 4), np.int8), np.zeros((2, 2), np.float32)), None, {},
     r"loss mse needs targets shaped like the model output \[3\]"),
    ("mse", (np.zeros((2, 4), np.int8), np.array([[0.0, np.nan, 0.0]] * 2)), None, {}, "NaN"),
])
def test_device_data_errors_are_one_line(loss, train, evals, kw, message) -> None:
    with pytest.raises(PockError, match=message) as e:
        device_data(IN, OUT, loss, train, evals, **kw)
    assert "\n" not in str(e.value)


def test_check_data_guards_a_project() -> None:
    x, y = _xy()
    ok = device_data(IN, OUT, "cross_entropy", (x, y))
    training = {"loss": "cross_entropy"}
    check_data(ok, input_bytes=4, output_bytes=3, training=training)
    with pytest.raises(PockError, match="training inputs must be int8 samples of 8 values"):
        check_data(ok, input_bytes=8, output_bytes=3, training=training)
    with pytest.raises(PockError, match="without a training spec"):
        check_data(ok, input_bytes=4, output_bytes=3, training=None)
    with pytest.raises(PockError, match="labels range 0..2, the model has 2 outputs"):
        check_data(ok, input_bytes=4, output_bytes=2, training=training)
    with pytest.raises(PockError, match="need int8 targets for the mse loss"):
        check_data(ok, input_bytes=4, output_bytes=3, training={"loss": "mse"})
    bad_order = dataclasses.replace(ok, order=np.array([0, 5]))
    with pytest.raises(PockError, match=r"outside 0..4"):
        check_data(bad_order, input_bytes=4, output_bytes=3, training=training)
    floats = dataclasses.replace(ok, eval_x=np.zeros((1, 4), np.float32))
    with pytest.raises(PockError, match="evaluation inputs must be int8"):
        check_data(floats, input_bytes=4, output_bytes=3, training=training)
    empty = DeviceData.empty((1, 4))
    check_data(empty, input_bytes=4, output_bytes=3, training=None)
    assert empty.steps == 0 and empty.summary()["flash_bytes"] == 0


def test_data_files_compile_and_hold_the_data(tmp_path: Path) -> None:
    x, y = _xy(6, seed=1)
    d = device_data(IN, OUT, "cross_entropy", (x, y), (x[:2], y[:2]), epochs=2, seed=5)
    files = data_files("zz", d, ["generated for a test"])
    assert set(files) == {"zz_data.h", "zz_data.c"}
    sources = {k: v.decode() for k, v in files.items()}
    sources["zz_model.h"] = "/* stub */\n"
    sources["main.c"] = (
        '#include <stdio.h>\n#include "zz_data.h"\n'
        "int main(void) {\n  unsigned i;\n"
        '  printf("%u %u %u %u\\n", (unsigned)ZZ_DATA_TRAIN_COUNT, (unsigned)ZZ_DATA_STEPS,'
        " (unsigned)ZZ_DATA_EPOCHS, (unsigned)ZZ_DATA_EVAL_LABELS);\n"
        '  for (i = 0; i < ZZ_DATA_STEPS; i++) printf("%d ", (int)zz_order[i]);\n'
        '  printf("\\n");\n'
        '  for (i = 0; i < ZZ_DATA_TRAIN_COUNT; i++) printf("%ld ", (long)zz_train_y[i]);\n'
        '  printf("\\n");\n'
        '  for (i = 0; i < 4 * ZZ_DATA_TRAIN_COUNT; i++) printf("%d ", (int)zz_train_x[i]);\n'
        '  printf("\\n");\n  return 0;\n}\n')
    lines = _run_c(tmp_path, sources).splitlines()
    assert lines[0].split() == ["6", "12", "2", "1"]
    assert [int(v) for v in lines[1].split()] == sample_order(6, 2, seed=5).tolist()
    assert [int(v) for v in lines[2].split()] == y.tolist()
    assert [int(v) for v in lines[3].split()] == x.reshape(-1).tolist()


# -- boards: linker records and build flags -----------------------------------------------------

def test_linker_records_follow_the_board_file_and_stack_size() -> None:
    board = load_board("mps2-an385")
    rec = linker_records(board)
    regions = rec["regions"]
    origins = [int(r["origin"], 16) for r in regions]
    assert origins == sorted(origins)                           # in address order
    assert {r["name"]: (int(r["origin"], 16), int(r["length"])) for r in regions} == {
        "flash": (0x00000000, 4 << 20), "blockram": (0x01000000, 16 << 10),
        "sram": (0x20000000, 4 << 20), "psram": (0x21000000, 16 << 20)}
    assert all(re.fullmatch(r"0x[0-9A-F]{8}", r["origin"]) for r in regions)
    assert {r["name"]: (r["label"], r["attrs"]) for r in regions} == {
        "flash": ("FLASH", "rx"), "blockram": ("BLOCKRAM", "rwx"), "sram": ("SRAM", "rwx"),
        "psram": ("PSRAM", "rwx")}
    assert [r["name"] for r in rec["extra_regions"]] == ["blockram", "psram"]
    shuffled = dataclasses.replace(board, memory=dict(reversed(board.memory.items())))
    assert linker_records(shuffled)["regions"] == regions       # address order, not file order
    assert rec["stack_size"] == board.stack == 8 * 1024 and rec["entry"] == "pe_reset_handler"
    assert any(board_digest(board) in line for line in rec["banner"])
    assert linker_records(board, stack_size=4096)["stack_size"] == 4096
    for bad in (0, -8, 4 << 10 | 4):
        with pytest.raises(SpecError, match="positive multiple of 8"):
            linker_records(board, stack_size=bad)
    hexagon = linker_records(load_board("hexagon-v66"), 1024)
    assert hexagon["entry"] == "_start" and hexagon["extra_regions"] == []
    assert hexagon["stack_size"] == 1024
    with pytest.raises(SpecError, match="not linked with a script"):
        linker_records(load_board("host"))
    # the banner's board digest: of the board's content, not of where its file is
    digest = board_digest(board)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert board_digest(dataclasses.replace(board, path="/elsewhere/mps2-an385.yaml")) == digest
    assert board_digest(dataclasses.replace(board, stack=4096)) != digest
    assert f"board sha256 {digest}" in render_linker_script(board)


def test_build_flags_of_a_gcc_board_and_a_hexagon_board(monkeypatch) -> None:
    arm, hexagon, host = (load_board(n) for n in ("mps2-an385", "hexagon-v66", "host"))
    script, map_file = Path("b.ld"), Path("out/fw.map")
    a = board_cflags(arm)
    assert a == [*arm.cflags, *COMMON_CFLAGS]                  # the board's flags first
    assert "-mcpu=cortex-m3" in a and "-ffp-contract=off" in a and "-G0" not in a
    h = board_cflags(hexagon)
    assert h[:len(hexagon.cflags)] == list(hexagon.cflags) and "--target=hexagon" in h
    assert {"-G0", "-ffreestanding", "-nostdlibinc"} <= set(h)
    al = board_ldflags(arm, script, map_file)
    assert al[0] == "-Wl,--gc-sections" and "-nostdlib" in al and "-Tb.ld" in al
    assert "-Wl,-Map=out/fw.map" in al and "-fuse-ld=lld" not in al
    hl = board_ldflags(hexagon, script, None)
    assert {"-nostdlib", "-fuse-ld=lld", "-static", "-Wl,-T,b.ld"} <= set(hl)
    assert not any(f.startswith("-Wl,-Map") for f in hl) and "-Tb.ld" not in hl
    hostl = board_ldflags(host, None, map_file)                 # no script, no map on host
    assert hostl == ["-Wl,--gc-sections", *host.ldflags]
    assert board_libs(arm) == ["-lgcc"] and board_libs(hexagon) == board_libs(host) == []
    assert compiler(arm) == "arm-none-eabi-gcc"
    monkeypatch.setenv("POCKENGINE_HEXAGON_CLANG", "/opt/hexagon/bin/clang")
    monkeypatch.setenv("CC", "ccache gcc")
    assert compiler(hexagon) == "/opt/hexagon/bin/clang" and compiler(host) == "ccache gcc"
    monkeypatch.delenv("POCKENGINE_HEXAGON_CLANG")
    monkeypatch.delenv("CC")
    assert compiler(hexagon) == "clang" and compiler(host) == "cc"


def test_board_files_carry_what_the_makefile_names(monkeypatch) -> None:
    monkeypatch.setenv("POCKENGINE_HEXAGON_CLANG", "ccache clang")
    for name in ("mps2-an385", "hexagon-v66"):
        board = load_board(name)
        bf = board_files(board, "zz")
        rec = bf.records
        assert rec["linker_script"] == f"{name}.ld"
        assert bf.files[f"{name}.ld"] == render_linker_script(board).encode()
        for src in rec["runtime_sources"] + rec["asm_sources"]:
            assert bf.files.get(src) == (runtime_root() / src).read_bytes()   # copied
        for d in bf.include_dirs:                               # the -I dirs' headers too
            headers = sorted((runtime_root() / d).glob("*.h"))
            assert headers and all(f"{d}/{h.name}" in bf.files for h in headers)
        assert "-DZZ_PROFILE=1" in rec["defines"] and f"-T{name}.ld" in " ".join(
            rec["ldflags"]).replace("-Wl,-T,", "-T")
        assert rec["cflags"] == board_cflags(board) and rec["map_file"] == "zz_firmware.map"
    assert bf.records["cc"] == ["ccache", "clang"]              # $CC-like commands: words
    assert bf.records["asm_sources"] == ["startup/hexagon/pe_crt0_hexagon.S"]


# -- records: kernel constants ------------------------------------------------------------------

def test_kernel_constants_are_deduplicated_by_content() -> None:
    from codegen.backends import ConstArray, Struct
    from codegen.render.records import _KernelConstants

    k = _KernelConstants("zz", {"inf": "ZZ_INF"})
    a = k.array(ConstArray("multiplier", "int32_t", np.array([1, 2, 3])))
    assert a == k.array(ConstArray("other role", "int32_t", [1, 2, 3]))    # same content
    assert k.array(ConstArray("multiplier", "int32_t", [1, 2, 4])) != a
    assert k.array(ConstArray("multiplier", "int16_t", [1, 2, 3])) != a    # other type
    assert k.array(ConstArray("shift", "int32_t", np.zeros(0))) == "NULL"
    assert len(k.arrays) == 3 and all(x["name"].startswith("zz_a") for x in k.arrays)
    assert k.arrays[0]["rows"] == ["1, 2, 3"] and k.arrays[0]["size"] == 3
    act = Struct("pe_activation_f32", {"min": float("-inf"), "max": 6.0})
    s = k.struct(act)
    assert s == k.struct(Struct("pe_activation_f32", {"max": 6.0, "min": float("-inf")}))
    assert k.structs[0]["init"] == "{.min = (-ZZ_INF), .max = 0x1.8p+2f}"
    quant = Struct("pe_per_channel_quant", {
        "multiplier": ConstArray("multiplier", "int32_t", [1, 2, 3]),
        "shift": ConstArray("shift", "int32_t", [INT32_MIN])})
    k.struct(quant)
    init = k.structs[-1]["init"]
    assert init.startswith(f"{{.multiplier = {a}, .shift = zz_a3_")   # the array is reused
    assert k.arrays[3]["rows"] == ["(-2147483647 - 1)"]
    with pytest.raises(ValueError, match="does not fit int32_t"):
        k.struct(Struct("pe_activation", {"min": -(2**31) - 1, "max": 0}))


def test_write_project_never_deletes_through_a_symlinked_directory(tmp_path: Path) -> None:
    d = tmp_path / "out"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    _write_manifest(d, _manifest(files=["link/victim.txt"]))
    (d / "link").symlink_to(outside, target_is_directory=True)
    write_project(_rendered("zz", {"zz_model.c": b"A"}), d)
    assert victim.is_file()
