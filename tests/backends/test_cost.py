"""Backend switching by cost: measured per-call instructions (cached) over a static model.

Runs without third-party code: a second backend is made of the ref kernels with a different
record (scratch), so the two candidates of each conv are measurably different calls.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from codegen import pipeline
from codegen.backends import REF, Backend, Chain, Target, lower_graph
from codegen.backends.cost import CostModel, call_key, kernel_family, load_cache
from codegen.board import load_board
from codegen.targets import emulator_available


def _twin() -> Backend:
    """ref's conv kernels, asking for 4 KiB of scratch they do not use."""
    def build(graph, op, batch, target):
        return replace(REF.build(graph, op, batch, target), scratch_bytes=4096)
    return Backend("twin", "test backend", {"conv2d": build}, kernel_dir="ref")


def test_keys_ignore_weights_but_not_shapes(digits_graph):
    low = lower_graph(digits_graph, (REF,))
    t = Target("mps2-an386", "cortex-m", frozenset({"dsp"}))
    calls = list(low.calls.values())
    keys = {call_key(c, t) for c in calls}
    assert len(keys) == len({(c.kernel, repr(c.args)) for c in calls}) or len(keys) > 5
    conv = next(c for c in calls if c.kernel == "pe_conv2d_s8")
    assert call_key(conv, t) != call_key(conv, Target("mps2-an500", "cortex-m"))
    assert call_key(replace(conv, scratch_bytes=16), t) != call_key(conv, t)
    assert kernel_family(conv) == "conv2d"
    assert kernel_family(replace(conv, kernel="pe_conv2d_s8_cmsis")) == "conv2d"


def test_static_model_prices_what_it_knows(digits_graph):
    model = CostModel(digits_graph, Target("b", "cortex-m", frozenset({"dsp"})))
    low = lower_graph(digits_graph, (REF,))
    priced = {op.type: model(op, low.choices[op.name].call) for op in digits_graph.ops}
    assert priced["conv2d"] > priced["fully_connected"] > 0
    twin = replace(low.choices[digits_graph.ops[0].name].call, backend="twin")
    assert model(digits_graph.ops[0], twin) is None     # no factor: chain order decides
    cheap = lambda op, c: 1.0 if c.backend == "ref" else None
    both = lower_graph(digits_graph, (_twin(), REF), cost=cheap)
    conv = next(op.name for op in digits_graph.ops if op.type == "conv2d")
    assert both.choices[conv].reason == "chain order"   # one candidate unpriced


@pytest.mark.emulator
def test_measured_costs_choose_and_are_cached(digits_graph, monkeypatch, tmp_path):
    board = load_board("mps2-an386")
    ok, why = emulator_available(board)
    if not ok:
        pytest.skip(why)
    monkeypatch.setenv("POCKENGINE_CACHE_DIR", str(tmp_path / "cache"))
    chain = Chain((_twin(), REF), "auto", (), Target.of(board))
    model = pipeline.kernel_costs(digits_graph, board, chain)
    cache = load_cache()
    convs = [op for op in digits_graph.ops if op.type == "conv2d"]
    low = lower_graph(digits_graph, chain.backends, cost=model, target=chain.target)
    for op in convs:
        ch = low.choices[op.name]
        assert len(ch.candidates) == 2 and ch.reason == "cheapest"
        counts = [cache[call_key(c, chain.target)] for c in ch.candidates]
        assert all(n > 1000 for n in counts)
        assert ch.call is ch.candidates[counts.index(min(counts))]
        assert ch.costs == tuple(float(n) for n in counts)
    # a second compile finds every candidate in the cache and measures nothing
    monkeypatch.setattr(pipeline, "measure_kernel_costs",
                        lambda *a: pytest.fail("measured again despite the cache"))
    again = pipeline.kernel_costs(digits_graph, board, chain)
    assert again.measured == model.measured


def test_a_tight_budget_takes_the_kernel_with_less_scratch(digits_graph, tmp_path):
    """The scratch-hungry candidate is chosen (cheaper by the cost given) until the budget says
    no; then ref's scratch-free kernel wins over an error."""
    board = load_board("mps2-an386")
    chain = Chain((_twin(), REF), "auto", (), Target.of(board))
    cheap_twin = lambda op, c: 1.0 if c.backend == "twin" else 2.0
    low = lower_graph(digits_graph, chain.backends, cost=cheap_twin, target=chain.target)
    infer = pipeline.lowered_graph(digits_graph, low, pipeline.plan(digits_graph, low))
    assert any(c.backend == "twin" for c in infer.calls)
    need = pipeline.project_memory(board, infer, None)["sram"]
    tight = replace(board, budget={**board.budget, "sram": need - 1024})
    fitted, _ = pipeline.fit_budget(tight, infer, None, None, {})
    assert pipeline.project_memory(tight, fitted, None)["sram"] <= tight.sram_budget
    assert any(c.backend == "ref" and c.kernel == "pe_conv2d_s8" for c in fitted.calls)
