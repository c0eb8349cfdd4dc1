"""Parameter updates: QAS constants, optimizer state, the update ops and the step counter.

State exists only for trainable parameters and, where a layer trains a subset of its output
channels, only for those channels (momentum, Adam m/v, master copies, accumulators all have the
gradient's shape). Each parameter also has an int32 (1,) count of its saturated updates
(``train_optim``; per parameter so that update ops share no written tensor and stay free to
reorder; in the parameter pool, so checkpoints keep it). Shared state (step counter, Adam's
running powers, the scheduled lr) is created once. Layout of the update ops' inputs: ``ir.ops.UPDATE_INPUTS``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from ..golden.numerics import quantize_multipliers
from ..golden.train_optim import (
    MASTER_FRAC_BITS,
    cosine_lr,
    forward_bias_limit,
    master_init,
    warmup_lr,
)
from ..ir import Graph, Op, Role, Tensor
from ..ir.ops import UPDATE_INPUTS
from .spec import TrainSpec


def qas_scale(graph: Graph, weight: str, x: str, kind: str,
              channels: tuple[int, ...] | None, axis: int) -> np.ndarray:
    """float64 real factor per trained channel turning a real-valued gradient step into
    parameter quanta: 1/s_w[c] (weights) or 1/(s_x*s_w[c]) (int32 biases)."""
    w = graph.tensors[weight]
    n = w.shape[axis]
    s_w = np.broadcast_to(w.quant.scale.astype(np.float64), (n,)) if w.quant.scale.size == 1 \
        else w.quant.scale.astype(np.float64)
    if channels is not None:
        s_w = s_w[list(channels)]
    if kind == "weight":
        return 1.0 / s_w
    s_x = float(graph.tensors[x].quant.scale[0])
    return 1.0 / (s_x * s_w)


def int32_master_init(data: np.ndarray, kind: str, channels: tuple[int, ...] | None,
                      axis: int) -> np.ndarray:
    """Initial value of an int32 master (``master_weights: int32``, int8 backward), in the
    gradient's shape: an int8 weight's trained entries ``w_q << F`` (F = MASTER_FRAC_BITS);
    an int32 bias's sub-quantum remainder, 0 (``golden.train_optim.master_init``)."""
    return master_init(data, "int32", kind, channels, axis)


def layer_bias_limit(graph: Graph, layer: Op) -> int | None:
    """``bias_limit`` of a layer's trained bias: the largest |bias| for which its forward int32
    accumulator cannot overflow (``golden.train_optim.forward_bias_limit``)."""
    w = graph.tensors[layer.inputs[1]]
    x = graph.tensors[layer.inputs[0]]
    if x.quant is None:
        return None
    if layer.type == "depthwise_conv2d":
        taps = w.shape[1] * w.shape[2]
    else:                                   # conv OHWI (per-group input channels), FC (O, I)
        taps = int(np.prod(w.shape[1:], dtype=np.int64))
    return forward_bias_limit(taps, int(x.quant.zero_point[0]))


class Updater:
    """Creates state tensors and update ops in a graph under construction."""

    def __init__(self, g: Graph, spec: TrainSpec, mode: str):
        self.g, self.spec, self.mode = g, spec, mode
        self.opt = spec.optimizer
        self.parameters: list[dict[str, Any]] = []
        self.state: list[dict[str, Any]] = []
        self.step = self._state("train_step", (1,), "int32", np.zeros(1, np.int32), "step")
        self.pows = self.lr = ""
        if self.opt.name == "adam":
            self.pows = self._state("adam_pows", (2,), "float32", np.ones(2, np.float32),
                                    "adam_pows")
        sched = spec.schedule
        if sched.name != "constant":     # lr_t before any update: step_counter's formula at u = 0
            lr0 = np.float32(self.opt.lr)
            if sched.name == "warmup":
                lr0 = warmup_lr(0, self.opt.lr, sched.warmup_steps)
            elif sched.name == "cosine":
                lr0 = cosine_lr(0, self.opt.lr, sched.total_steps, sched.warmup_steps,
                                sched.min_lr)
            self.lr = self._state("lr_t", (1,), "float32", np.array([lr0], np.float32), "lr")

    def _state(self, base: str, shape: tuple[int, ...], dtype: str, data: np.ndarray,
               kind: str, param: str | None = None) -> str:
        t = self.g.add_tensor(Tensor(self.g.unique_name(base), shape, dtype,
                                     Role.OPTIMIZER_STATE, data=data.reshape(shape)))
        self.state.append({"tensor": t.name, "role": Role.OPTIMIZER_STATE.value, "kind": kind,
                           "param": param, "bytes": t.nbytes})
        return t.name

    def _const(self, base: str, data: np.ndarray, dtype: str) -> str:
        t = self.g.add_tensor(Tensor(self.g.unique_name(base), data.shape, dtype, Role.CONSTANT,
                                     data=data))
        return t.name

    def update_op(self, layer: Op, param: str, grad: str, grad_exp: str | None, x: str,
                  kind: str, channels: tuple[int, ...] | None, axis: int) -> Op:
        """The sgd_update / adam_update op of one parameter (weight or bias of ``layer``)."""
        g, opt = self.g, self.opt
        weight = layer.inputs[1]
        p = g.tensors[param]
        gshape = g.tensors[grad].shape
        factor = qas_scale(g, weight, x, kind, channels, axis)
        slot = dict.fromkeys(UPDATE_INPUTS, "")
        slot.update(param=param, grad=grad)
        if self.mode == "fp32":
            slot["qas"] = self._const(f"{param}:qas", factor.astype(np.float32), "float32")
        else:
            m, k = quantize_multipliers(np.float64(opt.lr) * self._int8_factor(factor, x, kind))
            slot["qas"] = self._const(f"{param}:qas_mult", m.astype(np.int32), "int32")
            slot["qas_shift"] = self._const(f"{param}:qas_shift", k.astype(np.int32), "int32")
            slot["grad_exp"] = grad_exp or ""
        buf_dtype = "int32" if self.mode == "int8" else "float32"
        zeros = np.zeros(gshape)
        if opt.name == "adam":
            slot["buf1"] = self._state(f"{param}:adam_m", gshape, "float32", zeros, "adam_m",
                                       param)
            slot["buf2"] = self._state(f"{param}:adam_v", gshape, "float32", zeros, "adam_v",
                                       param)
            slot["pows"] = self.pows
        elif opt.momentum > 0:
            slot["buf1"] = self._state(f"{param}:momentum", gshape, buf_dtype, zeros,
                                       "momentum", param)
        if self.spec.master_weights in ("fp32", "int32"):
            # the master follows the parameter: this value, and after <p>_params_import
            master_dtype = "float32" if self.spec.master_weights == "fp32" else "int32"
            slot["master"] = self._state(f"{param}:master", gshape, master_dtype,
                                         master_init(p.data, master_dtype, kind, channels,
                                                     axis), "master", param)
        slot["lr"] = self.lr
        if self.spec.accumulate > 1:
            slot["accum"] = self._state(f"{param}:accum", gshape, "float32", zeros, "accum",
                                        param)
            slot["step"] = self.step
        slot["saturated"] = self._state(f"{param}:saturated", (1,), "int32",
                                        np.zeros(1, np.int32), "saturated", param)
        mutated = [slot[k] for k in ("param", "buf1", "buf2", "master", "accum", "saturated")
                   if slot[k] and slot[k] != self.pows]
        attrs: dict[str, Any] = {"updates": tuple(mutated), "mode": self.mode,
                                 "lr": float(opt.lr), "channels": channels,
                                 "channel_axis": axis, "accumulate": self.spec.accumulate,
                                 "forward": layer.name, "kind": kind}
        if slot["master"] and self.mode == "int8":
            attrs["master_frac_bits"] = MASTER_FRAC_BITS
        if kind == "bias" and p.dtype == "int32":
            limit = layer_bias_limit(g, layer)
            if limit is not None:
                attrs["bias_limit"] = limit
        if opt.name == "adam":
            attrs.update(beta1=opt.beta1, beta2=opt.beta2, eps=opt.eps)
            op_type = "adam_update"
        else:
            attrs["momentum"] = float(opt.momentum)
            op_type = "sgd_update"
        self.parameters.append({"tensor": param, "role": p.role.value, "layer": layer.name,
                                "channels": channels, "channel_axis": axis, "bytes": p.nbytes})
        return Op(op_type, g.unique_name(f"{param}:{op_type}"),
                  tuple(slot[k] for k in UPDATE_INPUTS), (), attrs)

    def _int8_factor(self, factor: np.ndarray, x: str, kind: str) -> np.ndarray:
        """int8 mode folds s_x into the weight factor: the weight gradient sums x_q - zp."""
        if kind == "weight":
            return factor * float(self.g.tensors[x].quant.scale[0])
        return factor

    def step_op(self) -> Op:
        s, opt = self.spec.schedule, self.opt
        updates = tuple(n for n in (self.step, self.lr, self.pows) if n)
        attrs = {"updates": updates, "accumulate": self.spec.accumulate, "schedule": s.name,
                 "lr": float(opt.lr), "gamma": float(s.gamma), "step_size": int(s.step_size),
                 "warmup_steps": int(s.warmup_steps), "total_steps": int(s.total_steps),
                 "min_lr": float(s.min_lr), "beta1": float(opt.beta1),
                 "beta2": float(opt.beta2)}
        return Op("step_counter", self.g.unique_name("step_counter"),
                  (self.step, self.lr, self.pows), (), attrs)

    def spec_record(self) -> dict[str, Any]:
        sp = self.spec
        return {"loss": sp.loss, "optimizer": asdict(sp.optimizer),
                "schedule": asdict(sp.schedule), "backward": sp.backward,
                "master_weights": sp.master_weights, "accumulate": sp.accumulate,
                "source": sp.source}
