"""Run training ops and whole training steps through the C kernels (ctypes) and compare them
with the golden model byte for byte.

- :func:`run_op`: one op of a graph through its kernel call record (forward or training);
- :func:`check_train_case`: a single-op case of ``train_cases`` vs ``golden.train_kernels``;
- :class:`CTrainer`: a training graph executed op by op in C over a mutable state (parameters
  and optimizer state), the same loop as ``codegen.golden.training.TrainProgram.run``.

Masks (dtype ``bit``) live packed in C (LSB first); the golden model keeps bool arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from codegen.backends import kernel_call
from codegen.golden.train_kernels import build_train_kernel
from codegen.ir import Graph, Op

from .c_runner import RefKernels


def pack_mask(b: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(b, bool).reshape(-1), bitorder="little")


def c_array(dtype: str, shape, value) -> np.ndarray:
    """A tensor value as the C kernels hold it (bit: packed bytes)."""
    if dtype == "bit":
        return pack_mask(value)
    return np.ascontiguousarray(np.asarray(value, dtype=dtype).reshape(shape))


def blank(dtype: str, shape) -> np.ndarray:
    """An output buffer filled with garbage (so that unwritten elements show)."""
    if dtype == "bit":
        return np.full((int(np.prod(shape, dtype=np.int64)) + 7) // 8, 0xA5, np.uint8)
    if dtype == "float32":
        return np.full(shape, np.nan, np.float32)
    return np.full(shape, 0x5A, dtype=dtype)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run_op(lib: RefKernels, graph: Graph, op: Op, values: Mapping[str, np.ndarray],
           inplace: bool = False) -> dict[str, np.ndarray]:
    """Run ``op`` in C on C-layout ``values`` (tensor name -> array; constants default to their
    data) through the library's record (``lib.record``: ref's by default); returns its fresh
    outputs. Arrays of ``values`` the kernel writes are updated in place. ``inplace``: where
    the record permits it, the output is written over its input (one buffer holding the
    input's values, as the planner places them)."""
    call = lib.record(graph, op, 1)
    vals: dict[str, np.ndarray] = {}
    outs: dict[str, np.ndarray] = {}
    for name in call.tensors():
        t = graph.tensors[name]
        if name in op.outputs:
            outs[name] = vals[name] = blank(t.dtype, t.shape)
        elif name in values:
            vals[name] = values[name]
        elif t.data is not None:
            vals[name] = c_array(t.dtype, t.shape, t.data)
        else:
            raise KeyError(f"no value for tensor {name!r}")
    if inplace and call.inplace:
        src, out = call.inplace[0], op.outputs[0]
        if vals[src].shape == vals[out].shape and vals[src].dtype == vals[out].dtype:
            outs[out] = vals[out] = vals[src] = vals[src].copy()
    lib.call(call, vals)
    return outs


def check_train_case(lib: RefKernels, graph: Graph, inputs: list, inplace: bool = False,
                     same: Callable[[np.ndarray, np.ndarray], bool] = same_bytes
                     ) -> tuple[int, int, str]:
    """(mismatching tensors, compared tensors, first difference) of one single-op case
    (``inplace``: see ``run_op``; ``same``: the comparison, equal bytes by default)."""
    op = graph.ops[0]
    golden = build_train_kernel(graph, op).run(list(inputs))
    values = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, v)
              for n, v in zip(op.inputs, inputs) if n}
    before = {n: v.copy() for n, v in values.items()}
    outs = run_op(lib, graph, op, values, inplace)
    if op.outputs:
        want = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, v)
                for n, v in zip(op.outputs, golden)}
        got = outs
    else:                                     # update ops: every input slot after the update
        want = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape,
                           golden.get(n, before[n])) for n in values}
        got = values
    bad, first = 0, ""
    for n, w in want.items():
        if not same(got[n], w):
            bad += 1
            if not first:
                first = f"{n}: C {got[n].reshape(-1)[:8]} golden {w.reshape(-1)[:8]}"
    return bad, len(want), first


class CTrainer:
    """A training graph run op by op through the C kernels (one record per op, built once)."""

    def __init__(self, lib: RefKernels, graph: Graph, state: Mapping[str, np.ndarray]):
        self.lib, self.graph = lib, graph
        self.calls = [kernel_call(graph, op) for op in graph.ops]
        self.state = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, v)
                      for n, v in state.items()}
        self.consts = {n: c_array(t.dtype, t.shape, t.data) for n, t in graph.tensors.items()
                       if t.data is not None and n not in self.state}

    def step(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One training step; every tensor it computed (C layout)."""
        g = self.graph
        env: dict[str, np.ndarray] = {n: c_array(g.tensors[n].dtype, g.tensors[n].shape, v)
                                      for n, v in feeds.items()}
        for op, call in zip(g.ops, self.calls):
            vals: dict[str, np.ndarray] = {}
            for name in call.tensors():
                if name in op.outputs:
                    t = g.tensors[name]
                    env[name] = blank(t.dtype, t.shape)
                    vals[name] = env[name]
                elif name in self.state:
                    vals[name] = self.state[name]
                elif name in env:
                    vals[name] = env[name]
                else:
                    vals[name] = self.consts[name]
            self.lib.call(call, vals)
        return env


# -- whole training steps on the bundled digits CNN ---------------------------------------------
def digits_setup():
    """(int8 digits CNN, int8 training inputs, labels) as the golden training tests use them."""
    from codegen import models
    from codegen.data import fit_input
    from codegen.frontend import load_model
    from codegen.quant import quantize

    g = load_model(models.path("digits_cnn.onnx"))
    x, y = models.digits("train")
    q = quantize(g, x[:100])
    return q, fit_input(q, x), y


def training_graph(q: Graph, spec):
    """A training graph from a short spec string or a spec dict."""
    from codegen.train.build import build_training_graph
    from codegen.train.spec import parse_short, spec_from_dict

    return build_training_graph(q, parse_short(spec) if isinstance(spec, str)
                                else spec_from_dict(spec))


def mse_target(graph: Graph, y: int) -> np.ndarray:
    """An int8 target for an MSE graph: the one-hot of y in the output's quantization."""
    t = graph.tensors[graph.metadata["training"]["inputs"]["target"]]
    lo, hi = -128, 127
    target = np.full(t.shape, lo, np.int8).reshape(-1)
    target[int(y) % target.size] = hi
    return target.reshape(t.shape)


def run_training(lib: RefKernels, q: Graph, spec, xs: np.ndarray, ys: np.ndarray,
                 steps: int) -> dict:
    """``steps`` training steps in C and in the golden model from the same initial state.

    After every step: the loss, every tensor the step computed (forward activations, masks,
    gradients and exponents) and every parameter and optimizer-state tensor are compared byte
    for byte. Returns {"steps", "mismatches", "first", "losses", "compared"}.
    """
    from codegen.golden.training import TrainState

    graph = training_graph(q, spec)
    state = TrainState.from_graph(graph)
    prog = state.program(graph)
    trainer = CTrainer(lib, graph, state.values)
    mse = graph.metadata["training"]["loss"] == "mse"
    report: dict = {"steps": 0, "mismatches": 0, "first": "", "losses": [], "compared": 0}

    def differ(what: str, got: np.ndarray, want: np.ndarray) -> None:
        report["compared"] += 1
        if not same_bytes(got, want):
            report["mismatches"] += 1
            report["first"] = report["first"] or what

    for s in range(steps):
        target = mse_target(graph, ys[s]) if mse else ys[s]
        feeds = prog.feeds(xs[s], target)
        want = prog.run(state, feeds, keep_all=True)
        got = trainer.step(feeds)
        for op in graph.ops:
            for name in op.outputs:
                t = graph.tensors[name]
                differ(f"step {s} op {op.name!r} ({op.type}) output {name!r}", got[name],
                       c_array(t.dtype, t.shape, want[name]))
        for name, v in state.values.items():
            t = graph.tensors[name]
            differ(f"step {s} state {name!r}", trainer.state[name], c_array(t.dtype, t.shape, v))
        report["losses"].append((float(got[prog.loss_tensor][0]),
                                 float(want[prog.loss_tensor][0])))
        report["steps"] += 1
    return report
