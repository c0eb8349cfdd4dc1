"""Bad specs, board files and data files: one line, exit status 2, never an internal error.

Each case here was found by a probe or by the fuzz campaign (``python -m tests.fuzz``) and
failed before its fix: internal errors (exit 1) from YAML that is too deep, not UTF-8 or holds
numbers C cannot hold; an alias bomb that ran for half a minute into gigabytes; board files
whose flags ran shell commands from the generated Makefile; NaN and infinities in data that
were quantized silently; object arrays in .npz files.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from codegen.board import board_from_dict, boards_dir, load_board_file
from codegen.cli import main
from codegen.data import fit_input, load_npy, load_npz
from codegen.errors import MAX_MESSAGE, PockError, SpecError
from codegen.train.spec import load_spec, parse_short

ROOT = Path(__file__).resolve().parents[1]
ALIAS_BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
                       + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]"
                          for i in range(1, 10)]) + "\n"


def _id(value: object) -> str | None:
    """Short test ids for long parameters."""
    return repr(value)[:30] if isinstance(value, (str, bytes)) else None


def cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        status = main([str(a) for a in argv])
    except SystemExit as e:
        status = e.code
    return status, capsys.readouterr().err


def one_line_error(status: int, err: str, *words: str) -> str:
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("pockengine: error: "), err
    for w in words:
        assert w in lines[0], (w, err)
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """The bundled digits CNN as an int8 .tflite (quantized on 100 training images)."""
    from codegen.frontend import save_model
    from tests.render.helpers import digits_int8

    p = tmp_path_factory.mktemp("model") / "digits.tflite"
    save_model(digits_int8(), p)
    return p


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from codegen.models import digits

    x, y = digits("train")
    p = tmp_path_factory.mktemp("data") / "train.npz"
    np.savez(p, x=x[:8], y=y[:8])
    return p


# -- training specs ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,words", [
    ("bias:last4,accumulate=4294967297", ["accumulate = 4294967297", "at most 2147483647"]),
    ("bias:last4,accumulate=" + "9" * 5000, ["accumulate must be a number"]),
    ("bias:last4,lr=1e300", ["lr = 1e+300 is out of range"]),
    ("bias:last4,lr=1e-50", ["lr must be > 0"]),
], ids=_id)
def test_short_specs_out_of_range(text, words):
    with pytest.raises(SpecError) as e:
        parse_short(text)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("text,words", [
    ("bias:-" + "9" * 30, ["layer index -" + "9" * 30 + " out of range"]),
    ("bias:-" + "9" * 5000, ["unknown layer '-999"]),         # int() refuses 5,000 digits
    ("bias:last" + "9" * 5000, ["unknown layer 'last999"]),
], ids=_id)
def test_layer_numbers_of_any_length(model, text, words):
    from codegen.frontend import load_model
    from codegen.train.spec import resolve

    with pytest.raises(SpecError) as e:
        resolve(parse_short(text), load_model(model))
    for w in words:
        assert w in str(e.value)
    assert len(str(e.value)) < 400


@pytest.mark.parametrize("body,words", [
    ("schedule: {name: step, step_size: 2147483648}", ["step_size = 2147483648"]),
    ("schedule: {name: warmup, warmup_steps: 4294967297}", ["warmup_steps = 4294967297"]),
    ("schedule: {name: cosine, total_steps: 2147483648}", ["total_steps = 2147483648"]),
    ("schedule: {name: cosine, total_steps: 10, min_lr: 1.0e+39}", ["min_lr = 1e+39"]),
    ("accumulate: 2147483648", ["accumulate = 2147483648"]),
    ("accumulate: .inf", ["accumulate = inf is out of range"]),
    ("optimizer: {name: adam, eps: 1.0e+39}", ["eps = 1e+39 is out of range"]),
], ids=_id)
def test_yaml_numbers_c_cannot_hold(tmp_path, body, words):
    p = tmp_path / "spec.yaml"
    p.write_text("trainable: [{layers: all}]\n" + body + "\n")
    with pytest.raises(SpecError) as e:
        load_spec(p)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("text,words", [
    (b"trainable:\n  - {layers: null}\n", ["layers must be", "got None"]),
    (b"trainable:\n  - {layers: [1, {a: 2}]}\n", ["layers must be"]),
    (b"[" * 20000, ["line 1", "nested deeper than 64 levels"]),
    (b"loss: \xff\n", ["line 1", "not UTF-8", "0xff at offset 6"]),
    (ALIAS_BOMB.encode() + b"trainable: *a9\n", ["line 2", "aliases are not supported"]),
    (b"loss: mse\ntrainable: [{layers: all}]\nloss: cross_entropy\n",
     ["line 3", "duplicate key 'loss'"]),
    (b"trainable: [{layers: all, params: bias, params: weight}]\n",
     ["line 1", "duplicate key 'params'"]),
    (b"trainable: [{layers: all}]\n1: 2\nx: 3\n", ["unknown key(s) ['x', 1]"]),
    (b"trainable: [" + b", ".join([b"{layers: all}"] * 1000) + b"]\noptimizer: "
     + b"[" + b", ".join([b"123456789"] * 50000) + b"]\n", ["optimizer must be a mapping"]),
], ids=_id)
def test_bad_yaml_specs_are_one_line(tmp_path, text, words):
    refused(load_spec, tmp_path / "spec.yaml", text, words)


def refused(load, p: Path, text: bytes, words: list[str]) -> None:
    """``load(p)`` of a file holding ``text`` is a short one-line SpecError naming the file
    and containing ``words``."""
    p.write_bytes(text)
    with pytest.raises(SpecError) as e:
        load(p)
    msg = str(e.value)
    assert msg.startswith(str(p)), msg
    assert "\n" not in msg and len(msg) < 400, msg
    for w in words:
        assert w in msg, msg


def test_every_verb_rejects_the_spec_the_same_way(tmp_path, capsys, model, data):
    """plan, compile and fit agree: the spec is checked when it is read, not when C is
    printed (compile used to fail with 'ValueError: 4294967297 does not fit int32_t')."""
    spec = "bias:last4,accumulate=4294967297"
    for argv in (["plan", model, "--train", spec],
                 ["compile", model, "--board", "host", "--train", spec, "-o", tmp_path / "p"],
                 ["fit", model, "--train", spec, "--data", data]):
        one_line_error(*cli(argv, capsys), "accumulate = 4294967297 is out of range")
    bad = tmp_path / "null.yaml"
    bad.write_text("trainable:\n  - {layers: null}\n")
    for argv in (["plan", model, "--train", bad],
                 ["compile", model, "--board", "host", "--train", bad, "-o", tmp_path / "q"]):
        one_line_error(*cli(argv, capsys), "layers must be")


def test_alias_bomb_through_the_cli(tmp_path, capsys, model):
    p = tmp_path / "bomb.yaml"
    p.write_text(ALIAS_BOMB + "trainable: *a9\n")
    one_line_error(*cli(["plan", model, "--train", p], capsys), "aliases are not supported")


# -- board files ------------------------------------------------------------------------------

@pytest.fixture()
def an386() -> dict:
    return yaml.safe_load((boards_dir() / "mps2-an386.yaml").read_text())


def _write_board(tmp_path: Path, d: dict, name: str = "my-board") -> Path:
    d = dict(d, name=name)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("text,words", [
    (b"[" * 20000, ["nested deeper than 64 levels"]),
    (b"name: \xff\n", ["not UTF-8"]),
    (ALIAS_BOMB.encode() + b"name: *a9\n", ["aliases are not supported"]),
    (b"name: a\nname: b\n", ["line 2", "duplicate key 'name'"]),
    (b"\x00", ["not valid YAML"]),
], ids=_id)
def test_bad_yaml_board_files(tmp_path, text, words):
    refused(load_board_file, tmp_path / "b.yaml", text, words)


@pytest.mark.parametrize("path,value,words", [
    ("budget.sram", "9" * 400 + " KiB", ["is more than 1024 GiB"]),
    ("budget.sram", "1" + "0" * 5000 + " B", ["is more than 1024 GiB"]),
    ("budget.sram", "\u0661\u0662 KiB", ["needs explicit units"]),    # Arabic-Indic digits
    ("cflags", ["-mcpu=cortex-m4", "$(shell touch /tmp/x)"], ["cflags[1]", "is not a -m"]),
    ("cflags", ["-mcpu=cortex-m4;touch /tmp/x"], ["cflags[0]"]),
    ("cflags", ["-mcpu=cortex-m4 -mthumb"], ["cflags[0]"]),
    ("cflags", ["-fplugin=./evil.so"], ["cflags[0]"]),
    ("cflags", ["-DX=`id`"], ["cflags[0]"]),
    ("cflags", ["-Wl,-plugin,evil.so"], ["cflags[0]"]),
    ("ldflags", ["-Wl,--plugin=evil.so"], ["ldflags[0]"]),
    ("ldflags", ["-Wl,-Map=/etc/passwd"], ["ldflags[0]"]),
    ("cpu", "cortex-m4\n$(shell id)", ["cpu"]),
    ("summary", "an M4\nall:\n\ttouch /tmp/x", ["summary", "one line"]),
    ("run.machine", "mps2-an386 -plugin x", ["run.machine"]),
    ("run.args", ["-plugin", "file=evil.so"], ["run.args[0]"]),
    ("run.args", ["-m", "16M", "-netdev", "tap,script=/tmp/evil"], ["run.args[2]"]),
    ("uart.qemu_serial", 10**9, ["uart.qemu_serial", "outside 0..3"]),
    ("uart.base", -1, ["uart.base", "outside"]),
    ("uart.base", 2**32, ["uart.base", "outside"]),
    ("memory.flash.origin", -4096, ["origin", "outside"]),
    ("uart.renode_name", "sysbus.uart0\nquit", ["renode_name"]),
], ids=_id)
def test_board_values_are_data(an386, path, value, words):
    d = yaml.safe_load(yaml.safe_dump(an386))
    target = d
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[k]
    target[keys[-1]] = value
    with pytest.raises(SpecError) as e:
        board_from_dict(d, "mps2-an386.yaml")
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    for w in words:
        assert w in msg, msg


def test_real_flags_pass(an386):
    d = dict(an386, cflags=["-mcpu=cortex-m4+nofp", "-mthumb", "-mfloat-abi=hard",
                            "-mfpu=fpv4-sp-d16", "-O2", "-fno-common", "-DBOARD_REV=2",
                            "-UNDEBUG", "-ffunction-sections", "-g3"],
             ldflags=["-Wl,--print-memory-usage", "-lm", "-Wl,-z,norelro"])
    b = board_from_dict(d, "b.yaml")
    assert "-DBOARD_REV=2" in b.cflags and "-lm" in b.ldflags
    assert board_from_dict(dict(an386, run={"emulator": "qemu-system-arm",
                                            "machine": "mps2-an386",
                                            "args": ["-icount", "shift=0"]}), "b.yaml")


def test_board_name_must_be_a_plain_word(tmp_path, an386):
    p = tmp_path / "x$(shell touch y).yaml"
    p.write_text(yaml.safe_dump(dict(an386, name=p.stem)))
    with pytest.raises(SpecError, match="name"):
        load_board_file(p)


def test_board_file_errors_through_the_cli(tmp_path, capsys, model, an386):
    marker = tmp_path / "ran"
    d = dict(an386, cflags=list(an386["cflags"]) + [f"$(shell touch {marker})"])
    p = _write_board(tmp_path, d)
    one_line_error(*cli(["plan", model, "--board", p], capsys), "cflags[4]")
    one_line_error(*cli(["compile", model, "--board", p, "-o", tmp_path / "fw"], capsys),
                   "cflags[4]")
    p.write_bytes(b"[" * 20000)
    one_line_error(*cli(["plan", model, "--board", p], capsys), "nested deeper")
    p.write_text(ALIAS_BOMB + "name: *a9\n")
    one_line_error(*cli(["plan", model, "--board", p], capsys), "aliases")
    h = yaml.safe_load((boards_dir() / "host.yaml").read_text())
    h["budget"]["sram"] = "9" * 400 + " B"
    p = _write_board(tmp_path, h, "big-host")
    one_line_error(*cli(["plan", model, "--board", p], capsys), "is more than 1024 GiB")
    assert not marker.exists()


def test_makefile_values_are_quoted(tmp_path, model):
    """Even a flag that slipped past validation is one word in the generated Makefile: make
    -n (which expands every recipe) runs no shell command of it."""
    from codegen.board import load_board
    from codegen.pipeline import load as load_source
    from codegen.pipeline import plan_lowered, render
    from codegen.render import Lowered
    from codegen.render.output import write_project

    marker = tmp_path / "ran"
    evil = [f"$(shell touch {marker})", f"-DX=1;touch {marker}", f"`touch {marker}`",
            "-DA='b c'#d", "-DQ=\"\\\\\""]
    board = dataclasses.replace(load_board("mps2-an386"),
                                cflags=load_board("mps2-an386").cflags + tuple(evil))
    src = load_source(model)
    low = Lowered(plan_lowered(src.graph, backend="ref"), None, "ref")
    proj = write_project(render(low, src, board=board), tmp_path / "fw")
    make = (proj.dir / "Makefile").read_text()
    r = subprocess.run(["make", "-n", "-C", str(proj.dir), "CC=echo"], capture_output=True,
                       text=True, check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), make
    # and a recipe hands them to the shell as the words they were (';' and '`' included)
    flags = next(ln for ln in make.splitlines() if ln.startswith("BOARD_CFLAGS = "))
    probe = tmp_path / "Makefile.probe"
    probe.write_text(f"{flags}\nall:\n\t@printf '%s\\n' $(BOARD_CFLAGS)\n")
    r = subprocess.run(["make", "-s", "-f", str(probe)], capture_output=True, text=True,
                       check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:len(board.cflags)] == list(board.cflags)
    assert not marker.exists()


def test_cmake_words_are_quoted(tmp_path):
    from codegen.render.names import cmake_word

    words = ["plain-word", "a b", "x;y", "${HOME}", 'q"uote', "back\\slash"]
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(p NONE)\n"
        + "".join(f"message(STATUS {cmake_word(w)})\n" for w in words))
    r = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b")],
                       capture_output=True, text=True, check=False, timeout=120)
    if r.returncode != 0 and "cmake" not in r.stderr.lower():
        pytest.skip("cmake not usable here")
    assert r.returncode == 0, r.stderr
    printed = [ln[3:] for ln in r.stdout.splitlines() if ln.startswith("-- ")]
    for w in words:
        assert w in printed, (w, printed)


# -- data files -------------------------------------------------------------------------------

def test_object_arrays_are_never_unpickled(tmp_path, capsys, model):
    marker = tmp_path / "unpickled"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    p = tmp_path / "obj.npz"
    np.savez(p, x=np.array([Evil()], dtype=object), y=np.array([0]))
    n = tmp_path / "obj.npy"
    np.save(n, np.array([Evil(), 1], dtype=object), allow_pickle=True)
    raw = tmp_path / "pickle.npy"
    raw.write_bytes(pickle.dumps(Evil()))
    one_line_error(*cli(["fit", model, "--train", "bias:last2", "--data", p], capsys),
                   "obj.npz 'x'", "Python objects")
    for f in (n, raw):
        one_line_error(*cli(["infer", model, "--input", f, "--output", tmp_path / "o.npy"],
                            capsys), f.name)
    assert not marker.exists()


def test_declared_shape_larger_than_the_file(tmp_path):
    """numpy allocates what a header declares before reading: check it against the file."""
    p = tmp_path / "x.npy"
    with open(p, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (4096000000, 8, 8, 1)})
        f.write(bytes(64))
    with pytest.raises(PockError, match=r"header declares shape \[4096000000, 8, 8, 1\]"):
        load_npy(p)
    z = tmp_path / "x.npz"
    import zipfile

    with zipfile.ZipFile(z, "w") as zf:
        zf.write(p, "x.npy")
    with pytest.raises(PockError, match=r"x.npz 'x': the header declares shape"):
        load_npz(z)


@pytest.mark.parametrize("flag", ["--data", "--eval", "--calib"])
def test_scalar_x_is_one_line(tmp_path, capsys, model, data, flag):
    p = tmp_path / "scalar.npz"
    np.savez(p, x=np.array(1.0), y=np.array(1))
    argv = ["fit", model, "--train", "bias:last2", "--data", data, flag, p]
    one_line_error(*cli(argv, capsys), "scalar.npz", "single value")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_in_data_are_refused(tmp_path, capsys, model, data, value):
    from codegen.models import digits

    x, y = digits("train")
    x = x[:6].copy()
    x[3, 2, 5, 0] = value
    x[4, 0, 0, 0] = value
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=x, y=y[:6])
    npy = tmp_path / "bad.npy"
    np.save(npy, x)
    words = ["bad.npz 'x'", "2 NaN or infinite values", "index [3, 2, 5, 0]"]
    one_line_error(*cli(["fit", model, "--train", "bias:last2", "--data", bad], capsys),
                   *words)
    one_line_error(*cli(["fit", model, "--train", "bias:last2", "--data", data, "--eval", bad],
                        capsys), *words)
    one_line_error(*cli(["compile", model, "--board", "mps2-an386", "--train", "bias:last2",
                         "--data", bad, "-o", tmp_path / "fw"], capsys), *words)
    one_line_error(*cli(["infer", model, "--input", npy, "--output", tmp_path / "y.npy"],
                        capsys), "bad.npy", "index [3, 2, 5, 0]")
    one_line_error(*cli(["quantize", ROOT / "codegen" / "models" / "digits_cnn.onnx",
                         "--calib", bad, "-o", tmp_path / "q.tflite"], capsys), *words)
    # arrays handed to the API directly are checked too
    from codegen.frontend import load_model

    with pytest.raises(PockError, match=r"training x has 2 NaN .*index \[3, 2, 5, 0\]"):
        fit_input(load_model(model), x, "training x")


def test_mse_targets_with_nan(tmp_path):
    from codegen.data import TensorSpec, fit_targets

    out = TensorSpec("y", (1, 4), "int8", 0.1, 0)
    t = np.zeros((3, 4), np.float32)
    t[1, 2] = np.nan
    with pytest.raises(PockError, match=r"eval targets has 1 NaN .*index \[1, 2\]"):
        fit_targets(out, "mse", t, t, "eval")


def test_npz_with_a_truncated_member(tmp_path):
    p = tmp_path / "t.npz"
    np.savez(p, x=np.zeros((16, 8, 8, 1), np.float32), y=np.zeros(16, np.int64))
    p.write_bytes(p.read_bytes()[:700])
    with pytest.raises(PockError, match="t.npz"):
        load_npz(p)


def test_messages_are_bounded():
    assert len(str(PockError("x" * 100_000))) == MAX_MESSAGE
    with pytest.raises(SpecError) as e:
        parse_short("bias:last4,lr=" + "x" * 100_000)
    assert len(str(e.value)) < 400


def test_console_script_bad_board(tmp_path):
    """The real entry point: exit status 2 and one stderr line."""
    p = tmp_path / "b.yaml"
    p.write_bytes(b"[" * 20000)
    r = subprocess.run([sys.executable, "-m", "codegen", "plan", "x.tflite", "--board", str(p)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("text,words", [
    (b"trainable: [{layers: all}]\naccumulate: " + b"9" * 5000 + b"\n",
     ["line 2", "a number with 5000 digits"]),
    (b"trainable: [{layers: all}]\naccumulate: !!int x\n", ["line 2", "explicit YAML tags"]),
    (b"trainable: !!python/object/apply:os.system [id]\n", ["explicit YAML tags"]),
    (b"trainable: [{layers: all}]\nloss: 2001-13-45\n", ["line 2", "cannot read '2001-13-45'"]),
], ids=_id)
def test_yaml_values_the_constructor_cannot_build(tmp_path, text, words):
    refused(load_spec, tmp_path / "spec.yaml", text, words)


def test_short_form_longer_than_a_file_name():
    """load_spec asks the file system first: a 5,000-character short form is not a file
    (it raised OSError: File name too long)."""
    with pytest.raises(SpecError, match="accumulate must be a number"):
        load_spec("bias:all,accumulate=" + "9" * 5000)
    from codegen.board import load_board

    with pytest.raises(SpecError, match="no such board file"):
        load_board("b" * 5000 + ".yaml")
    with pytest.raises(SpecError, match="unknown board"):
        load_board("b" * 5000)


# -- model files ------------------------------------------------------------------------------

def _small_onnx(name: str, edit) -> bytes:
    import onnx

    from tests.fuzz.onnx_mut import small_models

    m = onnx.ModelProto()
    m.ParseFromString(small_models()[name])
    edit(m.graph)
    return m.SerializeToString()


def test_huge_tensors_are_refused_at_import(tmp_path, capsys):
    """A Conv pad of 2**31-1 made a 68 GB activation that fit ran into ("out of memory");
    every importer's graph now has at most MAX_ELEMENTS elements per tensor."""
    from onnx import helper

    def pad(g):
        conv = next(n for n in g.node if n.op_type == "Conv")
        del conv.attribute[[a.name for a in conv.attribute].index("pads")]
        conv.attribute.append(helper.make_attribute("pads", [0, 2**31 - 1, 0, 1]))

    p = tmp_path / "pad.onnx"
    p.write_bytes(_small_onnx("dw_bn_gap", pad))
    one_line_error(*cli(["inspect", p], capsys), "pad.onnx", "17179869216 elements",
                   "at most 16777216")


def test_nan_weights_are_refused_at_import(tmp_path, capsys):
    """A NaN weight reached the quantizer, which printed a NumPy RuntimeWarning."""
    from onnx import numpy_helper

    def nan(g):
        t = next(i for i in g.initializer if i.name == "w1")
        a = numpy_helper.to_array(t).copy()
        a[1, 2, 0, 1] = np.inf
        t.CopyFrom(numpy_helper.from_array(a, "w1"))

    p = tmp_path / "nan.onnx"
    p.write_bytes(_small_onnx("pad_conv_pool", nan))
    one_line_error(*cli(["inspect", p], capsys), "nan.onnx", "1 NaN or infinite value",
                   "index [1, 0, 1, 2]")      # OIHW [1, 2, 0, 1] is OHWI [1, 0, 1, 2]


def quiet_cli(argv: list[str], capsys) -> tuple[int, str]:
    """``cli`` that also fails on any Python warning (they reach the user's terminal)."""
    import warnings

    with warnings.catch_warnings(record=True) as rec:
        status, err = cli(argv, capsys)
    assert not rec, [f"{w.filename}:{w.lineno}: {w.message}" for w in rec]
    return status, err


def test_onnx_pads_of_2_62_name_the_field(tmp_path, capsys):
    """Was the catch-all 'cannot import the model at node /flatten (ValueError: cannot
    reshape array of size 48 into shape (1,4,2305843009213693955,4))'."""
    from onnx import numpy_helper

    def pads(g):
        t = next(i for i in g.initializer if i.name == "pads")
        t.CopyFrom(numpy_helper.from_array(np.array([0, 0, 2**62, 1, 0, 0, 1, 1], np.int64),
                                           "pads"))

    p = tmp_path / "pads.onnx"
    p.write_bytes(_small_onnx("pad_conv_pool", pads))
    for verb in (["inspect", p], ["plan", p, "--calib", tmp_path / "c.npz"]):
        np.savez(tmp_path / "c.npz", x=np.zeros((2, 3, 8, 8), np.float32))
        line = one_line_error(*quiet_cli(verb, capsys), "node '/pad' (Pad)",
                              "pads [0, 0, 4611686018427387904, 1, 0, 0, 1, 1]")
        assert "ValueError" not in line and "cannot import" not in line


def test_tflite_scalar_output_of_fully_connected(tmp_path, capsys, model):
    """An FC whose output shape vector is empty reached the user as 'corrupt TFLite file
    (IndexError: tuple index out of range)' from ir/verify.py."""
    import struct

    import tflite

    data = bytearray(model.read_bytes())
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    fc = next(sg.Operators(k) for k in range(sg.OperatorsLength())
              if m.OperatorCodes(sg.Operators(k).OpcodeIndex()).BuiltinCode()
              == tflite.BuiltinOperator.FULLY_CONNECTED)
    out = sg.Tensors(fc.Outputs(0))
    struct.pack_into("<I", data, out._tab.Vector(out._tab.Offset(4)) - 4, 0)   # shape: []
    p = tmp_path / "fc.tflite"
    p.write_bytes(bytes(data))
    line = one_line_error(*quiet_cli(["inspect", p], capsys), "(fully_connected)",
                          "output shape []")
    assert "IndexError" not in line


def test_overflowing_weights_are_one_line_without_warnings(tmp_path, capsys):
    """Finite weights whose products overflow float32: calibration printed a NumPy
    'overflow encountered' RuntimeWarning before the error."""
    from onnx import numpy_helper

    def huge(g):
        t = next(i for i in g.initializer if i.name == "w1")
        t.CopyFrom(numpy_helper.from_array(np.full((4, 3, 3, 3), 3e38, np.float32), "w1"))

    p = tmp_path / "huge.onnx"
    p.write_bytes(_small_onnx("pad_conv_pool", huge))
    c = tmp_path / "c.npz"
    np.savez(c, x=np.ones((2, 3, 8, 8), np.float32))
    one_line_error(*quiet_cli(["quantize", p, "--calib", c, "-o", tmp_path / "q.tflite"],
                              capsys), "calibration produced non-finite values")


def test_hybrid_weights_that_overflow_float32(tmp_path, capsys):
    """A hybrid (int8 weights, float activations) model whose weight scale is 3e38: the
    dequantized weights overflow; was a RuntimeWarning before the error."""
    import struct

    import tflite

    src = ROOT.parent / "shared" / "models" / "kws_ref_model_float32.tflite"
    if not src.is_file():
        pytest.skip(f"{src} not found")
    data = bytearray(src.read_bytes())
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    t = next(sg.Tensors(i) for i in range(sg.TensorsLength())
             if sg.Tensors(i).Type() == tflite.TensorType.INT8 and sg.Tensors(i).Buffer()
             and sg.Tensors(i).Quantization() is not None
             and sg.Tensors(i).Quantization().ScaleLength())
    q = t.Quantization()
    struct.pack_into("<f", data, q._tab.Vector(q._tab.Offset(8)), 3e38)       # scale[0]
    p = tmp_path / "hybrid.tflite"
    p.write_bytes(bytes(data))
    one_line_error(*quiet_cli(["inspect", p], capsys), "NaN or infinite")


def test_npy_given_as_npz_is_not_parsed(tmp_path, capsys, model):
    """An .npy (with a damaged header) where an .npz belongs: numpy's header parser raised
    tokenize.TokenError through load_npz."""
    p = tmp_path / "data.npz"
    np.save(tmp_path / "x.npy", np.zeros((2, 8, 8, 1), np.float32))
    p.write_bytes((tmp_path / "x.npy").read_bytes().replace(b"'shape': (", b"'shape': ((", 1))
    one_line_error(*quiet_cli(["fit", model, "--train", "bias:last2", "--data", p], capsys),
                   "expected an .npz archive")
    q = tmp_path / "x2.npy"
    q.write_bytes(p.read_bytes())
    one_line_error(*quiet_cli(["infer", model, "--input", q, "--output", tmp_path / "y.npy"],
                              capsys), "not a readable .npy array")


@pytest.mark.parametrize("values,words", [
    ([-1.0, 1.0], ["var + epsilon must be > 0", "channel 0 has -1.0"]),
    ([np.nan, 1.0], ["BatchNormalization var is not finite"]),
    ([1e-14, 1.0], ["scale does not fit float32 (3e+39)"]),
])
def test_batchnorm_parameters_are_checked(tmp_path, capsys, values, words):
    """A negative variance printed 'RuntimeWarning: invalid value encountered in sqrt'."""
    from onnx import TensorProto, numpy_helper

    def var(g):
        t = next(i for i in g.initializer if i.name == "var")
        t.CopyFrom(numpy_helper.from_array(np.array(values, np.float64), "var"))
        t.data_type = TensorProto.DOUBLE
        g.initializer.remove(next(i for i in g.initializer if i.name == "s"))
        g.initializer.append(numpy_helper.from_array(np.full(2, 3e32, np.float32), "s"))
        eps = next(n for n in g.node if n.op_type == "BatchNormalization")
        from onnx import helper

        eps.attribute.append(helper.make_attribute("epsilon", 0.0))

    p = tmp_path / "bn.onnx"
    p.write_bytes(_small_onnx("dw_bn_gap", var))
    one_line_error(*quiet_cli(["inspect", p], capsys), "node '/bn' (BatchNormalization)",
                   *words)


def test_double_initializer_beyond_float32(tmp_path, capsys):
    from onnx import numpy_helper

    def big(g):
        t = next(i for i in g.initializer if i.name == "w2")
        t.CopyFrom(numpy_helper.from_array(np.full((10, 64), 1e300), "w2"))

    p = tmp_path / "big.onnx"
    p.write_bytes(_small_onnx("pad_conv_pool", big))
    one_line_error(*quiet_cli(["inspect", p], capsys), "initializer 'w2'",
                   "do not fit float32 (1e+300)")
