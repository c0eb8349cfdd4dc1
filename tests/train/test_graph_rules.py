"""Every backward rule on a small synthetic int8 graph that uses every forward op."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.errors import SpecError
from codegen.ir import Graph, Op, QuantParams, Role, Tensor, verify
from codegen.ir.ops import OP_SPECS, TRAINING_OP_SPECS
from codegen.train import GRAD_RULES, build_training_graph, load_spec, saved_activations
from codegen.train.report import phase

FORWARD_OPS = [t for t in OP_SPECS if t not in TRAINING_OP_SPECS]


def q(scale: float = 0.05, zp: int = 0) -> QuantParams:
    return QuantParams(np.array([scale], np.float32), np.array([zp]))


class Int8Graph:
    """A tiny int8 graph builder (names t1, t2, ...)."""

    def __init__(self, shape: tuple[int, ...]):
        self.g = Graph("synthetic")
        self.n = 0
        self.rng = np.random.default_rng(0)
        self.g.add_tensor(Tensor("x", shape, "int8", quant=q(0.02, -3)))
        self.g.inputs.append("x")

    def _name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def act(self, shape, quant=None) -> str:
        return self.g.add_tensor(Tensor(self._name("t"), shape, "int8",
                                        quant=quant or q())).name

    def op(self, type_, inputs, out_shape, quant=None, **attrs) -> str:
        out = self.act(out_shape, quant)
        self.g.add_op(Op(type_, self._name(type_), tuple(inputs), (out,), attrs))
        return out

    def params(self, wshape, axis, c, x) -> tuple[str, str]:
        sw = self.rng.uniform(0.005, 0.02, c).astype(np.float32)
        w = self.g.add_tensor(Tensor(
            self._name("w"), wshape, "int8", Role.WEIGHT,
            QuantParams(sw, np.zeros(c, np.int64), axis),
            self.rng.integers(-127, 128, wshape))).name
        sx = self.g.tensors[x].quant.scale
        b = self.g.add_tensor(Tensor(
            self._name("b"), (c,), "int32", Role.BIAS,
            QuantParams(sx * sw, np.zeros(c, np.int64), 0),
            self.rng.integers(-500, 500, c))).name
        return w, b

    def const(self, shape) -> str:
        return self.g.add_tensor(Tensor(self._name("k"), shape, "int8", Role.CONSTANT, q(0.1),
                                        self.rng.integers(1, 20, shape))).name

    def shape(self, name):
        return self.g.tensors[name].shape


def synthetic_graph() -> Graph:
    b = Int8Graph((1, 8, 8, 3))
    w, bias = b.params((4, 3, 3, 3), 0, 4, "x")
    c1 = b.op("conv2d", ["x", w, bias], (1, 8, 8, 4), stride=(1, 1), dilation=(1, 1),
              padding=(1, 1, 1, 1), activation="relu")
    p = b.op("pad", [c1], (1, 10, 10, 4), pads=((0, 0), (1, 1), (1, 1), (0, 0)))
    mp = b.op("max_pool2d", [p], (1, 5, 5, 4), filter=(2, 2), stride=(2, 2),
              padding=(0, 0, 0, 0), activation="none")
    r6 = b.op("relu6", [mp], (1, 5, 5, 4))
    w, bias = b.params((1, 3, 3, 8), 3, 8, r6)
    dw = b.op("depthwise_conv2d", [r6, w, bias], (1, 5, 5, 8), stride=(1, 1), dilation=(1, 1),
              padding=(1, 1, 1, 1), activation="relu6", depth_multiplier=2)
    m = b.op("mul", [dw, b.const((1, 1, 1, 8))], (1, 5, 5, 8), activation="none")
    rq = b.op("quantize", [m], (1, 5, 5, 8), quant=q(0.07, 2))
    w, bias = b.params((8, 1, 1, 8), 0, 8, rq)
    pw = b.op("conv2d", [rq, w, ""], (1, 5, 5, 8), stride=(1, 1), dilation=(1, 1),
              padding=(0, 0, 0, 0), activation="none")
    cat = b.op("concat", [rq, pw], (1, 5, 5, 16), axis=3, activation="none")
    avg = b.op("mean", [cat], (1, 1, 1, 16), axes=(1, 2), keep_dims=True)
    add = b.op("add", [cat, avg], (1, 5, 5, 16), activation="relu")
    ap = b.op("avg_pool2d", [add], (1, 1, 1, 16), filter=(5, 5), stride=(5, 5),
              padding=(0, 0, 0, 0), activation="none")
    flat = b.op("reshape", [ap], (1, 16), shape=(1, 16))
    sm = b.op("softmax", [flat], (1, 16), quant=q(1 / 256, -128), beta=1.0)
    w, bias = b.params((10, 16), 0, 10, sm)
    logits = b.op("fully_connected", [sm, w, bias], (1, 10), activation="none",
                  keep_num_dims=False)
    out = b.g.add_tensor(Tensor("probs", (1, 10), "float32")).name
    b.g.add_op(Op("dequantize", "deq", (logits,), (out,), {}))
    b.g.outputs = [out]
    return verify(b.g)


def test_every_forward_op_has_a_rule():
    assert set(GRAD_RULES) == set(FORWARD_OPS)


@pytest.mark.parametrize("mode", ["fp32", "int8"])
def test_all_rules_on_synthetic_graph(mode):
    fwd = synthetic_graph()
    g = build_training_graph(fwd, load_spec(f"all,backward={mode},opt=momentum"))
    verify(g)
    types = {op.type for op in g.ops}
    for t in ("pad_grad", "max_pool2d_grad", "mask_grad", "depthwise_conv2d_grad_input",
              "depthwise_conv2d_grad_weight", "mul_grad", "concat_grad", "add_grad",
              "mean_grad", "avg_pool2d_grad", "reshape_grad", "softmax_grad",
              "fully_connected_grad_input", "fully_connected_grad_weight", "conv2d_grad_input",
              "conv2d_grad_weight", "bias_grad", "grad_add", "act_mask"):
        assert t in types, t
    # the first conv's input is the graph input: no gradient for it
    assert not [op for op in g.ops if op.type == "conv2d_grad_input"
                and op.attrs["forward"] == fwd.ops[0].name]
    # the bias-less pointwise conv trains its weight only
    pw = next(op for op in fwd.ops if op.type == "conv2d" and not op.inputs[2])
    assert [op.type for op in g.ops if op.attrs.get("forward") == pw.name
            and phase(op) == "update"] == ["sgd_update"]
    # the logits come from the FC before the final DEQUANTIZE; the softmax is mid-graph
    loss = next(op for op in g.ops if op.type == "softmax_cross_entropy")
    assert loss.inputs[0] == fwd.ops[-1].inputs[0]
    # the mul gradient only for the activation input (the other factor is constant)
    (mul_grad,) = [op for op in g.ops if op.type == "mul_grad"]
    assert mul_grad.attrs["input"] == 0
    # concat: one slice per input, at the right offsets
    cat = [op for op in g.ops if op.type == "concat_grad"]
    assert sorted(op.attrs["begin"] for op in cat) == [0, 8]
    # add: the full-shape input takes dy itself, the broadcast one gets add_grad
    (add_grad,) = [op for op in g.ops if op.type == "add_grad"]
    assert add_grad.attrs["input"] == 1
    assert g.tensors[add_grad.outputs[0]].shape == (1, 1, 1, 16)
    # saved: max_pool's input, softmax's output, weight-gradient inputs, masks
    saved = set(saved_activations(g))
    mp = next(op for op in fwd.ops if op.type == "max_pool2d")
    sm = next(op for op in fwd.ops if op.type == "softmax")
    assert mp.inputs[0] in saved and sm.outputs[0] in saved
    masks = [op for op in g.ops if op.type == "act_mask"]
    assert len(masks) == 4        # conv relu, standalone relu6, depthwise relu6, add relu
    relu6 = next(op for op in fwd.ops if op.type == "relu6")
    (m6,) = [op for op in masks if op.inputs[0] == relu6.outputs[0]]
    assert (m6.attrs["lo"], m6.attrs["hi"]) == (0, 120)        # clamp of [0, 6] at scale 0.05
    # mask ops follow their forward op directly
    for op in masks:
        i = g.ops.index(op)
        assert op.inputs[0] in g.ops[i - 1].outputs


def test_bias_only_on_synthetic_graph_reads_no_activation():
    fwd = synthetic_graph()
    g = build_training_graph(fwd, load_spec("bias:last1"))
    assert {op.type for op in g.ops if phase(op) == "backward"} == {"bias_grad"}
    assert saved_activations(g) == []


def test_weight_of_first_layer_keeps_its_input():
    fwd = synthetic_graph()
    g = build_training_graph(fwd, load_spec("weight:0@0.5"))
    (gw,) = [op for op in g.ops if op.type == "conv2d_grad_weight"]
    assert gw.inputs[0] == "x" and len(gw.attrs["channels"]) == 2
    assert "x" in saved_activations(g)
    # backward stops at that layer: no gradient of its input, nothing for frozen params
    assert not [op for op in g.ops if op.type.endswith("_grad_weight") and op is not gw]


def test_shared_trainable_weight_is_a_spec_error():
    fwd = synthetic_graph()
    g = fwd.copy()
    fc = g.ops[-2]
    # a second FC reusing the first's weight, its output unused except by an add to the first
    w = fc.inputs[1]
    g.add_tensor(Tensor("fc2_out", (1, 10), "int8", quant=q()))
    g.add_tensor(Tensor("sum", (1, 10), "int8", quant=q()))
    g.ops.insert(len(g.ops) - 1, Op("fully_connected", "fc2", (fc.inputs[0], w, ""),
                                    ("fc2_out",), {"activation": "none",
                                                   "keep_num_dims": False}))
    deq = g.ops[-1]
    g.ops.insert(len(g.ops) - 1, Op("add", "sum_op", (fc.outputs[0], "fc2_out"), ("sum",),
                                    {"activation": "none"}))
    g.ops[-1] = deq.replace(inputs=("sum",))
    verify(g)
    with pytest.raises(SpecError, match="shared") as e:
        build_training_graph(g, load_spec(f"weight:{fc.name}"))
    assert "\n" not in str(e.value)


# -- IR support for training graphs ---------------------------------------------------------------

def test_bit_tensors_and_prune_keeps_side_effect_ops():
    m = Tensor("m", (1, 5, 5, 3), "bit")
    assert m.nbytes == 10 and Tensor("m1", (9,), "bit").nbytes == 2
    with pytest.raises(ValueError):
        Tensor("m2", (8,), "bit", data=np.ones(8))
    g = build_training_graph(synthetic_graph(), load_spec("bias:last2"))
    assert g.prune().ops == g.ops            # update ops (no outputs) survive pruning


def _replace_op(g: Graph, old: Op, new: Op) -> Graph:
    g = g.copy()
    g.ops = [new if op is old else op for op in g.ops]
    return g


def test_verify_rejects_malformed_training_ops():
    from codegen.errors import ModelError

    g = build_training_graph(synthetic_graph(), load_spec("all,backward=int8,opt=momentum"))
    upd = next(op for op in g.ops if op.type == "sgd_update")
    # an update may only mutate its own parameter/state inputs
    qas = upd.inputs[2]
    assert g.tensors[qas].role == Role.CONSTANT
    bad = _replace_op(g, upd, upd.replace(attrs={**upd.attrs, "updates": (upd.inputs[0], qas)}))
    with pytest.raises(ModelError, match="not a parameter or optimizer state"):
        verify(bad)
    bad = _replace_op(g, upd, upd.replace(attrs={**upd.attrs, "updates": ("x",)}))
    with pytest.raises(ModelError, match="not one of its inputs"):
        verify(bad)
    bad = _replace_op(g, upd, upd.replace(inputs=upd.inputs[:5]))
    with pytest.raises(ModelError, match="slots"):
        verify(bad)
    # int8 mode: a gradient op without its exponent output
    gi = next(op for op in g.ops if op.type == "conv2d_grad_input")
    with pytest.raises(ModelError, match="outputs"):
        verify(_replace_op(g, gi, gi.replace(outputs=gi.outputs[:1])))
    # a mask that is not a bit tensor of y's shape
    am = next(op for op in g.ops if op.type == "act_mask")
    g2 = g.copy()
    g2.tensors = dict(g.tensors)
    g2.tensors[am.outputs[0]] = g.tensors[am.outputs[0]].replace(dtype="int8")
    with pytest.raises(ModelError, match="mask"):
        verify(g2)
    # weight gradient with a channel count that does not match its attr
    gw = next(op for op in g.ops if op.type == "conv2d_grad_weight")
    with pytest.raises(ModelError, match="channels"):
        verify(_replace_op(g, gw, gw.replace(attrs={**gw.attrs, "channels": (0,)})))
