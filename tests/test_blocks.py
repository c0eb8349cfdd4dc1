"""The blocked-update pass (codegen.blocks, issue 13): weight gradients computed and applied in
blocks of output channels.

- the pass: which (grad_weight, update) pairs it splits, block bounds, the IR checks of an
  update op's ``rows``;
- exactness: the golden model's whole training state (parameters, momentum, Adam moments,
  masters, accumulators, saturation counts) is the same blocked and not, in both backward
  modes, with channel subsets and one-row blocks;
- the pipeline: ``plan_project`` blocks where it lowers the arena (the fewest blocks that
  give the smallest), ``off`` does not; plan/compile report it; the generated C (host under
  ASan + UBSan, a QEMU board) trains to the golden model's parameters.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import models, pipeline
from codegen.blocks import block_report, block_updates, blockable, bounds, reblock
from codegen.errors import ModelError
from codegen.golden.training import TrainState, fit
from codegen.ir import Op, verify

SPECS = [
    "bias:all+weight:last2,opt=sgd,lr=0.05,backward=int8",
    "bias:all+weight:last2,opt=sgd,lr=0.05,momentum=0.9,master_weights=int32,backward=int8",
    "bias:all+weight:last2,opt=sgd,lr=0.002,momentum=0.9,master_weights=fp32",
    "weight:last3@0.5,opt=adam,lr=0.003,accumulate=2",
]


def digits_case():
    """The digits CNN quantized on 100 training digits, 16 of them as int8 inputs, labels."""
    x, y = models.digits("train")
    g = pipeline.quantize(pipeline.load(models.path("digits_cnn.onnx")), x[:100]).graph
    q = g.tensors[g.inputs[0]].quant
    xq = np.clip(np.round(x[:16] / q.scale[0]) + q.zero_point[0], -128, 127).astype(np.int8)
    return g, xq, y[:16]


digits = pytest.fixture(scope="module")(digits_case)


def _state(tg, xq, y):
    st = TrainState.from_graph(tg)
    fit(tg, st, xq, y, epochs=1, shuffle=False)
    return st


def test_bounds_are_even_and_capped():
    assert bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert bounds(3, 8) == [(0, 1), (1, 2), (2, 3)]
    assert bounds(5, 1) == [(0, 5)]


def test_the_pass_splits_conv_and_fc_weight_gradients_only(digits):
    g, _, _ = digits
    tg = pipeline.training_graph(g, "bias:all+weight:last3@0.5")
    pairs = blockable(tg)
    kinds = sorted(gw.type for gw, _ in pairs)
    assert kinds == ["conv2d_grad_weight", "conv2d_grad_weight", "fully_connected_grad_weight"]
    assert all(u.inputs[0].endswith(".weight") for _, u in pairs)
    assert block_updates(tg, {}) is tg
    bg = verify(block_updates(tg, {u.name: 3 for _, u in pairs}))
    rep = {r["param"]: r for r in block_report(bg)}
    assert set(rep) == {u.inputs[0] for _, u in pairs}
    for gw, u in pairs:
        whole = tg.tensors[gw.outputs[0]]
        r = rep[u.inputs[0]]
        assert r["blocks"] == 3 and r["gradient_bytes"] == whole.nbytes
        assert r["rows"] == [list(b) for b in bounds(whole.shape[0], 3)]
        assert whole.name not in bg.tensors                     # the whole gradient is gone
    # the same split again from the report (what the benchmarks read from a manifest)
    again = reblock(tg, block_report(bg))
    assert [op.name for op in again.ops] == [op.name for op in bg.ops]
    assert blockable(bg) == []                                  # nothing left to split


def test_update_rows_are_checked(digits):
    g, _, _ = digits
    tg = pipeline.training_graph(g, "weight:last1")
    gw, u = blockable(tg)[0]
    bg = block_updates(tg, {u.name: 2})
    ups = [op for op in bg.ops if op.attrs.get("rows") is not None]
    assert [tuple(op.attrs["rows"]) for op in ups] == bounds(tg.tensors[gw.outputs[0]].shape[0],
                                                             2)
    bad = bg.copy()
    bad.ops = [Op(op.type, op.name, op.inputs, op.outputs, {**op.attrs, "rows": (0, 99)})
               if op is ups[0] else op for op in bg.ops]
    with pytest.raises(ModelError, match="rows"):
        verify(bad)


@pytest.mark.parametrize("spec", SPECS)
def test_golden_state_is_the_same_blocked_and_not(digits, spec):
    g, xq, y = digits
    tg = pipeline.training_graph(g, spec)
    pairs = blockable(tg)
    assert pairs
    whole = _state(tg, xq, y)
    rng = np.random.default_rng(0)
    for counts in ({u.name: 2 for _, u in pairs},
                   {u.name: int(rng.integers(2, 40)) for _, u in pairs}):   # up to 1 row each
        bg = verify(block_updates(tg, counts))
        blocked = _state(bg, xq, y)
        names = set(whole.values) & set(blocked.values)
        assert names >= {u.inputs[0] for _, u in pairs}
        for n in names:
            assert np.array_equal(whole.values[n], blocked.values[n]), (spec, n)
    saturated = [n for n in whole.values if n.endswith(":saturated")]
    assert any(int(whole.values[n][0]) > 0 for n in saturated) or "int8" not in spec or \
        "master" in spec


def test_plan_blocks_where_it_lowers_the_arena(digits):
    g, _, _ = digits
    tg = pipeline.training_graph(g, "bias:all+weight:last2")
    _, off = pipeline.plan_project(g, tg, blocking="off")
    _, auto = pipeline.plan_project(g, tg)
    info = auto.stream["update_blocks"]
    assert off.stream["update_blocks"]["updates"] == []
    assert info["unblocked_arena_bytes"] == off.plan.arena_bytes
    assert auto.plan.arena_bytes < off.plan.arena_bytes
    (r,) = info["updates"]
    assert r["param"] == "conv2.weight" and r["blocks"] >= 2
    # the fewest blocks for that arena: one block fewer (the next count down) is worse
    fewer = block_updates(tg, {u.name: max(1, r["blocks"] // 2) for _, u in blockable(tg)
                               if u.inputs[0] == r["param"]})
    assert pipeline.plan_lowered(fewer).plan.arena_bytes > auto.plan.arena_bytes
    with pytest.raises(Exception, match="update blocks 'sometimes'"):
        pipeline.plan_project(g, tg, blocking="sometimes")


def test_plan_and_compile_report_the_blocks(tmp_path, capsys):
    from codegen.cli import main

    x, y = models.digits("train")
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=x[:50], y=y[:50])
    model = str(models.path("digits_cnn.onnx"))
    args = ["--train", "bias:all+weight:last2", "--calib", str(calib)]
    assert main(["plan", model, *args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ub = doc["stream"]["update_blocks"]
    assert ub["updates"][0]["param"] == "conv2.weight"
    assert doc["arena_bytes"] < ub["unblocked_arena_bytes"]
    assert main(["plan", model, *args]) == 0
    assert "weight gradients in blocks: 1 update" in capsys.readouterr().out
    assert main(["plan", model, *args, "--no-block-updates", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stream"]["update_blocks"] == {"mode": "off", "updates": [],
                                              "unblocked_arena_bytes": doc["arena_bytes"]}
    assert main(["compile", model, *args, "--board", "host", "--backend", "ref", "-o",
                 str(tmp_path / "p"), "-q"]) == 0
    assert "weight gradients in blocks" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "p" / "pockengine.json").read_text())
    assert manifest["memory"]["stream"]["train"]["update_blocks"]["updates"]


def test_host_build_under_sanitizers_trains_as_the_golden_model(digits, tmp_path):
    from codegen.run.host import run_host_fit
    from codegen.toolchain import build_project

    g, xq, y = digits
    for k, spec in enumerate(SPECS[1:]):
        tg = pipeline.training_graph(g, spec)
        gold = fit(tg, TrainState.from_graph(tg), xq, y, epochs=1, shuffle=False)
        # the ref chain: the native chain's arena is set by its scratch (the k x k input
        # gradient's gathered rows), which blocks do not lower, so it keeps whole updates
        proj = pipeline.compile_model(g, spec=spec, out_dir=tmp_path / f"p{k}", backend="ref")
        assert proj.manifest["memory"]["stream"]["train"]["update_blocks"]["updates"], spec
        host = run_host_fit(build_project(proj, sanitize=True), xq, y, order=None, epochs=1)
        assert host["params_sha256"] == gold["params_sha256"], spec


@pytest.mark.emulator
def test_board_fine_tune_blocked_equals_golden():
    """digits on mps2-an386 (Cortex-M4F, fp32 backward with momentum and masters): the same
    parameters blocked and not, on the board and the golden model, in less SRAM."""
    from codegen.fit import fit_model
    from codegen.targets import emulator_available

    ok, why = emulator_available(pipeline.resolve_board("mps2-an386"))
    if not ok:
        pytest.skip(why)
    x, y = models.digits("train")
    data, ev = {"x": x[:12], "y": y[:12]}, {"x": x[12:20], "y": y[12:20]}
    runs = {(e, b): fit_model(models.path("digits_cnn.onnx"), SPECS[2], data, ev, calib=x[:50],
                              engine=e, blocks=b, shuffle=False)
            for e, b in (("golden", "auto"), ("mps2-an386", "off"), ("mps2-an386", "auto"))}
    assert len({r["params_sha256"] for r in runs.values()}) == 1
    off, on = runs["mps2-an386", "off"], runs["mps2-an386", "auto"]
    assert on["memory"]["sram_bytes"] < off["memory"]["sram_bytes"] - 2_000


def test_budget_error_names_the_stage_that_was_turned_off(capsys):
    """VWW weight:last4 does not fit netduinoplus2's 192 KiB with its 256 KiB gradient whole;
    blocked it does: the error says which switch to drop."""
    from codegen.cli import main
    from tests.render.helpers import model_path

    args = ["plan", str(model_path("vww_96_int8.tflite")), "--train", "weight:last4",
            "--board", "netduinoplus2"]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--no-block-updates"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "board netduinoplus2 has 192 KiB" in err
    assert "hint: compile without --no-block-updates computes the weight gradients in blocks" \
        in err
