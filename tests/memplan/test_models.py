"""Plans of the five shared MLPerf Tiny models (inference): quality against the schedule's lower
bound and TFLM's arena, the JSON contract, pools, the picture, the budget check."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from codegen.errors import PockError
from codegen.ir import Role
from codegen.memplan import MemoryPlan, check_budget, plan_memory, plot_plan
from codegen.schedule import lower_bound, schedule

from .conftest import MODELS, TFLM_HEAD, plan_ref, ref_kernels


@pytest.mark.parametrize("name", MODELS)
def test_inference_plan_quality(name: str, load) -> None:
    g = load(name)
    plan = plan_ref(g)
    plan.verify()
    assert plan.lower_bound_bytes == lower_bound(plan.schedule) > 0
    assert plan.lower_bound_bytes <= plan.arena_bytes <= 1.05 * plan.lower_bound_bytes
    if name in TFLM_HEAD:
        assert plan.arena_bytes <= TFLM_HEAD[name]
    assert plan.params_bytes == 0                        # inference: nothing trains
    assert plan.arena_bytes % 16 == 0
    # every activation has an arena offset, every weight a constant-pool offset
    for op in g.ops:
        for t in op.inputs + op.outputs:
            if not t:
                continue
            pool = "constant" if g.tensors[t].is_const else "arena"
            assert plan.offsets[t].pool == pool, t
            assert plan.offsets[t].offset % 16 == 0


def test_kws_meets_tflm_exactly(load) -> None:
    plan = plan_ref(load("kws_ref_model.tflite"))
    assert plan.arena_bytes == plan.lower_bound_bytes == 16_000


def test_resnet_adds_write_in_place(load) -> None:
    g = load("pretrainedResnet_quant.tflite")
    plan = plan_ref(g)
    inplace = [sh for sh in plan.schedule.sharing if sh.kind == "inplace"]
    assert {g.op_by_name(sh.op).type for sh in inplace} <= {"add", "relu", "relu6"}
    assert inplace
    for sh in plan.schedule.sharing:
        assert plan.offset(sh.output) == plan.offset(sh.input)
    without = plan_ref(g, inplace=False)
    assert without.lower_bound_bytes >= plan.lower_bound_bytes


def test_json_contract(load) -> None:
    g = load("vww_96_int8.tflite")
    plan = plan_ref(g)
    doc = json.loads(json.dumps(plan.to_json()))
    for key in ("peak_bytes", "lower_bound_bytes", "pools", "schedule"):
        assert key in doc
    assert doc["peak_bytes"] == plan.arena_bytes
    assert doc["lower_bound_bytes"] == plan.lower_bound_bytes
    assert set(doc["pools"]) == {"arena", "parameters", "constant"}
    assert doc["pools"]["constant"]["bytes"] == plan.constant_bytes > 0
    assert doc["schedule"] == [op.name for op in plan.schedule.ops]
    assert sorted(doc["schedule"]) == sorted(op.name for op in g.ops)
    assert max(s["live_bytes"] for s in doc["steps"]) == doc["lower_bound_bytes"]
    consts = {t["name"] for t in doc["pools"]["constant"]["tensors"]}
    assert consts == {t.name for t in g.tensors.values() if t.is_const
                      and any(t.name in op.inputs for op in g.ops)}
    for b in doc["pools"]["arena"]["buffers"]:
        assert b["offset"] + b["size"] <= doc["peak_bytes"]


def test_keep_order_and_given_schedule(load) -> None:
    g = load("pretrainedResnet_quant.tflite")
    s = schedule(g, keep_order=True, kernels=ref_kernels(g))
    plan = plan_memory(g, s)
    assert plan.schedule is s
    assert [op.name for op in plan.schedule.ops] == [op.name for op in g.ops]
    with pytest.raises(ValueError):
        plan_memory(load("ad01_int8.tflite"), s)


@pytest.mark.parametrize("alignment", [4, 64])
def test_alignment_is_configurable(alignment: int, load) -> None:
    plan = plan_ref(load("pretrainedResnet_quant.tflite"), alignment=alignment)
    plan.verify()
    assert plan.alignment == alignment
    assert all(p.offset % alignment == 0 for p in plan.offsets.values())
    assert plan.arena_bytes <= 1.05 * plan.lower_bound_bytes


def test_kernel_scratch_is_counted_in_the_arena(load) -> None:
    g = load("kws_ref_model.tflite")

    from dataclasses import replace

    def im2col(op):                          # e.g. a CMSIS-NN-like conv buffer
        w = g.tensors[op.inputs[1]]
        return 2 * w.shape[1] * w.shape[2] * w.shape[3]

    calls = {op.name: replace(c, scratch_bytes=im2col(op)) if op.type == "conv2d" else c
             for op, c in ((g.op_by_name(n), c) for n, c in ref_kernels(g).items())}
    plan = plan_memory(g, kernels=calls)      # scratch comes from the records
    plan.verify()
    scratch = plan.scratch_offsets()
    assert set(scratch) == {op.name for op in g.ops if op.type == "conv2d"}
    base = plan_ref(g)
    assert plan.lower_bound_bytes > base.lower_bound_bytes
    assert plan.arena_bytes <= 1.05 * plan.lower_bound_bytes
    for pb in plan.buffers:
        if pb.buffer.kind == "scratch":
            assert pb.buffer.first == pb.buffer.last
            assert pb.end <= plan.arena_bytes


def test_budget_check_message(load) -> None:
    plan = plan_ref(load("vww_96_int8.tflite"))
    assert check_budget(plan, 256 * 1024) is plan
    with pytest.raises(PockError) as e:
        check_budget(plan, 32 * 1024)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"needs {plan.ram_bytes / 1024:.1f} KiB SRAM (arena " in msg
    assert "+ parameters 0.0 KiB), board has 32 KiB" in msg
    with pytest.raises(PockError, match=r"needs [\d.]+ KiB flash .* board mps2 has 100 KiB"):
        check_budget(plan, 1 << 20, 100 * 1024, board="mps2")


def _plan_with_params(load) -> MemoryPlan:
    """An inference graph whose last FC weight and bias are marked trainable by hand."""
    g = load("ad01_int8.tflite").copy()
    last = g.ops[-1]
    g.metadata["training"] = {"parameters": [{"tensor": last.inputs[1]},
                                             {"tensor": last.inputs[2]}]}
    return plan_ref(g)


def test_parameter_pool(load) -> None:
    plan = _plan_with_params(load)
    params = plan.pool("parameters")
    assert len(params) == 2 and plan.params_bytes == sum(-(-p.nbytes // 16) * 16
                                                        for p in params.values())
    assert all(plan.graph.tensors[t].role in (Role.WEIGHT, Role.BIAS) for t in params)
    assert not set(params) & set(plan.pool("constant"))
    assert plan.ram_bytes == plan.arena_bytes + plan.params_bytes
    with pytest.raises(PockError, match=r"\(arena [\d.]+ KiB \+ parameters [\d.]+ KiB\)"):
        check_budget(plan, plan.ram_bytes - 1)


def test_plot_svg(tmp_path, load) -> None:
    plan = _plan_with_params(load)
    path = plot_plan(plan, tmp_path / "plan.svg")
    root = ET.parse(path).getroot()
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for label in ("arena (RAM)", "parameters (RAM)", "constant (flash)"):
        assert label in texts
    rects = list(root.iter("{http://www.w3.org/2000/svg}rect"))
    assert len(rects) >= len(plan.buffers) + 2


def test_plot_png(tmp_path, load) -> None:
    pytest.importorskip("matplotlib", reason="PNG plots need matplotlib (SVG does not)")
    path = plot_plan(plan_ref(load("pretrainedResnet_quant.tflite")), tmp_path / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_rejects_unknown_format(tmp_path, load) -> None:
    with pytest.raises(PockError, match="svg or .png"):
        plot_plan(plan_ref(load("ad01_int8.tflite")), tmp_path / "plan.pdf")
