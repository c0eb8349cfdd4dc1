"""The arm backend's compile-time parts, without a compiler: the one-rounding requantization
constants against the golden model's two-step recipe, the packed weight layout, what the
builders take and decline, both forms of a record, the sources a project gets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codegen.backends import NullArg, ScalarArg, Target, arm, kernel_call
from codegen.backends.params import MUTABLE
from codegen.backends.sources import source_index
from codegen.golden import numerics as nx
from codegen.resources import data_dir
from tests.backends import arm_cases
from tests.kernels.cases import conv2d_graph

from .arm_helpers import arm_record


def _c_requant(acc: np.ndarray, words: np.ndarray) -> np.ndarray:
    """pe_arm_requant3 of pe_arm.h, step by step in 64-bit integers."""
    hi0, m, e1 = (int(v) for v in words)
    neg = (acc < 0).astype(np.int64)
    lo = np.where(neg == 1, 0xC0000000, 0x40000000).astype(np.int64)
    total = ((hi0 - neg) << 32) + lo + acc * m           # SMLAL into hi:lo
    hi = total >> 32
    assert np.all((hi >= -(1 << 31)) & (hi < (1 << 31)))   # the C high word is an int32
    return hi >> e1                                      # arithmetic shift


def _int32s(rng: np.random.Generator, n: int) -> np.ndarray:
    edges = np.array([nx.INT32_MIN, nx.INT32_MIN + 1, -(1 << 30) - 1, -(1 << 30), -2, -1, 0,
                      1, 2, 1 << 30, nx.INT32_MAX - 1, nx.INT32_MAX], dtype=np.int64)
    return np.concatenate([edges, rng.integers(nx.INT32_MIN, nx.INT32_MAX, n, endpoint=True),
                           rng.integers(-5000, 5000, n)])


def test_one_rounding_requantization_equals_two_steps():
    """Every multiplier range QuantizeMultiplier produces with right shifts of 2 and more
    (and dead channels of multiplier 0): the single 64-bit rounding equals TFLM's
    SaturatingRoundingDoublingHighMul then RoundingDivideByPOT on int32 edges and random
    accumulators, ties included (small accumulators hit them)."""
    rng = np.random.default_rng(3)
    checked = 0
    for trial in range(400):
        if trial % 10 == 0:
            m, shift = 0, 0
        else:
            m = int(rng.integers((1 << 30) + 1, 1 << 31))
            shift = -int(rng.integers(2, 32))
        words = arm.requant_words(np.array([m]), np.array([shift]))
        assert words is not None
        acc = _int32s(rng, 2000)
        want = nx.multiply_by_quantized_multiplier(acc, m, shift)
        assert np.array_equal(_c_requant(acc, words), want), (m, shift)
        checked += acc.size
    assert checked > 1_000_000


def test_folded_zero_point_adds_it_after_the_shift():
    """The high word with zp * 2^(e-1) folded in gives the requantized value plus zp, for every
    zero point and the largest shift folding allows; larger shifts do not fold."""
    rng = np.random.default_rng(4)
    for trial in range(200):
        m = int(rng.integers((1 << 30) + 1, 1 << 31))
        shift = -int(rng.integers(2, arm.FOLD_MAX_E1 + 2))
        zp = int(rng.integers(-128, 128)) if trial % 5 else (-128, 127, 0, -1, 128)[trial % 25 // 5]
        words = arm.requant_words(np.array([m]), np.array([shift]))
        folded = arm.fold_zero_point(words, zp)
        assert folded is not None
        acc = _int32s(rng, 1000)
        got = _c_requant(acc, folded)
        assert np.array_equal(got, nx.multiply_by_quantized_multiplier(acc, m, shift) + zp)
        assert np.all(np.abs(got) < 2**31)
    words = arm.requant_words(np.array([(1 << 30) + 5]), np.array([-(arm.FOLD_MAX_E1 + 2)]))
    assert arm.fold_zero_point(words, 3) is None


def test_requantization_outside_the_range_declines():
    assert arm.requant_words(np.array([1 << 30]), np.array([-5])) is None   # m = 2^30
    assert arm.requant_words(np.array([(1 << 30) + 7]), np.array([-1])) is None
    assert arm.requant_words(np.array([(1 << 30) + 7]), np.array([3])) is None
    w = arm.requant_words(np.array([(1 << 30) + 7, 0]), np.array([-9, 0]))
    assert w is not None and list(w) == [1 << 7, (1 << 30) + 7, 8, 1, 0, 1]


def test_packed_rows_follow_the_inner_loops():
    w = np.arange(5 * 6, dtype=np.int64).reshape(5, 6).astype(np.int8)
    pairs = arm.pack_rows(w, 2)
    # two pairs of rows (groups of 4, rows padded 6 -> 8), then the odd row on its own
    assert pairs.size == 5 * 8
    assert list(pairs[:16]) == [0, 1, 2, 3, 6, 7, 8, 9, 4, 5, 0, 0, 10, 11, 0, 0]
    assert list(pairs[32:]) == [24, 25, 26, 27, 28, 29, 0, 0]
    quads = arm.pack_rows(w, 4)
    assert list(quads[:16]) == [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 18, 19, 20, 21]
    assert list(quads[32:]) == [24, 25, 26, 27, 28, 29, 0, 0]


def test_w16_stream_follows_the_inner_loop():
    """Per pair of rows: [doubled bias pair] groups (each: row 0's two int16 pair words, row
    1's), the groups padded to an even count, then the rows' requantization words."""
    w = np.arange(-6, 4 * 6 - 6, dtype=np.int64).reshape(4, 6).astype(np.int8)
    words = arm.requant_words(np.full(4, (1 << 30) + 5), np.array([-3, -4, -5, -6]))
    assert words is not None

    def pair(lo, hi):                                   # an int16 pair as the int32 word
        return int(np.array([(lo & 0xFFFF) | ((hi & 0xFFFF) << 16)]).astype(np.uint32)
                   .view(np.int32)[0])

    fast = arm.w16_stream(w, np.array([1, -2, 3, 4]), words, -128, fast=True)
    per_pair = 4 + 2 * 4 + 6
    assert fast.size == 2 * per_pair
    first = fast[:per_pair]
    assert list(first[:4]) == [2, -4, 2, -4]            # doubled bias, for both pixels
    r0, r1 = 2 * w[0].astype(np.int64), 2 * w[1].astype(np.int64)
    assert list(first[4:8]) == [pair(r0[0], r0[2]), pair(r0[1], r0[3]),
                                pair(r1[0], r1[2]), pair(r1[1], r1[3])]
    assert list(first[8:12]) == [pair(r0[4], 0), pair(r0[5], 0), pair(r1[4], 0),
                                 pair(r1[5], 0)]
    assert list(first[12:]) == [(1 << 30) + 5, 4 - 128 * 8, 3, (1 << 30) + 5, 8 - 128 * 16, 4]
    general = arm.w16_stream(w, None, words, 5, fast=False)
    assert general.size == 2 * (2 * 4 + 6)
    assert list(general[8:14]) == [2 + 5 * 4, (1 << 30) + 5, 2, 4 + 5 * 8, (1 << 30) + 5, 3]


def test_w16_forms_follow_the_bias_and_the_bound():
    rng = np.random.default_rng(3)
    graph, _ = conv2d_graph(rng, "int8", (1, 4, 4, 8), 6, (1, 1), 8, (1, 1), (1, 1),
                            (0, 0, 0, 0))
    op = graph.ops[0]
    graph.ops[0] = replace(op, attrs={**op.attrs, "activation": "none"})
    call = arm.ARM.build(graph, graph.ops[0], 1, Target())
    assert call is not None and call.kernel == arm.W16_KERNEL
    assert int(call.arg("mode").value) & arm.FAST
    graph.metadata[MUTABLE] = [op.inputs[2]]            # a bias training changes: general
    call = arm.ARM.build(graph, graph.ops[0], 1, Target())
    assert call is not None and not int(call.arg("mode").value) & arm.FAST
    del graph.metadata[MUTABLE]
    b = graph.tensors[op.inputs[2]]                     # a bias beyond the fast form's bound
    graph.tensors[b.name] = replace(b, data=np.full(b.shape, 1 << 29, np.int32))
    call = arm.ARM.build(graph, graph.ops[0], 1, Target())
    assert call is not None and call.kernel == arm.W16_KERNEL
    assert not int(call.arg("mode").value) & arm.FAST


def test_builders_take_and_decline():
    rng = np.random.default_rng(0)
    taken = {}
    for op_type in arm.OUT_OF_LINE:            # stream_chain: test_stream_chain_record
        n = 0
        for graph, _, batch in arm_cases.iter_cases(op_type, 120):
            call = arm_record(graph, graph.ops[0], batch)
            if call is None:
                continue
            n += 1
            assert call.backend == "arm"
            assert call.kernel in {*arm.BODIES.values(), arm.W16_KERNEL, arm.ROWS_KERNEL}
            scalars = [a for _, a in call.args if isinstance(a, ScalarArg)]
            assert scalars and all(a.ctype == "int32_t" for a in scalars)
            ool = arm_record(graph, graph.ops[0], batch, form="arm-ool")
            assert ool is not None and ool.kernel in arm.BODIES
            if call.kernel in (arm.W16_KERNEL, arm.ROWS_KERNEL):   # columns of k up to 8, out_c
                assert call.scratch_bytes >= ool.scratch_bytes
            else:
                assert ool.scratch_bytes == call.scratch_bytes
        taken[op_type] = n
    assert all(n > 40 for n in taken.values()), taken
    # grouped convolutions, depth multipliers and dilations go to the next backend
    grouped, _ = conv2d_graph(rng, "int8", (1, 5, 5, 4), 4, (3, 3), 2, (1, 1), (1, 1),
                              (1, 1, 1, 1))
    assert arm.ARM.build(grouped, grouped.ops[0], 1, Target()) is None
    dilated, _ = conv2d_graph(rng, "int8", (1, 7, 7, 4), 4, (3, 3), 4, (1, 1), (2, 2),
                              (0, 0, 0, 0))
    assert arm.ARM.build(dilated, dilated.ops[0], 1, Target()) is not None   # conv: any
    from tests.backends.cmsis_cases import _dw

    mult, _ = _dw(rng, 2, (3, 3), 3)
    assert arm.ARM.build(mult, mult.ops[0], 1, Target()) is None
    dw_dil, _ = _dw(rng, 1, (3, 3), 3, dilation=(2, 1))
    assert arm.ARM.build(dw_dil, dw_dil.ops[0], 1, Target()) is None
    assert kernel_call(mult, mult.ops[0]).backend == "ref"


def test_stream_chain_record():
    """A stream_chain op runs its stages as the bodies their own ops would (the same forms,
    packed streams and folded constants): in a generated model through a stage function whose
    cases call them with every shape a literal but the band's rows and padding, out of line
    through pe_stream_arm_stage structs; the bodies' scratch after the row buffers and state.
    A chain with a stage arm declines goes to ref whole."""
    from codegen.backends import ExprArg, FunctionArg
    from codegen.ir.stream import chain_graph

    taken = 0
    for graph, _, batch in arm_cases.iter_cases("stream_chain", 60):
        op = graph.ops[0]
        ool = arm_record(graph, op, batch)
        ref = kernel_call(graph, op, batch)
        chain = chain_graph(graph, op)
        alone = [arm.ARM.build(chain, o, 1, Target()) for o in chain.ops]
        if ool is None:
            assert None in alone and ref.kernel == "pe_stream_chain_s8"
            assert arm.ARM.build(graph, op, batch, Target()) is None
            continue
        taken += 1
        assert ool.kernel == "pe_stream_chain_s8_arm" and None not in alone
        stages = ool.arg("arm_stages").values
        assert [arm.STREAM_FORMS[c.kernel] for c in alone if c.kernel in arm.STREAM_FORMS] \
            == [st.values["form"] for st in stages]
        params = ool.arg("params").value.values
        assert params["kernel_scratch_offset"] >= ref.scratch_bytes
        assert ool.scratch_bytes == params["kernel_scratch_offset"] + \
            params["kernel_scratch_bytes"]
        assert [n for n, _ in ool.args][:4] == ["ctx", "params", "stages", "arm"]
        fn_call = arm.ARM.build(graph, op, batch, Target())
        fn = fn_call.arg("fn")
        assert fn_call.kernel == "pe_stream_chain_s8_arm_fn" and isinstance(fn, FunctionArg)
        assert [c.kernel for c in fn.cases] == [c.kernel for c in alone]
        assert fn_call.scratch_bytes == ool.scratch_bytes
        for case in fn.cases:
            exprs = {a.expr for _, a in case.args if isinstance(a, ExprArg)}
            assert {"c->input", "c->output"} <= exprs
            if case.kernel != "pe_arm_add_s8":
                assert {"c->ctx", "c->in_dims.h", "c->out_dims.h", "c->pad_h"} <= exprs
    assert taken > 30


def test_depthwise_may_write_over_its_input_and_fc_packs_constant_weights():
    for graph, _, batch in arm_cases.iter_cases("depthwise_conv2d", 40):
        call = arm_record(graph, graph.ops[0], batch)
        if call is not None:
            assert call.inplace == (graph.ops[0].inputs[0],)
    for graph, _, batch in arm_cases.iter_cases("fully_connected", 20):
        call = arm_record(graph, graph.ops[0], batch)
        if call is None:
            continue
        packed = call.arg("packed")
        assert isinstance(packed, ScalarArg) and packed.value == 1
        plain = arm_record(graph, graph.ops[0], batch, form="arm-plain")
        assert plain.arg("packed").value == 0 and plain.arg("filter").tensor == "w"


def test_add_tables_are_tflms_rescaled_inputs():
    for graph, feeds, batch in arm_cases.iter_cases("add", 30):
        call = arm.out_of_line(graph, graph.ops[0], batch)
        if call is None:
            continue
        p = call.arg("params").value.values
        t = call.arg("tables").value.values.astype(np.int64)
        for k, off in ((0, p["input1_offset"]), (1, p["input2_offset"])):
            x = np.arange(-128, 128)
            want = nx.multiply_by_quantized_multiplier(
                nx.wrap_int32((x + off) << p["left_shift"]), p[f"input{k + 1}_multiplier"],
                p[f"input{k + 1}_shift"])
            assert np.array_equal(t[256 * k + (x & 0xFF)], want)
        assert isinstance(call.arg("rq"), NullArg) or call.arg("rq").value.values.size == 3


def test_header_kernels_need_no_source_file():
    """The bodies live in headers every project carries: the closure of a body is empty (it
    calls nothing defined in a .c file), and nothing is reported missing."""
    index = source_index(data_dir("runtime_c") / "kernels")
    bodies = sorted(arm.BODIES.values())
    assert index.missing(bodies) == []
    assert index.closure(bodies) == []
    assert [p.name for p in index.closure(["pe_conv2d_s8_arm"])] == ["pe_conv2d_s8_arm.c"]


@pytest.mark.parametrize("board", ["mps2-an385", "hexagon-v67"])
def test_arm_needs_the_dsp_extension(board):
    from codegen.backends import chain_for
    from codegen.board import load_board
    from codegen.errors import PockError

    with pytest.raises(PockError, match="backend arm needs a core with dsp or mve|"
                                        "backend arm has no kernels for hexagon"):
        chain_for(load_board(board), "arm")


def test_flash_short_falls_back_to_the_out_of_line_kernels(tmp_path, digits_graph):
    """A board whose flash holds the out-of-line kernels' tables but not the specialised ones'
    (packed weight copies): compile takes the out-of-line kernels instead of failing; a board
    with room keeps the specialised bodies; the estimate counts the kernel tables."""
    import yaml

    from codegen import pipeline
    from codegen.board import boards_dir, load_board
    from codegen.safe_yaml import load_yaml_file

    spec = "bias:all+weight:last1"
    board = load_board("mps2-an386")
    need = {}
    for specialise in (True, False):
        tg = pipeline.training_graph(digits_graph, spec)
        low = [pipeline.plan_lowered(g, board, "arm") for g in
               (pipeline.beside_training(digits_graph, tg), tg)]
        if not specialise:
            low = [pipeline._relower_generic(lg) for lg in low]
        need[specialise] = pipeline.project_memory(board, *low)["flash"]
    assert need[True] > need[False]                    # packed copies of frozen weights
    d = load_yaml_file(boards_dir() / "mps2-an386.yaml", "board file")
    d["budget"]["flash"] = f"{(need[True] + need[False]) // 2} B"
    (tmp_path / "tight").mkdir()
    path = tmp_path / "tight" / "mps2-an386.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    proj = pipeline.compile_model(digits_graph, board=str(path), spec=spec,
                                  out_dir=tmp_path / "p", backend="arm")
    kernels = {o["kernel"] for o in proj.manifest["ops"] if o["backend"] == "arm"}
    assert kernels and all(k.endswith("_arm") for k in kernels), kernels
    roomy = pipeline.compile_model(digits_graph, board="mps2-an386", spec=spec,
                                   out_dir=tmp_path / "q", backend="arm")
    assert any(o["kernel"].startswith("pe_arm_") for o in roomy.manifest["ops"])
