"""The generated C project: deterministic, strict C99 under gcc and clang, sanitised names,
prefixed symbols, no malloc, banners, and the output-directory rules."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from codegen import __version__, golden
from codegen.errors import PockError
from codegen.pipeline import build_project, compile_model, run_host_fit, run_host_infer
from codegen.render import C_FLAGS

from .helpers import (
    MALLOC_FAMILY,
    defined_globals,
    model_path,
    nasty_names,
    need,
    random_int8,
    undefined_symbols,
)

GENERATED = ("pe_model.h", "pe_model.c", "pe_weights.h", "pe_weights.c", "main_host.c",
             "Makefile", "CMakeLists.txt")


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and "build" not in p.relative_to(d).parts[0]}


def test_render_is_deterministic(tmp_path, digits_graph):
    a = compile_model(digits_graph, out_dir=tmp_path / "a")
    b = compile_model(digits_graph, out_dir=tmp_path / "b")
    fa, fb = _files(a.dir), _files(b.dir)
    assert fa == fb
    assert set(GENERATED) <= set(fa)
    assert any(k.startswith("kernels/ref/") and k.endswith(".c") for k in fa)
    # a file-backed model: same bytes again; the banner names the model file's hash
    kws = model_path("kws_ref_model.tflite")
    c = compile_model(kws, out_dir=tmp_path / "c")
    d = compile_model(kws, out_dir=tmp_path / "d")
    assert _files(c.dir) == _files(d.dir)
    digest = hashlib.sha256(kws.read_bytes()).hexdigest()
    for name in GENERATED:
        head = (c.dir / name).read_text().splitlines()[:4]
        assert any(f"pockengine {__version__} -- do not edit" in ln for ln in head), name
        assert any(digest in ln for ln in (c.dir / name).read_text().splitlines()[:6]), name


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_strict_c99_builds_and_runs(tmp_path, cc, digits_graph):
    need(cc)
    proj = compile_model(model_path("kws_ref_model.tflite"), out_dir=tmp_path / "kws")
    makefile = (proj.dir / "Makefile").read_text()
    for flag in ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off"):
        assert flag in C_FLAGS and flag in makefile
    res = build_project(proj, cc=cc, build_dir=f"build-{cc}")
    assert res.binary.is_file() and res.cc == cc
    assert "warning" not in res.log.lower()
    mem = proj.manifest["memory"]            # flash holds the constants, SRAM the arena
    assert res.sizes["flash_bytes"] > mem["constant_bytes"] > 20_000
    # the exact arena of the ref chain is tested in tests/memplan (16,000 B, TFLM's head);
    # the host's native kernels add their scratch
    assert res.sizes["sram_bytes"] >= mem["arena_bytes"] >= 16_000
    from codegen.frontend import load_model

    g = load_model(model_path("kws_ref_model.tflite"))
    x = random_int8(g, 8, seed=3)
    assert np.array_equal(run_host_infer(res, x), golden.run(g, x)[0])
    # training projects (every fp32 and every int8 training kernel the digits CNN needs)
    from codegen.golden.training import TrainState, fit
    from codegen.train import build_training_graph
    from codegen.train.spec import load_spec

    xs = random_int8(digits_graph, 12, seed=6)
    ys = np.arange(12) % 10
    for spec in ("all,opt=adam,lr=0.001,backward=fp32",
                 "all,opt=momentum,lr=0.01,momentum=0.9,backward=int8"):
        proj = compile_model(digits_graph, spec=spec, out_dir=tmp_path / spec.split(",")[-1])
        res = build_project(proj, cc=cc, build_dir=f"build-{cc}")
        assert "warning" not in res.log.lower()
        tg = build_training_graph(digits_graph, load_spec(spec))
        gold = fit(tg, TrainState.from_graph(tg), xs, ys)
        host = run_host_fit(res, xs, ys)
        assert host["loss"] == gold["loss"] and host["params_sha256"] == gold["params_sha256"]


@pytest.mark.parametrize("backend", ["auto", "ref"])
def test_no_malloc_no_free(tmp_path, digits_graph, backend):
    res = build_project(compile_model(digits_graph, out_dir=tmp_path / "p", backend=backend))
    objs = sorted((res.project.dir / "build").rglob("*.o"))
    sources = sorted(res.project.dir.rglob("*.c"))
    # model, weights, harness and the kernels used (native bodies are inlined in the model)
    assert len(objs) == len(sources) > 3 and any("kernels" in str(s) for s in sources)
    undefined = undefined_symbols(objs)
    assert not undefined & MALLOC_FAMILY, undefined & MALLOC_FAMILY
    model_objs = [o for o in objs if o.name != "main_host.o"]
    # the model and the kernels need nothing from libc but (possibly) memcpy/memset
    external = undefined_symbols(model_objs) - defined_globals(model_objs)
    assert external <= {"memcpy", "memset", "memmove"}, external


def test_sanitised_names_build_and_match_golden(tmp_path, digits_graph):
    g = nasty_names(digits_graph)
    assert "int" in g.tensors and "1:conv/weights;int" in g.tensors
    proj = compile_model(g, out_dir=tmp_path / "nasty", prefix="zz")
    src = (proj.dir / "zz_model.c").read_text() + (proj.dir / "zz_weights.c").read_text()
    assert "*/ oops" not in src and "??/" not in src
    res = build_project(proj)
    x = random_int8(g, 50, seed=4)
    assert np.array_equal(run_host_infer(res, x), golden.run(g, x)[0])
    model_objs = [res.project.dir / "build" / n for n in ("zz_model.o", "zz_weights.o")]
    syms = defined_globals(model_objs)
    assert syms and all(s.startswith("zz_") for s in syms), sorted(syms)


def test_prefix_on_every_symbol(tmp_path, digits_graph):
    proj = compile_model(digits_graph, out_dir=tmp_path / "k", prefix="kws")
    header = (proj.dir / "kws_model.h").read_text()
    for decl in ("int kws_init(void)", "int kws_infer(const int8_t *input, int8_t *output)",
                 "int kws_train_step(const int8_t *input, int32_t label, float *loss)",
                 "size_t kws_params_export(uint8_t *dst, size_t cap)",
                 "int kws_params_import(const uint8_t *src, size_t len)"):
        assert decl in header
    macros = re.findall(r"^#define (\w+)", header, re.MULTILINE)
    assert "KWS_ARENA_BYTES" in macros and all(m.startswith("KWS_") for m in macros)
    for name in ("kws_model.c", "kws_weights.c"):
        text = (proj.dir / name).read_text()
        assert "malloc" not in text and "alloca" not in text
        assert all(m.startswith("KWS_") for m in re.findall(r"^#define (\w+)", text, re.MULTILINE))
    res = build_project(proj)
    syms = defined_globals([res.project.dir / "build" / n for n in ("kws_model.o",
                                                                    "kws_weights.o")])
    assert "kws_infer" in syms and all(s.startswith("kws_") for s in syms)


def test_output_directory_rules(tmp_path, digits_graph):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(PockError, match="not empty"):
        compile_model(digits_graph, out_dir=foreign)
    assert (foreign / "notes.txt").read_text() == "mine"
    compile_model(digits_graph, out_dir=foreign, force=True)
    assert (foreign / "pockengine.json").is_file() and (foreign / "notes.txt").is_file()
    # an earlier pockengine output is overwritten; unchanged files keep their timestamps
    out = tmp_path / "out"
    compile_model(digits_graph, out_dir=out)
    stamp = (out / "pe_weights.c").stat().st_mtime_ns
    compile_model(digits_graph, out_dir=out, prefix="dg")
    assert not (out / "pe_weights.c").exists() and (out / "dg_weights.c").is_file()
    compile_model(digits_graph, out_dir=out, prefix="dg")
    assert (out / "dg_weights.c").stat().st_mtime_ns >= stamp
    with pytest.raises(PockError, match="prefix"):
        compile_model(digits_graph, out_dir=tmp_path / "bad", prefix="int")
    with pytest.raises(PockError, match="board"):
        compile_model(digits_graph, out_dir=tmp_path / "bad", board="nonexistent-board")


def test_cmake_project_builds(tmp_path, digits_graph):
    need("cmake")
    import subprocess

    proj = compile_model(digits_graph, out_dir=tmp_path / "cm")
    build = tmp_path / "cmake-build"
    subprocess.run([need("cmake"), "-S", str(proj.dir), "-B", str(build)], check=True,
                   capture_output=True)
    r = subprocess.run([need("cmake"), "--build", str(build), "-j2"], check=False,
                       capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (build / "pe_host").is_file()
