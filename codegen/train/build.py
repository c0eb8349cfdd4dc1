"""The training-graph builder: forward + loss + sparse backward + updates, as ONE IR graph.

``build_training_graph(graph, spec)`` (docs/training.md is the contract):

1. resolve the spec against the model (``spec.resolve``) and check it fits the backward mode;
2. mark the tensors whose gradient is needed: outputs of trainable layers and everything
   computed from them (PyTorch's requires_grad) — backward therefore stops at the earliest
   trainable layer;
3. add the loss (its label/target input and constant table);
4. walk the forward ops in reverse, applying each op's rule (``rules.GRAD_RULES``) to the
   gradient of its output; fused activations become ``act_mask`` (a bit tensor computed right
   after the forward op) + ``mask_grad``; gradients meeting at a tensor are summed with
   ``grad_add`` as soon as both exist;
5. place each update right after the gradient it consumes (``reorder=True``) or all at the
   end, then the ``step_counter``;
6. dead-code elimination (``Graph.prune``: update ops are side effects and roots) and
   ``ir.verify``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ..errors import SpecError
from ..ir import OP_SPECS, PARAMETRIC_OPS, Graph, Op, Role, Tensor, verify
from .loss import LossSite, add_loss_inputs, find_loss_site
from .optimizer import Updater
from .rules import GRAD_RULES, Grad, mask_bounds
from .spec import LayerUpdate, TrainSpec, resolve


def check_spec_mode(spec: TrainSpec) -> None:
    """Spec combinations the backward mode cannot run (one-line SpecError)."""
    src = spec.source
    if spec.optimizer.weight_decay:
        raise SpecError(f"{src}: weight_decay is not supported yet (got "
                        f"{spec.optimizer.weight_decay})")
    if spec.backward != "int8":
        if spec.master_weights == "int32":
            raise SpecError(f"{src}: master_weights int32 needs backward: int8 (use "
                            "master_weights: fp32 with backward: fp32)")
        return
    if spec.optimizer.name == "adam":
        raise SpecError(f"{src}: optimizer adam needs backward: fp32 (int8 backward supports "
                        "sgd with optional momentum)")
    if spec.master_weights == "fp32":
        raise SpecError(f"{src}: master_weights fp32 needs backward: fp32 (use "
                        "master_weights: int32 with backward: int8)")
    if spec.schedule.name != "constant":
        raise SpecError(f"{src}: schedule {spec.schedule.name!r} needs backward: fp32 (int8 "
                        "backward folds a constant lr into its update multipliers)")
    if spec.accumulate > 1:
        raise SpecError(f"{src}: accumulate {spec.accumulate} needs backward: fp32")


class Backward:
    """The graph under construction and the helpers the rules use."""

    def __init__(self, forward: Graph, spec: TrainSpec, layers: list[LayerUpdate],
                 reorder: bool):
        self.forward = forward
        self.g = forward.copy()
        self.g.inputs = list(forward.inputs)
        self.spec, self.mode, self.reorder = spec, spec.backward, reorder
        self.layers = {u.op: u for u in layers}
        self.grads: dict[str, Grad] = {}
        self.side: dict[str, list[Op]] = {}      # forward op name -> act_mask ops after it
        self.backward: list[Op] = []
        self.deferred: list[Op] = []             # updates when reorder=False
        self.updater = Updater(self.g, spec, self.mode)
        self._producer = {o: op for op in forward.ops for o in op.outputs}
        self._requires = self._requires_grad()

    # -- queries used by the rules -----------------------------------------------------------
    def requires(self, name: str) -> bool:
        return name in self._requires

    def layer(self, op: Op) -> LayerUpdate | None:
        return self.layers.get(op.name)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.g.tensors[name].shape

    def attrs(self, op: Op, *copied: str) -> dict[str, Any]:
        return {"forward": op.name, "mode": self.mode, **{k: op.attrs[k] for k in copied}}

    # -- construction used by the rules ------------------------------------------------------
    def new_grad(self, like: str, *, channels: Sequence[int] | None = None, axis: int = 0,
                 accumulator: bool = False, shape: tuple[int, ...] | None = None,
                 tag: str = "grad") -> Grad:
        """A gradient tensor shaped like forward tensor ``like`` (restricted to ``channels`` on
        ``axis``), float32 in fp32 mode; int8 (int32 for weight/bias gradients) + exponent.
        Named ``<like>:<tag>`` (``grad``, ``grad_preact`` after a mask, ``grad_sum``)."""
        shape = list(shape or self.shape(like))
        if channels is not None:
            shape[axis] = len(channels)
        dtype = "float32" if self.mode == "fp32" else "int32" if accumulator else "int8"
        g = self.g.add_tensor(Tensor(self.g.unique_name(f"{like}:{tag}"), tuple(shape), dtype,
                                     Role.GRADIENT)).name
        e = None
        if self.mode == "int8":
            e = self.g.add_tensor(Tensor(self.g.unique_name(f"{g}_exp"), (1,), "int32",
                                         Role.GRADIENT)).name
        return g, e

    def emit(self, op_type: str, inputs: Sequence[str | Grad], outputs: Sequence[str | Grad],
             attrs: dict[str, Any], side_of: Op | None = None) -> Op:
        forward = attrs.get("forward", "")
        base = f"{forward}:{op_type}" if forward else op_type
        op = Op(op_type, self.g.unique_name(base), _flat(inputs), _flat(outputs), attrs)
        if side_of is not None:
            self.side.setdefault(side_of.name, []).append(op)
        else:
            self.backward.append(op)
        self.g.ops.append(op)            # registers the name for unique_name; reordered later
        return op

    def give(self, name: str, grad: Grad) -> None:
        """Add a gradient contribution to forward tensor ``name`` (grad_add when it joins)."""
        if not self.requires(name):
            return
        prev = self.grads.get(name)
        if prev is None:
            self.grads[name] = grad
            return
        total = self.new_grad(name, tag="grad_sum")
        self.emit("grad_add", [prev, grad], [total], {"mode": self.mode})
        self.grads[name] = total

    def through_activation(self, op: Op, activation: str, dy: Grad) -> Grad:
        """dy -> dz through the clamp of ``activation`` on op's output (mask_grad)."""
        if activation == "none":
            return dy
        y = self.g.tensors[op.outputs[0]]
        lo, hi = mask_bounds(activation, y.quant.s, y.quant.zp)
        mask = self.g.add_tensor(Tensor(self.g.unique_name(f"{y.name}:mask"), y.shape,
                                        "bit")).name
        self.emit("act_mask", [y.name], [mask], {"lo": lo, "hi": hi, "forward": op.name},
                  side_of=op)
        dz = self.new_grad(y.name, tag="grad_preact")
        self.emit("mask_grad", [dy, mask], [dz], {"forward": op.name, "mode": self.mode})
        return dz

    def update(self, op: Op, param: str, grad: Grad, *, x: str, kind: str,
               channels: tuple[int, ...] | None, axis: int) -> None:
        upd = self.updater.update_op(op, param, grad[0], grad[1], x, kind, channels, axis)
        self.g.ops.append(upd)
        (self.backward if self.reorder else self.deferred).append(upd)

    # -- the walk ----------------------------------------------------------------------------
    def _requires_grad(self) -> set[str]:
        req: set[str] = set()
        for op in self.forward.ops:
            if op.name in self.layers or any(i in req for i in op.inputs if i):
                req.update(op.outputs)
        return req

    def run(self, site: LossSite, extra_input: str, table: str) -> Graph:
        g, src, loss_tensor = self.g, self.spec.source, site.tensor
        reach = _ancestors(self.forward, loss_tensor, self._producer)
        for name, u in self.layers.items():
            if name not in reach:
                raise SpecError(f"{src}: layer {name!r} (index {u.index}) trains but does not "
                                f"reach the loss input {loss_tensor!r}")
        y = g.tensors[loss_tensor]
        dy = self.new_grad(loss_tensor)
        loss = g.add_tensor(Tensor(g.unique_name("loss"), (1,), "float32")).name
        if self.spec.loss == "cross_entropy":
            attrs = {"mode": self.mode, "beta": site.beta}
            loss_op = Op("softmax_cross_entropy", g.unique_name("loss:softmax_cross_entropy"),
                         (y.name, extra_input, table), _flat([loss, dy]), attrs)
        else:
            loss_op = Op("mse_loss", g.unique_name("loss:mse_loss"), (y.name, extra_input),
                         _flat([loss, dy]), {"mode": self.mode})
        g.ops.append(loss_op)
        self.give(loss_tensor, dy)
        for op in reversed(self.forward.ops):
            dy_op = self.grads.get(op.outputs[0]) if op.outputs else None
            if dy_op is None:
                continue
            rule = GRAD_RULES.get(op.type)
            if rule is None:
                raise SpecError(f"{src}: no backward rule for op {op.name!r} ({op.type}) on "
                                "the path from the trainable layers to the loss")
            if op.type in PARAMETRIC_OPS and op.name in self.layers:
                self._check_layer(op)
            act = "none" if OP_SPECS[op.type].is_activation \
                else op.attrs.get("activation", "none")
            rule(self, op, self.through_activation(op, act, dy_op))
        step = self.updater.step_op()
        ops: list[Op] = []
        for op in self.forward.ops:
            ops.append(op)
            ops.extend(self.side.get(op.name, ()))
        ops.append(loss_op)
        ops.extend(self.backward)
        ops.extend(self.deferred)
        ops.append(step)
        g.ops = ops
        g.outputs = [loss] + list(self.forward.outputs)
        g.metadata["training"] = {
            "mode": self.mode, "reorder": self.reorder, **self.updater.spec_record(),
            "layers": [asdict(u) for u in self.layers.values()],
            "parameters": self.updater.parameters, "state": self.updater.state,
            "inputs": {"model": list(self.forward.inputs), "label" if self.spec.loss ==
                       "cross_entropy" else "target": extra_input},
            "outputs": {"loss": loss, "model": list(self.forward.outputs)},
            "loss_op": loss_op.name, "loss_input": loss_tensor,
        }
        return g

    def _check_layer(self, op: Op) -> None:
        src = self.spec.source
        x, w = (self.g.tensors[n] for n in op.inputs[:2])
        if w.dtype != "int8" or x.dtype != "int8" or w.quant is None or x.quant is None:
            raise SpecError(f"{src}: layer {op.name!r} is not int8 ({x.dtype} input, {w.dtype} "
                            "weight); quantize the model first")
        if not w.is_const:
            raise SpecError(f"{src}: layer {op.name!r} has a computed weight; only constant "
                            "weights can train")
        for n in op.inputs[1:]:
            users = [o.name for o in self.forward.ops if n and n in o.inputs]
            if len(users) > 1:
                raise SpecError(f"{src}: parameter {n!r} of trainable layer {op.name!r} is "
                                f"shared by {len(users)} ops; shared parameters cannot train")


def _flat(items: Sequence[str | Grad]) -> tuple[str, ...]:
    out: list[str] = []
    for it in items:
        if isinstance(it, tuple):
            out.append(it[0])
            if it[1] is not None:
                out.append(it[1])
        else:
            out.append(it)
    return tuple(out)


def _ancestors(graph: Graph, name: str, producer: dict[str, Op]) -> set[str]:
    """Names of the ops whose outputs ``name`` depends on."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        op = producer.get(stack.pop())
        if op is None or op.name in seen:
            continue
        seen.add(op.name)
        stack.extend(i for i in op.inputs if i)
    return seen


def build_training_graph(graph: Graph, spec: TrainSpec, *, reorder: bool = True) -> Graph:
    """The training graph of an int8 forward ``graph`` for ``spec`` (docs/training.md).

    Raises SpecError (one line) for a spec that does not fit the model or the backward mode.
    """
    check_spec_mode(spec)
    layers = resolve(spec, graph)
    site = find_loss_site(graph, spec)
    b = Backward(graph, spec, layers, reorder)
    extra, table = add_loss_inputs(b.g, site, b.mode)
    g = b.run(site, extra, table).prune()
    return verify(g)
