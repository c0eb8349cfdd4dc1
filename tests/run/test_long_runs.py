"""Long runs at aggressive learning rates (the CI slice of ``python -m tests.benchmark_longrun``).

SGD + momentum at lr 0.5 and Adam at lr 0.1 on every parameter of the bundled digits CNN, in
both backward modes (Adam is fp32 only), a few hundred steps: the losses stay finite, the
parameters saturate (int8 weights never reach -128, biases stay inside their forward-safe
range) and the saturated updates are counted — identically by the golden model and by the
generated C built with AddressSanitizer + UBSan (losses bit for bit, params_sha256, the count
per step). The full 10,000-step runs are the benchmark's.
"""

from __future__ import annotations

import numpy as np
import pytest

from codegen.data import fit_input
from codegen.golden.train_optim import param_limits
from codegen.golden.training import TrainState, fit
from codegen.models import digits
from codegen.pipeline import build_project, compile_model, run_host_fit
from codegen.train import build_training_graph
from codegen.train.spec import load_spec
from tests.render.helpers import digits_int8, need

STEPS = 300
SEED = 4
# name -> spec: the long-run configurations (tests/benchmark_longrun.py adds master weights)
LONG_RUNS = {
    "fp32-momentum": "all,opt=momentum,lr=0.5,momentum=0.9,backward=fp32",
    "fp32-adam": "all,opt=adam,lr=0.1,backward=fp32",
    "int8-momentum": "all,opt=momentum,lr=0.5,momentum=0.9,backward=int8",
}


@pytest.fixture(scope="module")
def digits_steps():
    graph = digits_int8()
    x, y = digits("train")
    return graph, fit_input(graph, x[:STEPS], "x"), y[:STEPS].astype(np.int64)


def check_parameters_in_range(tg, state) -> None:
    """Every trained parameter lies inside its saturation range (a wrap would leave it)."""
    ups = {op.inputs[0]: op for op in tg.ops if op.type in ("sgd_update", "adam_update")}
    for name in state.parameters:
        v = state[name].astype(np.int64)
        lo, hi = param_limits(state[name].dtype, ups[name].attrs.get("bias_limit"))
        assert lo <= v.min() and v.max() <= hi, (name, int(v.min()), int(v.max()), lo, hi)


@pytest.mark.parametrize("config", sorted(LONG_RUNS))
def test_long_run_saturates_counts_and_matches_golden(tmp_path, digits_steps, config):
    need("make")
    spec = LONG_RUNS[config]
    graph, x, y = digits_steps
    tg = build_training_graph(graph, load_spec(spec))
    state = TrainState.from_graph(tg)
    gold = fit(tg, state, x, y, epochs=1, shuffle=True, seed=SEED)
    assert np.all(np.isfinite(gold["loss"])), config
    check_parameters_in_range(tg, state)
    # the aggressive lr drives parameters into their limits, and the JSON says so
    assert gold["saturated_updates"] > 0
    assert sum(gold["saturated_per_step"]) == gold["saturated_updates"]
    assert len(gold["saturated_per_step"]) == STEPS
    weights = [n for n in state.parameters if state[n].dtype == np.int8]
    assert any(np.abs(state[n]).max() == 127 for n in weights)

    build = build_project(compile_model(graph, spec=spec, out_dir=tmp_path / "p"),
                          sanitize=True)
    host = run_host_fit(build, x, y, order=SEED, epochs=1)
    bits = np.asarray(gold["loss"], np.float32).view(np.uint32)
    bad = np.flatnonzero(host["loss_bits"] != bits)
    assert bad.size == 0, f"{config}: {bad.size} losses differ, first at step {bad[0]}"
    assert host["params_sha256"] == gold["params_sha256"]
    assert host["saturated_per_step"] == gold["saturated_per_step"]
    assert host["saturated_updates"] == gold["saturated_updates"]


def test_gentle_training_reports_no_saturation(digits_steps):
    """The count is not a constant: a small learning rate saturates nothing."""
    graph, x, y = digits_steps
    tg = build_training_graph(graph, load_spec("bias:all,opt=sgd,lr=0.001"))
    res = fit(tg, TrainState.from_graph(tg), x[:40], y[:40], epochs=1, shuffle=False)
    assert res["saturated_updates"] == 0 and res["saturated_per_step"] == [0] * 40


def test_fit_cli_reports_saturation_in_json_and_one_line(tmp_path):
    import json
    import subprocess
    import sys

    from codegen import models

    x, y = digits("train")
    np.savez(tmp_path / "train.npz", x=x[:30], y=y[:30])
    np.savez(tmp_path / "calib.npz", x=x[:100])
    args = [sys.executable, "-m", "codegen", "fit", models.path("digits_cnn.onnx"), "--train",
            LONG_RUNS["fp32-momentum"], "--data", tmp_path / "train.npz", "--calib",
            tmp_path / "calib.npz", "--engine", "golden"]
    js = subprocess.run([*map(str, args), "--json"], capture_output=True, text=True, check=True)
    result = json.loads(js.stdout)
    assert result["saturated_updates"] == sum(result["saturated_per_step"]) > 0
    human = subprocess.run(list(map(str, args)), capture_output=True, text=True, check=True)
    lines = [ln for ln in human.stdout.splitlines() if ln.startswith("saturation:")]
    assert len(lines) == 1
    assert f"{result['saturated_updates']:,} parameter updates clamped" in lines[0]
    assert "master_weights" in lines[0]


DRIVER = r"""
#include <stdio.h>
#include "pe_model.h"

static uint8_t pool[PE_PARAMS_BYTES];
static int8_t x[PE_INPUT_BYTES];

int main(void)
{
    uint32_t trained, fresh, restored;
    float loss;
    long k, i;
    pe_init();
    for (k = 0; k < STEPS; ++k) {
        for (i = 0; i < (long)PE_INPUT_BYTES; ++i) {
            x[i] = (int8_t)((i * 7 + k * 13) % 256 - 128);
        }
        if (pe_train_step(x, (int32_t)(k % PE_NUM_CLASSES), &loss) != PE_OK) {
            return 1;
        }
    }
    trained = pe_saturation_count();
    if (pe_state_read(0, pool, PE_PARAMS_BYTES) != PE_PARAMS_BYTES) {
        return 1;
    }
    pe_init();
    fresh = pe_saturation_count();
    if (pe_state_write(0, pool, PE_PARAMS_BYTES) != PE_OK) {
        return 1;
    }
    restored = pe_saturation_count();
    printf("%lu %lu %lu\n", (unsigned long)trained, (unsigned long)fresh,
           (unsigned long)restored);
    return 0;
}
"""


def test_saturation_count_lives_in_the_checkpointed_state(tmp_path, digits_steps):
    """<p>_saturation_count() equals the golden count, restarts at pe_init() and comes back
    with the parameter pool (pe_state_read / pe_state_write, what checkpoints save)."""
    import subprocess

    need("make")
    graph, _, _ = digits_steps
    spec = LONG_RUNS["int8-momentum"]
    steps = 30
    proj = compile_model(graph, spec=spec, out_dir=tmp_path / "p")
    (proj.dir / "driver.c").write_text(DRIVER)
    subprocess.run(["make", "-j2", "-C", str(proj.dir), "HOST_SRCS=driver.c",
                    f"CFLAGS=-DSTEPS={steps}", "SANITIZE=1", "OPT=-O1"], check=True,
                   capture_output=True)
    out = subprocess.run([str(proj.binary("build"))], check=True, capture_output=True,
                         text=True, env={"ASAN_OPTIONS": "detect_leaks=0"}).stdout
    trained, fresh, restored = map(int, out.split())
    n = graph.tensors[graph.inputs[0]].size
    idx = np.arange(n)
    xs = np.stack([((idx * 7 + k * 13) % 256 - 128).astype(np.int8) for k in range(steps)])
    classes = graph.tensors[graph.outputs[0]].shape[-1]
    tg = build_training_graph(graph, load_spec(spec))
    gold = fit(tg, TrainState.from_graph(tg), xs, np.arange(steps) % classes, epochs=1,
               shuffle=False)
    assert trained == gold["saturated_updates"] > 0
    assert fresh == 0 and restored == trained
