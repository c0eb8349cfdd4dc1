"""The golden training step on training graphs built by codegen.train (executor level).

- every backward op of a real training graph (the bundled digits CNN: conv, depthwise,
  residual add, avg pool, flatten, FC) matches PyTorch autograd of its forward op on the
  dequantized tensors of that very step (fp32 mode, relative error <= 1e-4);
- int8 mode's gradients follow fp32 mode's on the same step;
- determinism, params_sha256 byte order, state only for trainable parameters, fit().
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from codegen import models
from codegen.data import fit_input
from codegen.errors import PockError
from codegen.frontend import load_model
from codegen.golden.training import TrainState, fit, predict, train_step
from codegen.quant import quantize

build = pytest.importorskip("codegen.train.build")
spec_mod = pytest.importorskip("codegen.train.spec")
torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = 1e-4


@pytest.fixture(scope="module")
def digits():
    g = load_model(models.path("digits_cnn.onnx"))
    x_train, y_train = models.digits("train")
    q = quantize(g, x_train[:100])
    return q, fit_input(q, x_train), y_train


def training_graph(q, short: str):
    return build.build_training_graph(q, spec_mod.parse_short(short))


def rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# -- local vector-Jacobian products in PyTorch ---------------------------------------------------

def _deq(graph, name, value):
    t = graph.tensors[name]
    s = t.quant.scale.astype(np.float64)
    zp = t.quant.zero_point
    if t.quant.axis is not None and s.size > 1:
        shape = [1] * value.ndim
        shape[t.quant.axis] = s.size
        s, zp = s.reshape(shape), zp.reshape(shape)
    else:
        s, zp = s[0], int(zp[0])
    return torch.tensor((value.astype(np.float64) - zp) * s, requires_grad=True)


def _pad_nchw(x, padding, value=0.0):
    t, b, left, r = padding
    return F.pad(x.permute(0, 3, 1, 2), (left, r, t, b), value=value)


def _forward(fwd, graph, xs):
    """PyTorch float64 forward of an IR op (before its fused activation), NHWC tensors."""
    a = fwd.attrs
    x = xs[0]
    if fwd.type in ("conv2d", "depthwise_conv2d"):
        w = xs[1]
        if fwd.type == "conv2d":
            groups, wt = x.shape[3] // w.shape[3], w.permute(0, 3, 1, 2)
        else:
            groups, wt = x.shape[3], w[0].permute(2, 0, 1)[:, None]
        y = F.conv2d(_pad_nchw(x, a["padding"]), wt, stride=tuple(a["stride"]),
                     dilation=tuple(a["dilation"]), groups=groups)
        return y.permute(0, 2, 3, 1)
    if fwd.type == "fully_connected":
        return x.reshape(-1, xs[1].shape[1]) @ xs[1].T
    if fwd.type == "avg_pool2d":
        s = F.avg_pool2d(_pad_nchw(x, a["padding"]), tuple(a["filter"]), tuple(a["stride"]),
                         divisor_override=1)
        ones = _pad_nchw(torch.ones_like(x[:1, :, :, :1]), a["padding"])
        count = F.avg_pool2d(ones, tuple(a["filter"]), tuple(a["stride"]), divisor_override=1)
        return (s / count).permute(0, 2, 3, 1)
    if fwd.type == "max_pool2d":
        y = F.max_pool2d(_pad_nchw(x, a["padding"], -np.inf), tuple(a["filter"]),
                         tuple(a["stride"]))
        return y.permute(0, 2, 3, 1)
    if fwd.type == "reshape":
        return x.reshape(graph.tensors[fwd.outputs[0]].shape)
    if fwd.type == "add":
        return xs[0] + xs[1]
    if fwd.type == "mul":
        return xs[0] * xs[1]
    if fwd.type == "concat":
        return torch.cat(xs, dim=a["axis"])
    if fwd.type == "pad":
        flat = [p for pair in reversed(a["pads"]) for p in pair]
        return F.pad(x, flat)
    if fwd.type == "mean":
        return x.mean(dim=tuple(a["axes"]), keepdim=bool(a["keep_dims"]))
    raise AssertionError(f"no reference for {fwd.type}")


def reference(op, graph, env, before):
    """torch.autograd result for one backward op of the fp32 training graph."""
    def val(n):
        return env[n] if n in env else before[n] if n in before else graph.tensors[n].data

    if op.type == "softmax_cross_entropy":
        z = _deq(graph, op.inputs[0], val(op.inputs[0]))
        loss = F.cross_entropy(op.attrs["beta"] * z, torch.tensor(val(op.inputs[1]).astype(
            np.int64).reshape(1)))
        loss.backward()
        return z.grad.numpy(), loss.item()
    if op.type == "mask_grad":
        return np.where(val(op.inputs[1]), val(op.inputs[0]), 0.0), None
    if op.type == "grad_add":
        return val(op.inputs[0]).astype(np.float64) + val(op.inputs[1]), None
    fwd = graph.op_by_name(op.attrs["forward"])
    dy = val(op.inputs[1] if op.type.endswith("_grad_weight") else op.inputs[0])
    if op.type == "bias_grad":
        return dy.astype(np.float64).reshape(-1, dy.shape[-1]).sum(axis=0), None
    if op.type == "softmax_grad":                 # autograd's softmax backward at the int8 y
        y = _deq(graph, fwd.outputs[0], val(fwd.outputs[0])).detach()
        g = torch.ops.aten._softmax_backward_data(torch.tensor(dy, dtype=torch.float64), y,
                                                  y.dim() - 1, torch.float64)
        return op.attrs["beta"] * g.numpy(), None
    xs = [_deq(graph, n, val(n)) for n in fwd.inputs if n]
    if op.type.endswith("_grad_weight"):
        which = 1
    elif op.type in ("add_grad", "mul_grad"):
        which = op.attrs["input"]
    elif op.type == "concat_grad":
        ax, starts, pos = op.attrs["axis"], [], 0
        for n in fwd.inputs:
            starts.append(pos)
            pos += graph.tensors[n].shape[ax]
        which = starts.index(op.attrs["begin"])
    else:
        which = 0
    y = _forward(fwd, graph, xs)
    y.backward(torch.tensor(dy, dtype=torch.float64).reshape(y.shape))
    g = xs[which].grad.numpy()
    if op.type.endswith("_grad_weight") and op.attrs["channels"] is not None:
        g = np.take(g, list(op.attrs["channels"]), axis=3 if fwd.type == "depthwise_conv2d"
                    else 0)
    return g.reshape(graph.tensors[op.outputs[0]].shape), None


def check_local_vjps(tg, xs, ys) -> dict[str, float]:
    """Run one fp32 step and compare every backward op with PyTorch; max error per op type."""
    state = TrainState.from_graph(tg)
    before = {k: v.copy() for k, v in state.values.items()}
    prog = state.program(tg)
    env = prog.run(state, prog.feeds(xs, ys), keep_all=True)
    checked: dict[str, float] = {}
    for op in tg.ops:
        if "mode" not in op.attrs or not op.outputs:          # forward ops, updates
            continue
        out = env[op.outputs[1] if op.type in ("softmax_cross_entropy", "mse_loss")
                  else op.outputs[0]]
        want, loss = reference(op, tg, env, before)
        err = rel_err(out, want)
        checked[op.type] = max(checked.get(op.type, 0.0), err)
        assert err <= TOL, f"{op.name}: relative error {err:.2e}"
        if loss is not None:
            assert abs(float(env[op.outputs[0]][0]) - loss) <= TOL * max(loss, 1e-3)
    return checked


@pytest.mark.parametrize("short", ["all", "bias:all+weight:last2@0.5,opt=momentum"])
def test_every_backward_op_matches_torch_on_the_step(digits, short):
    q, xs, ys = digits
    checked = check_local_vjps(training_graph(q, short), xs[0], ys[0])
    assert {"conv2d_grad_input", "depthwise_conv2d_grad_input", "fully_connected_grad_input",
            "fully_connected_grad_weight", "conv2d_grad_weight", "bias_grad", "avg_pool2d_grad",
            "reshape_grad", "mask_grad", "grad_add", "softmax_cross_entropy"} <= set(checked)


def many_ops_model():
    """A float CNN using every op with a backward rule, quantized by PTQ."""
    from tests.quant.graphs import GraphBuilder

    rng = np.random.default_rng(0)
    b = GraphBuilder((1, 6, 6, 2))

    def w(*shape):
        return (rng.standard_normal(shape) * 0.4).astype(np.float32)

    c1 = b.conv(b.x, w(4, 3, 3, 2), w(4), activation="relu")
    c2 = b.conv(c1, w(4, 3, 3, 4), w(4))
    d = b.dwconv(c1, w(1, 3, 3, 8), w(8), activation="relu6")          # multiplier 2
    m = b.op("mul", [c1, c2], (1, 6, 6, 4), activation="none")
    mp = b.pool("max_pool2d", m, 2)
    ap = b.pool("avg_pool2d", d, 2)                                      # (1, 3, 3, 8)
    cat = b.op("concat", [mp, ap], (1, 3, 3, 12), axis=3, activation="none")
    pd = b.op("pad", [cat], (1, 4, 4, 12), pads=((0, 0), (1, 0), (0, 1), (0, 0)))
    mn = b.op("mean", [pd], (1, 1, 1, 12), axes=(1, 2), keep_dims=True)
    ad = b.op("add", [pd, mn], (1, 4, 4, 12), activation="none")
    f1 = b.fc(b.reshape(ad, (1, 192)), w(16, 192) * 0.3, w(16))
    sm = b.op("softmax", [f1], (1, 16), beta=1.0)
    logits = b.fc(sm, w(5, 16) * 4, w(5))
    g = b.build(logits)
    return quantize(g, rng.standard_normal((64, 6, 6, 2)).astype(np.float32))


def test_many_op_graph_backward_matches_torch():
    q = many_ops_model()
    tg = training_graph(q, "all")
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 6, 6, 2)).astype(np.int8)
    checked = check_local_vjps(tg, x, 2)
    assert {"mul_grad", "max_pool2d_grad", "avg_pool2d_grad", "concat_grad", "pad_grad",
            "mean_grad", "add_grad", "softmax_grad", "depthwise_conv2d_grad_input",
            "depthwise_conv2d_grad_weight", "grad_add", "mask_grad"} <= set(checked)
    # the same graph in int8 mode runs and follows (loss-level sanity)
    t8 = training_graph(q, "all,backward=int8")
    s8 = TrainState.from_graph(t8)
    losses = [train_step(t8, s8, x, 2) for _ in range(3)]
    assert all(np.isfinite(losses))


def test_mse_graph_backward_matches_torch():
    from tests.quant.graphs import GraphBuilder

    rng = np.random.default_rng(2)
    b = GraphBuilder((1, 24))
    h = b.fc(b.x, (rng.standard_normal((12, 24)) * 0.3).astype(np.float32),
             rng.standard_normal(12).astype(np.float32), activation="relu")
    out = b.fc(h, (rng.standard_normal((24, 12)) * 0.3).astype(np.float32),
               rng.standard_normal(24).astype(np.float32))
    q = quantize(b.build(out), rng.standard_normal((64, 24)).astype(np.float32))
    tg = build.build_training_graph(q, spec_mod.spec_from_dict(
        {"loss": "mse", "trainable": [{"layers": "all", "params": "both"}]}))
    x = rng.integers(-128, 128, (1, 24)).astype(np.int8)
    target = rng.integers(-128, 128, (1, 24)).astype(np.int8)
    state = TrainState.from_graph(tg)
    before = {k: v.copy() for k, v in state.values.items()}
    prog = state.program(tg)
    env = prog.run(state, prog.feeds(x, target), keep_all=True)
    loss_op = next(op for op in tg.ops if op.type == "mse_loss")
    y = _deq(tg, loss_op.inputs[0], env[loss_op.inputs[0]])
    ref = F.mse_loss(y, _deq(tg, loss_op.inputs[0], target).detach())
    ref.backward()
    assert abs(float(env[loss_op.outputs[0]][0]) - ref.item()) <= TOL * ref.item()
    assert rel_err(env[loss_op.outputs[1]], y.grad.numpy()) <= TOL
    for op in tg.ops:
        if "forward" in op.attrs and "mode" in op.attrs and op.outputs:
            want, _ = reference(op, tg, env, before)
            assert rel_err(env[op.outputs[0]], want) <= TOL, op.name
    fit_r = fit(tg, state, np.repeat(x, 20, 0), np.repeat(target, 20, 0))
    assert fit_r["loss"][-1] < fit_r["loss"][0]


def test_int8_step_follows_fp32_step(digits):
    q, xs, ys = digits
    short = "all"
    g32, g8 = training_graph(q, short), training_graph(q, short + ",backward=int8")
    # a shifted domain (inverted images): the model errs, so the gradients are not ~0
    # (int8 p resolves 1/256 only: a confident, correct sample has no int8 gradient to speak of)
    xs = (-1 - xs[:8].astype(np.int16)).astype(np.int8)
    worst, used = 1.0, 0
    for i in range(len(xs)):
        s32, s8 = TrainState.from_graph(g32), TrainState.from_graph(g8)
        p32, p8 = s32.program(g32), s8.program(g8)
        e32 = p32.run(s32, p32.feeds(xs[i], ys[i]), keep_all=True)
        if float(e32[p32.loss_tensor][0]) < 0.05:
            continue                      # below the int8 loss gradient's resolution (1/256)
        used += 1
        e8 = p8.run(s8, p8.feeds(xs[i], ys[i]), keep_all=True)
        for op in g8.ops:
            if "mode" not in op.attrs or not op.outputs:         # forward ops, updates
                continue
            k = 1 if op.type == "softmax_cross_entropy" else 0
            name, exp = op.outputs[k], op.outputs[k + 1]
            v8 = e8[name].astype(np.float64) * 2.0 ** int(e8[exp][0])
            if op.type.endswith("_grad_weight"):
                v8 = v8 * g8.tensors[op.inputs[0]].quant.s        # real: acc * 2**e * s_x
            v32 = e32[name].astype(np.float64)
            c = float(v8.ravel() @ v32.ravel() / (np.linalg.norm(v8) * np.linalg.norm(v32)
                                                  + 1e-300))
            worst = min(worst, c)
            assert c > 0.99, f"sample {i} {op.name}: cosine {c:.4f}"
    assert used >= 4 and worst > 0.99


def test_steps_are_deterministic_and_sha256_is_documented(digits):
    q, xs, ys = digits
    for mode in ("fp32", "int8"):
        tg = training_graph(q, f"bias:all+weight:last1,opt=momentum,backward={mode}")
        a, b = TrainState.from_graph(tg), TrainState.from_graph(tg)
        h0 = hashlib.sha256(b"".join(
            np.ascontiguousarray(tg.tensors[n].data).astype(tg.tensors[n].dtype).tobytes()
            for n in a.parameters)).hexdigest()
        assert a.params_sha256() == h0
        la = [train_step(tg, a, xs[i], ys[i]) for i in range(8)]
        lb = [train_step(tg, b, xs[i], ys[i]) for i in range(8)]
        assert la == lb and a.params_sha256() == b.params_sha256() != h0
        assert all(isinstance(v, float) for v in la)
        for name in a.values:
            assert np.array_equal(a[name], b[name]) and a[name].dtype == b[name].dtype


def test_state_only_for_trainable_parameters(digits):
    q, _, _ = digits
    tg = training_graph(q, "bias:last2+weight:last1@0.5,opt=adam")
    st = TrainState.from_graph(tg)
    meta = tg.metadata["training"]
    params = [p["tensor"] for p in meta["parameters"]]
    assert st.parameters == params
    assert set(st.values) == set(params) | {s["tensor"] for s in meta["state"]}
    fc_w = next(p for p in meta["parameters"] if p["channels"] is not None)
    own = [s for s in meta["state"] if s.get("param") == fc_w["tensor"]]
    moments = [s for s in own if s["kind"] != "saturated"]
    assert sorted(s["kind"] for s in moments) == ["adam_m", "adam_v"]
    assert all(st[s["tensor"]].shape[0] == len(fc_w["channels"]) for s in moments)
    counters = [s for s in own if s["kind"] == "saturated"]      # one int32 count per param
    assert len(counters) == 1 and st[counters[0]["tensor"]].tolist() == [0]
    exported = st.export()
    assert list(exported) == params
    frozen = [n for n, t in tg.tensors.items() if t.is_const and t.role.value == "weight"
              and n not in params]
    assert frozen and not set(frozen) & set(st.values)


def test_only_trained_channels_and_params_change(digits):
    q, xs, ys = digits
    tg = training_graph(q, "weight:last1@0.3,lr=0.5")
    st = TrainState.from_graph(tg)
    (p,) = tg.metadata["training"]["parameters"]
    w0 = st[p["tensor"]].copy()
    for i in range(5):
        train_step(tg, st, xs[i], ys[i])
    w1 = st[p["tensor"]]
    changed = sorted(set(np.nonzero(w1 != w0)[0].tolist()))
    assert changed and set(changed) <= set(p["channels"])


@pytest.mark.parametrize("short,epochs", [("bias:all+weight:last2,lr=0.002", 2),
                                          ("bias:all+weight:last2,opt=momentum,lr=0.0005", 2),
                                          ("bias:all+weight:last2,opt=adam,lr=0.0005", 2),
                                          ("bias:all+weight:last2,lr=0.002,backward=int8", 2),
                                          ("bias:all+weight:last2,opt=momentum,lr=0.0005"
                                           + ",backward=int8", 2)])
def test_fit_reduces_the_loss_on_a_shifted_domain(digits, short, epochs):
    q, xs, ys = digits
    shifted = (-1 - xs[:96].astype(np.int16)).clip(-128, 127).astype(np.int8)   # inverted
    tg = training_graph(q, short)
    st = TrainState.from_graph(tg)
    before = float((predict(tg, st, shifted).argmax(1) == ys[:96]).mean())
    r = fit(tg, st, shifted, ys[:96], epochs=epochs + 1, shuffle=True, seed=1)
    assert r["steps"] == 96 * (epochs + 1) and len(r["loss"]) == r["steps"]
    assert r["epoch_loss"][-1] < r["epoch_loss"][0]
    after = float((predict(tg, st, shifted).argmax(1) == ys[:96]).mean())
    assert after > before and r["params_sha256"] == st.params_sha256()


def test_bad_inputs_are_one_line_errors(digits):
    q, xs, ys = digits
    tg = training_graph(q, "bias:last1")
    st = TrainState.from_graph(tg)
    with pytest.raises(PockError):
        train_step(tg, st, xs[0].astype(np.float32), 1)
    with pytest.raises(PockError, match="label 10"):
        train_step(tg, st, xs[0], 10)
    with pytest.raises(PockError):
        fit(tg, st, xs[:3], ys[:2])
