"""Small graphs for scheduler and planner tests: random DAGs and a hand-made training step."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from codegen.ir import Graph, Op, Role, Tensor


def random_dag(seed: int, n_ops: int | None = None, *, inplace_ops: bool = True) -> Graph:
    """A random DAG of 2..7 ops over int8 vectors: 'concat' ops (never in place), and — with
    ``inplace_ops`` — 'add' / 'relu' (in place when an input dies) and 'reshape' (alias)."""
    rng = random.Random(seed)
    n = n_ops if n_ops is not None else rng.randint(2, 7)
    g = Graph(f"dag{seed}")
    sizes = [1, 3, 16, 40, 64, 100, 256]
    width = rng.choice(sizes)
    x = g.add_tensor(Tensor("x", (width,), "int8")).name
    g.inputs.append(x)
    if rng.random() < 0.3:
        g.inputs.append(g.add_tensor(Tensor("x2", (rng.choice(sizes),), "int8")).name)
    avail = list(g.inputs)
    w = g.add_tensor(Tensor("w", (4,), "int8", Role.WEIGHT, data=np.ones(4, np.int8))).name
    for i in range(n):
        kind = rng.choice(["concat", "concat", "add", "relu", "reshape"] if inplace_ops
                          else ["concat"])
        out = f"t{i}"
        if kind == "concat":
            k = rng.randint(1, min(3, len(avail)))
            ins = tuple(rng.sample(avail, k)) + ((w,) if rng.random() < 0.3 else ())
            g.add_tensor(Tensor(out, (rng.choice(sizes),), "int8"))
            g.add_op(Op("concat", f"op{i}", ins, (out,), {"axis": 0, "activation": "none"}))
        elif kind == "add":
            a = rng.choice(avail)
            shape = g.tensors[a].shape
            same = [t for t in avail if g.tensors[t].shape == shape]
            b = rng.choice(same)
            g.add_tensor(Tensor(out, shape, "int8"))
            g.add_op(Op("add", f"op{i}", (a, b), (out,), {"activation": "none"}))
        elif kind == "relu":
            a = rng.choice(avail)
            g.add_tensor(Tensor(out, g.tensors[a].shape, "int8"))
            g.add_op(Op("relu", f"op{i}", (a,), (out,)))
        else:
            a = rng.choice(avail)
            size = g.tensors[a].size
            g.add_tensor(Tensor(out, (1, size), "int8"))
            g.add_op(Op("reshape", f"op{i}", (a,), (out,), {"shape": (1, size)}))
        avail.append(out)
    used = {t for op in g.ops for t in op.inputs}
    outs = [t for t in avail[len(g.inputs):] if t not in used]
    # some unused results stay dead (never read, not outputs), some used ones are outputs too
    g.outputs = [t for t in outs if rng.random() < 0.8] or [avail[-1]]
    if rng.random() < 0.3:
        extra = rng.choice(avail[len(g.inputs):])
        if extra not in g.outputs:
            g.outputs.append(extra)
    return g


def training_step(reorder: bool = True) -> Graph:
    """A hand-made 'training step': y = fc(x, w); loss/grad; dw; update w (mutates w).

    ops: fc(x, w) -> y; loss(y) -> (loss, dy); fc_grad_input(dy, w) -> dx;
    fc_grad_weight(x, dy) -> dw; sgd_update(w, dw) (no outputs); step_counter(step).
    """
    g = Graph("train")
    t = g.add_tensor
    t(Tensor("x", (64,), "int8"))
    t(Tensor("w", (32, 64), "int8", Role.WEIGHT, data=np.ones((32, 64), np.int8)))
    t(Tensor("w2", (32, 32), "int8", Role.WEIGHT, data=np.ones((32, 32), np.int8)))
    t(Tensor("step", (1,), "int32", Role.OPTIMIZER_STATE, data=np.zeros(1, np.int32)))
    t(Tensor("qas", (32,), "float32", Role.CONSTANT, data=np.ones(32, np.float32)))
    for name, shape, dtype, role in [("h", (32,), "int8", Role.ACTIVATION),
                                     ("y", (32,), "int8", Role.ACTIVATION),
                                     ("loss", (1,), "float32", Role.ACTIVATION),
                                     ("dy", (32,), "float32", Role.GRADIENT),
                                     ("dh", (32,), "float32", Role.GRADIENT),
                                     ("dw2", (32, 32), "float32", Role.GRADIENT),
                                     ("dw", (32, 64), "float32", Role.GRADIENT)]:
        t(Tensor(name, shape, dtype, role))
    g.inputs = ["x"]
    g.outputs = ["loss"]
    ops = [
        Op("fully_connected", "fc1", ("x", "w"), ("h",), {"activation": "none",
                                                        "keep_num_dims": False}),
        Op("fully_connected", "fc2", ("h", "w2"), ("y",), {"activation": "none",
                                                         "keep_num_dims": False}),
        Op("mse_loss", "loss_op", ("y", "y"), ("loss", "dy"), {"mode": "fp32"}),
        Op("fully_connected_grad_input", "fc2_gi", ("dy", "w2"), ("dh",),
           {"forward": "fc2", "mode": "fp32"}),
        Op("fully_connected_grad_weight", "fc2_gw", ("h", "dy"), ("dw2",),
           {"forward": "fc2", "mode": "fp32", "channels": None}),
    ]
    upd2 = Op("sgd_update", "w2_update", ("w2", "dw2", "qas") + ("",) * 9, (),
              {"updates": ("w2",), "mode": "fp32", "lr": 0.1, "channels": None,
               "channel_axis": 0, "accumulate": 1, "momentum": 0.0})
    gw1 = Op("fully_connected_grad_weight", "fc1_gw", ("x", "dh"), ("dw",),
             {"forward": "fc1", "mode": "fp32", "channels": None})
    upd1 = Op("sgd_update", "w_update", ("w", "dw", "qas") + ("",) * 9, (),
              {"updates": ("w",), "mode": "fp32", "lr": 0.1, "channels": None,
               "channel_axis": 0, "accumulate": 1, "momentum": 0.0})
    step = Op("step_counter", "step_counter", ("step", "", ""), (),
              {"updates": ("step",), "accumulate": 1, "schedule": "constant"})
    g.ops = ops + ([upd2, gw1, upd1] if reorder else [gw1, upd2, upd1]) + [step]
    g.metadata["training"] = {"reorder": reorder,
                              "parameters": [{"tensor": "w"}, {"tensor": "w2"}],
                              "state": [{"tensor": "step"}]}
    return g



@dataclass(frozen=True)
class Facts:
    """Kernel facts as a call record carries them (codegen.schedule.storage.KernelFacts)."""

    scratch_bytes: int = 0
    inplace: tuple[str, ...] = ()
    may_alias: tuple[tuple[str, str], ...] = ()


def toy_kernels(g: Graph) -> dict[str, Facts]:
    """Kernel facts for the synthetic graphs, as the ref kernels of these op types have them:
    reshape aliases its input, relu / add / grad_add / mask_grad may write over an input."""
    out = {}
    for op in g.ops:
        if op.type in ("reshape", "reshape_grad"):
            out[op.name] = Facts(may_alias=((op.inputs[0], op.outputs[0]),))
        elif op.type in ("relu", "add", "grad_add", "mask_grad"):
            out[op.name] = Facts(inplace=tuple(n for n in op.inputs if n))
        else:
            out[op.name] = Facts()
    return out
