"""The CMSIS-NN backend without CMSIS-NN: what its builders accept and decline per core, the
scratch sizes they give (equal to values recorded from CMSIS-NN v7.0.0's compiled
*_get_buffer_size functions), the kernel sums they put in flash, records that match the
wrappers' prototypes, and lowering along a board's chain. Pure Python: runs in CI, where the
submodule is empty (tests needing the sources are test_cmsis_nn_scratch.py, the kernel tests
and test_cmsis_nn_targets.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from codegen.backends import ArrayArg, ConstArray, NullArg, Target, chain_for, lower_graph
from codegen.backends import cmsis_nn as cm
from codegen.board import load_board
from codegen.resources import data_dir
from tests.frontend.single_op import (
    binary_graph,
    conv2d_graph,
    depthwise_conv2d_graph,
    fully_connected_graph,
    pool2d_graph,
    softmax_graph,
)

HOST, M4, M55 = Target(), Target.of(load_board("mps2-an386")), Target.of(load_board("mps3-an547"))
CORES = {cm.PLAIN: HOST, cm.DSP: M4, cm.MVE: M55}
G = cm.ConvGeometry

# arm_convolve_wrapper_s8_get_buffer_size / arm_depthwise_conv_wrapper_s8_get_buffer_size of
# CMSIS-NN v7.0.0, as compiled on the host (plain C, and its _dsp / _mve variants), for these
# geometries (n, in h w c, filter h w c, out h w c, stride h w, pad t b l r, dilation h w).
RECORDED_CONV = [
    (G(1, 49, 10, 64, 3, 3, 64, 49, 10, 64, 1, 1, 1, 1, 1, 1), (2304, 2304, 2304)),
    (G(1, 49, 10, 1, 10, 4, 1, 25, 5, 64, 2, 2, 4, 5, 1, 1), (160, 160, 192)),
    (G(1, 24, 24, 16, 1, 1, 16, 24, 24, 32), (0, 0, 0)),
    (G(1, 24, 24, 16, 1, 1, 16, 12, 12, 32, 2, 2), (0, 0, 0)),
    (G(1, 1, 20, 8, 1, 5, 8, 1, 20, 16, 1, 1, 0, 0, 2, 2), (160, 160, 56)),
    (G(1, 1, 15, 2, 1, 4, 2, 1, 8, 4, 1, 2, 0, 0, 1, 2), (32, 32, 10)),
    (G(1, 1, 3, 4, 1, 7, 4, 1, 3, 4, 1, 1, 0, 0, 3, 3), (112, 112, 128)),
    (G(2, 9, 9, 3, 3, 3, 3, 5, 5, 8, 1, 1, 0, 0, 0, 0, 2, 2), (112, 112, 128)),
]
RECORDED_DW = [
    (G(1, 25, 5, 64, 3, 3, 1, 25, 5, 64, 1, 1, 1, 1, 1, 1), (0, 0, 4464)),
    (G(1, 12, 12, 32, 5, 5, 1, 12, 12, 32, 1, 1, 2, 2, 2, 2), (0, 1600, 12400)),
    (G(1, 6, 6, 200, 3, 3, 1, 3, 3, 200, 2, 2, 0, 1, 0, 1), (0, 0, 4464)),
    (G(1, 8, 8, 4, 3, 3, 1, 8, 8, 8, 1, 1, 1, 1, 1, 1), (0, 0, 0)),
    (G(1, 8, 8, 1, 3, 3, 1, 8, 8, 6, 1, 1, 1, 1, 1, 1), (0, 0, 118)),
    (G(2, 8, 8, 8, 3, 3, 1, 8, 8, 8, 1, 1, 1, 1, 1, 1), (0, 0, 0)),
]


@pytest.mark.parametrize(("geometry", "want"), RECORDED_CONV)
def test_conv_scratch_equals_recorded_cmsis_values(geometry, want):
    got = tuple(cm.convolve_wrapper_buffer_size(c, geometry) for c in (cm.PLAIN, cm.DSP, cm.MVE))
    assert got == want


@pytest.mark.parametrize(("geometry", "want"), RECORDED_DW)
def test_depthwise_scratch_equals_recorded_cmsis_values(geometry, want):
    got = tuple(cm.depthwise_wrapper_buffer_size(c, geometry)
                for c in (cm.PLAIN, cm.DSP, cm.MVE))
    assert got == want


def test_fc_and_avgpool_scratch():
    assert [cm.fully_connected_buffer_size(c, 10) for c in (cm.PLAIN, cm.DSP, cm.MVE)] == \
        [0, 0, 40]
    assert [cm.avgpool_buffer_size(c, 5, 64) for c in (cm.PLAIN, cm.DSP, cm.MVE)] == [0, 256, 0]


def test_core_follows_the_board_features():
    assert [cm.core(t) for t in (HOST, M4, M55)] == [cm.PLAIN, cm.DSP, cm.MVE]
    assert cm.core(Target.of(load_board("mps2-an505"))) == cm.DSP      # M33: DSP, no MVE


def _build(graph, target, batch=1):
    return cm.CMSIS_NN.build(graph, graph.ops[0], batch, target)


def _rng():
    return np.random.default_rng(3)


# -- what is accepted, what declines, per core ----------------------------------------------------
def test_conv_records_keep_the_ref_numbers_and_add_scratch():
    g = conv2d_graph(_rng(), (1, 10, 10, 8), 16, (3, 3), padding="same")
    from codegen.backends import kernel_call
    ref = kernel_call(g, g.ops[0])
    for core, target in CORES.items():
        call = _build(g, target)
        assert call.kernel == "pe_conv2d_s8_cmsis" and call.backend == "cmsis-nn"
        assert [n for n, _ in call.args] == [n for n, _ in ref.args]
        assert dict(call.const_arrays()).keys() == dict(ref.const_arrays()).keys()
        for (name, a), (_, b) in zip(call.const_arrays(), ref.const_arrays()):
            assert np.array_equal(a.values, b.values), name
        want = cm.convolve_s8_buffer_size(core, cm.ConvGeometry(1, 10, 10, 8, 3, 3, 8, 10, 10,
                                                                16))
        assert call.scratch_bytes == want > 0


def test_per_tensor_conv_quantization_is_expanded_per_channel():
    g = conv2d_graph(_rng(), (1, 6, 6, 4), 5, (1, 1), padding="valid")
    w = g.tensors[g.ops[0].inputs[1]]
    from dataclasses import replace

    from codegen.ir import QuantParams
    g.tensors[w.name] = replace(w, quant=QuantParams(w.quant.scale[:1], w.quant.zero_point[:1]))
    call = _build(g, M4)
    arrays = dict(call.const_arrays())
    assert arrays["quant_multiplier"].values.shape == (5,)
    assert len(set(arrays["quant_multiplier"].values.tolist())) == 1


def test_conv_declines():
    rng = _rng()
    # 1x1 with bottom/right padding: the 1x1 kernels assume none
    g = conv2d_graph(rng, (1, 5, 5, 4), 4, (1, 1), padding=(0, 1, 0, 1))
    assert all(_build(g, t) is None for t in CORES.values())
    # grouped 1x1: the buffer query sizes it as 1x1 (0 bytes), the im2col kernel needs more
    g = conv2d_graph(rng, (1, 5, 5, 4), 4, (1, 1), padding="valid")
    w = g.tensors[g.ops[0].inputs[1]]
    from tests.kernels.cases import conv2d_graph as grouped
    gg, _ = grouped(rng, "int8", (1, 5, 5, 4), 4, (1, 1), 2, (1, 1), (1, 1), (0, 0, 0, 0))
    assert _build(gg, M4) is None and w.shape[3] == 4
    gg, _ = grouped(rng, "int8", (1, 5, 5, 4), 4, (3, 3), 2, (1, 1), (1, 1), (1, 1, 1, 1))
    assert _build(gg, M4) is not None
    # too wide for CMSIS-NN's uint16 sizes
    g = conv2d_graph(rng, (1, 1, 70000, 1), 1, (1, 3), padding="valid")
    assert _build(g, M4) is None
    # float: CMSIS-NN has no float kernels
    assert _build(conv2d_graph(rng, dtype="float32"), M4) is None


def test_grouped_conv_without_bias_gets_zeros():
    from tests.kernels.cases import conv2d_graph as grouped
    rng = _rng()
    for _ in range(20):
        g, _ = grouped(rng, "int8", (1, 5, 5, 6), 6, (3, 3), 2, (1, 1), (1, 1), (1, 1, 1, 1))
        if not g.ops[0].inputs[2:] or not g.ops[0].inputs[2]:
            break
    call = _build(g, M4)
    bias = call.arg("bias")
    assert isinstance(bias, ArrayArg) and np.array_equal(bias.value.values, np.zeros(6))


@pytest.mark.parametrize(("width", "k", "stride", "pads", "mve_ok"), [
    (20, 5, 1, (0, 0, 2, 2), True),            # SAME, stride 1
    (10, 7, 2, (0, 0, 2, 3), False),           # SAME, right-padded windows beyond the buffer
    (9, 3, 2, (0, 0, 1, 1), True),             # SAME stride 2, pad_right - 1 divisible
    (10, 3, 1, (0, 0, 0, 0), True),            # VALID, no leftover column
    (11, 4, 2, (0, 0, 0, 0), False),           # VALID, a column left over (total pad -1)
    (11, 3, 3, (0, 0, 0, 0), False),           # VALID, two left over (total pad -2)
    (10, 3, 1, (0, 0, 2, 0), False),           # explicit, not TFLite's SAME split
    (3, 7, 1, (0, 0, 3, 3), True),             # columns do not split: arm_convolve_s8
])
def test_mve_1xn_declines(width, k, stride, pads, mve_ok):
    g = conv2d_graph(_rng(), (1, 1, width, 4), 8, (1, k), stride=(1, stride), padding=pads)
    assert _build(g, M4) is not None and _build(g, HOST) is not None
    assert (_build(g, M55) is not None) == mve_ok


def test_depthwise_paths_and_declines():
    rng = _rng()
    # 3x3 whose last window's middle column is padding: the 3x3 kernel reads past the row
    g = depthwise_conv2d_graph(rng, (1, 6, 4, 8), 1, (3, 3), stride=(1, 1),
                               padding=(1, 1, 1, 3))
    assert _build(g, M4) is None and _build(g, HOST) is None
    assert _build(g, M55) is not None                       # MVE takes the opt kernel
    g = depthwise_conv2d_graph(rng, (1, 6, 4, 8), 1, (3, 3), padding="same")
    assert _build(g, M4).scratch_bytes == 0                 # 3x3 kernel: no buffer
    assert _build(g, M55).scratch_bytes == 4 * 124 * 9      # opt kernel on MVE
    g = depthwise_conv2d_graph(rng, (1, 6, 6, 1), 4, (3, 3), padding="same")
    assert _build(g, M55).scratch_bytes == \
        cm.convolve_s8_buffer_size(cm.MVE, cm.ConvGeometry(1, 6, 6, 1, 3, 3, 1, 6, 6, 4)) + 36
    g = depthwise_conv2d_graph(rng, (1, 6, 6, 3), 3, (3, 3), dilation=(2, 2), padding="same")
    assert all(_build(g, t).scratch_bytes == 0 for t in CORES.values())   # generic kernel


def test_fc_kernel_sums_in_flash_on_mve_only():
    rng = _rng()
    for per_channel in (False, True):
        g = fully_connected_graph(rng, (1, 24), 7, per_channel=per_channel)
        op = g.ops[0]
        x, w, b = (g.tensors[n] for n in op.inputs)
        name = "pe_fully_connected_s8" + ("_per_channel" if per_channel else "") + "_cmsis"
        dsp = _build(g, M4)
        assert dsp.kernel == name and isinstance(dsp.arg("kernel_sum"), NullArg)
        assert dsp.scratch_bytes == 0
        mve = _build(g, M55)
        sums = mve.arg("kernel_sum")
        assert isinstance(sums, ArrayArg) and mve.scratch_bytes == 0
        want = b.data.astype(np.int64) - int(x.quant.zero_point[0]) * \
            w.data.astype(np.int64).sum(axis=1)
        assert np.array_equal(sums.value.values, want.astype(np.int32))
    # arm_vector_sum_s8 wraps like C int32
    big = cm.kernel_sums(np.full((1, 4096), 127, np.int8), np.array([2**31 - 1]), 128)
    assert big[0] == np.int32(np.int64(2**31 - 1 + 127 * 4096 * 128) - 2**32)


def test_fc_trained_in_place_sums_at_run_time(digits_graph):
    """In a training graph whose FC weights are trainable, the MVE record asks for scratch and
    lets the wrapper compute the kernel sums (flash sums would go stale)."""
    from codegen import pipeline

    tg = pipeline.training_graph(digits_graph, "weight:last1")
    fc = next(op for op in tg.ops if op.type == "fully_connected")
    assert tg.ops[[o.name for o in tg.ops].index(fc.name)].inputs[1] in cm.mutable_tensors(tg)
    call = cm.CMSIS_NN.build(tg, fc, 1, M55)
    assert isinstance(call.arg("kernel_sum"), NullArg)
    assert call.scratch_bytes == 4 * tg.tensors[fc.inputs[1]].shape[0]
    frozen = cm.CMSIS_NN.build(digits_graph, next(op for op in digits_graph.ops
                                                  if op.type == "fully_connected"), 1, M55)
    assert isinstance(frozen.arg("kernel_sum"), ArrayArg) and frozen.scratch_bytes == 0


def test_pool_elementwise_softmax():
    rng = _rng()
    avg = pool2d_graph(rng, "avg", (1, 6, 6, 5), (3, 3), (2, 2), "same")
    assert [_build(avg, t).scratch_bytes for t in (HOST, M4, M55)] == [0, 20, 0]
    mx = pool2d_graph(rng, "max", (1, 6, 6, 5), (2, 2), (2, 2), "valid")
    assert _build(mx, M4).kernel == "pe_max_pool2d_s8_cmsis"
    # a max-pool window entirely in the padding: CMSIS-NN leaves that output unwritten
    far = pool2d_graph(rng, "max", (1, 2, 2, 3), (1, 1), (2, 2), (0, 2, 0, 0))
    assert _build(far, M4) is None
    same = binary_graph(rng, "add", (1, 4, 4, 8), (1, 4, 4, 8))
    call = _build(same, M4)
    assert call.kernel == "pe_add_s8_cmsis" and set(call.inplace) == set(same.ops[0].inputs)
    assert _build(binary_graph(rng, "mul", (1, 4, 4, 8), (1, 4, 4, 8)), M55) is not None
    for b in ((1, 1, 1, 8), (8,), (1,)):                    # broadcasts decline
        assert _build(binary_graph(rng, "add", (1, 4, 4, 8), b), M4) is None
    assert _build(softmax_graph(rng, (1, 10)), M4).kernel == "pe_softmax_s8_cmsis"
    assert _build(softmax_graph(rng, (1, 10), dtype="float32"), M4) is None
    assert _build(binary_graph(rng, "add", dtype="float32"), M4) is None


# -- records and prototypes -----------------------------------------------------------------------
def _prototypes() -> dict[str, list[tuple[str, str]]]:
    text = (data_dir("runtime_c") / "kernels" / "pe_cmsis_kernels.h").read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    protos = {}
    for name, params in re.findall(r"void\s+(pe_\w+)\s*\(([^)]*)\)\s*;", text):
        protos[name] = [(m.group(1).replace(" ", ""), m.group(2)) for m in
                        (re.match(r"(.*?)(\w+)$", " ".join(p.split())) for p in params.split(","))]
    return protos


def test_records_match_the_wrapper_prototypes():
    """Every record the builders make calls a prototype of pe_cmsis_kernels.h with the right
    argument types, and every prototype is made by some record."""
    from tests.backends import cmsis_cases

    protos = _prototypes()
    used = set()
    for op_type in cmsis_cases.OPS:
        for graph, _, batch in cmsis_cases.iter_cases(op_type, 40, seed=5):
            for target in CORES.values():
                call = cm.CMSIS_NN.build(graph, graph.ops[0], batch, target)
                if call is None:
                    continue
                got = [(a.ctype.replace(" ", ""), n) for n, a in call.args]
                assert got == protos[call.kernel], call.kernel
                used.add(call.kernel)
                for _, arr in call.const_arrays():
                    assert isinstance(arr, ConstArray) and arr.values.dtype == np.int32
    assert used == set(protos)
    for name in protos:                       # the ref name plus the backend's suffix
        assert name.endswith(cm.SUFFIX)


def test_auto_chain_lowers_forward_ops_to_cmsis_nn(monkeypatch, tmp_path, digits_graph):
    """With a checkout (here: a stand-in that only has the marker file), a DSP board's auto
    chain is arm, cmsis-nn, ref, and --backend cmsis-nn's is cmsis-nn, ref: a training graph's
    forward int8 ops take CMSIS-NN kernels, its backward and update ops the ref kernels."""
    from codegen import pipeline

    (tmp_path / "Include").mkdir()
    (tmp_path / "Include" / "arm_nnfunctions.h").write_text("")
    monkeypatch.setenv("POCKENGINE_CMSIS_NN", str(tmp_path))
    for board in ("mps2-an386", "mps3-an547"):
        assert chain_for(load_board(board)).names == ("arm", "cmsis-nn", "ref")
        chain = chain_for(load_board(board), "cmsis-nn")
        assert chain.names == ("cmsis-nn", "ref")
        tg = pipeline.training_graph(digits_graph, "bias:all+weight:last2")
        low = lower_graph(tg, chain.backends, target=chain.target)
        by_type = {}
        for op in tg.ops:
            by_type.setdefault(op.type, set()).add(low.choices[op.name].call.backend)
        for t in ("conv2d", "depthwise_conv2d", "fully_connected", "add", "avg_pool2d"):
            assert by_type[t] == {"cmsis-nn"}, t
        assert by_type["conv2d_grad_input"] == {"ref"} if "conv2d_grad_input" in by_type else True
        assert by_type["reshape"] == {"ref"} and any("grad" in t for t in by_type)
    assert chain_for(load_board("mps2-an385")).names == ("ref",)        # no DSP: ref
