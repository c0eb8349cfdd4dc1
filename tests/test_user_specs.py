"""What a new user meets (issue #15, second part): `inspect` lists the layers a training spec
selects (index, name, kind, what can train); specs select layers by kind and by index range;
the spec grammar is documented; the generated headers compile as C++; a board file of one's
own carries through compile, build and sim; a project is not replaced by one of the other
kind without --force. Everything runs on the bundled digits CNN (host projects, or board
projects built but not measured)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from codegen.cli import main
from codegen.errors import PockError
from codegen.train.spec import load_spec, parametric_layers, parse_short, resolve, spec_from_dict

from .render.helpers import digits_int8

ROOT = Path(__file__).resolve().parents[1]
DIGITS_NAMES = ["/conv1/Conv", "/dw/Conv", "/pw/Conv", "/conv2/Conv", "/fc/Gemm"]
DIGITS_KINDS = ["conv", "dwconv", "conv", "conv", "fc"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = main([str(a) for a in argv])
    except SystemExit as e:                     # argparse
        status = e.code
    out = capsys.readouterr()
    return status, out.out, out.err


def one_line_error(status: int, out: str, err: str, *needles: str) -> str:
    """``run``'s result is a one-line error (exit 2) that has every needle."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2 and not out, f"exit status {status}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("pockengine: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def graph():
    return digits_int8()


@pytest.fixture(scope="module")
def model(tmp_path_factory, graph) -> Path:
    """The quantized digits CNN as an int8 .tflite."""
    from codegen.frontend import save_model

    path = tmp_path_factory.mktemp("model") / "digits.tflite"
    save_model(graph, path)
    return path


def trained(spec: str | dict, graph) -> list[tuple[int, bool, bool]]:
    """(index, bias, weight) of the layers a spec trains on ``graph``."""
    s = spec_from_dict(spec) if isinstance(spec, dict) else parse_short(spec)
    return [(u.index, u.bias, u.weight) for u in resolve(s, graph)]


def biases(*indices: int) -> list[tuple[int, bool, bool]]:
    return [(i, True, False) for i in indices]


# -- 1. inspect: the trainable layers -----------------------------------------------------------
def test_inspect_lists_trainable_layers(capsys, model, graph):
    """Text and --json: every parametric layer with the index a spec uses, its full name,
    kind and what can train; the float model's indices are those of its quantized graph."""
    import codegen.models as bundled

    assert [op.name for op in parametric_layers(graph)] == DIGITS_NAMES
    for path in (model, bundled.path("digits_cnn.onnx")):
        status, out, err = run(capsys, "inspect", path, "--json")
        assert status == 0, err
        s = json.loads(out)
        assert {"ops", "op_counts", "macs", "param_count"} <= set(s)       # kept
        assert [(la["index"], la["name"], la["kind"]) for la in s["layers"]] == \
            list(zip(range(5), DIGITS_NAMES, DIGITS_KINDS))
        assert [la["kind_index"] for la in s["layers"]] == [0, 0, 1, 2, 0]
        assert [la["type"] for la in s["layers"]] == [
            "conv2d", "depthwise_conv2d", "conv2d", "conv2d", "fully_connected"]
        assert all(la["trainable"] == ["weight", "bias"] for la in s["layers"])
        assert s["layers"][4]["weight_shape"] == [10, 24]
        status, out, err = run(capsys, "inspect", path)
        assert status == 0, err
        rows = out[out.index("trainable layers (5)"):].splitlines()[2:]
        assert [r.split()[:2] for r in rows] == [
            ["0", "conv.0"], ["1", "dwconv.0"], ["2", "conv.1"], ["3", "conv.2"], ["4", "fc.0"]]
        assert all(r.endswith(n) and "weight, bias" in r for r, n in zip(rows, DIGITS_NAMES))


def test_inspect_full_names_and_bias_less_layers():
    """Long names are printed whole (the op table cuts them); a layer of an int8 model
    without a bias can train its weight only."""
    from codegen.summary import format_summary, summarize

    from .frontend.single_op import conv2d_graph
    from .render.helpers import rename_graph

    g = conv2d_graph(np.random.default_rng(0), bias=False)
    long = "model/block_12/expanded_conv_project/BatchNorm/FusedBatchNormV3;Conv2D"
    g = rename_graph(g, lambda n: long if n.startswith("op:") else n)
    s = summarize(g)
    assert s["layers"] == [{"index": 0, "name": long, "type": "conv2d", "kind": "conv",
                            "kind_index": 0, "weight_shape": [4, 3, 3, 3],
                            "trainable": ["weight"]}]
    text = format_summary(s)
    assert re.search(rf"^\s+0\s+conv\.0\s+conv2d\s+weight\s+{re.escape(long)}$", text,
                     re.MULTILINE)
    with pytest.raises(PockError, match="have no bias"):
        resolve(parse_short("bias:all"), g)


def test_layer_kind_of_grouped_conv():
    """conv2d with several groups (weight input channels < input channels) is kind gconv."""
    from codegen.train.spec import layer_kind

    from .frontend.single_op import conv2d_graph

    g = conv2d_graph(np.random.default_rng(1), in_shape=(1, 8, 8, 4))
    op = g.ops[0]
    assert layer_kind(g, op) == "conv"
    w = g.tensors[op.inputs[1]]
    g.tensors[w.name] = w.replace(shape=(4, 3, 3, 2), data=w.data[..., :2])
    assert layer_kind(g, op) == "gconv"


# -- 2. layers by kind and by index range ---------------------------------------------------
@pytest.mark.parametrize("spec, expected", [
    ("bias:conv.last2", biases(2, 3)),
    ("bias:conv.first1", biases(0)),
    ("bias:conv.0/2", biases(0, 3)),
    ("bias:conv.0..1", biases(0, 2)),
    ("bias:conv.all", biases(0, 2, 3)),
    ("weight:fc.last1", [(4, False, True)]),
    ("weight:dwconv.all", [(1, False, True)]),
    ("bias:1..3", biases(1, 2, 3)),
    ("bias:2..", biases(2, 3, 4)),
    ("bias:..1", biases(0, 1)),
    ("bias:-2..-1", biases(3, 4)),
    ("bias:0/3..4", biases(0, 3, 4)),
    ("bias:..", biases(0, 1, 2, 3, 4)),
    ("bias:all+weight:conv.last1", [*biases(0, 1, 2), (3, True, True), (4, True, False)]),
    ({"trainable": [{"layers": "last 2", "kind": "conv", "params": "bias"}]}, biases(2, 3)),
    ({"trainable": [{"kind": "dwconv", "params": "weight"}]}, [(1, False, True)]),
    ({"trainable": [{"layers": [0, "3..4"], "params": "bias"}]}, biases(0, 3, 4)),
    ({"trainable": [{"layers": "1..2", "params": "bias"}]}, biases(1, 2)),
    ({"trainable": [{"layers": ["/conv2/Conv", -1], "kind": "conv", "params": "bias"}]},
     biases(3)),
])
def test_layers_by_kind_and_range(graph, spec, expected):
    assert trained(spec, graph) == expected


def test_kind_selection_is_the_same_training_graph(graph, tmp_path):
    """Downstream sees only the selected layers: a spec by kind builds exactly the graph of
    the same layers given by index (YAML file and short form alike)."""
    from codegen.pipeline import graph_digest
    from codegen.train import build_training_graph

    path = tmp_path / "spec.yaml"
    path.write_text("trainable:\n  - {kind: conv, layers: last 2, params: bias}\n"
                    "  - {kind: fc, layers: all, params: weight}\n")
    by_index = build_training_graph(graph, parse_short("bias:2/3+weight:4"))
    for spec in (load_spec(path), parse_short("bias:conv.last2+weight:fc.all")):
        tg = build_training_graph(graph, spec)
        assert tg.metadata["training"]["layers"] == by_index.metadata["training"]["layers"]
        assert graph_digest(tg) == graph_digest(by_index)


@pytest.mark.parametrize("spec, needles", [
    ("bias:lstm.last2", ["unknown layer kind 'lstm'", "conv 3, dwconv 1, fc 1"]),
    ("bias:gconv.all", ["no gconv layers", "conv 3, dwconv 1, fc 1"]),
    ("weight:conv.last4", ["'last 4' but the model has 3 conv layers"]),
    ("bias:fc.1", ["layer index 1 out of range", "1 fc layers"]),
    ("bias:0..9", ["layer range '0..9'", "index 9 out of range", "0..4"]),
    ("bias:3..1", ["layer range '3..1' is empty"]),
])
def test_kind_and_range_errors(capsys, model, spec, needles):
    """A bad kind or range is one line naming the kinds the model has or the numbers."""
    one_line_error(*run(capsys, "plan", model, "--train", spec), *needles)


def test_kind_errors_in_yaml(graph, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainable: [{kind: dwconv, layers: [/fc/Gemm], params: weight}]\n")
    with pytest.raises(PockError, match=r"'/fc/Gemm' is a fc layer, not one of the dwconv"):
        resolve(load_spec(bad), graph)
    bad.write_text("trainable: [{kind: [conv], params: weight}]\n")
    with pytest.raises(PockError, match="kind must be one of conv, dwconv, fc"):
        load_spec(bad)
    with pytest.raises(PockError, match="has no 'layers'"):
        spec_from_dict({"trainable": [{"params": "bias"}]})


# -- 3. the spec grammar in docs/training.md ------------------------------------------------
def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_spec_grammar_is_documented(graph):
    """docs/training.md has a "Training specs" section with the YAML form, the short-form
    grammar and examples; every example there works on the digits CNN as the table says; the
    README points to it."""
    doc = _section((ROOT / "docs" / "training.md").read_text(), "Training specs")
    for needle in ("### The short form", "### The YAML form", "KIND", "lastN", "A..B",
                   "`bias:conv.last2`", "`weight:fc.last1`", "`weight:dwconv.all`",
                   "`bias:3..4`", "pockengine inspect"):
        assert needle in doc, needle
    (block,) = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    d = yaml.safe_load(block)
    assert trained({**d, "kernels": {}}, graph) == [
        (0, True, False), (1, True, False), (2, True, True), (3, True, True), (4, True, True)]
    rows = [r for r in re.findall(r"^\| `([^`|]+)` \| ([^|]+) \|$", doc, re.MULTILINE)
            if ":" in r[0] or r[0] == "all"]                  # the short-form examples
    expect = {"bias:last4": biases(1, 2, 3, 4), "bias:3..4": biases(3, 4),
              "bias:0/2..3": biases(0, 2, 3), "bias:conv.last2": biases(2, 3),
              "weight:fc.last1": [(4, False, True)], "weight:dwconv.all": [(1, False, True)]}
    assert set(expect) <= {r[0] for r in rows}
    for short, _ in rows:
        got = trained(short, graph)
        assert got, short
        if short in expect:
            assert got == expect[short], short
    readme = (ROOT / "README.md").read_text()
    assert "docs/training.md#training-specs" in readme


# -- 4. the generated headers compile as C++ ------------------------------------------------
def _cxx_compilers() -> list[str]:
    found = [c for c in ("g++", "clang++") if shutil.which(c)]
    if not found:
        pytest.skip("no C++ compiler (g++ or clang++) is installed")
    return found


CXX_FLAGS = ("-Wall", "-Wextra", "-Werror", "-pedantic")


def _first_array(header: Path) -> str:
    """The name of the first array a generated header declares."""
    return re.search(r"^extern const \w+ (\w+)\[", header.read_text(), re.MULTILINE).group(1)


USE_CPP = """\
#include <cstdio>
#include <cstring>
#include "pe_model.h"
#include "pe_weights.h"

static const float in_scale = PE_INPUT_SCALE, out_scale = PE_OUTPUT_SCALE;

int main() {
    int (*init)(void) = pe_init;
    int (*infer)(const int8_t *, int8_t *) = pe_infer;
    int (*step)(const int8_t *, int32_t, float *) = pe_train_step;
    int (*step_target)(const int8_t *, const int8_t *, float *) = pe_train_step_target;
    size_t (*export_)(uint8_t *, size_t) = pe_params_export;
    int (*imp)(const uint8_t *, size_t) = pe_params_import;
    size_t (*stream)(void (*)(void *, const uint8_t *, size_t), void *) = pe_params_stream;
    size_t (*sread)(size_t, uint8_t *, size_t) = pe_state_read;
    int (*swrite)(size_t, const uint8_t *, size_t) = pe_state_write;
    uint32_t (*saturated)(void) = pe_saturation_count;
    (void)step_target; (void)imp; (void)stream; (void)sread; (void)swrite;
    static int8_t x[PE_INPUT_BYTES], y[PE_OUTPUT_BYTES];
    static uint8_t params[PE_EXPORT_BYTES + 1];
    float loss = -1.0f;
    int ok = init() == PE_OK && infer(x, y) == PE_OK && step(x, 0, &loss) == PE_OK
             && export_(params, sizeof params) == PE_EXPORT_BYTES && saturated() == 0u;
    uint32_t a, b;
    std::memcpy(&a, &in_scale, sizeof a);
    std::memcpy(&b, &out_scale, sizeof b);
    std::printf("%d %08x %08x %d %g\\n", ok, (unsigned)a, (unsigned)b, (int)WEIGHT[0],
                (double)loss);
    return ok ? 0 : 1;
}
"""


def test_float_literals_round_trip_in_decimal():
    """Header constants are decimal literals valid in C and C++ that give back the float32
    exactly: checked over random float32s of every magnitude and the extremes."""
    from codegen.render.literals import c_float_decimal

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 0x7F800000, size=4000, dtype=np.uint32)
    values = np.concatenate([bits.view(np.float32), np.float32([
        1.0, 0.5, 1 / 255, 0.003921569, np.finfo(np.float32).max, np.finfo(np.float32).tiny,
        np.float32(2.0 ** -149), 1e-10, 123456789.0])])
    values = np.concatenate([values, -values[:100]])
    for v in values:
        text = c_float_decimal(v)
        assert re.fullmatch(r"-?\d+(\.\d*)?(e[+-]\d+)?f", text) and re.search(r"[.e]", text)
        assert len(re.sub(r"[^0-9]", "", text.split("e")[0]).strip("0")) <= 9, text
        assert np.float32(float(text[:-1])) == v, (v, text)
    assert c_float_decimal(1.0) == "1.0f" and c_float_decimal(0.00390625) == "0.00390625f"


def test_generated_headers_compile_as_cxx(tmp_path, graph):
    """pe_model.h, pe_weights.h (host project) and pe_data.h (board project) compile as C++11
    and C++14 with every warning an error; a C++ program calls the API of the C objects (so
    the extern "C" guards hold) and reads the scales back bit for bit."""
    from codegen.pipeline import build_project, compile_model

    compilers = _cxx_compilers()
    host = compile_model(graph, spec="bias:all", out_dir=tmp_path / "host")
    fw = compile_model(graph, board="mps2-an386", spec="bias:all", out_dir=tmp_path / "fw",
                       measure=False)
    header = (host.dir / "pe_model.h").read_text()
    for macro in ("PE_INPUT_SCALE", "PE_OUTPUT_SCALE"):     # decimal: no hex float in C++ < 17
        assert re.search(rf"^#define {macro} \d[0-9.e+-]*f$", header, re.MULTILINE), macro
    for d, h in ((host.dir, "pe_model.h"), (host.dir, "pe_weights.h"), (fw.dir, "pe_data.h")):
        text = (d / h).read_text()
        assert '#ifdef __cplusplus\nextern "C" {' in text and text.count("__cplusplus") == 2, h
    for cxx in compilers:
        for std in ("c++11", "c++14", "c++17"):
            for d, h in ((host.dir, "pe_model.h"), (host.dir, "pe_weights.h"),
                         (fw.dir, "pe_data.h")):
                r = subprocess.run([cxx, f"-std={std}", *CXX_FLAGS, "-fsyntax-only", "-x",
                                    "c++", "-I", str(d), str(d / h)], capture_output=True,
                                   text=True, check=False)
                assert r.returncode == 0, f"{cxx} -std={std} {h}: {r.stderr}"
    build = build_project(host)
    objects = [str(o) for o in build.objects if Path(o).name != "main_host.o"]
    weight = _first_array(host.dir / "pe_weights.h")
    src = tmp_path / "use.cpp"
    src.write_text(USE_CPP.replace("WEIGHT", weight))
    expected = [f"{int(np.float32(host.manifest[k]['scale']).view(np.uint32)):08x}"
                for k in ("input", "output")]
    for cxx in compilers:
        for std in ("c++11", "c++14"):
            exe = tmp_path / f"use-{cxx}-{std}"
            r = subprocess.run([cxx, f"-std={std}", *CXX_FLAGS, "-I", str(host.dir), str(src),
                                *objects, "-o", str(exe)], capture_output=True, text=True,
                               check=False)
            assert r.returncode == 0, f"{cxx} -std={std}: {r.stderr}"
            out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
            ok, a, b, *_ = out.split()
            assert ok == "1" and [a, b] == expected, out
    # pe_data.h's arrays link from C++ as well
    data_obj = tmp_path / "pe_data.o"
    subprocess.run([shutil.which("gcc") or "cc", "-std=c99", "-c", "-I", str(fw.dir),
                    str(fw.dir / "pe_data.c"), "-o", str(data_obj)], check=True)
    arr = _first_array(fw.dir / "pe_data.h")
    src.write_text(f'#include <cstdio>\n#include "pe_data.h"\nint main() {{ std::printf('
                   f'"%d\\n", (int)sizeof {arr}[0] + (int)PE_DATA_STEPS); return 0; }}\n')
    r = subprocess.run([compilers[0], "-std=c++11", *CXX_FLAGS, "-I", str(fw.dir), str(src),
                        str(data_obj), "-o", str(tmp_path / "data")], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr


# -- 5. a board file of one's own -----------------------------------------------------------
def _own_board(directory: Path, name: str = "myboard") -> Path:
    """boards/mps2-an386.yaml under a new name (and a name field to match)."""
    text = (ROOT / "boards" / "mps2-an386.yaml").read_text()
    assert re.search(r"^name: mps2-an386$", text, re.MULTILINE)
    path = directory / f"{name}.yaml"
    path.write_text(re.sub(r"^name: mps2-an386$", f"name: {name}", text, flags=re.MULTILINE))
    return path


def test_own_board_file_carries_through_build_and_sim(capsys, tmp_path, model):
    """compile --board ./myboard.yaml keeps a copy of the board file in the project, so that
    build (and sim, where QEMU is installed) find the board, even once the original is
    gone."""
    from codegen.render.output import open_project

    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (needed to build for the board)")
    mine = tmp_path / "mine"
    mine.mkdir()
    board = _own_board(mine)
    proj = tmp_path / "proj"
    status, _, err = run(capsys, "compile", model, "--board", board, "--train", "bias:last2",
                         "--no-measure", "-o", proj)
    assert status == 0, err
    m = json.loads((proj / "pockengine.json").read_text())
    assert m["board"] == "myboard" and m["board_file"] == "board/myboard.yaml"
    assert (proj / "board" / "myboard.yaml").read_bytes() == board.read_bytes()
    assert "board/myboard.yaml" in m["files"]
    shutil.rmtree(mine)                                   # the project's copy is enough
    assert open_project(proj).board_record().name == "myboard"
    status, out, err = run(capsys, "build", proj, "--json")
    assert status == 0, err
    assert json.loads(out)["board"] == "myboard"
    if shutil.which("qemu-system-arm") is not None:
        import codegen.models as bundled

        x, y = bundled.digits("train")
        np.savez(tmp_path / "train.npz", x=x[:4], y=y[:4])
        status, out, err = run(capsys, "sim", proj, "--data", tmp_path / "train.npz",
                               "--json")
        assert status == 0, err
        r = json.loads(out)
        assert r["board"] == "myboard" and len(r["loss"]) == 4
    # the copy gone: one line saying what to do
    (proj / "board" / "myboard.yaml").unlink()
    one_line_error(*run(capsys, "build", proj), "board/myboard.yaml", "--board PATH.yaml")


def test_project_of_unknown_board_without_copy(capsys, tmp_path, model):
    """A project that names a board the catalogue lacks and keeps no copy (made before
    projects kept one): build says so and how to fix it, on one line."""
    proj = tmp_path / "proj"
    status, _, err = run(capsys, "compile", model, "--board", _own_board(tmp_path, "oldboard"),
                         "--no-measure", "-o", proj)
    assert status == 0, err
    m = json.loads((proj / "pockengine.json").read_text())
    del m["board_file"]
    (proj / "pockengine.json").write_text(json.dumps(m))
    one_line_error(*run(capsys, "build", proj), "'oldboard'", "not in the catalogue",
                   "--board PATH/oldboard.yaml")


# -- 6. replacing a project of the other kind -------------------------------------------------
def test_other_kind_in_same_output_needs_force(capsys, tmp_path, model):
    """An inference project is not replaced by a training project (or back) without --force;
    recompiling the same kind in place works as before."""
    out = tmp_path / "p"
    compile_ = lambda *extra: run(capsys, "compile", model, "--board", "host", "-o", out,
                                  *extra)
    assert compile_()[0] == 0
    assert compile_()[0] == 0                                       # same kind: in place
    one_line_error(*compile_("--train", "bias:last2"), str(out), "inference project",
                   "training project", "--force")
    assert json.loads((out / "pockengine.json").read_text())["training"] is None   # untouched
    assert compile_("--train", "bias:last2", "--force")[0] == 0
    assert json.loads((out / "pockengine.json").read_text())["training"] is not None
    assert compile_("--train", "bias:last1")[0] == 0                # same kind: in place
    one_line_error(*compile_(), "training project", "inference project", "--force")
    status, _, err = compile_("-f")
    assert status == 0, err
    assert json.loads((out / "pockengine.json").read_text())["training"] is None
