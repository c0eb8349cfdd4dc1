"""Partial trainable tensors (codegen.partial, issue 13): only the trained channels of a
channel-sparse weight in RAM, the frozen ones in flash.

- the pass: which weights it splits, the two parts, the merge ops before every reader (the
  training graph's forward and input gradient, the inference graph's layer), the update ops
  on the trained part, the export names; the runs of rows and the golden merge;
- the pipeline: auto splits where it lowers the RAM (arena + parameters), on always, off
  never; plan and compile report it;
- exactness: the generated C (host under ASan + UBSan) trains to the golden model's
  parameters (which never splits) in both backward modes, imports a state and refuses one
  whose frozen channels differ; a QEMU board gives the same parameters with less SRAM.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import models, pipeline
from codegen.golden.train_kernels import merge_channels
from codegen.golden.training import TrainState, fit, import_params
from codegen.ir import verify
from codegen.partial import MERGE_OP, partial_report, partial_weights, runs, split_partial
from codegen.train.report import phase
from tests.test_blocks import digits_case

SPECS = [
    "weight:last2@0.5+bias:all,opt=sgd,lr=0.01,momentum=0.9,master_weights=fp32",
    "weight:last3@0.25,opt=sgd,lr=0.05,momentum=0.9,master_weights=int32,backward=int8",
    "weight:last3@0.5,opt=adam,lr=0.003,accumulate=2",
]


digits = pytest.fixture(scope="module")(digits_case)     # the quantized CNN, 16 int8 samples


def test_runs_alternate_trained_and_frozen_rows():
    assert runs((0, 1, 4), 6) == [2, 2, 1, 1]
    assert runs((2, 3), 5) == [0, 2, 2, 1]
    assert runs((4,), 5) == [0, 4, 1]
    assert sum(runs((1, 5, 6, 9), 12)) == 12


def test_golden_merge_puts_every_row_back(digits):
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (9, 3, 3, 4), dtype=np.int8)
    ch = (0, 2, 3, 7)
    mask = np.isin(np.arange(9), ch)
    assert np.array_equal(merge_channels(w[mask], w[~mask], ch), w)
    assert not np.array_equal(merge_channels(w[mask], w[~mask], (1, 2, 3, 7)), w)


def test_the_pass_splits_channel_sparse_weights(digits):
    g, _, _ = digits
    tg = pipeline.training_graph(g, SPECS[0])
    found = partial_weights(tg)
    assert sorted(found) == ["conv2.weight", "fc.weight"]          # the two @0.5 weights
    st = split_partial(tg, found)
    verify(st)
    for w, p in found.items():
        whole = tg.tensors[w]
        trained, frozen = st.tensors[p.trained], st.tensors[p.frozen]
        assert w not in st.tensors
        assert trained.shape[0] == len(p.channels) and frozen.is_const
        assert frozen.shape[0] == whole.shape[0] - len(p.channels)
        assert np.array_equal(merge_channels(trained.data, frozen.data, p.channels),
                              whole.data)
        readers = [op for op in tg.ops if w in op.inputs and op.type not in
                   ("sgd_update", "adam_update")]
        merges = [op for op in st.ops if op.type == MERGE_OP and op.attrs["partial_of"] == w]
        assert len(merges) == len(readers) == 2                     # forward, input gradient
        names = [op.name for op in st.ops]
        for m in merges:                     # each right before the op that reads its copy
            reader = st.ops[names.index(m.name) + 1]
            assert m.outputs[0] in reader.inputs
            assert phase(m) == ("backward" if reader.type.endswith("_grad_input")
                                else "forward")                  # counted with its reader
        ups = [op for op in st.ops if op.attrs.get("partial_of") == w
               and op.type == "sgd_update"]
        assert ups and all(u.inputs[0] == p.trained and u.attrs["channels"] is None
                           for u in ups)
    entries = {e["export"]: e for e in st.metadata["training"]["parameters"] if "export" in e}
    assert sorted(entries) == sorted(found)
    rep = {r["weight"]: r for r in partial_report(st)}
    assert rep["conv2.weight"]["channels"] == 12 and rep["conv2.weight"]["total_channels"] == 24
    assert rep["conv2.weight"]["ram_bytes"] + rep["conv2.weight"]["flash_bytes"] == \
        tg.tensors["conv2.weight"].nbytes
    # the inference graph beside it: its layers read merged copies of the trained part
    ig = split_partial(pipeline.beside_training(g, tg), found)
    verify(ig)
    assert "conv2.weight" not in ig.tensors
    assert found["conv2.weight"].trained in ig.metadata["mutable_tensors"]
    assert sum(op.type == MERGE_OP for op in ig.ops) == 2
    # nothing to split without a channel subset
    assert partial_weights(pipeline.training_graph(g, "bias:all+weight:last2")) == {}


def test_modes_and_reports(digits, tmp_path, capsys):
    g, _, _ = digits
    tg = pipeline.training_graph(g, SPECS[0])
    off = pipeline.plan_project(g, tg, partial="off")[1]
    auto = pipeline.plan_project(g, tg)[1]
    on = pipeline.plan_project(g, tg, partial="on")[1]
    assert off.stream["partial_weights"]["weights"] == []
    assert len(on.stream["partial_weights"]["weights"]) == 2
    ram = {k: max(a.plan.arena_bytes for a in lgs) + lgs[1].plan.params_bytes
           for k, lgs in (("off", pipeline.plan_project(g, tg, partial="off")),
                          ("auto", pipeline.plan_project(g, tg)))}
    assert ram["auto"] < ram["off"]
    assert auto.plan.params_bytes < off.plan.params_bytes - 1_500   # half of conv2, fc
    with pytest.raises(Exception, match="partial weights 'some'"):
        pipeline.plan_project(g, tg, partial="some")
    from codegen.cli import main

    x, y = models.digits("train")
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=x[:100], y=y[:100])
    args = ["plan", str(models.path("digits_cnn.onnx")), "--train", SPECS[0], "--calib",
            str(calib)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "partial trainable weights: 2 weights" in out and "conv2.weight 12/24" in out
    assert main([*args, "--no-partial-weights", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stream"]["partial_weights"]["weights"] == []
    proj = pipeline.compile_model(g, spec=SPECS[0], out_dir=tmp_path / "p")
    m = proj.manifest
    assert m["training"]["parameters"] == [
        e["tensor"] for e in tg.metadata["training"]["parameters"]]      # the whole weights
    assert m["training"]["export_bytes"] == sum(
        tg.tensors[n].nbytes for n in m["training"]["parameters"])


def test_host_build_under_sanitizers_trains_as_the_golden_model(digits, tmp_path):
    from codegen.run.host import HostRunError, run_host_fit
    from codegen.toolchain import build_project

    g, xq, y = digits
    for k, spec in enumerate(SPECS):
        tg = pipeline.training_graph(g, spec)
        gold = fit(tg, TrainState.from_graph(tg), xq, y, epochs=2, shuffle=False)
        proj = pipeline.compile_model(g, spec=spec, out_dir=tmp_path / f"p{k}", partial="on")
        parts = proj.manifest["memory"]["stream"]["train"]["partial_weights"]["weights"]
        assert parts, spec
        build = build_project(proj, sanitize=True)
        host = run_host_fit(build, xq, y, order=None, epochs=2)
        assert host["params_sha256"] == gold["params_sha256"], spec
        if k:
            continue
        # import: training goes on from an imported state as in the golden model ...
        st = TrainState.from_graph(tg)
        import_params(tg, st, host["params"])
        again = fit(tg, st, xq[:4], y[:4], epochs=1, shuffle=False)
        h2 = run_host_fit(build, xq[:4], y[:4], order=None, epochs=1, params=host["params"])
        assert h2["params_sha256"] == again["params_sha256"]
        # ... and a state whose frozen channels differ from the flash is refused
        bad = bytearray(host["params"])
        names = proj.manifest["training"]["parameters"]
        at = sum(tg.tensors[n].nbytes for n in names[:names.index("conv2.weight")])
        frozen = next(c for c in range(24) if c not in
                      partial_weights(tg)["conv2.weight"].channels)
        row = int(np.prod(tg.tensors["conv2.weight"].shape[1:]))
        bad[at + frozen * row] ^= 0x01
        with pytest.raises(HostRunError, match="params_import"):
            run_host_fit(build, xq[:4], y[:4], order=None, epochs=1, params=bytes(bad))


@pytest.mark.emulator
def test_board_fine_tune_partial_equals_golden():
    """digits on mps2-an386 (Cortex-M4F, fp32 backward, momentum and fp32 masters): the same
    parameters split and not, on the board and the golden model, in less SRAM."""
    from codegen.fit import fit_model
    from codegen.targets import emulator_available

    ok, why = emulator_available(pipeline.resolve_board("mps2-an386"))
    if not ok:
        pytest.skip(why)
    x, y = models.digits("train")
    data, ev = {"x": x[:12], "y": y[:12]}, {"x": x[12:20], "y": y[12:20]}
    runs_ = {(e, p): fit_model(models.path("digits_cnn.onnx"), SPECS[0], data, ev,
                               calib=x[:50], engine=e, partial=p, shuffle=False)
             for e, p in (("golden", "auto"), ("mps2-an386", "off"), ("mps2-an386", "auto"))}
    assert len({r["params_sha256"] for r in runs_.values()}) == 1
    off, on = runs_["mps2-an386", "off"], runs_["mps2-an386", "auto"]
    assert on["memory"]["sram_bytes"] < off["memory"]["sram_bytes"] - 1_000


def test_budget_error_names_the_partial_weights_when_they_are_off():
    """MobileNetV2-w0.35 (generated: no shared table) fits 140 KiB of SRAM with its two
    quarter-trained expansions split, not whole: the error says which switch to drop."""
    from dataclasses import replace

    from codegen.errors import PockError
    from tests.mcunet import mbv2_graph, mbv2_spec

    board = replace(pipeline.resolve_board("mps2-an500"), budget={"sram": 140 * 1024,
                                                                   "flash": 2 * 2**20})
    g = mbv2_graph(seed=0)
    tg = pipeline.training_graph(g, pipeline.resolve_spec(mbv2_spec(), board))
    pipeline.check_device_budget(board, *pipeline.plan_project(g, tg, board))
    with pytest.raises(PockError) as e:
        pipeline.check_device_budget(board, *pipeline.plan_project(g, tg, board,
                                                                   partial="off"))
    assert "has 140 KiB" in str(e.value) and \
        "compile without --no-partial-weights keeps only the trained channels" in str(e.value)
