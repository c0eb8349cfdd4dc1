"""The whole fp32 backward of a training graph equals PyTorch autograd on the dequantized model.

Per-op gradient checks live in tests/golden; this test checks their composition: loss fusion,
masks, residual gradient sums, reshape/pool chains and the sparse selection. PyTorch recomputes
each layer in float on the dequantized int8 tensors and uses the golden int8 value of its output
(a straight-through estimator masked like pockengine's `act_mask`), so the only difference left
is float rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.torch_mirror import deq, float_op, is_forward


def torch_gradients(graph, env, x_q, label):
    """Parameter gradients of PyTorch autograd; forward values pinned to the golden int8 ones."""
    params: dict[str, torch.Tensor] = {}

    def param(name):
        if name not in params:
            t = graph.tensors[name]
            params[name] = torch.tensor(deq(t, np.asarray(env.get(name, t.data))),
                                        dtype=torch.float64, requires_grad=True)
        return params[name]

    vals: dict[str, torch.Tensor] = {}
    xin = graph.tensors[graph.inputs[0]]
    vals[xin.name] = torch.tensor(deq(xin, x_q.reshape(xin.shape)), dtype=torch.float64)
    for op in graph.ops:
        if not is_forward(op):
            continue
        y = float_op(graph, op, vals, param)
        out = graph.tensors[op.outputs[0]]
        golden = torch.tensor(deq(out, env[out.name].reshape(out.shape)), dtype=torch.float64)
        mask = torch.ones_like(golden)
        act = op.attrs.get("activation", "none")
        if act != "none":
            mask_name = f"{out.name}:mask"
            if mask_name in env:  # absent where no trainable layer lies upstream
                m = np.asarray(env[mask_name]).reshape(out.shape).astype(np.float64)
                mask = torch.tensor(m)
        vals[out.name] = golden + (y - y.detach()) * mask
    logits = vals[graph.metadata["training"]["loss_input"]]
    loss = F.cross_entropy(logits.reshape(1, -1), torch.tensor([int(label)]))
    loss.backward()
    return {n: p.grad.numpy() for n, p in params.items()}, float(loss.detach())


def rel_err(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


@pytest.mark.parametrize("spec", ["all", "bias:all+weight:last2", "bias:last3",
                                  "weight:last2@0.5"])
def test_training_graph_gradients_match_torch(spec):
    import codegen.models as bundled
    from codegen.data import fit_input
    from codegen.frontend import load_model
    from codegen.golden.training import TrainState
    from codegen.quant import quantize
    from codegen.train import build_training_graph
    from codegen.train.spec import load_spec

    graph = quantize(load_model(bundled.path("digits_cnn.onnx")), bundled.digits("train")[0][:100])
    # a learning rate so small that no parameter moves: the gradients are those of one state
    tg = build_training_graph(graph, load_spec(f"{spec},opt=sgd,lr=1e-30"))
    x, y = bundled.digits("test")
    xq = fit_input(graph, x)
    # Samples the model is unsure about: where p(label) ~ 1, p - 1 in float32 cancels and the
    # relative error of every gradient grows to ~1e-7 / (1 - p), in PyTorch's float32 as here.
    from codegen import golden

    out_t = graph.tensors[graph.outputs[0]]
    z = (golden.run(graph, xq)[0].astype(np.float64) - out_t.quant.zp) * out_t.quant.s
    p = np.exp(z - z.max(1, keepdims=True))
    p_label = (p / p.sum(1, keepdims=True))[np.arange(len(y)), y]
    picked = np.flatnonzero(p_label < 0.9)[:6]
    assert len(picked) >= 3
    checked = 0
    for i in picked:
        state = TrainState.from_graph(tg)
        prog = state.program(tg)
        env = prog.run(state, prog.feeds(xq[i], y[i]), keep_all=True)
        grads, loss = torch_gradients(tg, env, xq[i], y[i])
        assert abs(float(env["loss"][0]) - loss) < 1e-4 * max(1.0, abs(loss))
        for op in tg.ops:
            if op.type != "sgd_update":
                continue
            pname, gname = op.inputs[0], op.inputs[1]
            ours = np.asarray(env[gname], dtype=np.float64)
            ref = grads[pname]
            ch = op.attrs.get("channels")
            if ch is not None:
                axis = op.attrs.get("channel_axis", 0)
                ref = np.take(ref, list(ch), axis=axis)
            assert ours.shape == ref.shape, (pname, ours.shape, ref.shape)
            if np.linalg.norm(ref) < 1e-9:
                assert np.linalg.norm(ours) < 1e-6
                continue
            assert rel_err(ours, ref) <= 1e-4, (spec, pname, rel_err(ours, ref))
            checked += 1
    assert checked > 0


def _check_step_gradients(tg, env, xq, label, where) -> int:
    """Golden gradients of one step against PyTorch float64 autograd from the same state."""
    grads, loss = torch_gradients(tg, env, xq, label)
    assert abs(float(env["loss"][0]) - loss) < 1e-4 * max(1.0, abs(loss)), where
    checked = 0
    for op in tg.ops:
        if op.type != "sgd_update":
            continue
        pname, gname = op.inputs[0], op.inputs[1]
        ours, ref = np.asarray(env[gname], dtype=np.float64), grads[pname]
        if op.attrs.get("channels") is not None:
            ref = np.take(ref, list(op.attrs["channels"]), axis=op.attrs.get("channel_axis", 0))
        if np.linalg.norm(ref) < 1e-9:
            assert np.linalg.norm(ours) < 1e-6, (where, pname)
            continue
        assert rel_err(ours, ref) <= 1e-4, (where, pname, rel_err(ours, ref))
        checked += 1
    return checked


def test_gradients_track_torch_along_the_transfer_fine_tune():
    """The transfer benchmark's fine-tune (tests/transfer.py: bundled CNN, shifted digits,
    bias:all+weight:last2, SGD lr 5e-4 momentum 0.9, fp32 master weights), step by step: at
    every 10th of its first 300 steps, the golden's gradients equal PyTorch float64 autograd
    evaluated at the golden's own parameters of that step. This is the exact, machine-independent
    counterpart of the benchmark's end-to-end accuracy comparison (float64 PyTorch, and the
    golden's fixed float32 summation orders: nothing here depends on the CPU)."""
    import codegen.models as bundled
    from codegen.data import fit_input
    from codegen.frontend import load_model
    from codegen.golden.training import TrainState
    from codegen.quant import quantize
    from codegen.train import build_training_graph
    from codegen.train.spec import load_spec
    from tests.transfer import SPEC, sample_order

    x, y = bundled.digits("train")
    graph = quantize(load_model(bundled.path("digits_cnn.onnx")), x[:100])
    tg = build_training_graph(graph, load_spec(
        f"{SPEC},opt=sgd,lr=0.0005,momentum=0.9,backward=fp32,master_weights=fp32"))
    xq = fit_input(graph, bundled.shift_digits(x))
    state = TrainState.from_graph(tg)
    prog = state.program(tg)
    start = {n: np.array(state[n]) for n in state.parameters}
    checked = 0
    for step, i in enumerate(sample_order(len(y), 1, 0)[0][:300]):
        params = {n: np.array(state[n]) for n in state.parameters}   # before this step
        env = prog.run(state, prog.feeds(xq[i], y[i]), keep_all=True)
        if step % 10 == 0:
            checked += _check_step_gradients(tg, {**params, **env}, xq[i], y[i], step)
    assert checked >= 30 * 4
    moved = [n for n in state.parameters if not np.array_equal(state[n], start[n])]
    assert len(moved) == len(state.parameters), "the fine-tune must move every parameter"
