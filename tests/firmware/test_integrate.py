"""The generated model inside a build of one's own (firmware_examples/integrate): a board
project exports the model as a library (``pockengine.cmake`` / ``CMakeLists.txt``, ``model.mk``)
without the firmware's harness, startup code or linker script; a user's program built from it
with the host compiler gives the golden model's outputs, losses and parameters; the arena can be
the caller's buffer (``pe_init_with_arena``, ``PE_USER_ARENA``) or sit in a named section
(``PE_ARENA_SECTION``); the example application builds, saves its training state and resumes it
after a "reboot" exactly where it was."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from codegen import golden, pipeline
from codegen.data import fit_input
from codegen.golden.training import TrainState, fit
from codegen.pipeline import compile_model

from .helpers import ROOT, SPEC, digits_data, digits_graph

BOARD = "mps2-an386"
SAMPLES = 10
EXAMPLE = ROOT / "firmware_examples" / "integrate"

# A user's program: argv "checks" prints what the init calls return; "run X Y N OUT LOSS PAR"
# initialises (on a buffer of garbage when the model has no arena of its own, overwritten
# again before every call), infers N samples with the initial parameters, trains on them in
# order and exports the parameters.
USER_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe_model.h"

static uint8_t arena[PE_ARENA_BYTES + 2u * PE_ARENA_ALIGNMENT]
    __attribute__((aligned(PE_ARENA_ALIGNMENT)));

static long load(const char *path, void *dst, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t got;
    if (f == NULL) {
        return -1;
    }
    got = fread(dst, 1, n, f);
    fclose(f);
    return (long)got;
}

static int save(const char *path, const void *src, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok;
    if (f == NULL) {
        return 1;
    }
    ok = fwrite(src, 1, n, f) == n;
    return fclose(f) != 0 || !ok;
}

/* Between calls the arena holds nothing: another user may overwrite it. */
static void scribble(long i)
{
#if defined(PE_USER_ARENA) && PE_USER_ARENA
    memset(arena + PE_ARENA_ALIGNMENT, (int)(0x5A ^ i) & 0xFF, PE_ARENA_BYTES);
#else
    (void)i;
#endif
}

static int checks(void)
{
    int8_t x[PE_INPUT_BYTES] = {0};
    int8_t y[PE_OUTPUT_BYTES];
    printf("infer_first %d\n", pe_infer(x, y));
    printf("init_with_arena_null %d\n", pe_init_with_arena(NULL, sizeof arena));
    printf("init_with_arena_small %d\n", pe_init_with_arena(arena, PE_ARENA_BYTES - 1u));
    printf("init_with_arena_misaligned %d\n", pe_init_with_arena(arena + 1, PE_ARENA_BYTES));
    printf("infer_after_errors %d\n", pe_infer(x, y));
    printf("init %d\n", pe_init());
    printf("init_with_arena_exact %d\n", pe_init_with_arena(arena, PE_ARENA_BYTES));
    printf("infer %d\n", pe_infer(x, y));
    return 0;
}

int main(int argc, char **argv)
{
    static int8_t xs[1024 * PE_INPUT_BYTES];
    static int8_t ys[1024 * PE_OUTPUT_BYTES];
    static int32_t labels[1024];
    static float losses[1024];
    static uint8_t params[PE_EXPORT_BYTES + 1u];
    long i, n;
    int rc;
    if (argc == 2 && strcmp(argv[1], "checks") == 0) {
        return checks();
    }
    if (argc != 8 || strcmp(argv[1], "run") != 0) {
        return 2;
    }
    n = atol(argv[4]);
    if (n < 1 || n > 1024 || load(argv[2], xs, (size_t)n * PE_INPUT_BYTES) != n * (long)PE_INPUT_BYTES
        || load(argv[3], labels, (size_t)n * sizeof labels[0]) != n * (long)sizeof labels[0]) {
        return 2;
    }
#if defined(PE_USER_ARENA) && PE_USER_ARENA
    memset(arena, 0xA5, sizeof arena);            /* the arena needs no initialization */
    rc = pe_init_with_arena(arena + PE_ARENA_ALIGNMENT, PE_ARENA_BYTES);
#else
    rc = pe_init();
#endif
    if (rc != PE_OK) {
        printf("init %d\n", rc);
        return 1;
    }
    for (i = 0; i < n; ++i) {
        scribble(i);
        if (pe_infer(xs + i * PE_INPUT_BYTES, ys + i * PE_OUTPUT_BYTES) != PE_OK) {
            return 1;
        }
    }
#if PE_HAS_TRAINING
    for (i = 0; i < n; ++i) {
        scribble(i);
        if (pe_train_step(xs + i * PE_INPUT_BYTES, labels[i], &losses[i]) != PE_OK) {
            return 1;
        }
    }
#else
    memset(losses, 0, sizeof losses);
#endif
    if (pe_params_export(params, sizeof params) != PE_EXPORT_BYTES) {
        return 1;
    }
    return save(argv[5], ys, (size_t)n * PE_OUTPUT_BYTES) || save(argv[6], losses, (size_t)n * 4u)
           || save(argv[7], params, PE_EXPORT_BYTES);
}
"""

# A user's Makefile that takes the model through model.mk: the model's sources with the flags
# it asks for (and pockengine's warnings, as errors), third-party sources with theirs.
USER_MAKEFILE = r"""
MODEL ?= model
B ?= build
PE_MODEL_DEFINES = -DPE_USER_ARENA=1
include $(MODEL)/model.mk

M_OBJS = $(addprefix $(B)/m/,$(notdir $(PE_MODEL_SRCS:.c=.o)))
T_OBJS = $(addprefix $(B)/t/,$(notdir $(PE_MODEL_THIRD_PARTY_SRCS:.c=.o)))
vpath %.c $(sort $(dir $(PE_MODEL_SRCS) $(PE_MODEL_THIRD_PARTY_SRCS)))

$(B)/app: $(B)/main.o $(M_OBJS) $(T_OBJS)
	$(CC) -o $@ $^

$(B)/main.o: main.c
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -Wall -Wextra -Werror $(PE_MODEL_INCLUDES) $(PE_MODEL_DEFINES) -c $< -o $@

$(M_OBJS): $(B)/m/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -O2 $(PE_MODEL_CFLAGS) $(PE_MODEL_WARNINGS) -Werror $(PE_MODEL_INCLUDES) -c $< -o $@

$(T_OBJS): $(B)/t/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -O2 $(PE_MODEL_THIRD_PARTY_CFLAGS) $(PE_MODEL_INCLUDES) -c $< -o $@

syntax:
	$(CC) -fsyntax-only $(PE_MODEL_CFLAGS) $(PE_MODEL_WARNINGS) -Werror $(PE_MODEL_INCLUDES) $(PE_MODEL_SRCS)
"""

# The same program in a user's CMake project: the model's own arena, in a named section.
USER_CMAKE = r"""
cmake_minimum_required(VERSION 3.13)
project(user_app C)
set(PE_ARENA_SECTION .pe_arena)
set(PE_MODEL_WERROR ON)
add_subdirectory("${MODEL}" pe_model)
add_executable(app main.c)
target_link_libraries(app PRIVATE pe_model)
"""


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def _run(cmd: list[str], cwd: Path | None = None, env: dict | None = None
         ) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                       timeout=300, env=env, check=False)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-3000:]}{r.stderr[-3000:]}"
    return r


def _macros(header: Path) -> dict[str, int]:
    """The integer macros of a generated header: ``#define PE_ERR_SIZE (-5)`` -> -5."""
    out = {}
    for name, value in re.findall(r"^#define (\w+) \(?(-?\d+)u?\)?", header.read_text(),
                                  re.MULTILINE):
        out[name] = int(value)
    return out


@pytest.fixture(scope="module")
def board_project(tmp_path_factory):
    """The digits CNN compiled for a Cortex-M4F board (no data embedded), as a user gets it."""
    out = tmp_path_factory.mktemp("integrate") / "model"
    return compile_model(digits_graph(), board=BOARD, spec=SPEC, out_dir=out, measure=False)


@pytest.fixture(scope="module")
def expected(board_project):
    """Int8 samples and what the golden model gives for them: outputs with the initial
    parameters, per-step losses and the exported parameters after training in order."""
    graph = digits_graph()
    train, _ = digits_data()
    x = fit_input(graph, train["x"][:SAMPLES])
    y = np.asarray(train["y"][:SAMPLES], dtype=np.int32)
    spec = pipeline.resolve_spec(SPEC, pipeline.resolve_board(BOARD))
    tg = pipeline.training_graph(graph, spec)
    state = TrainState.from_graph(tg)
    gold = fit(tg, state, x, y)
    params = b"".join(np.ascontiguousarray(state[n], dtype=state[n].dtype.newbyteorder("<"))
                      .tobytes() for n in state.parameters)
    assert hashlib.sha256(params).hexdigest() == gold["params_sha256"]
    return {"x": x, "y": y, "outputs": golden.run(graph, x)[0], "loss": gold["loss"],
            "params": params}


def _check_run(binary: Path, work: Path, expected: dict) -> None:
    x, y = expected["x"], expected["y"]
    x.tofile(work / "x.bin")
    y.astype("<i4").tofile(work / "y.bin")
    _run([binary, "run", work / "x.bin", work / "y.bin", len(x), work / "out.bin",
          work / "loss.bin", work / "params.bin"], cwd=work)
    outputs = np.fromfile(work / "out.bin", np.int8).reshape(expected["outputs"].shape)
    assert np.array_equal(outputs, expected["outputs"])
    assert np.fromfile(work / "loss.bin", "<f4").tolist() == expected["loss"]
    assert (work / "params.bin").read_bytes() == expected["params"]


def _make_user_project(tmp_path: Path, **files: str) -> Path:
    work = tmp_path / "user"
    work.mkdir()
    (work / "main.c").write_text(USER_MAIN)
    for name, text in files.items():
        (work / name).write_text(text)
    return work


def test_board_project_exports_the_model_alone(board_project):
    d = board_project.dir
    for name in ("model.mk", "pockengine.cmake", "CMakeLists.txt", "Makefile"):
        assert (d / name).is_file(), name
    mk = (d / "model.mk").read_text()
    cmake = (d / "pockengine.cmake").read_text()
    srcs = re.search(r"^PE_MODEL_SRCS = \\\n((?:\t.*\n)+)", mk, re.MULTILINE)
    assert srcs is not None
    listed = [s.strip().rstrip("\\").strip().removeprefix("$(PE_MODEL_DIR)/")
              for s in srcs.group(1).splitlines()]
    assert listed[:2] == ["pe_model.c", "pe_weights.c"]
    assert all(s.startswith("kernels/") for s in listed[2:]) and len(listed) > 2
    for s in listed:
        assert (d / s).is_file() and f'"${{PE_MODEL_DIR}}/{s}"' in cmake
    for harness in ("main_device.c", "pe_data.c", "startup/", "runtime/", f"{BOARD}.ld"):
        assert harness not in mk and harness not in cmake, harness
    assert re.search(r"^PE_MODEL_CFLAGS = .*-ffp-contract=off", mk, re.MULTILINE)
    assert "add_library(pe_model STATIC" in cmake and "-ffp-contract=off" in cmake
    assert "include(\"${CMAKE_CURRENT_LIST_DIR}/pockengine.cmake\")" in (
        d / "CMakeLists.txt").read_text()
    assert "pockengine.cmake" in board_project.manifest["files"]
    header = _macros(d / "pe_model.h")
    assert header["PE_ARENA_ALIGNMENT"] == 16 and header["PE_ERR_ALIGNMENT"] == -6
    assert "int pe_init_with_arena(void *buf, size_t bytes);" in (d / "pe_model.h").read_text()


def test_model_mk_library_with_a_user_arena_matches_golden(tmp_path, board_project, expected):
    _need("gcc")
    make = _need("make")
    work = _make_user_project(tmp_path, Makefile=USER_MAKEFILE)
    _run([make, "-j2", f"MODEL={board_project.dir}", "CC=gcc"], cwd=work)
    _check_run(work / "build" / "app", work, expected)


def test_user_arena_init_rejects_bad_buffers(tmp_path, board_project):
    _need("gcc")
    make = _need("make")
    work = _make_user_project(tmp_path, Makefile=USER_MAKEFILE)
    _run([make, "-j2", f"MODEL={board_project.dir}", "CC=gcc"], cwd=work)
    r = _run([work / "build" / "app", "checks"], cwd=work)
    got = {k: int(v) for k, v in (line.split() for line in r.stdout.splitlines())}
    m = _macros(board_project.dir / "pe_model.h")
    assert got == {
        "infer_first": m["PE_ERR_NOT_INITIALIZED"],
        "init_with_arena_null": m["PE_ERR_ARGUMENT"],
        "init_with_arena_small": m["PE_ERR_SIZE"],          # one byte short
        "init_with_arena_misaligned": m["PE_ERR_ALIGNMENT"],
        "infer_after_errors": m["PE_ERR_NOT_INITIALIZED"],  # a failed init changes nothing
        "init": m["PE_ERR_UNSUPPORTED"],                    # no arena of its own
        "init_with_arena_exact": m["PE_OK"],
        "infer": m["PE_OK"],
    }


def test_user_arena_build_is_warning_free_under_clang(tmp_path, board_project):
    _need("clang")
    make = _need("make")
    work = _make_user_project(tmp_path, Makefile=USER_MAKEFILE)
    for defines in ("PE_MODEL_DEFINES=-DPE_USER_ARENA=1", "PE_MODEL_DEFINES="):
        _run([make, "syntax", f"MODEL={board_project.dir}", "CC=clang", defines], cwd=work)


def test_cmake_library_target_with_the_arena_in_a_section(tmp_path, board_project, expected):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    work = _make_user_project(tmp_path, **{"CMakeLists.txt": USER_CMAKE})
    build = work / "build"
    _run([cmake, "-S", work, "-B", build, f"-DMODEL={board_project.dir}",
          "-DCMAKE_C_COMPILER=gcc"])
    _run([cmake, "--build", build, "-j2"])
    _check_run(build / "app", work, expected)
    r = _run([build / "app", "checks"], cwd=work)
    got = dict(line.split() for line in r.stdout.splitlines())
    m = _macros(board_project.dir / "pe_model.h")
    assert int(got["init_with_arena_exact"]) == m["PE_ERR_UNSUPPORTED"]   # its own arena
    assert int(got["init"]) == m["PE_OK"]
    objdump = shutil.which("objdump")
    if objdump is not None:
        heads = _run([objdump, "-h", build / "app"]).stdout
        size = re.search(r"\s\.pe_arena\s+([0-9a-f]+)\s", heads)
        assert size is not None and int(size.group(1), 16) >= m["PE_ARENA_BYTES"], heads


def test_user_arena_binds_pointer_lists(tmp_path):
    """A concatenation's input list holds arena addresses: NULL in the static initializer of a
    user-arena build, set by pe_init_with_arena()."""
    from codegen.ir import Graph, verify
    from tests.frontend.single_op import _act_quant, _activation, single_op_graph

    _need("gcc")
    make = _need("make")
    rng = np.random.default_rng(5)
    q = _act_quant(rng)
    x = _activation("x", (1, 4, 4, 3), "int8", q)
    g = single_op_graph("concat", [x, x], _activation("y", (1, 4, 4, 6), "int8", q),
                        {"axis": 3, "activation": "none"})
    g = verify(Graph(g.name, dict(g.tensors), list(g.ops), ["x"], ["y"]))
    proj = compile_model(g, out_dir=tmp_path / "concat", measure=False)
    assert "pe_infer_list0[1] = (const int8_t *)PE_ARENA_AT(" in (
        proj.dir / "pe_model.c").read_text()
    work = _make_user_project(tmp_path, Makefile=USER_MAKEFILE)
    _run([make, "-j2", f"MODEL={proj.dir}", "CC=gcc"], cwd=work)
    xs = rng.integers(-128, 128, size=(3, 4, 4, 3), dtype=np.int8)
    _check_run(work / "build" / "app", work, {
        "x": xs, "y": np.zeros(3, np.int32), "outputs": golden.run(g, xs)[0],
        "loss": [0.0] * 3, "params": b""})


def test_integrate_example_builds_and_resumes_after_a_reboot(tmp_path, board_project,
                                                             expected):
    """firmware_examples/integrate: its Makefile (STM32CubeMX style) builds the application
    with the model from model.mk; two runs on halves of the data, the second restoring the
    state the first saved, train exactly as the golden model does in one go."""
    _need("gcc")
    make = _need("make")
    app = tmp_path / "integrate"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("out", "build"))
    _run([make, "-j2", f"MODEL={board_project.dir}", "CC=gcc"], cwd=app)
    x, y = expected["x"], expected["y"]
    half = len(x) // 2
    for k, part in enumerate((slice(0, half), slice(half, None)), start=1):
        rec = np.zeros(len(x[part]), dtype=[("x", np.int8, x[0].size), ("y", "<i4")])
        rec["x"], rec["y"] = x[part].reshape(len(rec), -1), y[part]
        rec.tofile(app / f"samples_{k}.bin")         # platform_host.c's APP_SAMPLES format
    losses = []
    for k in (1, 2):
        env = {**os.environ, "APP_SAMPLES": str(app / f"samples_{k}.bin"),
               "APP_STORAGE": str(app / "st.bin"), "APP_SEND": str(app / "params.bin")}
        out = _run([app / "build" / "app"], cwd=app, env=env).stdout.splitlines()
        assert out[0] == ("fresh start" if k == 1 else f"resumed after {half} steps")
        losses += [float(line.split()[3]) for line in out if line.startswith("step ")]
    assert np.array_equal(np.float32(losses), np.float32(expected["loss"]))
    assert (app / "params.bin").read_bytes() == expected["params"]
    assert f"crc32 {zlib.crc32(expected['params']):08x}" in out[-1]
    for f in ("README.md", "CMakeLists.txt", "run.sh", "make_data.py", "spec.yaml"):
        assert (EXAMPLE / f).is_file(), f
    readme = (EXAMPLE / "README.md").read_text()
    assert "pe_init_with_arena" in readme and "model.mk" in readme
