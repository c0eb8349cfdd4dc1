"""The stream pass (issue 13, docs/memory.md): frozen chains of convolutions run in row bands.

- the op: a stream_chain op computes the bytes of the chain it stands for (golden, on random
  chains: strides 1 and 2, padding, dilation, kernels 1-7, residual adds, ReLU6 clamps), its
  band schedule computes every row once and its buffers hold what the windows read; the C
  kernels against the golden model are tests/kernels (ref) and tests/backends (arm);
- the pass: what it fuses (nothing the backward reads; the stem and the inverted residual
  blocks of MCUNet's frozen prefix), what disappears from the graph, its errors;
- the pipeline: plan_project's modes and band heights, the arena's lower bound with and
  without streaming, plan / compile output, --no-stream;
- whole runs: fit on the golden model, the host build (also under ASan + UBSan) and a board
  give the same params_sha256 with the pass on and off.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import golden, pipeline
from codegen.errors import ModelError, PockError, SpecError
from codegen.ir import verify
from codegen.ir.stream import RowStage, band_plan, chain_graph, row_stages, unstream
from codegen.stream import band_options, fuse, stream_graph, stream_report, with_bands
from tests.kernels.cases import chain_graph as random_chain
from tests.mcunet import mcunet_graph, mcunet_spec_49kb, table_missing_reason

needs_table = pytest.mark.skipif(table_missing_reason() is not None,
                                 reason=table_missing_reason() or "")


@pytest.fixture(scope="module")
def mcunet():
    g = mcunet_graph(seed=0)
    return g, pipeline.training_graph(g, mcunet_spec_49kb())


# -- the op ---------------------------------------------------------------------------------------
def _check_chain(g, names, add, band, rng):
    fused = verify(fuse(g, names, add, band_rows=band))
    assert [op.type for op in fused.ops] == ["stream_chain"]
    x = rng.integers(-128, 128, size=(2, *g.tensors["x"].shape[1:]), dtype=np.int8)
    want = golden.run(g, x)[0]
    assert np.array_equal(golden.run(fused, x)[0], want)
    back = unstream(fused)                         # the chain again, tensor for tensor
    assert [op.name for op in back.ops] == [op.name for op in g.ops]
    assert np.array_equal(golden.run(back, x)[0], want)
    return fused


def test_golden_fused_equals_unfused_on_random_chains():
    rng = np.random.default_rng(13)
    seen = {"stride2": 0, "residual": 0, "k5+": 0, "relu6": 0, "pad": 0, "dilation": 0}
    for _ in range(150):
        g, names, add = random_chain(rng)
        height = g.tensors[g.outputs[0]].shape[1]
        op = _check_chain(g, names, add, int(rng.integers(1, height + 1)), rng).ops[0]
        seen["residual"] += add is not None
        for st, w in zip(op.attrs["stages"], op.inputs[1::2]):
            seen["stride2"] += st["stride"][0] == 2
            seen["k5+"] += g.tensors[w].shape[1] >= 5
            seen["relu6"] += st["activation"] == "relu6"
            seen["pad"] += st["padding"][0] > 0
            seen["dilation"] += st["dilation"][0] > 1
    assert all(n >= 10 for n in seen.values()), seen


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("residual", [False, True])
def test_inverted_residual_block(k, stride, residual):
    """expand 1x1 -> depthwise k x k (ReLU6) -> project 1x1, SAME padding, every band
    height: the blocks the pass is for."""
    from tests.kernels.cases import _act_q, _bias, _out_q, _weights

    if residual and stride == 2:
        pytest.skip("a residual block keeps its resolution")
    rng = np.random.default_rng(k * 10 + stride)
    g = _block(rng, (1, 11, 6, 4), 12, k, stride, residual, _act_q, _bias, _out_q, _weights)
    names = ["expand", "dw", "project"]
    for band in range(1, g.tensors[g.outputs[0]].shape[1] + 1):
        _check_chain(g, names, "add" if residual else None, band, rng)


def _block(rng, shape, hidden, k, stride, residual, act_q, bias, out_q, weights):
    from codegen.ir import Graph, Op, Tensor, same_padding
    from codegen.ir.graph import Role

    g = Graph(name="block")
    xq = act_q(rng)
    cur = g.add_tensor(Tensor("x", shape, "int8", Role.ACTIVATION, xq))
    c = shape[3]
    h, w = shape[1:3]
    _, pt, pb = same_padding(h, k, stride)
    _, pl, pr = same_padding(w, k, stride)
    oh, ow = -(-h // stride), -(-w // stride)
    layers = [("expand", "conv2d", (hidden, 1, 1, c), (1, 1), (0, 0, 0, 0), (1, h, w, hidden)),
              ("dw", "depthwise_conv2d", (1, k, k, hidden), (stride, stride), (pt, pb, pl, pr),
               (1, oh, ow, hidden)),
              ("project", "conv2d", (c, 1, 1, hidden), (1, 1), (0, 0, 0, 0), (1, oh, ow, c))]
    for name, kind, wshape, st, pads, out in layers:
        axis = 3 if kind == "depthwise_conv2d" else 0
        wt = g.add_tensor(weights(rng, wshape, axis, "int8").replace(name=f"{name}/w"))
        b = g.add_tensor(bias(rng, wshape[axis], cur.quant.s, wt, "int8").replace(
            name=f"{name}/b"))
        taps = wshape[1] * wshape[2] * (1 if axis == 3 else wshape[3])
        y = g.add_tensor(Tensor(f"{name}/out", out, "int8", Role.ACTIVATION,
                                out_q(rng, cur.quant.s, wt, taps)))
        attrs = {"stride": st, "dilation": (1, 1), "padding": pads,
                 "activation": "none" if name == "project" else "relu6"}
        if axis == 3:
            attrs["depth_multiplier"] = 1
        g.add_op(Op(kind, name, (cur.name, wt.name, b.name), (y.name,), attrs))
        cur = y
    if residual:
        z = g.add_tensor(Tensor("y", cur.shape, "int8", Role.ACTIVATION, act_q(rng)))
        g.add_op(Op("add", "add", (cur.name, "x"), ("y",), {"activation": "none"}))
        cur = z
    g.inputs, g.outputs = ["x"], [cur.name]
    return verify(g)


def test_band_plan_computes_every_row_once():
    rng = np.random.default_rng(5)
    for _ in range(300):
        g, names, add = random_chain(rng)
        stages = row_stages(chain_graph(fuse(g, names, add), fuse(g, names, add).ops[0]))
        height = stages[-1].out_h
        for band in {1, 2, height, int(rng.integers(1, height + 1))}:
            p = band_plan(stages, band)
            assert p.bands == -(-height // band) and p.recomputed_rows == 0
            assert all(c <= s.out_h for c, s in zip(p.rows_computed, stages))
            assert p.rows_computed[-1] == height and max(p.max_rows[-1:]) <= band
            assert all(rows <= s.out_h for rows, s in zip(p.buffer_rows, stages))
            assert p.scratch_bytes % 16 == 0 and len(p.buffer_offsets) == len(stages) - 1


def test_band_plan_carries_the_window_overlap():
    """A 3x3 depthwise (stride 1, SAME) after a 1x1 conv: one band row needs three rows of
    the expansion, each computed once (two carried to the next band)."""
    stages = [RowStage(8, 8, 1, 1, 0, 32), RowStage(8, 8, 3, 1, 1, 32)]
    p = band_plan(stages, 1)
    assert p.buffer_rows == (3,) and p.rows_computed == (8, 8) and p.bands == 8
    # bands 3..7 move two rows to the front; the last band's rows are all there already
    assert p.moved_bytes == 5 * 2 * 32 and p.max_rows == (2, 1)
    whole = band_plan(stages, 8)
    assert whole.buffer_rows == (8,) and whole.moved_bytes == 0 and whole.bands == 1


def test_malformed_stream_ops_are_one_line_model_errors():
    rng = np.random.default_rng(2)
    g, names, add = random_chain(rng, residual=False)
    fused = fuse(g, names, add)
    op = fused.ops[0]
    for attrs, what in (({**op.attrs, "band_rows": 0}, "band_rows"),
                        ({**op.attrs, "stages": op.attrs["stages"][:1]}, "inputs do not fit"),
                        ({**op.attrs, "stages": ({"type": "conv2d"},) * len(
                            op.attrs["stages"])}, "malformed stages")):
        bad = fused.copy()
        bad.ops = [op.replace(attrs=attrs)]
        with pytest.raises(ModelError, match=what) as e:
            verify(bad)
        assert "\n" not in str(e.value)


# -- the pass -------------------------------------------------------------------------------------
@needs_table
def test_pass_fuses_the_frozen_prefix_only(mcunet):
    g, tg = mcunet
    sg = stream_graph(tg)
    report = {r["op"]: r for r in stream_report(sg)}
    assert list(report) == ["v0..v2_conv_2", "v3_conv_0..v3_add", "v4_conv_0..v4_conv_2",
                            "v5_conv_0..v5_add", "v6_conv_0..v6_conv_2", "v7_conv_0..v7_add"]
    assert report["v0..v2_conv_2"]["ops"] == ["v0", "v1_conv_0", "v1_conv_1", "v2_conv_0",
                                              "v2_conv_1", "v2_conv_2"]
    assert report["v3_conv_0..v3_add"]["residual"]
    # the intermediates are gone, and the next stage was all that read each of them: no
    # backward, mask or update op
    gone = set(tg.tensors) - set(sg.tensors)
    assert "v2_conv_0/out" in gone and "v1_conv_1/out" in gone
    assert sum(r["intermediate_bytes"] for r in report.values()) == sum(
        tg.tensors[t].nbytes for t in gone)
    readers = {t: [op.name for op in tg.ops if t in op.inputs] for t in gone}
    for r in report.values():
        for t, nxt in zip([f"{n}/out" for n in r["ops"][:-1]], r["ops"][1:]):
            if t in gone:
                assert readers[t] == [nxt], (t, readers[t])
    streamed = {n for r in report.values() for n in r["ops"]}
    assert not streamed & {op.attrs.get("forward") for op in tg.ops}
    assert stream_graph(sg) is sg                  # nothing left to fuse
    assert stream_graph(tg, keep={"v2_conv_1"}) is not sg and "v2_conv_1" in {
        op.name for op in stream_graph(tg, keep={"v2_conv_1"}).ops}
    # the inference graph of the project streams the same prefix (v8 onwards train)
    infer = stream_graph(pipeline.beside_training(g, tg))
    assert [r["op"] for r in stream_report(infer)] == list(report)


@needs_table
def test_needed_ops_shrink_the_segments(mcunet):
    _, tg = mcunet
    sg = stream_graph(tg, needed={"v2_conv_0", "v2_conv_1"})
    assert [r["ops"] for r in stream_report(sg)] == [["v2_conv_0", "v2_conv_1"]]
    one = stream_graph(tg, needed={"v2_conv_0"})   # with the neighbour of the smaller step
    assert [r["ops"] for r in stream_report(one)] == [["v2_conv_0", "v2_conv_1"]]
    assert stream_graph(tg, needed=set()) is tg


def _with_head_and_tail(rng):
    """conv "pre" -> a random chain (fused) -> reshape -> FC "fc": a model whose chain lies
    between two layers that can train."""
    from codegen.ir import Op, Tensor
    from codegen.ir.graph import QuantParams, Role
    from tests.kernels.cases import _bias, _out_q, _weights

    g, names, add = random_chain(rng, residual=False)
    x = g.tensors["x"]
    c = x.shape[3]
    g.add_tensor(Tensor("x0", x.shape, "int8", Role.ACTIVATION, QuantParams(np.float32(0.05), 3)))
    w = g.add_tensor(_weights(rng, (c, 1, 1, c), 0, "int8").replace(name="pre/w"))
    g.add_tensor(_bias(rng, c, 0.05, w, "int8").replace(name="pre/b"))
    g.ops.insert(0, Op("conv2d", "pre", ("x0", "pre/w", "pre/b"), ("x",), {
        "stride": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0), "activation": "none"}))
    y = g.tensors[g.outputs[0]]
    n = y.size
    g.add_tensor(Tensor("flat", (1, n), "int8", Role.ACTIVATION, y.quant))
    g.add_op(Op("reshape", "flat", (y.name,), ("flat",), {"shape": (1, n)}))
    fw = g.add_tensor(_weights(rng, (3, n), 0, "int8").replace(name="fc/w"))
    g.add_tensor(_bias(rng, 3, y.quant.s, fw, "int8").replace(name="fc/b"))
    g.add_tensor(Tensor("logits", (1, 3), "int8", Role.ACTIVATION,
                        _out_q(rng, y.quant.s, fw, n)))
    g.add_op(Op("fully_connected", "fc", ("flat", "fc/w", "fc/b"), ("logits",),
                {"activation": "none", "keep_num_dims": False}))
    g.inputs, g.outputs = ["x0"], ["logits"]
    return verify(fuse(verify(g), names, add))


def test_gradient_rule_refuses_a_chain_the_backward_reaches():
    g = _with_head_and_tail(np.random.default_rng(4))
    tg = pipeline.training_graph(g, "bias:last1")   # the chain before the trained FC: frozen
    assert [op.type for op in tg.ops].count("stream_chain") == 1
    with pytest.raises(SpecError, match="streams s0, .* in row bands and has no backward"):
        pipeline.training_graph(g, "bias:0")        # "pre" trains: its gradient crosses it


# -- the pipeline ---------------------------------------------------------------------------------
@needs_table
def test_plan_project_modes_and_bands(mcunet):
    g, tg = mcunet
    board = pipeline.resolve_board("mps2-an500")
    off = pipeline.plan_project(g, tg, board, streaming="off")
    on = pipeline.plan_project(g, tg, board, streaming="on")
    auto = pipeline.plan_project(g, tg, board)
    for lg in off:
        assert lg.stream["chains"] == [] and lg.stream["mode"] == "off"
    # the bound moves: the expansion of v2 no longer exists whole
    assert off[1].plan.lower_bound_bytes == off[1].stream["unstreamed"]["lower_bound_bytes"]
    for a, o in zip(auto, off):
        assert a.plan.lower_bound_bytes < o.plan.lower_bound_bytes - 40_000
        assert a.stream["unstreamed"]["arena_bytes"] == o.plan.arena_bytes
    arena = max(lg.plan.arena_bytes for lg in on)
    assert max(lg.plan.arena_bytes for lg in auto) <= arena   # auto: within streaming all's
    assert len(on[1].stream["chains"]) == 6
    chains = auto[1].stream["chains"]                          # ... with the least streamed
    # the stem and blocks 1-2 (the backward's peak is below theirs since the depthwise
    # input gradients are written over their gradients)
    assert [c["ops"] for c in chains] == [["v0", "v1_conv_0", "v1_conv_1", "v2_conv_0",
                                           "v2_conv_1"]]
    c = chains[0]
    assert c["kernel"] == "pe_stream_chain_s8_arm_fn" and c["recomputed_rows"] == 0
    # band height: the fewest bytes carried among the heights whose buffers fit the budget
    op = auto[1].graph.op_by_name(c["op"])
    fits = [p for p in band_options(auto[1].graph, op)
            if p.scratch_bytes <= c["scratch_bytes"]]
    assert c["band_rows"] > 1 and c["moved_bytes"] == min(p.moved_bytes for p in fits)
    assert c["bands"] == -(-32 // c["band_rows"])
    narrow = with_bands(auto[1].graph, {c["op"]: 1})
    assert pipeline.plan_lowered(narrow, board).plan.lower_bound_bytes <= \
        auto[1].plan.lower_bound_bytes
    with pytest.raises(PockError, match="stream mode 'sometimes'"):
        pipeline.plan_project(g, tg, board, streaming="sometimes")


def test_plan_and_compile_report_what_was_streamed(tmp_path, capsys):
    from codegen.cli import main
    from codegen.frontend import save_model
    from tests.render.helpers import digits_int8

    model = tmp_path / "d.tflite"
    save_model(digits_int8(), model)
    assert main(["plan", str(model), "--train", "bias:last2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stream"]["chains"][0]["ops"] == ["/dw/Conv", "/pw/Conv"]   # the add: not needed
    assert doc["lower_bound_bytes"] < doc["stream"]["unstreamed"]["lower_bound_bytes"]
    assert main(["plan", str(model), "--train", "bias:last2"]) == 0
    out = capsys.readouterr().out
    assert "streamed in row bands: 1 chain (2 ops)" in out and "/dw/Conv../pw/Conv" in out
    assert main(["plan", str(model), "--train", "bias:last2", "--no-stream"]) == 0
    assert "streamed: none (off)" in capsys.readouterr().out
    # compile on the host board with its ref chain (the native chain keeps its faster kernels
    # unstreamed while the plan fits, as an arm board does with cmsis-nn's)
    assert main(["compile", str(model), "--train", "bias:last2", "--board", "host",
                 "--backend", "ref", "-o", str(tmp_path / "p"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "streamed in row bands: 1 chain" in out
    manifest = json.loads((tmp_path / "p" / "pockengine.json").read_text())
    assert manifest["memory"]["stream"]["train"]["chains"][0]["kernel"] == "pe_stream_chain_s8"
    assert main(["compile", str(model), "--train", "bias:last2", "--board", "host",
                 "--backend", "ref", "-o", str(tmp_path / "q"), "-q", "--no-stream"]) == 0
    manifest = json.loads((tmp_path / "q" / "pockengine.json").read_text())
    assert manifest["memory"]["stream"]["train"]["chains"] == []


# -- whole runs -----------------------------------------------------------------------------------
DIGITS_SPEC = "bias:3..4,opt=sgd,lr=0.01"


def _digits_data():
    from codegen import models

    x, y = models.digits("train")
    return x, {"x": x[:24], "y": y[:24]}, {"x": x[24:40], "y": y[24:40]}


@pytest.mark.parametrize("engine", ["golden", "host"])
def test_fit_same_parameters_with_and_without_streaming(engine):
    from codegen import models
    from codegen.fit import fit_model

    x, data, ev = _digits_data()
    runs = {s: fit_model(models.path("digits_cnn.onnx"), DIGITS_SPEC, data, ev, calib=x[:100],
                         engine=engine, stream=s) for s in ("off", "on", "auto")}
    assert len({r["params_sha256"] for r in runs.values()}) == 1
    assert runs["on"]["loss"] == runs["off"]["loss"]


def test_streamed_host_build_under_sanitizers(tmp_path):
    """ASan + UBSan: the streamed kernels of KWS (every chain) train as the golden model."""
    from codegen.golden.training import TrainState, fit
    from codegen.run.host import run_host_fit
    from codegen.toolchain import build_project
    from tests.render.helpers import random_int8, shared_graph

    graph = shared_graph("kws_ref_model.tflite")
    spec = "bias:last3+weight:last2"
    tg = pipeline.training_graph(graph, spec)
    x = random_int8(graph, 3, seed=1)
    y = np.array([1, 4, 7])
    gold = fit(tg, TrainState.from_graph(tg), x, y, epochs=1, shuffle=False)
    proj = pipeline.compile_model(graph, spec=spec, out_dir=tmp_path / "p", stream="on")
    assert proj.manifest["memory"]["stream"]["train"]["chains"]
    host = run_host_fit(build_project(proj, sanitize=True), x, y, order=None, epochs=1)
    assert host["params_sha256"] == gold["params_sha256"]


@needs_table
@pytest.mark.emulator
def test_mcunet_on_the_board_streamed_and_not(mcunet):
    """MCUNet 49kb, two steps on mps2-an500 (Cortex-M7, arm kernels): the same parameters
    streamed (auto) and not, on the board, the host and the golden model; less SRAM."""
    from codegen.fit import fit_model
    from codegen.targets import emulator_available

    board = pipeline.resolve_board("mps2-an500")
    ok, why = emulator_available(board)
    if not ok:
        pytest.skip(why)
    g, _ = mcunet
    rng = np.random.default_rng(0)
    data = {"x": rng.integers(-128, 128, (2, 128, 128, 3), dtype=np.int8),
            "y": rng.integers(0, 10, 2)}
    runs = {(e, s): fit_model(g, mcunet_spec_49kb(), data, engine=e, stream=s, shuffle=False)
            for e in ("golden", "host", "mps2-an500") for s in ("off", "auto")}
    assert len({r["params_sha256"] for r in runs.values()}) == 1
    off, on = runs["mps2-an500", "off"], runs["mps2-an500", "auto"]
    assert on["memory"]["sram_bytes"] < off["memory"]["sram_bytes"] - 40_000
    assert on["instructions"]["step"] < 1.1 * off["instructions"]["step"]


def test_arm_stage_functions_in_a_host_build(tmp_path):
    """The arm backend's stage functions as a generated model defines them (every stage's
    body with literal shapes), built for the host (portable C paths) under ASan + UBSan:
    chains of random shapes infer as the golden model."""
    from codegen.run.host import run_host_infer
    from codegen.toolchain import build_project
    from tests.kernels.cases import chain_graph as arm_chain

    rng = np.random.default_rng(8)
    built = 0
    while built < 4:
        g, names, add = arm_chain(rng, arm=True)
        height = g.tensors[g.outputs[0]].shape[1]
        fused = fuse(g, names, add, band_rows=int(rng.integers(1, height + 1)))
        proj = pipeline.compile_model(fused, board="host", backend="arm", stream="off",
                                      out_dir=tmp_path / f"p{built}")
        kernels = {c["kernel"] for c in proj.manifest["ops"]}
        if kernels != {"pe_stream_chain_s8_arm_fn"}:
            continue                              # arm declined a stage: ref's, tested apart
        assert "static void pe_infer_fn0(const pe_stream_call *c)" in (
            proj.dir / "pe_model.c").read_text()
        x = rng.integers(-128, 128, size=(3, *g.tensors["x"].shape[1:]), dtype=np.int8)
        got = run_host_infer(build_project(proj, sanitize=True), x)
        assert np.array_equal(got, golden.run(g, x)[0])
        built += 1


def test_auto_keeps_a_fast_backend_while_the_board_has_the_memory():
    """hvx has no stream_chain kernel: a streamed chain would run on ref's kernels (ten
    times the packets), so auto fuses nothing while the unstreamed plan fits the board's
    SRAM, and streams as before once it does not; on keeps every chain (ref runs them).
    MobileNetV2-w0.35 (generated, no table needed), int8 backward as the DSP trains."""
    import dataclasses

    from tests.mcunet import mbv2_graph, mbv2_spec

    dsp = pipeline.resolve_board("hexagon-v67")
    g = mbv2_graph(seed=0)
    tg = pipeline.training_graph(g, mbv2_spec().replace("backward=fp32", "backward=int8"))
    off = pipeline.plan_project(g, tg, dsp, streaming="off")
    auto = pipeline.plan_project(g, tg, dsp)
    on = pipeline.plan_project(g, tg, dsp, streaming="on")
    ram = max(lg.plan.ram_bytes for lg in off)
    assert ram <= dsp.sram_budget
    assert [lg.stream["chains"] for lg in auto] == [[], []]
    assert [lg.plan.arena_bytes for lg in auto] == [lg.plan.arena_bytes for lg in off]
    assert on[1].stream["chains"] and {c["backend"] for c in on[1].stream["chains"]} == {"ref"}
    small = dataclasses.replace(dsp, budget={**dsp.budget, "sram": ram - 1})
    tight = pipeline.plan_project(g, tg, small)
    assert tight[1].stream["chains"]
    assert max(lg.plan.arena_bytes for lg in tight) < max(lg.plan.arena_bytes for lg in off)
