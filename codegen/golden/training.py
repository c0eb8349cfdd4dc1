"""The golden training step: execute a training graph (docs/training.md) op by op in NumPy.

    state = TrainState.from_graph(tg)              # parameters + optimizer state, initial values
    loss = train_step(tg, state, x, label)         # one sample: forward, loss, backward, updates
    result = fit(tg, state, xs, ys, epochs=3)      # {"loss": [...], "params_sha256": ...}
    saturation_count(tg, state)                    # saturated updates (pe_saturation_count)
    import_params(tg, state, blob)                 # pe_params_import: parameters + masters

Forward ops run on the forward golden kernels (bit exact with TFLM), training ops on
``train_kernels``; ops run in graph order, each reading the *current* value of the parameters
(an update earlier in the same step is visible to later ops, exactly as in the C, which
updates in place). The graph itself is never modified: mutable tensors (every tensor an
update op lists in ``updates``) live in a :class:`TrainState`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PockError
from ..ir import Graph, Op
from ..ir.ops import PARAM_UPDATE_OPS, UPDATE_INPUTS
from .executor import run
from .kernels import build_kernel
from .kernels.common import batched
from .train_kernels import TRAIN_KERNEL_BUILDERS, TrainKernel, build_train_kernel
from .train_optim import MASTER_FRAC_BITS, master_init


def _mutated(graph: Graph) -> list[str]:
    names: list[str] = []
    for op in graph.ops:
        for n in op.attrs.get("updates", ()) if not op.outputs else ():
            if n not in names:
                names.append(n)
    return names


def trainable_parameters(graph: Graph) -> list[str]:
    """The trainable parameter tensors in ``graph.metadata["training"]["parameters"]`` order
    (entries are dicts with a "tensor" key, or names); without metadata, the ``param`` slots of
    the update ops in op order."""
    meta = graph.metadata.get("training", {})
    params = meta.get("parameters")
    if params:
        return [p["tensor"] if isinstance(p, Mapping) else str(p) for p in params]
    out: list[str] = []
    for op in graph.ops:
        if op.type in PARAM_UPDATE_OPS and op.inputs[0] not in out:
            out.append(op.inputs[0])
    return out


COUNT_MAX = 2**32 - 1          # saturation_count saturates here (the C API's uint32_t)


def saturation_counters(graph: Graph) -> list[str]:
    """The ``saturated`` slot tensors of the update ops (one int32 (1,) count per trainable
    parameter, train_optim), in op order."""
    k = UPDATE_INPUTS.index("saturated")
    return list(dict.fromkeys(op.inputs[k] for op in graph.ops       # blocks share one
                              if op.type in PARAM_UPDATE_OPS and len(op.inputs) > k
                              and op.inputs[k]))


def saturation_count(graph: Graph, state: TrainState) -> int:
    """Saturated updates so far: the sum of the graph's counters, saturating at 2**32 - 1
    (exactly what the generated ``<prefix>_saturation_count()`` returns)."""
    total = sum(max(0, int(state[n].reshape(-1)[0])) for n in saturation_counters(graph))
    return min(total, COUNT_MAX)


@dataclass(frozen=True)
class MasterCopy:
    """A parameter's master copy (slot ``master`` of its update op): the tensor names, the
    master's dtype (float32 or int32), whether the parameter is a ``weight`` or a ``bias``,
    its trained ``channels`` on ``axis`` (None = all) and the int32 master's fraction bits."""

    master: str
    param: str
    dtype: str
    kind: str
    channels: tuple[int, ...] | None
    axis: int
    frac_bits: int


def master_copies(graph: Graph) -> list[MasterCopy]:
    """The master copies of the graph's update ops, in op order (none without
    ``master_weights``)."""
    out = []
    seen: set[str] = set()
    for op in graph.ops:
        if op.type not in PARAM_UPDATE_OPS:
            continue
        slot = dict(zip(UPDATE_INPUTS, op.inputs))
        if not slot.get("master") or slot["master"] in seen:   # the blocks of one update
            continue
        seen.add(slot["master"])
        param = graph.tensors[slot["param"]]
        # attr kind is informative; an int8 parameter is a weight, an int32 one a bias
        kind = op.attrs.get("kind") or ("weight" if param.dtype == "int8" else "bias")
        ch = op.attrs.get("channels")
        out.append(MasterCopy(slot["master"], param.name, graph.tensors[slot["master"]].dtype,
                              str(kind), None if ch is None else tuple(int(c) for c in ch),
                              int(op.attrs.get("channel_axis", 0)),
                              int(op.attrs.get("master_frac_bits", MASTER_FRAC_BITS))))
    return out


class TrainState:
    """Current values of a training graph's mutable tensors (parameters, optimizer state).

    ``values`` maps tensor name -> ndarray (the tensor's dtype and shape); ``versions`` counts
    writes per tensor (the executor rebuilds a forward kernel when its weights changed).
    """

    def __init__(self, values: Mapping[str, np.ndarray], parameters: Sequence[str]):
        self.values: dict[str, np.ndarray] = {k: np.array(v, copy=True) for k, v in
                                              values.items()}
        self.parameters = list(parameters)
        self.versions: dict[str, int] = dict.fromkeys(self.values, 0)
        self._programs: dict[int, tuple[Graph, TrainProgram]] = {}

    @classmethod
    def from_graph(cls, graph: Graph) -> TrainState:
        """Initial values: each mutated tensor's ``data`` (zeros of its shape without data)."""
        values = {}
        for n in _mutated(graph):
            t = graph.tensors[n]
            values[n] = (np.array(t.data, copy=True) if t.data is not None
                         else np.zeros(t.shape, dtype=t.dtype))
        return cls(values, trainable_parameters(graph))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def set(self, name: str, value: np.ndarray) -> None:
        old = self.values[name]
        value = np.asarray(value, dtype=old.dtype)
        if value.shape != old.shape:
            raise PockError(f"state {name!r}: new value has shape {list(value.shape)}, expected "
                            f"{list(old.shape)}")
        self.values[name] = value
        self.versions[name] += 1

    def params_bytes(self) -> bytes:
        """The trainable parameters as ``<p>_params_export`` writes them: in ``parameters``
        order, each parameter's current value as C-order bytes in its dtype, little-endian
        (int8 weights one byte per element, int32 biases four bytes), concatenated with
        nothing in between (:func:`import_params` reads them back)."""
        return params_to_bytes(self.values[n] for n in self.parameters)

    def params_sha256(self) -> str:
        """sha256 of :meth:`params_bytes`."""
        return hashlib.sha256(self.params_bytes()).hexdigest()

    def export(self, params_only: bool = True) -> dict[str, np.ndarray]:
        """Copies of the trainable parameters (or of every mutable tensor)."""
        names = self.parameters if params_only else list(self.values)
        return {n: self.values[n].copy() for n in names}

    def load(self, values: Mapping[str, np.ndarray]) -> None:
        """Overwrite tensors (e.g. parameters pulled from a device)."""
        for n, v in values.items():
            if n not in self.values:
                raise PockError(f"unknown state tensor {n!r}")
            self.set(n, v)

    def copy(self) -> TrainState:
        return TrainState(self.values, self.parameters)

    def program(self, graph: Graph) -> TrainProgram:
        hit = self._programs.get(id(graph))
        if hit is None or hit[0] is not graph:
            hit = (graph, TrainProgram(graph))
            self._programs = {id(graph): hit}
        return hit[1]


class TrainProgram:
    """A training graph prepared for execution: kernels built once (forward kernels of
    layers with mutable parameters are rebuilt after their parameters change)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        mutable = set(_mutated(graph))
        self.steps: list[tuple[Op, Any, tuple[str, ...]]] = []
        self._fwd_cache: dict[str, tuple[tuple[int, ...], Callable]] = {}
        for op in graph.ops:
            if op.type in TRAIN_KERNEL_BUILDERS:
                self.steps.append((op, build_train_kernel(graph, op), ()))
            else:
                params = tuple(n for n in op.inputs if n in mutable)
                kernel = build_kernel(graph, op) if not params else None
                self.steps.append((op, kernel, params))
        meta = graph.metadata.get("training", {})
        loss_op = next((op for op in graph.ops if op.type in ("softmax_cross_entropy",
                                                               "mse_loss")), None)
        if loss_op is None:
            raise PockError(f"graph {graph.name!r} is not a training graph (no loss op)")
        self.loss_tensor = loss_op.outputs[0]
        self.target_input = loss_op.inputs[1]
        self.model_inputs = list(meta.get("inputs", {}).get("model", [])) or \
            [n for n in graph.inputs if n != self.target_input]
        self.model_outputs = [n for n in graph.outputs if n != self.loss_tensor]

    def _forward_kernel(self, op: Op, params: tuple[str, ...], state: TrainState) -> Callable:
        key = tuple(state.versions[n] for n in params)
        hit = self._fwd_cache.get(op.name)
        if hit is not None and hit[0] == key:
            return hit[1]
        g = self.graph.copy()
        for n in params:
            g.tensors[n] = g.tensors[n].replace(data=state[n])
        kernel = build_kernel(g, op)
        self._fwd_cache[op.name] = (key, kernel)
        return kernel

    def feeds(self, x: np.ndarray, target: Any) -> dict[str, np.ndarray]:
        g = self.graph
        if len(self.model_inputs) != 1:
            raise PockError(f"training graph {g.name!r} has {len(self.model_inputs)} model "
                            "inputs; pass feeds by name")
        xin = g.tensors[self.model_inputs[0]]
        x = np.asarray(x)
        if x.dtype != np.dtype(xin.dtype) or x.size != xin.size:
            raise PockError(f"input {xin.name!r}: expected {xin.dtype} with {xin.size} values "
                            f"(shape {list(xin.shape)}), got {x.dtype} {list(x.shape)}")
        tt = g.tensors[self.target_input]
        t = np.asarray(target)
        if t.size != tt.size:
            raise PockError(f"{tt.name!r}: expected {tt.size} value(s) of shape "
                            f"{list(tt.shape)}, got {list(t.shape)}")
        if tt.dtype == "int32":
            t = t.astype(np.int64)
            if np.any(t < np.iinfo(np.int32).min) or np.any(t > np.iinfo(np.int32).max):
                raise PockError(f"{tt.name!r}: label outside int32")
        elif t.dtype != np.dtype(tt.dtype):
            raise PockError(f"{tt.name!r}: expected {tt.dtype}, got {t.dtype}")
        return {xin.name: x.reshape(xin.shape),
                tt.name: t.astype(tt.dtype).reshape(tt.shape)}

    def run(self, state: TrainState, feeds: Mapping[str, np.ndarray],
            keep_all: bool = False) -> dict[str, np.ndarray]:
        """One training step; returns the graph outputs (or every computed tensor)."""
        g = self.graph
        env: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in feeds.items()}

        def value(name: str):
            if not name:
                return None
            if name in env:
                return env[name]
            if name in state:
                return state[name]
            data = g.tensors[name].data
            if data is None:
                raise PockError(f"tensor {name!r} has no value (missing input?)")
            return data

        for op, kernel, params in self.steps:
            vals = [value(n) for n in op.inputs]
            if isinstance(kernel, TrainKernel):
                result = kernel.run(vals)
                if kernel.updates:
                    for name, v in result.items():
                        state.set(name, v)
                    continue
                for name, v in zip(op.outputs, result):
                    t = g.tensors[name]
                    arr = np.asarray(v)
                    if t.dtype != "bit":
                        arr = arr.astype(t.dtype, copy=False).reshape(t.shape)
                    env[name] = arr
                continue
            fwd = kernel if kernel is not None else self._forward_kernel(op, params, state)
            out = fwd(*vals)
            t = g.tensors[op.outputs[0]]
            want = batched(t.shape, 1)
            env[op.outputs[0]] = np.asarray(out).reshape(want).astype(t.dtype, copy=False)
        if keep_all:
            return env
        return {n: env[n] for n in g.outputs}


def params_to_bytes(values: Iterable[np.ndarray]) -> bytes:
    """Parameter values (in export order) as ``<p>_params_export`` writes them: each as
    C-order little-endian bytes of its dtype, back to back."""
    return b"".join(np.ascontiguousarray(v, dtype=v.dtype.newbyteorder("<")).tobytes()
                    for v in values)


def params_from_bytes(graph: Graph, blob: bytes) -> dict[str, np.ndarray]:
    """An export blob (``<p>_params_export``, GET_PARAMS, ``run_host_fit``'s ``params``) as
    arrays: the trainable parameters in export order (:func:`trainable_parameters`), each as
    little-endian values of its dtype (int8 one byte, int32 four), back to back."""
    names = trainable_parameters(graph)
    total = sum(graph.tensors[n].nbytes for n in names)
    if len(blob) != total:
        raise PockError(f"parameter blob of {len(blob)} bytes, the training graph exports "
                        f"{total}")
    out, offset = {}, 0
    for name in names:
        t = graph.tensors[name]
        dt = np.dtype(t.dtype).newbyteorder("<")
        out[name] = np.frombuffer(blob, dt, t.size, offset).reshape(t.shape).astype(t.dtype)
        offset += t.nbytes
    return out


def import_params(graph: Graph, state: TrainState,
                  params: bytes | Mapping[str, np.ndarray]) -> None:
    """What ``<p>_params_import`` does (SET_PARAMS): set the trainable parameters (an export
    blob, or arrays by name: those given) and make their master copies follow them, i.e. hold
    what they would have held had the model been compiled with these parameters
    (``train_optim.master_init``). Momentum, Adam moments, accumulators, step counter, lr and
    saturation counters are kept."""
    if isinstance(params, (bytes, bytearray, memoryview)):
        values = params_from_bytes(graph, bytes(params))
    else:
        values = dict(params)
    unknown = [n for n in values if n not in state.parameters]
    if unknown:
        raise PockError(f"{unknown[0]!r} is not a trainable parameter of {graph.name!r}")
    state.load(values)
    for m in master_copies(graph):
        if m.param in values:
            state.set(m.master, master_init(state[m.param], m.dtype, m.kind, m.channels,
                                            m.axis, m.frac_bits))


def train_step(graph: Graph, state: TrainState, x: np.ndarray, label: Any) -> float:
    """One training step on one sample; returns the loss (the float32 value, as a float).

    ``x``: the model input (int8, batch 1, with or without the batch axis); ``label``: the class
    index (cross-entropy) or the int8 target tensor (mse).
    """
    prog = state.program(graph)
    out = prog.run(state, prog.feeds(x, label))
    return float(out[prog.loss_tensor].reshape(-1)[0])


def predict(graph: Graph, state: TrainState, x: np.ndarray) -> np.ndarray:
    """The model output for a batch of inputs with the *current* parameters (no training)."""
    prog = state.program(graph)
    tensors = dict(graph.tensors)
    for n, v in state.values.items():
        tensors[n] = tensors[n].replace(data=v)
    fwd_ops = [op for op in graph.ops if op.type not in TRAIN_KERNEL_BUILDERS]
    g = Graph(graph.name, tensors, fwd_ops, list(prog.model_inputs), list(prog.model_outputs),
              dict(graph.metadata))
    return run(g, np.asarray(x))[0]


def fit(graph: Graph, state: TrainState, xs: np.ndarray, ys: np.ndarray, epochs: int = 1, *,
        shuffle: bool = False, seed: int = 0,
        callback: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Train for ``epochs`` passes over (xs, ys), one sample per step (batch on axis 0).

    Sample order: as given, or a fresh ``numpy.random.default_rng(seed)`` permutation per
    epoch with ``shuffle``. Returns ``{"loss": [per-step float], "epoch_loss": [mean per
    epoch], "steps": n, "params_sha256": ..., "saturated_updates": n, "saturated_per_step":
    [per-step int]}`` (the saturated updates of this fit, see :func:`saturation_count`);
    ``callback(epoch, step, loss)`` after each step.
    """
    xs, ys = np.asarray(xs), np.asarray(ys)
    if len(xs) != len(ys):
        raise PockError(f"{len(xs)} inputs but {len(ys)} labels/targets")
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    epoch_loss: list[float] = []
    prog = state.program(graph)
    first = count = saturation_count(graph, state)
    per_step: list[int] = []
    for ep in range(int(epochs)):
        order = rng.permutation(len(xs)) if shuffle else np.arange(len(xs))
        start = len(losses)
        for i in order:
            out = prog.run(state, prog.feeds(xs[i], ys[i]))
            loss = float(out[prog.loss_tensor].reshape(-1)[0])
            losses.append(loss)
            now = saturation_count(graph, state)
            per_step.append(now - count)
            count = now
            if callback is not None:
                callback(ep, len(losses) - 1, loss)
        chunk = losses[start:]
        epoch_loss.append(float(np.mean(chunk)) if chunk else float("nan"))
    return {"loss": losses, "epoch_loss": epoch_loss, "steps": len(losses),
            "params_sha256": state.params_sha256(), "saturated_updates": count - first,
            "saturated_per_step": per_step}
