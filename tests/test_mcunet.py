"""The MCUNet race model (tests/mcunet.py): the graph the table describes, its MACs, and the
49kb training graph. Fast: golden model only, no emulator."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from codegen import golden, pipeline
from codegen.ir import verify
from codegen.summary import op_macs
from tests.mcunet import (
    TABLE,
    TableMissing,
    backward_macs,
    forward_macs,
    load_table,
    mcunet_graph,
    mcunet_spec_49kb,
    table_missing_reason,
)

needs_table = pytest.mark.skipif(table_missing_reason() is not None,
                                 reason=table_missing_reason() or "")


@pytest.fixture(scope="module")
def graph():
    return mcunet_graph(seed=0)


@pytest.fixture(scope="module")
def training(graph):
    return pipeline.training_graph(graph, mcunet_spec_49kb())


def test_missing_table_is_named(tmp_path):
    missing = tmp_path / "mcunet_49kb.json"
    assert str(missing) in (table_missing_reason(missing) or "")
    with pytest.raises(TableMissing, match="mcunet_49kb.json"):
        mcunet_graph(table=missing)


@needs_table
def test_graph_follows_the_table(graph):
    verify(graph)
    table = load_table(TABLE)
    layers = table["architecture"]["layers"]
    types = Counter(op.type for op in graph.ops)
    assert types == {"conv2d": 28, "depthwise_conv2d": 14, "add": 7, "avg_pool2d": 1,
                     "fully_connected": 1}
    assert types["add"] == len(table["architecture"]["residual_blocks"])
    for layer in layers:
        op = graph.op_by_name(layer["name"])
        out = graph.tensors[op.outputs[0]]
        assert out.size == int(np.prod(layer["out_shape_hwc"])), layer["name"]
        assert op_macs(graph, op) == layer["macs"], layer["name"]
        if "out_zero_point" in layer:
            assert out.quant.zp == layer["out_zero_point"], layer["name"]
        if op.type == "depthwise_conv2d":
            assert op.attrs["depth_multiplier"] == 1
    # TFLite conventions: symmetric per-channel int8 weights, int32 biases at s_in * s_w
    for op in graph.ops:
        if op.type in ("conv2d", "depthwise_conv2d", "fully_connected"):
            x, w, b = (graph.tensors[n] for n in op.inputs)
            assert w.dtype == "int8" and w.quant.per_channel and w.data.min() >= -127
            assert b.dtype == "int32"
            np.testing.assert_array_equal(
                b.quant.scale, (np.float32(x.quant.s) * w.quant.scale).astype(np.float32))
    assert graph.tensors[graph.inputs[0]].shape == (1, 128, 128, 3)


@needs_table
def test_golden_forward_gives_varied_logits(graph):
    x = np.random.default_rng(7).integers(-128, 128, (1, 128, 128, 3), dtype=np.int8)
    (y,) = golden.run(graph, x)
    assert y.shape == (1, 10) and y.dtype == np.int8
    assert len(np.unique(y)) > 3
    # the graph is the same for the same seed, and another seed gives other weights
    again = mcunet_graph(seed=0)
    w = "v14_conv_2/weight"
    np.testing.assert_array_equal(again.tensors[w].data, graph.tensors[w].data)
    assert not np.array_equal(mcunet_graph(seed=1).tensors[w].data, graph.tensors[w].data)


@needs_table
def test_forward_macs_equal_the_table(graph):
    assert forward_macs(graph) == load_table(TABLE)["macs"]["forward"] == 22_455_104


@needs_table
def test_training_graph_trains_the_49kb_set(training):
    params = {p["tensor"]: p for p in training.metadata["training"]["parameters"]}
    biases = [n for n, p in params.items() if p["role"] == "bias"]
    weights = {n: p for n, p in params.items() if p["role"] == "weight"}
    table = load_table(TABLE)["training"]
    assert sorted(biases) == sorted(f"{b['tensor']}/bias" for b in table["bias_updated"])
    assert len(biases) == 21
    assert sum(training.tensors[n].size for n in biases) == table["n_bias_elements"] == 4602
    assert sorted(weights) == ["v10_conv_0/weight", "v11_conv_0/weight", "v15/weight",
                               "v9_conv_0/weight"]
    assert weights["v15/weight"]["channels"] is None            # the whole classifier
    trained = {"v11_conv_0/weight": 120, "v10_conv_0/weight": 96, "v9_conv_0/weight": 36}
    for name, n in trained.items():
        assert len(weights[name]["channels"]) == n, name       # of 240, 192, 144
    elements = 1600 + sum(n * 48 for n in trained.values())
    assert elements == table["n_weight_elements"] == 13_696
    meta = training.metadata["training"]
    assert meta["mode"] == "fp32" and meta["optimizer"]["name"] == "sgd"
    assert meta["optimizer"]["momentum"] == 0.0 and meta["loss"] == "cross_entropy"


@needs_table
def test_backward_macs_equal_the_table(training):
    macs = load_table(TABLE)["macs"]
    assert backward_macs(training) == {"data": macs["backward_data"],
                                       "weight_grad": macs["weight_grad"],
                                       "total": macs["backward_total"]}
    # the backward stops at v8_conv_1 (its bias is the earliest trainable parameter)
    grads = {op.attrs.get("forward") for op in training.ops if op.type.endswith("_grad_input")}
    assert "v8_conv_2" in grads and "v8_conv_1" not in grads


# -- MobileNetV2-w0.35 (issue 13's second network) ---------------------------------------------
def test_mobilenetv2_follows_torchvision():
    from tests.mcunet import make_divisible, mbv2_graph, mbv2_spec

    assert [make_divisible(c * 0.35) for c in (32, 16, 24, 32, 64, 96, 160, 320)] == \
        [16, 8, 8, 16, 24, 32, 56, 112]
    g = mbv2_graph(seed=0)
    ops = {op.name: op for op in g.ops}
    def shape(n):
        return g.tensors[n].shape

    dw = ops["b2_conv_1"]                      # block 2's depthwise: 64x64x48 -> 32x32x48
    assert shape(dw.inputs[0]) == (1, 64, 64, 48) and shape(dw.outputs[0]) == (1, 32, 32, 48)
    assert shape(ops["stem"].outputs[0]) == (1, 64, 64, 16)
    assert shape(ops["last"].outputs[0]) == (1, 4, 4, 1280)
    assert sum(op.type == "add" for op in g.ops) == 10                   # torchvision's residuals
    assert sum(op.type == "depthwise_conv2d" for op in g.ops) == 17
    x = np.random.default_rng(3).integers(-128, 128, (1, 128, 128, 3), dtype=np.int8)
    (y,) = golden.run(g, x)
    assert y.shape == (1, 10) and len(np.unique(y)) > 3
    tg = pipeline.training_graph(g, mbv2_spec())
    trained = {p["tensor"]: p["channels"] for p in tg.metadata["training"]["parameters"]}
    assert sum(t.endswith("/bias") for t in trained) == 20
    assert trained["fc/weight"] is None
    assert len(trained["b17_conv_0/weight"]) == len(trained["b16_conv_0/weight"]) == 84  # 336/4


def test_mobilenetv2_memory_stages_lower_the_arena():
    """Streaming and blocked updates on MobileNetV2-w0.35's scheme (mps2-an500): the
    block-2 expansion no longer sets the arena; both graphs plan far lower."""
    from tests.mcunet import mbv2_graph, mbv2_spec

    g = mbv2_graph(seed=0)
    tg = pipeline.training_graph(g, mbv2_spec())
    board = pipeline.resolve_board("mps2-an500")
    off = pipeline.plan_project(g, tg, board, streaming="off", blocking="off")
    auto = pipeline.plan_project(g, tg, board)
    s = off[1].plan.schedule
    peak = max(range(len(s.ops)), key=lambda k: s.live_bytes[k])
    assert s.ops[peak].name == "b2_conv_1"
    assert max(lg.plan.arena_bytes for lg in auto) < 0.5 * max(lg.plan.arena_bytes
                                                                for lg in off)
