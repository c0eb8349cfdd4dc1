"""The loss: which tensor it reads, its extra graph input and its constant table.

cross_entropy reads the logits: the model output, or the input of a final SOFTMAX (fused), in
both cases after stripping a final DEQUANTIZE. mse reads the int8 output (again before a final
DEQUANTIZE) and a new graph input ``target`` of that tensor's shape, dtype and quantization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import SpecError
from ..ir import Graph, Role, Tensor


class LossSpec(Protocol):
    """What the loss reads of a ``train.spec.TrainSpec`` (spec.py checks the loss with
    ``find_loss_site``, so this module does not import it)."""

    @property
    def loss(self) -> str: ...

    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class LossSite:
    loss: str          # spec loss name
    tensor: str        # the int8 tensor the loss op reads (logits or output)
    beta: float        # softmax beta folded into the loss (1.0 without a fused softmax)


def exp_table(scale: float, beta: float = 1.0) -> np.ndarray:
    """fp32 mode: EXP[k] = float32(exp(s * (k - 255))), s = float32(beta * scale)."""
    s = float(np.float32(np.float32(beta) * np.float32(scale)))
    k = np.arange(256, dtype=np.float64)
    return np.exp(s * (k - 255.0)).astype(np.float32)


def neglog_table() -> np.ndarray:
    """int8 mode: NEGLOG[k] = float32(-log(max(k, 0.5) / 256))."""
    k = np.maximum(np.arange(256, dtype=np.float64), 0.5)
    return (-np.log(k / 256.0)).astype(np.float32)


def find_loss_site(graph: Graph, spec: LossSpec, *, require_int8: bool = True) -> LossSite:
    """The tensor the loss reads; SpecError if the loss does not fit the model output.
    ``require_int8=False`` checks only shapes (a float model not yet quantized)."""
    src = spec.source
    if len(graph.outputs) != 1:
        raise SpecError(f"{src}: training needs a model with one output, this one has "
                        f"{len(graph.outputs)} ({', '.join(graph.outputs)})")
    name = graph.outputs[0]
    prod = graph.producer(name)
    if prod is not None and prod.type == "dequantize":
        name = prod.inputs[0]
        prod = graph.producer(name)
    beta = 1.0
    if spec.loss == "cross_entropy" and prod is not None and prod.type == "softmax":
        name, beta = prod.inputs[0], float(prod.attrs["beta"])
    t = graph.tensors[name]
    if require_int8 and (t.dtype != "int8" or t.quant is None or t.quant.per_channel):
        raise SpecError(f"{src}: loss {spec.loss} needs an int8 per-tensor quantized model "
                        f"output; {t.name!r} is {t.dtype} (quantize the model first)")
    if spec.loss == "cross_entropy":
        if len(t.shape) != 2 or t.shape[0] != 1 or t.shape[1] < 2:
            raise SpecError(f"{src}: loss cross_entropy needs class logits [1, C]; model output "
                            f"{t.name!r} has shape {list(t.shape)}")
        in_shapes = [graph.tensors[i].shape for i in graph.inputs]
        out_shape = graph.tensors[graph.outputs[0]].shape
        if out_shape in in_shapes and prod is not None and prod.type != "softmax":
            raise SpecError(f"{src}: loss cross_entropy does not fit model output "
                            f"{graph.outputs[0]!r} {list(out_shape)}: it has the input's "
                            "shape (an autoencoder?); use loss: mse")
    return LossSite(spec.loss, name, beta)


def add_loss_inputs(g: Graph, site: LossSite, mode: str) -> tuple[str, str]:
    """Add the label/target graph input and the loss table; (extra input, table or "")."""
    t = g.tensors[site.tensor]
    if site.loss == "cross_entropy":
        label = g.add_tensor(Tensor(g.unique_name("label"), (1,), "int32")).name
        table = exp_table(t.quant.s, site.beta) if mode == "fp32" else neglog_table()
        kind = "exp" if mode == "fp32" else "neglog"
        tab = g.add_tensor(Tensor(g.unique_name(f"loss_{kind}_table"), (256,), "float32",
                                  Role.CONSTANT, data=table)).name
        g.inputs.append(label)
        return label, tab
    target = g.add_tensor(Tensor(g.unique_name("target"), t.shape, t.dtype, quant=t.quant)).name
    g.inputs.append(target)
    return target, ""
