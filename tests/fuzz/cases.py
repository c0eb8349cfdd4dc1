"""One fuzz case per (kind, seed): the input files it writes and the commands it runs.

Kinds:
- ``tflite``: a mutated .tflite (``tflite_mut``) through inspect, plan, infer, fit, compile;
- ``onnx``: a mutated ONNX model (``onnx_mut``) through inspect, plan, quantize, compile, fit;
- ``spec``: a YAML training spec or a ``--train`` short form (``text_mut``) through plan,
  compile and fit;
- ``board``: a board file with hostile values (``text_mut``) through plan and compile; a
  project it produced is expanded with ``make -n`` (the marker file must not appear);
- ``data``: .npz / .npy files (``data_mut``) through fit, infer, quantize, compile, plan;
- ``names``: a model whose tensors, ops and file name are hostile strings (comment
  delimiters, ``#include``, ``../../x``, NUL, very long), compiled for the host and built:
  the project must build and every file must stay inside its directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import data_mut, onnx_mut, text_mut, tflite_mut

KINDS = ("tflite", "onnx", "spec", "board", "data", "names")
WEIGHTS = {"tflite": 0.34, "onnx": 0.25, "spec": 0.14, "board": 0.10, "data": 0.15,
           "names": 0.02}


@dataclass
class Case:
    kind: str
    commands: list[list[str]]
    marker: Path
    note: str = ""
    project: Path | None = None       # names: new files must all be in here
    build: bool = False               # names: the last command builds and must succeed
    make_dry_run: Path | None = None  # board: expand the project's Makefile (make -n)
    extra: dict[str, Any] = field(default_factory=dict)


def _pick(rng: np.random.Generator, seq: list) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _weighted(rng: np.random.Generator, table: list[tuple[float, Any]]) -> Any:
    total = sum(w for w, _ in table)
    r = rng.random() * total
    for w, v in table:
        r -= w
        if r < 0:
            return v
    return table[-1][1]


def _spec_for(rec: dict[str, Any]) -> str:
    return "bias:last2" + (",loss=mse" if rec["loss"] == "mse" else "")


def _model_commands(rng: np.random.Generator, model: Path, rec: dict[str, Any], d: Path,
                    onnx: bool) -> list[list[str]]:
    """One verb on a (possibly broken) model; heavy verbs only for the small seeds."""
    calib = ["--calib", rec["data"]] if rec["dtype"] == "float32" else []
    spec = _spec_for(rec)
    m = str(model)
    table = [(0.5 if not onnx else 0.35, ["inspect", m]),
             (0.15, ["plan", m, *calib] + (["--train", spec] if rng.random() < 0.5 else [])),
             (0.1, ["infer", m, "--input", rec["npy"], "--output", str(d / "y.npy")])]
    if onnx or rec["dtype"] == "float32":
        table.append((0.12, ["quantize", m, "--calib", rec["data"], "-o", str(d / "q.tflite")]))
    if rec["small"]:
        table += [(0.1, ["fit", m, "--train", spec, "--data", rec["data"], "--eval",
                         rec["data"], "-o", str(d / "tuned.tflite")]),
                  (0.08, ["compile", m, "--board", "host", "--train", spec, *calib,
                          "-o", str(d / "proj")])]
    return [_weighted(rng, table)]


def _case_model(kind: str, mutate: Any, rng: np.random.Generator, seeds: dict[str, Any],
                d: Path, marker: Path) -> Case:
    """A mutated seed model of ``kind`` (its file suffix) through one verb."""
    name = _pick(rng, sorted(k for k in seeds["models"] if k.endswith(f".{kind}")))
    rec = seeds["models"][name]
    blob, done = mutate(Path(rec["file"]).read_bytes(), rng)
    model = d / f"model.{kind}"
    model.write_bytes(blob)
    return Case(kind, _model_commands(rng, model, rec, d, kind == "onnx"), marker,
                f"{name}: {', '.join(done)}")


def case_tflite(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path
                ) -> Case:
    return _case_model("tflite", tflite_mut.mutate, rng, seeds, d, marker)


def case_onnx(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path) -> Case:
    return _case_model("onnx", onnx_mut.mutate, rng, seeds, d, marker)


def _small_int8(rng: np.random.Generator, seeds: dict[str, Any]) -> dict[str, Any]:
    names = [k for k in ("digits_int8.tflite", "kws_ref_model.tflite") if k in seeds["models"]]
    return seeds["models"][_pick(rng, names)]


def case_spec(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path) -> Case:
    rec = _small_int8(rng, seeds)
    if rng.random() < 0.3:
        spec = text_mut.short_spec(rng)
        note = f"short form {spec[:60]!r}"
    else:
        p = d / _pick(rng, ["spec.yaml", "spec.yml", "spec.json"])
        p.write_bytes(text_mut.spec_text(rng).replace(text_mut.MARKER.encode(),
                                                       str(marker).encode()))
        spec, note = str(p), f"YAML {p.read_bytes()[:60]!r}"
    m = rec["file"]
    cmd = _weighted(rng, [
        (0.6, ["plan", m, "--train", spec] + (["--board", "mps2-an385"] if rng.random() < 0.2
                                              else [])),
        (0.2, ["compile", m, "--board", "host", "--train", spec, "-o", str(d / "proj")]),
        (0.2, ["fit", m, "--train", spec, "--data", rec["data"]])])
    return Case("spec", [cmd], marker, note)


def case_board(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path) -> Case:
    rec = seeds["models"]["digits_int8.tflite"]
    name = _pick(rng, ["fuzz-board", "fuzzboard"])
    p = d / f"{name}.yaml"
    p.write_bytes(text_mut.board_text(rng, seeds["boards"], name)
                  .replace(text_mut.MARKER.encode(), str(marker).encode()))
    m = rec["file"]
    if rng.random() < 0.4:
        return Case("board", [["plan", m, "--board", str(p), "--train", "bias:last2"]], marker,
                    f"board {p.read_bytes()[:60]!r}")
    proj = d / "proj"
    return Case("board", [["compile", m, "--board", str(p), "--train", "bias:last2",
                           "-o", str(proj)]], marker, f"board {p.read_bytes()[:60]!r}",
                make_dry_run=proj)


def case_data(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path) -> Case:
    q = seeds["models"]["digits_int8.tflite"]
    f = seeds["models"]["digits_cnn.onnx"]
    shape = tuple(q["shape"])
    verb = _weighted(rng, [(0.35, "fit"), (0.15, "eval"), (0.15, "infer"), (0.15, "quantize"),
                           (0.1, "compile"), (0.1, "plan")])
    p = d / ("x.npy" if verb == "infer" else "data.npz")
    what = data_mut.data_file(rng, p, shape, q["classes"], str(marker), npy=verb == "infer")
    cmd = {
        "fit": ["fit", q["file"], "--train", "bias:last2", "--data", str(p)],
        "eval": ["fit", q["file"], "--train", "bias:last2", "--data", q["data"], "--eval",
                 str(p)],
        "infer": ["infer", q["file"], "--input", str(p), "--output", str(d / "y.npy")],
        "quantize": ["quantize", f["file"], "--calib", str(p), "-o", str(d / "q.tflite")],
        "compile": ["compile", q["file"], "--board", "mps2-an386", "--train", "bias:last2",
                    "--data", str(p), "--eval", str(p), "-o", str(d / "fw")],
        "plan": ["plan", f["file"], "--calib", str(p)],
    }[verb]
    return Case("data", [cmd], marker, f"{verb}: {what}")


HOSTILE_NAMES = ["*/ #include \"x\"", "/*", "*/", "../../x", "../../../../tmp/pe_fuzz_escape",
                 "a\x00b", "x" * 5000, "#define main exit", "\\", "??/", "\n#error x\n",
                 "\"", "'", "%s%n", "$(shell touch x)", "`id`", "CON", "pe_init", "int",
                 "\u00e9\u4e2d\u202e", "\r", "-rf", "/", ".", "..", "", " ", "\t", "/* x */",
                 "// line", "\\\n", "0x", "1", "__LINE__", "PE_ARENA_BYTES"]


def _hostile(rng: np.random.Generator, used: set[str]) -> str:
    if rng.random() < 0.7:
        base = _pick(rng, HOSTILE_NAMES)
    else:
        chars = [chr(int(c)) for c in rng.integers(1, 0x3000, size=int(rng.integers(1, 40)))]
        base = "".join(c for c in chars if not 0xD800 <= ord(c) < 0xE000)
    name, k = base, 1
    while name in used or not name:
        name = f"{base}{k}"
        k += 1
    used.add(name)
    return name


def case_names(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path) -> Case:
    from codegen.frontend import load_model, save_model
    from tests.render.helpers import rename_graph

    used: set[str] = set()
    mapping: dict[str, str] = {}

    def rename(n: str) -> str:
        if n not in mapping:
            mapping[n] = _hostile(rng, used) if rng.random() < 0.7 else n
        return mapping[n]

    if rng.random() < 0.4:
        return _names_onnx(rng, seeds, d, marker, rename)
    stem = _pick(rng, ["model", "a*\\ b *", "x'y\"z", "#1", "$(x)", "\u00e9", "a\\b", "-o",
                       "t\\"])
    model = d / f"{stem}.tflite"
    save_model(rename_graph(load_model(seeds["models"]["digits_int8.tflite"]["file"]), rename),
               model)
    proj = d / "proj"
    spec = _pick(rng, ["bias:last2", "weight:last1@0.5", "all"])
    prefix = _pick(rng, ["pe", "m", "net2"])
    return Case("names", [["compile", str(model), "--board", "host", "--train", spec,
                           "--prefix", prefix, "-o", str(proj)], ["build", str(proj)]],
                marker, f"names {sorted(mapping.values())[:4]!r}"[:200], project=proj,
                build=True)


def _names_onnx(rng: np.random.Generator, seeds: dict[str, Any], d: Path, marker: Path,
                rename: Any) -> Case:
    """The ONNX route: node names and value names (inputs, outputs, initializers) renamed."""
    import onnx

    name = _pick(rng, ["digits_cnn.onnx", "pad_conv_pool.onnx", "dw_bn_gap.onnx",
                       "matmul_concat.onnx"])
    rec = seeds["models"][name]
    m = onnx.load(rec["file"])
    g = m.graph
    values = {v.name for v in list(g.input) + list(g.output) + list(g.initializer)}
    values |= {o for n in g.node for o in list(n.input) + list(n.output) if o}
    new = {v: rename(v).replace("\x00", "") or "v" for v in sorted(values)}
    for v in list(g.input) + list(g.output) + list(g.initializer) + list(g.value_info):
        v.name = new.get(v.name, v.name)
    for n in g.node:
        n.name = rename("node:" + n.name)
        n.input[:] = [new.get(i, i) if i else i for i in n.input]
        n.output[:] = [new.get(o, o) if o else o for o in n.output]
    model = d / "model.onnx"
    model.write_bytes(m.SerializeToString())
    proj = d / "proj"
    return Case("names", [["compile", str(model), "--board", "host", "--calib", rec["data"],
                           "--train", "bias:last1", "-o", str(proj)], ["build", str(proj)]],
                marker, f"onnx names {sorted(new.values())[:4]!r}"[:200], project=proj,
                build=True)


GENERATORS = {"tflite": case_tflite, "onnx": case_onnx, "spec": case_spec,
              "board": case_board, "data": case_data, "names": case_names}


def make_case(kind: str, case_seed: int, seeds: dict[str, Any], d: Path) -> Case:
    rng = np.random.default_rng(case_seed)
    marker = d.parent / f"{d.name}.marker"
    return GENERATORS[kind](rng, seeds, d, marker)


def choose_kind(campaign_seed: int, index: int, kinds: tuple[str, ...]) -> tuple[str, int]:
    """The kind and seed of case ``index`` (deterministic; only ``kinds`` are drawn)."""
    rng = np.random.default_rng([campaign_seed, index])
    kind = _weighted(rng, [(WEIGHTS[k], k) for k in kinds])
    return kind, int(rng.integers(2**63))
