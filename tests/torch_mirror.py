"""PyTorch mirrors of pockengine IR graphs (test oracles and benchmark baselines).

`float_op` recomputes one forward op in float on PyTorch tensors (NHWC, dequantized weights);
`TorchMirror` is a float `nn.Module` of a whole int8 graph whose chosen parameters train.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def deq(t, q: np.ndarray) -> np.ndarray:
    """Dequantize an array with a tensor's per-tensor or per-channel parameters (float64)."""
    q = np.asarray(q)
    shape = [1] * q.ndim
    if t.quant.axis is not None and t.quant.scale.size > 1:
        shape[t.quant.axis] = -1
    return (q.astype(np.float64) - t.quant.zero_point.reshape(shape)) * \
        t.quant.scale.astype(np.float64).reshape(shape)


FORWARD_SKIP = ("act_mask", "mask_grad", "grad_add", "softmax_cross_entropy", "mse_loss",
                "sgd_update", "adam_update", "step_counter")


def is_forward(op) -> bool:
    return op.type not in FORWARD_SKIP and not op.type.endswith(("_grad", "_grad_input",
                                                                 "_grad_weight"))


def float_op(graph, op, vals: dict, param) -> torch.Tensor:
    """One forward op in float, before its fused activation; `param(name)` gives weights."""
    a = op.attrs
    x = vals[op.inputs[0]]
    if op.type in ("conv2d", "depthwise_conv2d"):
        w = param(op.inputs[1])
        pt, pb, pl, pr = a["padding"]
        xn = F.pad(x.permute(0, 3, 1, 2), (pl, pr, pt, pb))
        if op.type == "conv2d":
            y = F.conv2d(xn, w.permute(0, 3, 1, 2), stride=a["stride"], dilation=a["dilation"])
        else:
            y = F.conv2d(xn, w.permute(3, 0, 1, 2), stride=a["stride"], dilation=a["dilation"],
                         groups=x.shape[3])
        y = y.permute(0, 2, 3, 1)
        if len(op.inputs) > 2 and op.inputs[2]:
            y = y + param(op.inputs[2])
        return y
    if op.type == "fully_connected":
        w = param(op.inputs[1])
        y = x.reshape(-1, w.shape[1]) @ w.T
        if len(op.inputs) > 2 and op.inputs[2]:
            y = y + param(op.inputs[2])
        return y
    if op.type == "add":
        return x + vals[op.inputs[1]]
    if op.type == "avg_pool2d":
        pt, pb, pl, pr = a["padding"]
        assert (pt, pb, pl, pr) == (0, 0, 0, 0), "padded average pooling is not mirrored"
        return F.avg_pool2d(x.permute(0, 3, 1, 2), a["filter"], a["stride"]).permute(0, 2, 3, 1)
    if op.type == "reshape":
        return x.reshape((x.shape[0],) + tuple(graph.tensors[op.outputs[0]].shape[1:]))
    if op.type == "softmax":
        return x  # the loss fuses a final softmax: the logits are its input
    raise NotImplementedError(op.type)


def activate(y: torch.Tensor, act: str) -> torch.Tensor:
    if act == "relu":
        return F.relu(y)
    if act == "relu6":
        return F.relu6(y)
    if act == "relu_n1_to_1":
        return torch.clamp(y, -1.0, 1.0)
    return y


class TorchMirror(torch.nn.Module):
    """Float mirror of an int8 forward graph; parameters in `trainable` get gradients."""

    def __init__(self, graph, trainable: set[str], dtype=torch.float32):
        super().__init__()
        self.graph = graph
        self.ops = [op for op in graph.ops if is_forward(op)]
        self.weights = torch.nn.ParameterDict()
        self.keys: dict[str, str] = {}
        for op in self.ops:
            for name in op.inputs[1:]:
                t = graph.tensors.get(name) if name else None
                if t is None or t.data is None:
                    continue
                key = f"p{len(self.keys)}"
                self.keys[name] = key
                self.weights[key] = torch.nn.Parameter(
                    torch.tensor(deq(t, t.data), dtype=dtype), requires_grad=name in trainable)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        vals = {self.graph.inputs[0]: x}
        for op in self.ops:
            y = float_op(self.graph, op, vals, lambda n: self.weights[self.keys[n]])
            vals[op.outputs[0]] = activate(y, op.attrs.get("activation", "none"))
        return vals[self.ops[-1].outputs[0]]
