"""The pipeline's stages run one by one (no disk until `write`)."""

from __future__ import annotations

import numpy as np

from codegen import pipeline
from codegen.ir import verify
from codegen.render import Lowered


def test_stages_in_order_and_alone(tmp_path, digits_graph):
    assert [name for name, _ in pipeline.STAGES] == [
        "load", "quantize", "training_graph", "stream", "lower", "plan", "embed", "render",
        "write", "build", "run", "run_device"]
    src = pipeline.quantize(pipeline.load(digits_graph), None)   # int8: passes through
    assert src.graph is digits_graph and len(src.sha256) == 64
    tg = pipeline.training_graph(src.graph, "bias:last2")
    verify(tg)
    streamed = pipeline.stream(tg)                 # a graph transformation: ops fused
    assert verify(streamed) is streamed and pipeline.stream(tg, False) is tg
    assert [op.type for op in streamed.ops].count("stream_chain") == 1
    lowerings = [pipeline.lower(g) for g in (src.graph, tg)]      # records before the plan
    assert all(c.backend == "ref" for lw in lowerings for c in lw.calls.values())
    infer, train = (pipeline.lowered_graph(lw.graph, lw, pipeline.plan(lw.graph, lw))
                    for lw in lowerings)
    assert [c.op for c in train.calls] == [op.name for op in train.plan.schedule.ops]
    rendered = pipeline.render(Lowered(infer, train, "ref"), src, prefix="dg")
    assert "dg_model.c" in rendered.files and not list(tmp_path.iterdir())
    text = rendered.files["dg_model.c"].decode()
    assert "int dg_train_step(" in text and "bias:last2" in text
    proj = pipeline.write(rendered, tmp_path / "out")
    assert proj.has_training and proj.prefix == "dg"


def test_graph_digest_tracks_content(digits_graph):
    d0 = pipeline.graph_digest(digits_graph)
    assert d0 == pipeline.graph_digest(digits_graph.copy())
    g = digits_graph.copy()
    name = next(t.name for t in g.tensors.values() if t.dtype == "int8" and t.data is not None)
    data = g.tensors[name].data.copy()
    data.flat[0] = np.int8(data.flat[0] ^ 1)
    g.tensors[name] = g.tensors[name].replace(data=data)
    assert pipeline.graph_digest(g) != d0
