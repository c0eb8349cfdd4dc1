"""The scheduler: exact on small graphs (vs brute force over all topological orders), a cost
model checked against an independent re-implementation, order constraints of training graphs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.ir import Graph
from codegen.schedule import (
    is_topological,
    lower_bound,
    order_edges,
    schedule,
)

from .graphs import random_dag, toy_kernels, training_step


def _topological_orders(g: Graph):
    producer = {t: i for i, op in enumerate(g.ops) for t in op.outputs}
    preds = [{producer[t] for t in op.inputs if t in producer} for op in g.ops]
    n = len(g.ops)

    def rec(done: list[int], left: set[int]):
        if not left:
            yield list(done)
            return
        for i in sorted(left):
            if preds[i] <= set(done):
                done.append(i)
                left.remove(i)
                yield from rec(done, left)
                left.add(i)
                done.pop()

    yield from rec([], set(range(n)))


def reference_live(g: Graph, order: list[int], alignment: int = 1,
                   inplace: bool = True) -> list[int]:
    """Bytes live per step, computed naively from tensor lifetimes (independent of the
    library): reshape outputs alias their input; relu/add write over an input of the same
    shape and dtype that is read for the last time there and is no graph output."""
    ops = [g.ops[i] for i in order]
    n = len(ops)
    arena = [t for t in g.tensors.values() if not t.is_const]
    first = {t.name: 0 for t in arena if t.name in g.inputs}
    last: dict[str, int] = {}
    for k, op in enumerate(ops):
        for t in op.outputs:
            first[t] = k
        for t in op.inputs:
            if t in first:
                last[t] = k
    for t, f in first.items():
        last[t] = n - 1 if t in g.outputs else last.get(t, f)
    storage = {t: t for t in first}

    def root(t: str) -> str:
        while storage[t] != t:
            t = storage[t]
        return t

    for k, op in enumerate(ops):
        if not inplace:
            break
        y = op.outputs[0]
        if op.type == "reshape":
            storage[y] = root(op.inputs[0])
        elif op.type in ("relu", "add"):
            for x in dict.fromkeys(op.inputs):
                tx, ty = g.tensors[x], g.tensors[y]
                if tx.shape != ty.shape or tx.dtype != ty.dtype:
                    continue
                r = root(x)
                group = [t for t in first if root(t) == r]
                if all(last[t] <= k and t not in g.outputs for t in group):
                    storage[y] = r
                    break
    spans: dict[str, list[int]] = {}
    for t, f in first.items():
        r = root(t)
        size = -(-g.tensors[t].nbytes // alignment) * alignment
        s = spans.setdefault(r, [f, last[t], size])
        s[0], s[1], s[2] = min(s[0], f), max(s[1], last[t]), max(s[2], size)
    return [sum(sz for f, la, sz in spans.values() if f <= k <= la) for k in range(n)]


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([1, 16]), st.booleans())
def test_exact_on_small_dags(seed: int, alignment: int, inplace: bool) -> None:
    g = random_dag(seed)
    s = schedule(g, kernels=toy_kernels(g), alignment=alignment, inplace=inplace)
    order = [g.ops.index(op) for op in s.ops]
    assert sorted(order) == list(range(len(g.ops)))
    ref = reference_live(g, order, alignment, inplace)
    assert list(s.live_bytes) == ref
    best = min(max(reference_live(g, o, alignment, inplace))
               for o in _topological_orders(g))
    assert s.exact
    assert lower_bound(s) == best
    assert lower_bound(s) <= s.given_peak


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6))
def test_buffers_account_for_every_live_byte(seed: int) -> None:
    g = random_dag(seed, n_ops=10)
    s = schedule(g, kernels=toy_kernels(g))
    for k, live in enumerate(s.live_bytes):
        assert live == sum(b.size for b in s.buffers if b.first <= k <= b.last)
    for t, (first, last) in s.lifetimes.items():
        b = s.buffer(t)
        assert b.first <= first <= last <= b.last
        if t in g.inputs:
            assert first == 0
        if t in g.outputs:
            assert last == len(g.ops) - 1


def test_keep_order_reproduces_graph_ops() -> None:
    for seed in range(20):
        g = random_dag(seed, n_ops=9)
        s = schedule(g, kernels=toy_kernels(g), keep_order=True)
        assert [op.name for op in s.ops] == [op.name for op in g.ops]
        assert s.peak == s.given_peak == max(reference_live(g, list(range(len(g.ops))), 16))


def test_beam_never_worse_than_given_order() -> None:
    for seed in range(30):
        g = random_dag(seed, n_ops=14)
        s = schedule(g, kernels=toy_kernels(g), max_states=2)
        assert s.peak <= s.given_peak
        assert is_topological_names(g, [op.name for op in s.ops])


def is_topological_names(g: Graph, names: list[str]) -> bool:
    seen: set[str] = set(g.inputs) | {t.name for t in g.constants()}
    for name in names:
        op = g.op_by_name(name)
        if not all(t in seen for t in op.inputs if t):
            return False
        seen.update(op.outputs)
    return len(names) == len(g.ops)


def test_inplace_and_alias_are_reported() -> None:
    g = random_dag(3, n_ops=7)
    s = schedule(g, kernels=toy_kernels(g))
    for sh in s.sharing:
        assert s.buffer_of[sh.output] == s.buffer_of[sh.input]


def test_scratch_counts_at_its_step() -> None:
    g = random_dag(11, n_ops=6)
    from dataclasses import replace

    plain_calls = toy_kernels(g)
    calls = {name: replace(c, scratch_bytes=100) if g.op_by_name(name).type == "concat" else c
             for name, c in plain_calls.items()}
    plain = schedule(g, kernels=plain_calls, keep_order=True)
    s = schedule(g, kernels=calls, keep_order=True)
    for k, op in enumerate(s.ops):
        extra = 112 if op.type == "concat" else 0
        assert s.live_bytes[k] == plain.live_bytes[k] + extra
        assert s.scratch[k] == extra
    assert sum(b.kind == "scratch" for b in s.buffers) == sum(op.type == "concat"
                                                              for op in g.ops)


def test_alignment_must_be_power_of_two() -> None:
    with pytest.raises(ValueError):
        schedule(random_dag(0), alignment=12)


# -- training-graph constraints ---------------------------------------------------------------

def _pos(s, name: str) -> int:
    return [op.name for op in s.ops].index(name)


@pytest.mark.parametrize("reorder", [True, False])
def test_updates_after_every_reader_of_their_parameter(reorder: bool) -> None:
    g = training_step(reorder)
    for mode in ("auto", "free", "anchored"):
        s = schedule(g, kernels=toy_kernels(g), updates=mode)
        assert _pos(s, "w2_update") > max(_pos(s, "fc2"), _pos(s, "fc2_gi"))
        assert _pos(s, "w_update") > _pos(s, "fc1")
        assert _pos(s, "step_counter") == len(g.ops) - 1
        # the parameters are not arena tensors
        assert "w" not in s.buffer_of and "step" not in s.buffer_of


def test_anchored_keeps_builder_order_of_updates() -> None:
    g = training_step(reorder=False)
    s = schedule(g, kernels=toy_kernels(g))       # auto: reorder=False -> anchored
    assert s.stats["updates"] == "anchored"
    assert [op.name for op in s.ops][-3:] == ["w2_update", "w_update", "step_counter"]
    free = schedule(g, kernels=toy_kernels(g), updates="free")
    assert free.peak <= s.peak
    edges = order_edges(g, "anchored")
    ops = [op.name for op in g.ops]
    assert ops.index("fc1_gw") in edges[ops.index("w2_update")]


def test_reordered_training_step_is_lower() -> None:
    g_re, g_no = training_step(True), training_step(False)
    with_reorder = schedule(g_re, kernels=toy_kernels(g_re))
    without = schedule(g_no, kernels=toy_kernels(g_no))
    assert with_reorder.stats["updates"] == "free"
    assert with_reorder.peak < without.peak


def test_order_is_topological_under_all_constraints() -> None:
    from codegen.schedule import build_problem

    for reorder in (True, False):
        g = training_step(reorder)
        s = schedule(g, kernels=toy_kernels(g))
        p = build_problem(g, kernels=toy_kernels(g))
        assert is_topological(p, [g.ops.index(op) for op in s.ops])
