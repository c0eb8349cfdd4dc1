"""Run an IR graph with the golden kernels: input checks, batching, tensor lifetimes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import ModelError, PockError
from ..ir import Graph, Op, Tensor
from ..ir.stream import STREAM_OP, chain_graph
from .kernels import Kernel, build_kernel
from .kernels.common import batched

# Upper bound on the scratch memory one chunk of the batch may use (im2col, float copies).
CHUNK_BUDGET_BYTES = 256 * 2**20


def _fmt_shape(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


class Program:
    """A graph prepared for execution: every op's kernel built once, constants precomputed.

    Reuse a Program to run the same graph many times; build a new one after the graph (or
    any of its constant tensors) changes.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps: list[tuple[Op, Kernel]] = [(op, build_kernel(graph, op)) for op in graph.ops]
        last_use: dict[str, int] = {}
        for i, op in enumerate(graph.ops):
            for name in op.inputs:
                if name:
                    last_use[name] = i
        self._last_use = last_use
        per_sample = max((_scratch_bytes(graph, op) for op in graph.ops), default=1)
        self.chunk = max(1, CHUNK_BUDGET_BYTES // max(per_sample, 1))

    # -- public API --------------------------------------------------------------------------
    def run(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Graph outputs (batch on axis 0) for one array per graph input, in graph order."""
        if len(inputs) != len(self.graph.inputs):
            raise PockError(f"model {self.graph.name!r} has {len(self.graph.inputs)} input(s) "
                            f"({', '.join(self.graph.inputs)}), got {len(inputs)} array(s)")
        values = self.execute(dict(zip(self.graph.inputs, inputs)))
        return [values[name] for name in self.graph.outputs]

    def execute(self, feeds: Mapping[str, np.ndarray],
                keep_all: bool = False) -> dict[str, np.ndarray]:
        """Values of the graph outputs, or with ``keep_all`` of every non-constant tensor."""
        arrays = self._check_feeds(feeds)
        g = self.graph
        n = next((a.shape[0] for k, a in arrays.items() if _is_batched(g, k)), 1)
        if n <= self.chunk:
            return self._execute(arrays, keep_all)
        parts = [self._execute({k: v[i:i + self.chunk] if _is_batched(g, k) else v
                                for k, v in arrays.items()}, keep_all)
                 for i in range(0, n, self.chunk)]
        return {k: np.concatenate([p[k] for p in parts]) if _is_batched(self.graph, k)
                else parts[0][k] for k in parts[0]}

    # -- internals ---------------------------------------------------------------------------
    def _check_feeds(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        g = self.graph
        unknown = [k for k in feeds if k not in g.inputs]
        if unknown:
            raise PockError(f"unknown model input {unknown[0]!r}; the inputs are "
                            f"{', '.join(g.inputs)}")
        arrays: dict[str, np.ndarray] = {}
        batch: int | None = None
        for name in g.inputs:
            if name not in feeds:
                raise PockError(f"no value given for model input {name!r}")
            t = g.tensors[name]
            arr = feeds[name]
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            lead_batch = bool(t.shape) and t.shape[0] == 1
            expected = ("N",) + t.shape[1:] if lead_batch else t.shape
            shape_ok = (arr.ndim == len(t.shape) and tuple(arr.shape[1:]) == t.shape[1:]
                        and (arr.shape[0] >= 1 if lead_batch else arr.shape == t.shape))
            if arr.dtype != np.dtype(t.dtype) or not shape_ok:
                raise PockError(f"input {name!r}: expected a {t.dtype} array of shape "
                                f"{_fmt_shape(expected)}, got {arr.dtype} "
                                f"{_fmt_shape(arr.shape)}")
            if lead_batch:
                if batch is not None and arr.shape[0] != batch:
                    raise PockError(f"input {name!r} has batch {arr.shape[0]}, other inputs "
                                    f"have {batch}")
                batch = arr.shape[0]
            arrays[name] = arr
        return arrays

    def _execute(self, arrays: dict[str, np.ndarray], keep_all: bool) -> dict[str, np.ndarray]:
        g = self.graph
        n = next((a.shape[0] for name, a in arrays.items() if _is_batched(g, name)), 1)
        env: dict[str, np.ndarray] = dict(arrays)
        keep = set(g.outputs)
        for i, (op, kernel) in enumerate(self.steps):
            args = [None if not name else env[name] if name in env else g.tensors[name].data
                    for name in op.inputs]
            result = kernel(*args)
            results = result if isinstance(result, tuple) else (result,)
            if len(results) != len(op.outputs):
                raise ModelError(f"op {op.name!r} ({op.type}): kernel gave {len(results)} "
                                 f"values for {len(op.outputs)} outputs")
            for name, value in zip(op.outputs, results):
                env[name] = _conform(op, g.tensors[name], value, n)
            if not keep_all:
                for name in op.inputs:
                    if name and self._last_use.get(name) == i and name not in keep:
                        env.pop(name, None)
        if keep_all:
            return env
        return {name: env[name] if name in env else g.tensors[name].data for name in g.outputs}


def _conform(op: Op, t: Tensor, value: np.ndarray, n: int) -> np.ndarray:
    """A kernel's result with the tensor's batched shape and dtype (a bug if impossible)."""
    want = batched(t.shape, n)
    if value.shape != want:
        if value.size != int(np.prod(want, dtype=np.int64)):
            raise ModelError(f"op {op.name!r} ({op.type}): produced shape "
                             f"{_fmt_shape(value.shape)} for a batch of {n}, expected "
                             f"{_fmt_shape(want)}")
        value = value.reshape(want)
    if value.dtype != np.dtype(t.dtype):
        value = value.astype(t.dtype)
    return value


def _is_batched(graph: Graph, name: str) -> bool:
    shape = graph.tensors[name].shape
    return bool(shape) and shape[0] == 1 and not graph.tensors[name].is_const


def _scratch_bytes(graph: Graph, op: Op) -> int:
    """Rough per-sample working set of one op (bytes), to size batch chunks."""
    if op.type == STREAM_OP:                  # the chain's ops, one after the other
        chain = chain_graph(graph, op)
        return max(_scratch_bytes(chain, o) for o in chain.ops)
    t = graph.tensors
    out = sum(t[n].size for n in op.outputs)
    ins = sum(t[n].size for n in op.inputs if n and not t[n].is_const)
    if op.type == "conv2d":
        _, kh, kw, ci = t[op.inputs[1]].shape
        groups = max(1, t[op.inputs[0]].shape[3] // ci)
        oh, ow = t[op.outputs[0]].shape[1:3]
        return 8 * (oh * ow * kh * kw * ci * groups + 2 * ins + 4 * out)
    if op.type == "depthwise_conv2d":
        mult = int(op.attrs.get("depth_multiplier", 1))
        return 8 * (2 * ins * mult + 4 * out)
    return 8 * 4 * (ins + out)


def prepare(graph: Graph) -> Program:
    """Build the kernels of ``graph`` once (ModelError for ops the golden model cannot run)."""
    return Program(graph)


def run(graph: Graph, *inputs: np.ndarray) -> list[np.ndarray]:
    """Run ``graph`` on one array per graph input (batch on axis 0); the graph outputs."""
    return prepare(graph).run(*inputs)


def execute(graph: Graph, feeds: Mapping[str, np.ndarray],
            keep_all: bool = False) -> dict[str, np.ndarray]:
    """Run ``graph`` on named inputs; its outputs by name, or every tensor with keep_all."""
    return prepare(graph).execute(feeds, keep_all)
