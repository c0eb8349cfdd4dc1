"""Small float IR graphs for quantizer unit tests."""

from __future__ import annotations

import numpy as np

from codegen.ir import Graph, Op, Role, Tensor, verify

SAME3 = (1, 1, 1, 1)


class GraphBuilder:
    """Build a float32 IR graph op by op; tensor names are generated."""

    def __init__(self, *input_shapes: tuple[int, ...], name: str = "t") -> None:
        self.g = Graph(name)
        self.n = 0
        for i, shape in enumerate(input_shapes):
            self.g.add_tensor(Tensor(f"in{i}", shape, "float32"))
            self.g.inputs.append(f"in{i}")

    @property
    def x(self) -> str:
        return self.g.inputs[0]

    def const(self, data: np.ndarray, role: Role = Role.CONSTANT, dtype: str = "float32",
              quant=None) -> str:
        self.n += 1
        name = f"c{self.n}"
        self.g.add_tensor(Tensor(name, data.shape, dtype, role, quant, data))
        return name

    def op(self, type_: str, inputs: list[str], out_shape: tuple[int, ...], out_dtype="float32",
           out_quant=None, **attrs) -> str:
        self.n += 1
        out = f"{type_}{self.n}"
        self.g.add_tensor(Tensor(out, out_shape, out_dtype, quant=out_quant))
        self.g.add_op(Op(type_, f"op_{out}", tuple(inputs), (out,), attrs))
        return out

    def shape(self, name: str) -> tuple[int, ...]:
        return self.g.tensors[name].shape

    # common layers ------------------------------------------------------------------------
    def conv(self, x: str, w: np.ndarray, b: np.ndarray | None, activation="none",
             stride=(1, 1), padding=SAME3) -> str:
        n, h, wd, _ = self.shape(x)
        o, kh, kw, _ = w.shape
        oh = (h + padding[0] + padding[1] - kh) // stride[0] + 1
        ow = (wd + padding[2] + padding[3] - kw) // stride[1] + 1
        ins = [x, self.const(w, Role.WEIGHT), self.const(b, Role.BIAS) if b is not None else ""]
        return self.op("conv2d", ins, (n, oh, ow, o), stride=stride, dilation=(1, 1),
                       padding=padding, activation=activation)

    def dwconv(self, x: str, w: np.ndarray, b: np.ndarray | None, activation="none") -> str:
        n, h, wd, c = self.shape(x)
        ins = [x, self.const(w, Role.WEIGHT), self.const(b, Role.BIAS) if b is not None else ""]
        return self.op("depthwise_conv2d", ins, (n, h, wd, w.shape[3]), stride=(1, 1),
                       dilation=(1, 1), padding=SAME3, activation=activation,
                       depth_multiplier=w.shape[3] // c)

    def fc(self, x: str, w: np.ndarray, b: np.ndarray | None, activation="none") -> str:
        rows = int(np.prod(self.shape(x))) // w.shape[1]
        ins = [x, self.const(w, Role.WEIGHT), self.const(b, Role.BIAS) if b is not None else ""]
        return self.op("fully_connected", ins, (rows, w.shape[0]), activation=activation,
                       keep_num_dims=False)

    def reshape(self, x: str, shape: tuple[int, ...]) -> str:
        return self.op("reshape", [x], shape, shape=shape)

    def pool(self, kind: str, x: str, k=2, activation="none") -> str:
        n, h, w, c = self.shape(x)
        return self.op(kind, [x], (n, h // k, w // k, c), filter=(k, k), stride=(k, k),
                       padding=(0, 0, 0, 0), activation=activation)

    def build(self, *outputs: str) -> Graph:
        self.g.outputs = list(outputs)
        return verify(self.g)


def cnn_weights(rng: np.random.Generator, cin: int, cout: int, k: int = 3) -> np.ndarray:
    return (rng.standard_normal((cout, k, k, cin)) * 0.3).astype(np.float32)
