"""The training-graph builder on real models: sparsity, channel selection, residual joins,
reordering, optimizer state, int8 exponents, spec errors (docs/training.md)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from codegen.errors import SpecError
from codegen.ir import PARAMETRIC_OPS, Role, verify
from codegen.ir.ops import TRAINING_OP_SPECS, UPDATE_INPUTS
from codegen.train import (
    build_training_graph,
    format_training_graph,
    load_spec,
    saved_activations,
    training_summary,
)
from codegen.train.report import backward_ops, phase, update_ops
from codegen.train.spec import Schedule

PROJECT = Path(__file__).resolve().parents[2]
MODELS_DIR = PROJECT.parent / "shared" / "models"
DIGITS_ONNX = PROJECT / "codegen" / "models" / "digits_cnn.onnx"
DIGITS_NPZ = PROJECT / "codegen" / "models" / "digits.npz"

_cache: dict[str, object] = {}


def shared_model(name: str):
    path = MODELS_DIR / name
    if not path.exists():
        pytest.skip(f"shared model {path} is not present on this machine")
    if name not in _cache:
        from codegen.frontend import load_model

        _cache[name] = load_model(path)
    return _cache[name]


def digits_int8():
    """The bundled digits CNN (residual add) quantized with 64 training images."""
    if "digits" not in _cache:
        from codegen.frontend import load_model
        from codegen.quant import quantize

        d = np.load(DIGITS_NPZ)
        x = (d["images"][d["train_idx"][:64]].astype(np.float32) / 16.0)[..., None]
        _cache["digits"] = quantize(load_model(DIGITS_ONNX), x)
    return _cache["digits"]


def build(graph, short: str, **kw):
    g = build_training_graph(graph, load_spec(short), **kw)
    verify(g)
    return g


def ops_of(g, type_: str):
    return [op for op in g.ops if op.type == type_]


def producer_index(g, name: str) -> int:
    return next(i for i, op in enumerate(g.ops) if name in op.outputs)


# -- sparsity: bias-only training ---------------------------------------------------------------

def test_bias_last4_vww_has_no_weight_gradient_and_keeps_no_frozen_input():
    fwd = shared_model("vww_96_int8.tflite")
    g = build(fwd, "bias:last4")
    types = {op.type for op in g.ops}
    assert not any(t.endswith("_grad_weight") for t in types)
    layers = [op for op in fwd.ops if op.type in PARAMETRIC_OPS]
    trained = {u["op"] for u in g.metadata["training"]["layers"]}
    assert trained == {op.name for op in layers[-4:]}
    assert all(u["bias"] and not u["weight"] for u in g.metadata["training"]["layers"])
    # no backward/update op reads the input of a frozen layer ...
    frozen_inputs = {op.inputs[0] for op in layers if op.name not in trained}
    read_late = {n for op in g.ops if phase(op) in ("backward", "update") for n in op.inputs}
    assert not frozen_inputs & read_late
    # ... nor any int8 activation at all: bias-only layers need none; ReLUs need only masks
    saved = saved_activations(g)
    assert saved and all(g.tensors[n].dtype == "bit" for n in saved)
    for op in ops_of(g, "act_mask"):
        m = g.tensors[op.outputs[0]]
        assert m.dtype == "bit" and m.nbytes == math.ceil(m.size / 8)
        assert m.shape == g.tensors[op.inputs[0]].shape
        assert op.attrs["lo"] < op.attrs["hi"]
    # backward stops at the earliest trainable layer: no gradient of its input
    first = layers[-4]
    assert not [op for op in backward_ops(g) if op.attrs.get("forward") == first.name
                and op.type.endswith("_grad_input")]
    assert len(update_ops(g)) == 4 + 1            # 4 bias updates + the step counter


def test_bias_only_vww_update_params_and_metadata():
    g = build(shared_model("vww_96_int8.tflite"), "bias:last4")
    meta = g.metadata["training"]
    assert {p["role"] for p in meta["parameters"]} == {"bias"}
    for p in meta["parameters"]:
        t = g.tensors[p["tensor"]]
        assert t.role == Role.BIAS and t.dtype == "int32" and t.is_const
    # plain SGD: no buffers, a saturation counter per parameter
    assert [s["kind"] for s in meta["state"]] == ["step"] + ["saturated"] * 4
    assert g.outputs[0] == meta["outputs"]["loss"] and g.tensors[g.outputs[0]].shape == (1,)
    assert g.inputs[-1] == meta["inputs"]["label"]
    json.dumps(meta)                                            # plain Python values
    label = g.tensors[g.inputs[-1]]
    assert (label.dtype, label.shape) == ("int32", (1,))


# -- channel-sparse weight updates -------------------------------------------------------------

@pytest.mark.parametrize("model,short", [
    ("kws_ref_model.tflite", "weight:last2@0.25"),
    ("kws_ref_model.tflite", "weight:-3@0.25,opt=momentum"),     # a depthwise layer
    ("vww_96_int8.tflite", "weight:last2@0.25,opt=momentum"),
])
def test_channel_ratio_restricts_weight_gradients(model, short):
    fwd = shared_model(model)
    g = build(fwd, short)
    grads = [op for op in g.ops if op.type.endswith("_grad_weight")]
    assert len(grads) == len(g.metadata["training"]["layers"])
    for op in grads:
        layer = fwd.op_by_name(op.attrs["forward"])
        w = fwd.tensors[layer.inputs[1]]
        axis = 3 if layer.type == "depthwise_conv2d" else 0
        c = w.shape[axis]
        k = math.ceil(0.25 * c)
        ch = op.attrs["channels"]
        assert len(ch) == k and list(ch) == sorted(set(ch)) and max(ch) < c
        dw = g.tensors[op.outputs[0]]
        want = list(w.shape)
        want[axis] = k
        assert list(dw.shape) == want and dw.dtype == "float32"
        # the update uses the same channels; its QAS and buffers have k channels
        upd = next(u for u in ops_of(g, "sgd_update") if u.inputs[0] == w.name)
        slot = dict(zip(UPDATE_INPUTS, upd.inputs))
        assert upd.attrs["channels"] == ch and upd.attrs["channel_axis"] == axis
        assert slot["grad"] == dw.name
        assert g.tensors[slot["qas"]].shape == (k,)
        if "momentum" in short:
            assert list(g.tensors[slot["buf1"]].shape) == want
        # the chosen channels are those with the largest L1 norms
        norms = np.abs(w.data.astype(np.int64)).sum(
            axis=tuple(a for a in range(w.data.ndim) if a != axis))
        assert norms[list(ch)].min() >= np.delete(norms, list(ch)).max(initial=0)


def test_qas_constants_fp32():
    fwd = shared_model("kws_ref_model.tflite")
    g = build(fwd, "all")
    for upd in ops_of(g, "sgd_update"):
        layer = fwd.op_by_name(upd.attrs["forward"])
        x, w = (fwd.tensors[n] for n in layer.inputs[:2])
        axis = 3 if layer.type == "depthwise_conv2d" else 0
        s_w = np.broadcast_to(w.quant.scale.astype(np.float64), (w.shape[axis],))
        qas = g.tensors[upd.inputs[UPDATE_INPUTS.index("qas")]].data
        assert qas.dtype == np.float32
        want = 1.0 / s_w if upd.attrs["kind"] == "weight" else 1.0 / (x.quant.s * s_w)
        np.testing.assert_allclose(qas, want.astype(np.float32), rtol=1e-6)
        assert g.tensors[upd.inputs[UPDATE_INPUTS.index("qas")]].role == Role.CONSTANT


# -- residual joins and operator reordering ----------------------------------------------------

def test_all_on_digits_residual_grad_add():
    fwd = digits_int8()
    g = build(fwd, "all")
    adds = ops_of(g, "grad_add")
    assert len(adds) == 1
    # the residual source is the tensor with two consumers (the depthwise conv and the add)
    fanout = [t for t in fwd.tensors if len(fwd.consumers(t)) > 1]
    assert len(fanout) == 1
    assert g.tensors[adds[0].outputs[0]].shape == fwd.tensors[fanout[0]].shape
    joined = adds[0].outputs[0]
    # the summed gradient is what flows on into the producer of the residual source
    prod = fwd.producer(fanout[0])
    assert any(joined in op.inputs for op in g.ops if op.attrs.get("forward") == prod.name)
    n_layers = sum(op.type in PARAMETRIC_OPS for op in fwd.ops)
    assert len(ops_of(g, "sgd_update")) == 2 * n_layers
    # the first layer reads the graph input for its weight gradient, computes no input grad
    first = next(op for op in fwd.ops if op.type in PARAMETRIC_OPS)
    assert not [op for op in g.ops if op.attrs.get("forward") == first.name
                and op.type.endswith("_grad_input")]


@pytest.mark.parametrize("source", ["digits", "resnet"])
def test_reorder_places_updates_right_after_their_gradients(source):
    fwd = digits_int8() if source == "digits" else shared_model("pretrainedResnet_quant.tflite")
    g = build(fwd, "all,opt=momentum")
    assert g.metadata["training"]["reorder"] is True
    for upd in ops_of(g, "sgd_update"):
        i = g.ops.index(upd)
        grad = upd.inputs[1]
        assert producer_index(g, grad) == i - 1, upd.name
        # no op after the update reads the gradient: it never outlives its update
        assert not [op for op in g.ops[i + 1:] if grad in op.inputs]
        # nothing after the update reads the parameter's old value
        assert not [op for op in g.ops[i + 1:] if upd.inputs[0] in op.inputs
                    and op.type != "sgd_update"]
    assert g.ops[-1].type == "step_counter"


def test_no_reorder_puts_updates_at_the_end():
    fwd = digits_int8()
    g = build(fwd, "all", reorder=False)
    assert g.metadata["training"]["reorder"] is False
    kinds = [phase(op) for op in g.ops]
    first_update = kinds.index("update")
    assert all(k == "update" for k in kinds[first_update:])
    assert len(kinds) - first_update == 2 * sum(op.type in PARAMETRIC_OPS for op in fwd.ops) + 1
    # same ops either way, only the order differs
    g2 = build(fwd, "all")
    assert sorted(op.type for op in g.ops) == sorted(op.type for op in g2.ops)
    # with reordering the largest set of live weight gradients is smaller
    def live_weight_grads(graph):
        grads = {op.outputs[0] for op in graph.ops if op.type.endswith("_grad_weight")}
        last = {n: max(i for i, op in enumerate(graph.ops) if n in op.inputs) for n in grads}
        first = {n: producer_index(graph, n) for n in grads}
        return max(sum(first[n] <= i <= last[n] for n in grads) for i in range(len(graph.ops)))
    assert live_weight_grads(g2) == 1 < live_weight_grads(g)


# -- optimizer state -----------------------------------------------------------------------------

def test_adam_state_only_for_trainable_parameters():
    fwd = shared_model("kws_ref_model.tflite")
    g = build(fwd, "bias:last2+weight:-1@0.5,opt=adam")
    meta = g.metadata["training"]
    params = {p["tensor"]: p for p in meta["parameters"]}
    assert len(params) == 3                      # 2 biases + 1 weight
    state = [t for t in g.tensors.values() if t.role == Role.OPTIMIZER_STATE]
    assert {t.name for t in state} == {s["tensor"] for s in meta["state"]}
    per_param = [s for s in meta["state"] if s["param"] is not None]
    assert sorted(s["kind"] for s in per_param) == (["adam_m"] * 3 + ["adam_v"] * 3
                                                    + ["saturated"] * 3)
    assert {s["param"] for s in per_param} == set(params)
    shared = sorted(s["kind"] for s in meta["state"] if s["param"] is None)
    assert shared == ["adam_pows", "step"]
    # bytes: m and v of each trained parameter (restricted channels) + pows + step
    fc = fwd.op_by_name(meta["layers"][-1]["op"])
    c_fc = fwd.tensors[fc.inputs[1]].shape
    want = 0
    for p in params.values():
        n = fwd.tensors[p["tensor"]].size
        if p["channels"] is not None:
            n = n // c_fc[0] * len(p["channels"])
        want += 2 * 4 * n + 4                    # m, v and the saturation counter
    want += 2 * 4 + 4
    assert sum(t.nbytes for t in state) == want == training_summary(g)["optimizer_state_bytes"]
    assert all(t.is_const and not t.data.any() for t in state if t.name.endswith(("_m", "_v")))
    for upd in ops_of(g, "adam_update"):
        slot = dict(zip(UPDATE_INPUTS, upd.inputs))
        assert slot["buf1"] and slot["buf2"] and slot["pows"] and not slot["grad_exp"]
        assert slot["pows"] not in upd.attrs["updates"]
        assert set(upd.attrs["updates"]) == {slot["param"], slot["buf1"], slot["buf2"],
                                             slot["saturated"]}


def test_master_weights_schedule_and_accumulation_state():
    fwd = shared_model("kws_ref_model.tflite")
    spec = dataclasses.replace(
        load_spec("weight:-1@0.25,opt=momentum,master_weights=fp32,accumulate=4"),
        schedule=Schedule(name="step", step_size=10, gamma=0.5))
    g = build_training_graph(fwd, spec)
    (upd,) = ops_of(g, "sgd_update")
    slot = dict(zip(UPDATE_INPUTS, upd.inputs))
    w = fwd.tensors[slot["param"]]
    master = g.tensors[slot["master"]]
    ch = list(upd.attrs["channels"])
    np.testing.assert_array_equal(master.data, w.data[ch].astype(np.float32))
    assert g.tensors[slot["accum"]].shape == master.shape
    assert slot["step"] and slot["lr"] and upd.attrs["accumulate"] == 4
    step = g.ops[-1]
    assert step.type == "step_counter" and step.attrs["schedule"] == "step"
    assert set(step.attrs["updates"]) == {slot["step"], slot["lr"]}
    assert g.tensors[slot["lr"]].data[0] == np.float32(0.01)


def test_cosine_schedule_state_and_attrs(tmp_path):
    """A YAML cosine schedule: the step_counter's attrs, lr_t starting at the golden lr of
    update 0 (the warmup's first value, or lr itself without warmup)."""
    from codegen.golden.train_optim import cosine_lr

    p = tmp_path / "spec.yaml"
    for warmup, lr0 in ((4, np.float32(0.05) * np.float32(1) / np.float32(4)),
                        (0, np.float32(0.05))):
        p.write_text("trainable: [{layers: last 2, params: both}]\n"
                     "optimizer: {name: sgd, lr: 0.05, momentum: 0.9}\n"
                     f"schedule: {{name: cosine, total_steps: 40, warmup_steps: {warmup}, "
                     "min_lr: 0.001}\n")
        spec = load_spec(p)
        assert spec.schedule == Schedule(name="cosine", warmup_steps=warmup, total_steps=40,
                                         min_lr=0.001)
        g = build_training_graph(digits_int8(), spec)
        verify(g)
        step = g.ops[-1]
        assert step.type == "step_counter"
        a = step.attrs
        assert (a["schedule"], a["total_steps"], a["warmup_steps"], a["min_lr"]) == \
            ("cosine", 40, warmup, 0.001)
        lr_t = g.tensors[step.inputs[1]]
        assert lr_t.data.dtype == np.float32 and lr_t.data[0] == lr0 == \
            cosine_lr(0, 0.05, 40, warmup, 0.001)
        assert g.metadata["training"]["schedule"] == {"name": "cosine", "step_size": 0,
                                                      "gamma": 1.0, "warmup_steps": warmup,
                                                      "total_steps": 40, "min_lr": 0.001}


@pytest.mark.parametrize("schedule", ["{name: step, step_size: 10, gamma: 0.5}",
                                      "{name: warmup, warmup_steps: 3}",
                                      "{name: cosine, total_steps: 50, warmup_steps: 5}"])
def test_schedules_need_fp32_backward(tmp_path, schedule):
    """The int8 backward folds a constant lr into its multipliers: every other schedule is a
    one-line SpecError from the builder (the spec itself parses)."""
    p = tmp_path / "spec.yaml"
    p.write_text(f"trainable: [{{layers: last 2}}]\nbackward: int8\nschedule: {schedule}\n")
    spec = load_spec(p)
    with pytest.raises(SpecError) as e:
        build_training_graph(digits_int8(), spec)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p)), msg
    assert f"schedule '{spec.schedule.name}' needs backward: fp32" in msg, msg


# -- int8 backward ------------------------------------------------------------------------------

def test_int8_mode_has_exponent_tensors():
    fwd = digits_int8()
    g = build(fwd, "all,backward=int8,opt=momentum")
    assert g.metadata["training"]["mode"] == "int8"
    n_grad_ops = 0
    for op in g.ops:
        spec = TRAINING_OP_SPECS.get(op.type)
        if spec is None or not spec.grad_outputs:
            continue
        n_grad_ops += 1
        assert op.attrs["mode"] == "int8"
        assert len(op.outputs) == spec.n_outputs + 1
        grad, exp = (g.tensors[n] for n in op.outputs[-2:])
        assert (exp.dtype, exp.shape) == ("int32", (1,))
        want = "int32" if op.type.endswith("_grad_weight") or op.type == "bias_grad" else "int8"
        assert grad.dtype == want, op.name
    assert n_grad_ops > 10
    for upd in ops_of(g, "sgd_update"):
        slot = dict(zip(UPDATE_INPUTS, upd.inputs))
        assert g.tensors[slot["grad_exp"]].shape == (1,)
        mult, shift = g.tensors[slot["qas"]], g.tensors[slot["qas_shift"]]
        assert mult.dtype == shift.dtype == "int32" and mult.role == Role.CONSTANT
        assert g.tensors[slot["buf1"]].dtype == "int32"
    loss = ops_of(g, "softmax_cross_entropy")[0]
    table = g.tensors[loss.inputs[2]].data
    np.testing.assert_array_equal(
        table, (-np.log(np.maximum(np.arange(256), 0.5) / 256)).astype(np.float32))


def test_loss_tables_and_fused_softmax():
    fwd = shared_model("kws_ref_model.tflite")
    g = build(fwd, "bias:last1")
    (loss,) = ops_of(g, "softmax_cross_entropy")
    softmax = next(op for op in fwd.ops if op.type == "softmax")
    assert loss.inputs[0] == softmax.inputs[0]          # the logits: softmax fused
    s = fwd.tensors[softmax.inputs[0]].quant.s
    table = g.tensors[loss.inputs[2]].data
    assert table.dtype == np.float32 and table[255] == 1.0
    np.testing.assert_array_equal(
        table, np.exp(np.float64(np.float32(s)) * (np.arange(256) - 255.0)).astype(np.float32))
    assert g.outputs == ["loss", *fwd.outputs]


def test_mse_on_ad01():
    fwd = shared_model("ad01_int8.tflite")
    g = build(fwd, "bias:last2,loss=mse")
    (loss,) = ops_of(g, "mse_loss")
    target = g.tensors[loss.inputs[1]]
    out = fwd.tensors[fwd.outputs[0]]
    assert target.name in g.inputs and g.metadata["training"]["inputs"]["target"] == target.name
    assert (target.shape, target.dtype, target.quant) == (out.shape, out.dtype, out.quant)


# -- every model, both modes: the verifier accepts the graph ----------------------------------------

@pytest.mark.parametrize("model,short", [
    ("vww_96_int8.tflite", "all,opt=momentum"),
    ("vww_96_int8.tflite", "all,backward=int8"),
    ("kws_ref_model.tflite", "bias:all+weight:last2@0.5,opt=adam,master_weights=fp32"),
    ("pretrainedResnet_quant.tflite", "all,backward=int8,opt=momentum"),
    ("pretrainedResnet_quant.tflite", "bias:last4"),
    ("ad01_int8.tflite", "all,loss=mse,opt=momentum"),
    ("ad01_int8.tflite", "weight:last3@0.25,loss=mse,backward=int8"),
])
def test_verify_accepts_training_graphs(model, short):
    g = build(shared_model(model), short)
    assert g.ops[-1].type == "step_counter"
    dump = format_training_graph(g)
    assert "saved for backward" in dump and len(dump.splitlines()) > len(g.ops)
    # every gradient computed is consumed (dead-code elimination)
    used = {n for op in g.ops for n in op.inputs}
    for t in g.tensors.values():
        if t.role == Role.GRADIENT:
            assert t.name in used, t.name


# -- spec errors: one line ---------------------------------------------------------------------

@pytest.mark.parametrize("model,short,words", [
    ("kws_ref_model.tflite", "weight:conv_99", "unknown layer 'conv_99'"),
    ("kws_ref_model.tflite", "weight:42", "layer index 42 out of range"),
    ("kws_ref_model.tflite", "weight:last2@0", "channel ratio"),
    ("kws_ref_model.tflite", "weight:last2@1.5", "channel ratio"),
    ("kws_ref_model.tflite", "weight:last2@-0.25", "channel ratio"),
    ("kws_ref_model.tflite", "bias:last99", "trainable layers"),
    ("ad01_int8.tflite", "bias:last2", "cross_entropy"),
    ("kws_ref_model.tflite", "all,opt=adam,backward=int8", "adam"),
    ("kws_ref_model.tflite", "all,master_weights=fp32,backward=int8", "master_weights"),
    ("kws_ref_model.tflite", "all,accumulate=2,backward=int8", "accumulate"),
    ("kws_ref_model.tflite", "all,weight_decay=0.1", "weight_decay"),
    ("kws_ref_model_float32.tflite", "bias:last2", "quantize"),
    ("kws_ref_model_float32.tflite", "bias:last2,loss=mse", "quantize"),
])
def test_bad_specs_raise_one_line_spec_errors(model, short, words):
    fwd = shared_model(model)
    with pytest.raises(SpecError) as e:
        build_training_graph(fwd, load_spec(short))
    msg = str(e.value)
    assert "\n" not in msg and words in msg, msg


def test_resolve_accepts_a_float_model_the_builder_does_not():
    from codegen.train import resolve

    fwd = shared_model("kws_ref_model_float32.tflite")
    (u,) = resolve(load_spec("weight:last1@0.5"), fwd)
    assert u.weight and len(u.channels) == 6
    with pytest.raises(SpecError, match="quantize"):
        build_training_graph(fwd, load_spec("weight:last1@0.5"))


def test_empty_trainable_set_is_a_spec_error(tmp_path):
    fwd = shared_model("kws_ref_model.tflite")
    p = tmp_path / "spec.yaml"
    p.write_text("loss: cross_entropy\ntrainable: []\n")
    with pytest.raises(SpecError, match="trainable set is empty"):
        load_spec(p)
    # resolving to nothing (bias of layers without bias) is empty too
    g = fwd.copy()
    g.ops = [op.replace(inputs=op.inputs[:2]) if op.type in PARAMETRIC_OPS else op
             for op in g.ops]
    with pytest.raises(SpecError, match="empty") as e:
        build_training_graph(g.prune(), load_spec("bias:last2"))
    assert "\n" not in str(e.value)


def test_unreachable_trainable_layer_is_a_spec_error():
    fwd = shared_model("kws_ref_model.tflite")
    # the model output becomes the reshape's (1, 64): the final FC no longer reaches the loss
    g2 = fwd.copy()
    g2.outputs = [fwd.ops[-3].outputs[0]]
    with pytest.raises(SpecError) as e:
        build_training_graph(g2, load_spec("weight:last1,loss=mse"))
    assert "does not reach the loss" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text", [
    "bias",                       # no ':'
    "bias:last2@x",               # ratio not a number
    "bias:last2,lr=abc",
    "bias:last2,lr=-1",
    "bias:last2,frobnicate=1",
    "bias:last2,opt=rmsprop",
    "bias:last2,loss=hinge",
    "bias:last2,backward=int4",
    "bias:last2,momentum=1.5",
    "nope:last2",
    "bias:last2,accumulate=0",
    "bias:last2,schedule=cosine",   # cosine needs total_steps
    "bias:last2,schedule=cosine,total_steps=x",
    "bias:last2,schedule=cosine,total_steps=10,min_lr=lots",
    "bias:last2,schedule=sometimes",
])
def test_short_spec_errors_are_one_line(text):
    with pytest.raises(SpecError) as e:
        load_spec(text)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--train")


def test_short_form_schedules_equal_yaml(tmp_path):
    for short, yaml_sched in [
            ("schedule=cosine,total_steps=100,warmup_steps=10,min_lr=0.001",
             "{name: cosine, total_steps: 100, warmup_steps: 10, min_lr: 0.001}"),
            ("schedule=step,step_size=20,gamma=0.5", "{name: step, step_size: 20, gamma: 0.5}"),
            ("schedule=warmup,warmup_steps=5", "{name: warmup, warmup_steps: 5}")]:
        p = tmp_path / "s.yaml"
        p.write_text(f"trainable: [{{layers: last 2, params: bias}}]\n"
                     f"optimizer: {{name: sgd, lr: 0.01}}\nschedule: {yaml_sched}\n")
        a, b = load_spec(f"bias:last2,lr=0.01,{short}"), load_spec(str(p))
        assert a.schedule == b.schedule and a.schedule.name != "constant"


@pytest.mark.parametrize("yaml_text,words", [
    ("loss: [unclosed\n", "not valid YAML"),
    ("- just a list\n", "mapping"),
    ("trainable: [{layers: last 2, params: bias}]\nlosss: mse\n", "unknown key"),
    ("trainable: [{layers: last 2, params: bias, channels: 2}]\n", "channel ratio"),
    ("trainable: [{params: bias}]\n", "no 'layers'"),
    ("trainable: [{layers: last 2}]\noptimizer: {name: sgd, lr: fast}\n", "lr must be a number"),
    ("trainable: [{layers: last 2}]\nschedule: {name: step}\n", "step_size"),
    ("trainable: [{layers: last 2}]\nschedule: {name: cosine}\n",
     "schedule 'cosine' needs total_steps >= 1"),
    ("trainable: [{layers: last 2}]\nschedule: {name: cosine, total_steps: 0}\n",
     "schedule 'cosine' needs total_steps >= 1"),
    ("trainable: [{layers: last 2}]\nschedule: {name: cosine, total_steps: 2.5}\n",
     "total_steps must be an integer"),
    ("trainable: [{layers: last 2}]\nschedule: {name: cosine, total_steps: -3}\n",
     "total_steps = -3 is out of range"),
    (("trainable: [{layers: last 2}]\n"
      "schedule: {name: cosine, total_steps: 10, warmup_steps: 10}\n"),
     "needs warmup_steps < total_steps (got 10 >= 10)"),
    ("trainable: [{layers: last 2}]\nschedule: {name: cosine, total_steps: 10, min_lr: -0.001}\n",
     "min_lr = -0.001 is out of range"),
    (("trainable: [{layers: last 2}]\noptimizer: {name: sgd, lr: 0.01}\n"
      "schedule: {name: cosine, total_steps: 10, min_lr: 0.02}\n"),
     "needs min_lr <= the optimizer's lr (got min_lr 0.02 > lr 0.01)"),
    ("trainable: [{layers: last 2}]\nschedule: {name: cosine, total_steps: 10, decay: 0.1}\n",
     "unknown schedule key(s) ['decay']"),
    ("trainable: [{layers: last 2}]\nmaster_weights: fp16\n", "master_weights"),
])
def test_yaml_spec_errors_are_one_line(tmp_path, yaml_text, words):
    p = tmp_path / "spec.yaml"
    p.write_text(yaml_text)
    with pytest.raises(SpecError) as e:
        load_spec(p)
    msg = str(e.value)
    assert "\n" not in msg and words in msg and str(p) in msg, msg


def test_bias_updates_carry_the_forward_safe_limit():
    """Each trained int32 bias saturates inside the range where its layer's forward int32
    accumulator cannot overflow (golden.train_optim.forward_bias_limit)."""
    from codegen.golden.train_optim import forward_bias_limit
    from tests.render.helpers import digits_int8

    fwd = digits_int8()
    g = build(fwd, "bias:all,opt=sgd,lr=0.1")
    ups = ops_of(g, "sgd_update")
    assert ups
    for upd in ups:
        layer = fwd.op_by_name(upd.attrs["forward"])
        w, x = fwd.tensors[layer.inputs[1]], fwd.tensors[layer.inputs[0]]
        taps = w.shape[1] * w.shape[2] if layer.type == "depthwise_conv2d" else \
            int(np.prod(w.shape[1:]))
        zp = int(x.quant.zero_point[0])
        assert upd.attrs["bias_limit"] == forward_bias_limit(taps, zp)
        assert upd.attrs["bias_limit"] + taps * 127 * max(127 - zp, zp + 128) == 2**31 - 1
