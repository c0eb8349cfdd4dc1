"""Plans of training graphs (codegen.train.build): arena within 5 % of the schedule's lower
bound, the parameter pool, and update reordering lowering the peak."""

from __future__ import annotations

import json

import pytest

from codegen.memplan import plan_memory
from codegen.schedule import schedule

from .conftest import plan_ref, ref_kernels

build = pytest.importorskip("codegen.train.build",
                            reason="the training-graph builder (codegen/train/build.py) is "
                                   "not available")
spec_mod = pytest.importorskip("codegen.train.spec")


@pytest.fixture(scope="module")
def digits_int8():
    from codegen import models
    from codegen.frontend import load_model
    from codegen.quant import quantize

    graph = load_model(models.path("digits_cnn.onnx"))
    calib = models.digits("train")[0][:100]
    return quantize(graph, calib)


def _training(graph, spec: str, reorder: bool = True):
    return build.build_training_graph(graph, spec_mod.load_spec(spec), reorder=reorder)


def _check(tg):
    plan = plan_ref(tg)
    plan.verify()
    assert plan.lower_bound_bytes <= plan.arena_bytes <= 1.05 * plan.lower_bound_bytes
    s = plan.schedule
    assert s.peak <= s.given_peak
    names = [op.name for op in s.ops]
    # update ops after every reader of the tensors they mutate
    for k, op in enumerate(s.ops):
        for t in op.attrs.get("updates", ()) or ():
            readers = [names.index(o.name) for o in tg.ops if t in o.inputs and o is not op]
            assert all(r < k for r in readers), (op.name, t)
    assert s.ops[-1].type == "step_counter"
    # the trainable tensors and the optimizer state live in the parameter pool
    params = plan.pool("parameters")
    for entry in tg.metadata["training"]["parameters"]:
        assert entry["tensor"] in params
    for entry in tg.metadata["training"]["state"]:
        assert entry["tensor"] in params
    assert not set(params) & set(plan.pool("arena"))
    assert plan.params_bytes > 0
    json.dumps(plan.to_json())
    return plan


def test_digits_cnn_training_plan(digits_int8) -> None:
    for spec in ("bias:all+weight:last2", "all,opt=momentum"):
        plan = _check(_training(digits_int8, spec))
        kinds = {pb.buffer.kind for pb in plan.buffers}
        assert {"gradient", "mask", "input", "output"} <= kinds


@pytest.mark.parametrize("model", ["kws_ref_model.tflite", "vww_96_int8.tflite"])
def test_mlperf_training_plan(model: str, load) -> None:
    _check(_training(load(model), "bias:all+weight:last2"))


def test_vww_reordering_lowers_the_peak(load) -> None:
    g = load("vww_96_int8.tflite")
    with_reorder = _check(_training(g, "weight:last4", reorder=True))
    without = _check(_training(g, "weight:last4", reorder=False))
    assert without.schedule.stats["updates"] == "anchored"     # updates stay at the end
    assert with_reorder.peak_bytes < without.peak_bytes
    assert with_reorder.lower_bound_bytes < without.lower_bound_bytes
    assert with_reorder.params_bytes == without.params_bytes


def test_keep_order_reproduces_the_builder_order(digits_int8) -> None:
    tg = _training(digits_int8, "bias:all+weight:last2")
    s = schedule(tg, keep_order=True, kernels=ref_kernels(tg))
    assert [op.name for op in s.ops] == [op.name for op in tg.ops]
    assert plan_memory(tg, s).arena_bytes >= plan_ref(tg).arena_bytes
