"""Unit tests of codegen.schedule on tiny hand-made graphs whose answers are worked out by hand:
storage.align_up and the kernel facts, dependency edges and topological checks, the cost model
(bytes live per step, in-place writes, zero-copy aliases, dead tensors), the exact search and
its beam fallback, lifetimes and buffers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codegen.ir import Graph, Op, Role, Tensor
from codegen.schedule import (
    align_up,
    build_problem,
    inplace_candidates,
    is_topological,
    is_update_op,
    lower_bound,
    mutated_tensors,
    order_edges,
    parameter_tensors,
    peak_of,
    schedule,
    scratch_bytes,
    simulate,
    update_mode,
)
from codegen.schedule.order import search

from .graphs import Facts

CAT = {"axis": 0, "activation": "none"}


def _graph(name: str, tensors: dict[str, int], ops: list[tuple[str, str, tuple, tuple]],
           inputs: list[str], outputs: list[str]) -> Graph:
    """A graph of int8 vectors: ``tensors`` name -> bytes, ``ops`` (type, name, ins, outs)."""
    g = Graph(name)
    for t, n in tensors.items():
        g.add_tensor(Tensor(t, (n,), "int8"))
    for typ, op_name, ins, outs in ops:
        g.add_op(Op(typ, op_name, tuple(ins), tuple(outs), dict(CAT) if typ == "concat" else {}))
    g.inputs, g.outputs = list(inputs), list(outputs)
    return g


def diamond() -> Graph:
    """x -> a -> t0; t0 -> b -> t1; t0 -> c -> t2; (t1, t2) -> d -> y."""
    return _graph("diamond", {"x": 16, "t0": 32, "t1": 48, "t2": 64, "y": 16},
                  [("concat", "a", ("x",), ("t0",)), ("concat", "b", ("t0",), ("t1",)),
                   ("concat", "c", ("t0",), ("t2",)), ("concat", "d", ("t1", "t2"), ("y",))],
                  ["x"], ["y"])


def two_branches() -> Graph:
    """x feeds two branches x -> p (256 B) -> q (16 B); y = concat(q1, q2). Given order
    p1, p2, q1, q2, y keeps both 256-byte tensors live at once; p1, q1, p2, q2, y does not."""
    return _graph("branches", {"x": 16, "p1": 256, "p2": 256, "q1": 16, "q2": 16, "y": 16},
                  [("concat", "P1", ("x",), ("p1",)), ("concat", "P2", ("x",), ("p2",)),
                   ("concat", "Q1", ("p1",), ("q1",)), ("concat", "Q2", ("p2",), ("q2",)),
                   ("concat", "Y", ("q1", "q2"), ("y",))],
                  ["x"], ["y"])


# -- storage ------------------------------------------------------------------------------------

def test_align_up_examples() -> None:
    for n, a, want in [(0, 16, 0), (1, 16, 16), (15, 16, 16), (16, 16, 16), (17, 16, 32),
                       (1000, 8, 1000), (1001, 8, 1008), (7, 1, 7), (0, 1, 0)]:
        assert align_up(n, a) == want, (n, a)


@given(st.integers(0, 1 << 40), st.sampled_from([1, 2, 4, 8, 16, 32, 64, 4096]))
def test_align_up_is_the_smallest_multiple_not_below(n: int, a: int) -> None:
    r = align_up(n, a)
    assert r % a == 0 and n <= r < n + a


def test_kernel_facts_scratch_and_inplace_candidates() -> None:
    g = _graph("f", {"a": 8, "b": 8, "c": 4, "y": 8}, [("add", "op", ("a", "b", "c"), ("y",))],
               ["a", "b", "c"], ["y"])
    g.tensors["b"] = g.tensors["b"].replace(dtype="uint8")      # same shape, other dtype
    op = g.ops[0]
    assert scratch_bytes(op, None) == 0 and inplace_candidates(g, op, None) == []
    assert scratch_bytes(op, {"other": Facts(scratch_bytes=64)}) == 0
    assert scratch_bytes(op, {"op": Facts(scratch_bytes=-5)}) == 0        # clamped
    assert scratch_bytes(op, {"op": Facts(scratch_bytes=40)}) == 40
    # only the allowed inputs of the op with the output's shape and dtype, each once
    facts = {"op": Facts(inplace=("a", "a", "b", "c", "not_an_input"))}
    assert inplace_candidates(g, op, facts) == ["a"]


def test_parameter_pool_membership_and_order() -> None:
    g = Graph("p")
    for name, role in [("w1", Role.WEIGHT), ("w2", Role.WEIGHT), ("m", Role.OPTIMIZER_STATE),
                       ("s", Role.CONSTANT), ("acc", Role.ACTIVATION), ("x", Role.ACTIVATION)]:
        g.add_tensor(Tensor(name, (4,), "int8", role, data=np.zeros(4, np.int8)))
    g.add_op(Op("sgd_update", "u", ("w2", "x"), (), {"updates": ("w2", "acc", "")}))
    assert mutated_tensors(g) == {"w2", "acc"}
    assert parameter_tensors(g) == []                      # no "training" record: none
    g.metadata["training"] = {"parameters": [{"tensor": "w2"}, "w1", {"tensor": "gone"}],
                              "state": [{"tensor": "s"}]}
    # parameters in metadata order, state, optimizer-state role, then other mutated tensors;
    # unknown names dropped, no duplicates (w2 is both a parameter and mutated)
    assert parameter_tensors(g) == ["w2", "w1", "s", "m", "acc"]


# -- order constraints --------------------------------------------------------------------------

def test_diamond_edges_and_topological_orders() -> None:
    g = diamond()
    assert order_edges(g) == [set(), {0}, {0}, {1, 2}]
    p = build_problem(g)
    assert is_topological(p, [0, 1, 2, 3]) and is_topological(p, [0, 2, 1, 3])
    for bad in ([1, 0, 2, 3], [0, 1, 3, 2], [0, 1, 2], [0, 1, 1, 3], [3, 2, 1, 0]):
        assert not is_topological(p, bad), bad
    # a, c, b, d is as good as the given a, b, c, d (peak 144 either way): the given order stays
    s = schedule(g)
    assert s.order == ("a", "b", "c", "d") and s.method == "given" and s.peak == 144


def test_update_modes_and_hazards() -> None:
    g = Graph("h")
    g.add_tensor(Tensor("w", (4,), "int8", Role.WEIGHT, data=np.zeros(4, np.int8)))
    for t in ("x", "y", "z"):
        g.add_tensor(Tensor(t, (4,), "int8"))
    g.ops = [Op("concat", "read1", ("x", "w"), ("y",), CAT),
             Op("sgd_update", "upd", ("w", "y"), (), {"updates": ("w",)}),
             Op("concat", "read2", ("w", "x"), ("z",), CAT),
             Op("step_counter", "step", (), (), {})]
    g.inputs, g.outputs = ["x"], ["z"]
    assert is_update_op(g.ops[1]) and not is_update_op(g.ops[0])
    assert is_update_op(Op("custom", "c", ("w",), (), {"updates": ("w",)}))  # no outputs
    edges = order_edges(g)
    assert 0 in edges[1]            # data (y) and the read-before-write hazard on w
    assert 1 in edges[2]            # read2 sees the updated w: no data edge, only the hazard
    assert 0 not in edges[2]        # two readers of w are not ordered by w
    assert edges[3] == {0, 1, 2}    # step_counter runs last
    assert update_mode(g) == "free"
    g.metadata["training"] = {"reorder": False}
    assert update_mode(g) == "anchored" and update_mode(g, "free") == "free"
    with pytest.raises(ValueError, match="updates must be one of"):
        update_mode(g, "sometimes")


def test_bad_orders_are_refused() -> None:
    g = diamond()
    g.ops = [g.ops[1], g.ops[0], g.ops[2], g.ops[3]]         # b reads t0 before a made it
    with pytest.raises(ValueError, match="not in a valid execution order"):
        schedule(g)
    cyc = _graph("cyc", {"x": 16, "u": 16, "v": 16},
                 [("concat", "A", ("x", "v"), ("u",)), ("concat", "B", ("u",), ("v",))],
                 ["x"], ["v"])
    with pytest.raises(ValueError, match="cycle"):
        search(build_problem(cyc), 8)


# -- the cost model -----------------------------------------------------------------------------

def test_live_bytes_of_the_given_and_the_best_order() -> None:
    """Worked by hand (bytes live while each op runs: what is alive before it plus what it
    creates). Given order P1 P2 Q1 Q2 Y:  x+p1=272, x+p1+p2=528, p1+p2+q1=528, p2+q1+q2=288,
    q1+q2+y=48. Order P1 Q1 P2 Q2 Y: 272, x+p1+q1=288, x+q1+p2=288, q1+p2+q2=288, 48. Any order
    runs a second P while x and (the other p or its q) are live: 288 is the optimum."""
    g = two_branches()
    p = build_problem(g)
    given_steps = simulate(p, [0, 1, 2, 3, 4])
    assert [s.live for s in given_steps] == [272, 528, 528, 288, 48]
    assert all(s.inplace is None for s in given_steps)
    assert peak_of(p, [0, 2, 1, 3, 4]) == 288
    s = schedule(g)
    assert s.given_peak == 528 and s.peak == lower_bound(s) == 288
    assert s.exact and s.method == "search"
    assert list(s.live_bytes) == [272, 288, 288, 288, 48]
    assert s.order in (("P1", "Q1", "P2", "Q2", "Y"), ("P2", "Q2", "P1", "Q1", "Y"))
    kept = schedule(g, keep_order=True)
    assert kept.method == "given" and kept.peak == 528
    assert kept.order == ("P1", "P2", "Q1", "Q2", "Y")


def test_alignment_rounds_every_buffer() -> None:
    """Sizes 3, 5, 7 bytes: 16 each at alignment 16, exact at alignment 1."""
    g = _graph("odd", {"x": 3, "a": 5, "y": 7},
               [("concat", "A", ("x",), ("a",)), ("concat", "Y", ("a",), ("y",))], ["x"], ["y"])
    assert list(schedule(g, alignment=1).live_bytes) == [3 + 5, 5 + 7]
    assert list(schedule(g, alignment=16).live_bytes) == [32, 32]
    assert list(schedule(g, alignment=4).live_bytes) == [4 + 8, 8 + 8]


def test_dead_input_and_dead_result_count_only_when_alive() -> None:
    """An unused graph input is live at step 0 only (then dropped); a result nobody reads and
    that is no graph output is live during the op that makes it only."""
    g = _graph("dead", {"x": 16, "unused": 32, "junk": 64, "a": 16, "y": 16},
               [("concat", "J", ("x",), ("junk",)), ("concat", "A", ("x",), ("a",)),
                ("concat", "Y", ("a",), ("y",))], ["x", "unused"], ["y"])
    s = schedule(g, keep_order=True)
    # J: x + unused + junk; A: x + a (junk and unused gone); Y: a + y
    assert list(s.live_bytes) == [16 + 32 + 64, 16 + 16, 16 + 16]
    assert s.lifetimes["junk"] == (0, 0) and s.lifetimes["unused"] == (0, 0)
    # the same result as a graph output never dies: live from step 0 to the end
    g.outputs.append("junk")
    s = schedule(g, keep_order=True)
    assert list(s.live_bytes) == [16 + 32 + 64, 16 + 16 + 64, 16 + 16 + 64]
    assert s.lifetimes["junk"] == (0, 2) and s.buffer("junk").kind == "output"


def _relu_chain(second_reader: bool) -> Graph:
    """x -> A (concat) -> a (64 B) -> R (relu) -> b (64 B) -> Y (concat, reads a too when
    ``second_reader``) -> y (16 B)."""
    return _graph("relu", {"x": 16, "a": 64, "b": 64, "y": 16},
                  [("concat", "A", ("x",), ("a",)), ("relu", "R", ("a",), ("b",)),
                   ("concat", "Y", ("b", "a") if second_reader else ("b",), ("y",))],
                  ["x"], ["y"])


def test_inplace_write_saves_the_dying_input() -> None:
    g = _relu_chain(second_reader=False)
    facts = {"R": Facts(inplace=("a",))}
    s = schedule(g, kernels=facts, keep_order=True)
    # A: x+a = 80; R writes b over a (a dies there): 64; Y: b+y = 80
    assert list(s.live_bytes) == [80, 64, 80]
    assert [(sh.op, sh.output, sh.input, sh.kind) for sh in s.sharing] == [
        ("R", "b", "a", "inplace")]
    assert s.buffer_of["a"] == s.buffer_of["b"]
    buf = s.buffer("b")
    assert buf.tensors == ("a", "b") and (buf.first, buf.last) == (0, 2) and buf.size == 64
    off = schedule(g, kernels=facts, keep_order=True, inplace=False)
    assert list(off.live_bytes) == [80, 128, 80] and off.sharing == ()
    # a is read again later: it does not die at R, so nothing is written over it
    g2 = _relu_chain(second_reader=True)
    s2 = schedule(g2, kernels=facts, keep_order=True)
    assert list(s2.live_bytes) == [80, 128, 144] and s2.sharing == ()
    # a is a graph output: its bytes must survive, so b gets bytes of its own
    g3 = _relu_chain(second_reader=False)
    g3.outputs.append("a")
    s3 = schedule(g3, kernels=facts, keep_order=True)
    assert list(s3.live_bytes) == [80, 128, 144] and s3.sharing == ()


def test_zero_copy_alias_shares_one_buffer() -> None:
    g = _graph("alias", {"x": 16, "a": 64, "y": 16},
               [("concat", "A", ("x",), ("a",))], ["x"], ["y"])
    g.add_tensor(Tensor("r", (1, 64), "int8"))
    g.add_op(Op("reshape", "R", ("a",), ("r",), {"shape": (1, 64)}))
    g.add_op(Op("concat", "Y", ("r",), ("y",), CAT))
    facts = {"R": Facts(may_alias=(("a", "r"),))}
    s = schedule(g, kernels=facts, keep_order=True)
    assert list(s.live_bytes) == [80, 64, 80]                # r costs nothing: it is a's bytes
    assert [(sh.output, sh.input, sh.kind) for sh in s.sharing] == [("r", "a", "alias")]
    assert s.buffer("r") is s.buffer("a") and s.buffer("a").last == 2
    assert list(schedule(g, keep_order=True).live_bytes) == [80, 128, 80]   # without facts


def test_scratch_is_aligned_and_counted_at_its_step_only() -> None:
    g = diamond()
    s = schedule(g, kernels={"b": Facts(scratch_bytes=20)}, keep_order=True)
    plain = schedule(g, keep_order=True)
    assert s.scratch == (0, 32, 0, 0)
    assert [a - b for a, b in zip(s.live_bytes, plain.live_bytes, strict=True)] == [0, 32, 0, 0]
    scratch = [b for b in s.buffers if b.kind == "scratch"]
    assert [(b.name, b.first, b.last, b.size) for b in scratch] == [("scratch:b", 1, 1, 32)]


# -- lifetimes ----------------------------------------------------------------------------------

def test_lifetimes_of_the_diamond() -> None:
    """Steps a=0 b=1 c=2 d=3: x is read at 0, t0 made at 0 and last read by c at 2, t1 made at
    1 and read at 3, t2 made and read at 2..3, y (the output) made at 3 and kept to the end."""
    s = schedule(diamond(), keep_order=True)
    assert s.lifetimes == {"x": (0, 0), "t0": (0, 2), "t1": (1, 3), "t2": (2, 3), "y": (3, 3)}
    kinds = {b.name: b.kind for b in s.buffers}
    assert kinds == {"x": "input", "t0": "activation", "t1": "activation", "t2": "activation",
                     "y": "output"}
    # bytes live per step = the buffers whose [first, last] holds the step
    assert list(s.live_bytes) == [16 + 32, 32 + 48, 32 + 48 + 64, 48 + 64 + 16]
    for k, live in enumerate(s.live_bytes):
        assert live == sum(b.size for b in s.buffers if b.first <= k <= b.last)
    # buffers overlap when their inclusive step ranges meet: t0 (0..2) and t2 (2..3) do
    assert s.buffer("t0").overlaps(s.buffer("t2")) and s.buffer("t2").overlaps(s.buffer("t0"))
    assert not s.buffer("x").overlaps(s.buffer("t1"))           # 0..0 and 1..3
    assert not s.buffer("t1").overlaps(s.buffer("x"))


def test_lifetimes_follow_the_chosen_order() -> None:
    s = schedule(two_branches())
    pos = {name: k for k, name in enumerate(s.order)}
    made = {"p1": "P1", "p2": "P2", "q1": "Q1", "q2": "Q2", "y": "Y"}
    read = {"x": ("P1", "P2"), "p1": ("Q1",), "p2": ("Q2",), "q1": ("Y",), "q2": ("Y",)}
    for t, (first, last) in s.lifetimes.items():
        assert first == (0 if t == "x" else pos[made[t]])
        assert last == (len(s.ops) - 1 if t == "y" else max(pos[o] for o in read[t]))


def test_beam_search_reports_it_is_not_exact() -> None:
    """Level 1 of the two-branch graph holds two sets ({P1}, {P2}): a beam of one cuts it;
    no level holds more than three."""
    g = two_branches()
    s = schedule(g, max_states=1)
    assert not s.exact and s.peak <= s.given_peak
    assert is_topological(build_problem(g), [g.ops.index(op) for op in s.ops])
    assert schedule(g, max_states=3).exact           # widest level: {P1,P2}, {P1,Q1}, {P2,Q2}
