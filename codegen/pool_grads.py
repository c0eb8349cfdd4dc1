"""The pooled-backward pass (issue 13): a classifier head's backward without its largest
gradient.

    fused = fuse_pool_grads(tg)          # the training graph with each head fused, or tg
    pool_grad_report(fused)              # what was fused (plan --json, compile)

A MobileNet-like head is a 1x1 conv with a ReLU, a global average pool and the classifier. When
the conv's bias is trained (or anything before it), the fp32 backward holds the conv's output
gradient whole: the pool's gradient g [N,1,1,O] spread over every position (avg_pool2d_grad),
masked by the ReLU (mask_grad), summed into the bias gradient (bias_grad) and multiplied into
the input gradient (conv2d_grad_input). For MobileNetV2 at 128 x 128 that is 4 x 4 x 1280
float32, 80 KiB, the largest tensor of its backward. Those four ops become one
``pool_conv_grad`` (g, mask, w) -> (dx, db) that works one position at a time: each
position's gradient row is made, added to the bias gradient and multiplied into that
position's input gradient, in the order of the ops it replaces, so the result is the same
bits (the golden model runs the four ops' functions one after the other; the C kernels,
runtime_c/kernels/ref/pe_pool_conv_grad_f32.c and the arm backend's
pe_pool_conv_grad_f32_arm, the same float32 operations in the same order).

**What is fused**: in an fp32 training graph, an avg_pool2d_grad whose output has one window
(the pool's gradient is N x 1 x 1) and no padding, read only by a mask_grad, whose output is
read only by a bias_grad and a conv2d_grad_input of a 1x1 conv (stride 1, no padding, no
dilation, one group); none of the tensors between them a graph output. The fused op takes the
place of the pool's gradient op.

**When**: ``pipeline.plan_project`` fuses when it lowers the project's RAM (with the blocked
updates, ``compile --no-block-updates`` turns both off).
"""

from __future__ import annotations

from typing import Any

from .ir import Graph, Op

OP = "pool_conv_grad"

__all__ = ["OP", "fuse_pool_grads", "pool_grad_heads", "pool_grad_report"]


def pool_grad_heads(graph: Graph) -> list[tuple[Op, Op, Op, Op]]:
    """(avg_pool2d_grad, mask_grad, bias_grad, conv2d_grad_input) of each head the pass can
    fuse (see the module docstring), in graph order."""
    outputs = set(graph.outputs)
    heads = []
    for a in graph.ops:
        if a.type != "avg_pool2d_grad" or a.attrs.get("mode") != "fp32" or len(a.inputs) != 1:
            continue
        g, a_out = graph.tensors[a.inputs[0]], a.outputs[0]
        if len(g.shape) != 4 or tuple(g.shape[1:3]) != (1, 1) \
                or any(int(p) for p in a.attrs.get("padding", (0, 0, 0, 0))):
            continue
        ms = graph.consumers(a_out)
        if len(ms) != 1 or ms[0].type != "mask_grad" or ms[0].inputs[0] != a_out \
                or len(ms[0].inputs) != 2:
            continue
        m = ms[0]
        rs = graph.consumers(m.outputs[0])
        b = next((r for r in rs if r.type == "bias_grad"), None)
        c = next((r for r in rs if r.type == "conv2d_grad_input"), None)
        if b is None or c is None or len(rs) != 2 or b.inputs != (m.outputs[0],) \
                or c.inputs[0] != m.outputs[0] or len(c.inputs) != 2:
            continue
        w, dx = graph.tensors[c.inputs[1]], graph.tensors[c.outputs[0]]
        one = (tuple(int(v) for v in c.attrs.get("stride", (1, 1))) == (1, 1)
               and tuple(int(v) for v in c.attrs.get("dilation", (1, 1))) == (1, 1)
               and not any(int(p) for p in c.attrs.get("padding", (0, 0, 0, 0))))
        if not one or w.dtype != "int8" or tuple(w.shape[1:3]) != (1, 1) \
                or int(w.shape[3]) != int(dx.shape[3]):
            continue
        if {a_out, m.outputs[0]} & outputs:
            continue
        heads.append((a, m, b, c))
    return heads


def fuse_pool_grads(graph: Graph) -> Graph:
    """``graph`` with every head ``pool_grad_heads`` finds fused into one pool_conv_grad op;
    ``graph`` itself when there is none."""
    heads = pool_grad_heads(graph)
    if not heads:
        return graph
    g = graph.copy()
    first = {a.name: (a, m, b, c) for a, m, b, c in heads}
    gone = {op.name for h in heads for op in h[1:]}
    dropped = {t for a, m, _, _ in heads for t in (a.outputs[0], m.outputs[0])}
    ops: list[Op] = []
    for op in graph.ops:
        if op.name in gone:
            continue
        if op.name not in first:
            ops.append(op)
            continue
        a, m, b, c = first[op.name]
        ops.append(Op(OP, g.unique_name(f"{c.attrs.get('forward', c.name)}:{OP}"),
                      (a.inputs[0], m.inputs[1], c.inputs[1]), (c.outputs[0], b.outputs[0]),
                      {"forward": c.attrs.get("forward", ""), "mode": "fp32"}))
    g.ops = ops
    g.tensors = {n: t for n, t in g.tensors.items() if n not in dropped}
    return g


def pool_grad_report(graph: Graph) -> list[dict[str, Any]]:
    """Per fused head: the conv it belongs to and the gradient bytes that no longer exist."""
    out = []
    for op in graph.ops:
        if op.type == OP:
            w = graph.tensors[op.inputs[2]]
            dx = graph.tensors[op.outputs[0]]
            out.append({"op": op.name, "layer": op.attrs.get("forward", ""),
                        "gradient_bytes": int(dx.shape[0] * dx.shape[1] * dx.shape[2])
                        * int(w.shape[0]) * 4})
    return out
