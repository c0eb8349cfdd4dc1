"""The backend seam, with no third-party code: chains, declines, pins, facts from records.

A backend is a table op type -> builder returning a record or None; lowering walks the chain per
op; the scheduler and planner read scratch / in-place / alias facts from the chosen records; a
project compiles exactly the sources its chosen kernels need.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from codegen import pipeline
from codegen.backends import REF, Backend, chain_for, lower_graph
from codegen.board import load_board
from codegen.errors import ModelError, PockError
from codegen.render import Lowered
from codegen.resources import data_dir

REF_DIR = data_dir("runtime_c") / "kernels" / "ref"


def _toy(name: str, types: tuple[str, ...], **changes) -> Backend:
    """A backend that takes ``types`` with the ref kernels' records, changed by ``changes``."""
    def build(graph, op, batch, target):
        return replace(REF.build(graph, op, batch, target), **changes)
    return Backend(name=name, summary="test backend", builders=dict.fromkeys(types, build),
                   kernel_dir="ref")


def _declining(name: str) -> Backend:
    return Backend(name=name, summary="declines everything",
                   builders={"conv2d": lambda g, op, b, t: None}, kernel_dir="ref")


def test_ref_takes_what_the_first_backend_declines(digits_graph):
    toy = _toy("toy", ("relu", "add"))
    low = lower_graph(digits_graph, (_declining("nope"), toy, REF))
    for op in digits_graph.ops:
        c = low.choices[op.name]
        want = "toy" if op.type in ("relu", "add") else "ref"
        assert c.call.backend == want, op.name
        assert c.reason == ("chain order" if want == "toy" else "only candidate")
    assert low.chain == ("nope", "toy", "ref")


def test_an_op_no_backend_takes_is_a_one_line_error(digits_graph):
    with pytest.raises(ModelError) as e:
        lower_graph(digits_graph, (_declining("nope"),))
    assert "no kernel for it in backends nope" in str(e.value) and "\n" not in str(e.value)


def test_pins_choose_the_backend_per_layer(digits_graph):
    toy = _toy("toy", ("conv2d", "depthwise_conv2d"))
    convs = [op.name for op in digits_graph.ops if op.type == "conv2d"]
    low = lower_graph(digits_graph, (toy, REF), pins={convs[0]: "ref"})
    assert low.choices[convs[0]].call.backend == "ref"
    assert low.choices[convs[0]].reason == "pinned"
    assert all(low.choices[n].call.backend == "toy" for n in convs[1:])
    with pytest.raises(PockError, match="not in this build's chain"):
        lower_graph(digits_graph, (toy, REF), pins={convs[0]: "cmsis-nn"})


def test_cost_picks_the_cheapest_candidate(digits_graph):
    toy = _toy("toy", ("conv2d",))
    cost = {"toy": 5.0, "ref": 9.0}
    low = lower_graph(digits_graph, (REF, toy), cost=lambda op, c: cost[c.backend])
    conv = next(op.name for op in digits_graph.ops if op.type == "conv2d")
    assert low.choices[conv].call.backend == "toy" and low.choices[conv].reason == "cheapest"
    assert low.choices[conv].costs == (9.0, 5.0)
    row = next(r for r in low.table() if r["op"] == conv)
    assert [c["backend"] for c in row["candidates"]] == ["ref", "toy"]


def test_scratch_comes_from_the_record_and_is_planned(tmp_path, digits_graph):
    """A kernel that asks for scratch gets it in the arena at its step; the generated project
    passes that arena slice as ctx and still computes the golden's bits."""
    from codegen import golden

    toy = _toy("toy", ("conv2d",), scratch_bytes=1000)
    low = lower_graph(digits_graph, (toy, REF))
    plan = pipeline.plan(digits_graph, low)
    base = pipeline.plan(digits_graph)
    convs = {op.name for op in digits_graph.ops if op.type == "conv2d"}
    assert set(plan.scratch_offsets()) == convs
    assert plan.lower_bound_bytes >= base.lower_bound_bytes + 1000
    for pb in plan.buffers:
        if pb.buffer.kind == "scratch":
            assert pb.buffer.size == 1008 and pb.buffer.first == pb.buffer.last
    lg = pipeline.lowered_graph(digits_graph, low, plan)
    src = pipeline.load(digits_graph)
    proj = pipeline.write(pipeline.render(Lowered(lg, None, "toy", ("toy", "ref")), src),
                          tmp_path / "p")
    text = (proj.dir / "pe_model.c").read_text()
    assert "PE_ARENA_AT(" in text and "1000}" in text
    build = pipeline.build(proj)
    x = np.random.default_rng(0).integers(-128, 128, (8, 8, 8, 1), dtype=np.int8)
    assert np.array_equal(pipeline.run_host_infer(build, x), golden.run(digits_graph, x)[0])


def test_inplace_permission_comes_from_the_record(digits_graph):
    plain = pipeline.plan(digits_graph)
    assert any(sh.kind == "inplace" for sh in plain.schedule.sharing)
    none = _toy("strict", ("relu", "add"), inplace=())
    plan = pipeline.plan(digits_graph, lower_graph(digits_graph, (none, REF)))
    assert not any(sh.kind == "inplace" for sh in plan.schedule.sharing)
    assert plan.lower_bound_bytes >= plain.lower_bound_bytes


def test_chains_come_from_board_data(monkeypatch):
    monkeypatch.setenv("POCKENGINE_CMSIS_NN", "/nonexistent")
    assert chain_for(None).names == ("ref",)
    assert chain_for(load_board("mps2-an385")).names == ("ref",)          # Cortex-M3: no DSP
    auto = chain_for(load_board("mps2-an386"))                            # DSP, no CMSIS-NN
    assert auto.names == ("arm", "ref") and "CMSIS-NN sources not found" in auto.notes[0]
    assert chain_for(load_board("mps2-an386"), "arm").names == ("arm", "ref")
    assert chain_for(load_board("hexagon-v67")).names == ("hvx", "ref")  # HVX DSP
    assert chain_for(load_board("hexagon-v67"), "ref").names == ("ref",)
    with pytest.raises(PockError, match="backend hvx has no kernels for cortex-m boards"):
        chain_for(load_board("mps2-an386"), "hvx")
    assert chain_for(load_board("mps2-an386"), "ref").names == ("ref",)
    with pytest.raises(PockError) as e:
        chain_for(load_board("mps2-an386"), "cmsis-nn")
    msg = str(e.value)
    assert "board mps2-an386" in msg and "POCKENGINE_CMSIS_NN" in msg and "\n" not in msg
    with pytest.raises(PockError, match="unknown backend 'tvm' for board host"):
        chain_for(None, "tvm")


def test_project_compiles_only_the_kernels_it_calls(tmp_path, digits_graph):
    """The host board's chain (native, then ref): of each backend's C files the project copies
    and builds only those that define a kernel it calls (native bodies are headers)."""
    proj = pipeline.compile_model(digits_graph, spec="bias:last2", out_dir=tmp_path / "p")
    calls = proj.manifest["ops"] + proj.manifest["training"]["ops"]
    assert proj.manifest["chain"] == ["native", "ref"] and proj.manifest["backend"] == "auto"
    assert {c["backend"] for c in calls} == {"native", "ref"}
    makefile = (proj.dir / "Makefile").read_text()
    copied = {}
    for name in ("ref", "native"):
        src = data_dir("runtime_c") / "kernels" / name
        copied[name] = sorted(p.name for p in (proj.dir / "kernels" / name).glob("*.c"))
        assert copied[name], name
        for path in src.glob("*.c"):
            assert (path.name in copied[name]) == (f"kernels/{name}/{path.name}" in makefile)
    assert len(copied["ref"]) < len(list(REF_DIR.glob("*.c")))
    ref = [c for c in calls if c["backend"] == "ref"]
    # ref kernels need no scratch, but for the row buffers of a streamed chain
    assert ref and all((c["scratch_bytes"] == 0) != (c["kernel"] == "pe_stream_chain_s8")
                       for c in ref)
    assert "pe_nv_conv_s8" in {c["kernel"] for c in calls}
    ref_only = pipeline.compile_model(digits_graph, spec="bias:last2", out_dir=tmp_path / "r",
                                      backend="ref")
    assert ref_only.manifest["chain"] == ["ref"]
    assert "pe_conv2d_s8" in {c["kernel"] for c in ref_only.manifest["ops"]}
    assert not (ref_only.dir / "kernels" / "native").exists() or not list(
        (ref_only.dir / "kernels" / "native").glob("*.c"))
    pipeline.build(proj)                                   # links: nothing missing
    pipeline.build(ref_only)


def test_plan_kernels_table_and_json(capsys, tmp_path, digits_graph):
    from codegen.cli import main
    from codegen.frontend import save_model

    model = tmp_path / "d.tflite"
    save_model(digits_graph, model)
    assert main(["plan", str(model), "--train", "bias:last2", "--kernels"]) == 0
    out = capsys.readouterr().out
    assert "candidates (instructions)" in out and "ref:pe_conv2d_s8" in out
    assert main(["plan", str(model), "--json", "--backend", "ref", "--no-stream"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == {"requested": "ref", "chain": ["ref"]}
    assert {r["op"] for r in doc["kernels"]} == {op.name for op in digits_graph.ops}
    assert main(["plan", str(model), "--json", "--backend", "ref"]) == 0
    doc = json.loads(capsys.readouterr().out)       # a chain in row bands: one kernel
    streamed = {r["op"]: r["kernel"] for r in doc["kernels"]}["/dw/Conv../pw/Conv"]
    assert streamed == "pe_stream_chain_s8" and doc["stream"]["chains"][0]["ops"] == [
        "/dw/Conv", "/pw/Conv"]
    assert main(["compile", str(model), "--board", "host", "-o", str(tmp_path / "c"),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all({"op", "kernel", "backend", "scratch_bytes"} <= set(r) for r in doc["ops"])
    status = main(["compile", str(model), "--board", "mps2-an386", "--backend", "hvx",
                   "-o", str(tmp_path / "h")])
    err = capsys.readouterr().err
    assert status == 2 and "board mps2-an386" in err and len(err.strip().splitlines()) == 1


def test_plan_and_compile_agree_on_a_tiny_budget(capsys, tmp_path, digits_graph):
    """A board file with no SRAM: plan --board and compile report the same need."""
    from codegen.cli import main
    from codegen.frontend import save_model

    model = tmp_path / "d.tflite"
    save_model(digits_graph, model)
    board = tmp_path / "tiny.yaml"
    host = (data_dir("boards") / "host.yaml").read_text()
    board.write_text(host.replace("name: host", "name: tiny").replace(
        "budget: {sram: 1 GiB, flash: 1 GiB}", "budget: {sram: 0 B, flash: 1 GiB}"))
    msgs = []
    for argv in (["plan", str(model), "--train", "bias:all", "--board", str(board)],
                 ["compile", str(model), "--train", "bias:all", "--board", str(board), "-o",
                  str(tmp_path / "o")]):
        assert main(argv) == 2
        msgs.append(capsys.readouterr().err.strip())
    assert "needs" in msgs[0] and msgs[0] == msgs[1], msgs
