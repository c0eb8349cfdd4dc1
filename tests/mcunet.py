"""MCUNet-5FPS (128x128x3, 10 classes) as an int8 IR graph, and TinyEngine's "49kb" training spec.

The layer table ``../shared/models/mcunet_49kb.json`` was read out of TinyEngine's tiny-training
example (the MCUNet graph its compiler trains with the "49kb" sparse update, with its measured
instruction counts on a Cortex-M7). ``mcunet_graph(seed)`` rebuilds that network from the table,
layer for layer — stem conv, 14 inverted-residual blocks (pointwise expand, depthwise,
pointwise project; residual ADDs where the table lists them), global average pooling and a
10-class classifier — with random but deterministic int8 weights, so that pockengine can be
raced against TinyEngine on the same shapes (``tests/benchmark_race.py``).

Quantization follows TFLite's int8 conventions, as pockengine's quantizer does
(``codegen.quant``): float weights drawn per layer (He normal) and quantized per output channel,
symmetric, in [-127, 127]; int32 biases with scale ``s_in * s_w[c]``; per-tensor asymmetric int8
activations whose zero points are the table's (``out_zero_point`` of each layer; an ADD's output
takes the ``in_zero_point`` of the layer that reads it) and whose scales are calibrated on one
seeded random input: the network is simulated in float64 layer by layer (with the int8
rounding of every activation) and each scale is chosen so that the 99.9th percentile of the
layer's real output just fits the int8 range on either side of the zero point — outputs use
the range without all saturating. ReLU6 layers (the table's "relu6-like clamp", zero point
-128) take at most 6/255, so their clamp is the int8 range as in TinyEngine. Pooling shares its
input's parameters; the ADDs have their own.

    graph = mcunet_graph(seed=0)          # verified; golden.run(graph, x) -> logits (1, 10)
    spec = mcunet_spec_49kb()             # a short-form spec for pipeline.training_graph
    forward_macs(graph), backward_macs(pipeline.training_graph(graph, spec))

MAC accounting: ``codegen.summary.op_macs`` counts conv, depthwise and fully-connected
multiply-accumulates (pooling and ADDs count 0); so does the table, whose per-layer ``macs``
sum to its forward total 22,455,104 (the pooling row is 0). The forward totals agree exactly.
``backward_macs`` counts the training graph's input-gradient and weight-gradient ops the same
way (bias gradients, masks, the loss and updates are sums, not MACs — TinyEngine's
``backward_total`` 9,929,600 = ``backward_data`` 9,153,856 + ``weight_grad`` 775,744 leaves
them out too); see ``mcunet_spec_49kb`` for why the two agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from codegen.ir import Graph, Op, QuantParams, Role, Tensor, conv_out_size, verify
from codegen.quant import bias_params, quantize_array, weight_params
from codegen.summary import op_macs

TABLE = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "mcunet_49kb.json"
INPUT_SCALE = 1.0 / 128        # int8 input = pixel - 128, real = pixel/128 - 1 in [-1, 1)
PERCENTILE = 99.9              # of a layer's real output that must fit the int8 range
RELU6_MAX_SCALE = 6.0 / 255    # a ReLU6 layer with zero point -128 clamps to the int8 range
BIAS_STD = 0.1                 # real biases (folded batch norm), standard deviation


class TableMissing(FileNotFoundError):
    """The layer table is not where the tests and benchmarks look for it."""


def table_missing_reason(path: Path = TABLE) -> str | None:
    """Why the MCUNet graph cannot be built here (None when the table is present)."""
    if path.is_file():
        return None
    return (f"MCUNet layer table {path} not found (it sits next to the MLPerf Tiny models in "
            "../shared/models; tests/mcunet.py builds the graph from it)")


@cache
def load_table(path: Path = TABLE) -> dict[str, Any]:
    """The layer table as a dict (read once); TableMissing names the path when it is absent."""
    why = table_missing_reason(path)
    if why is not None:
        raise TableMissing(why)
    return json.loads(path.read_text())


# -- the spec -----------------------------------------------------------------------------------

def mcunet_spec_49kb() -> str:
    """TinyEngine's "49kb" sparse update as a pockengine spec (short form; as YAML:

    ```yaml
    loss: cross_entropy
    trainable:
      - {layers: last 21, params: bias}                  # v8_conv_1 .. v15
      - {layers: [v15], params: weight}                  # the classifier, whole
      - {layers: [v11_conv_0, v10_conv_0], params: weight, channels: 0.5}
      - {layers: [v9_conv_0], params: weight, channels: 0.25}
    optimizer: {name: sgd, lr: 0.0008}                   # plain SGD, no momentum
    backward: fp32
    master_weights: none
    ```

    batch 1, no accumulation). The table's "training" section: biases of the 21 last
    parametric layers (4,602 values), the classifier's 10x160 weight, and the first
    pointwise conv of blocks 11 and 10 (half) and 9 (a quarter): 13,696 weight values.

    Where pockengine's spec differs from TinyEngine's scheme, and what that does to the MACs:

    - **Which half.** TinyEngine updates the first ``ratio * 48`` *input* channels of those
      pointwise convs (``[0:24)``, ``[0:12)``); pockengine's channel-sparse update selects
      ``ceil(ratio * C)`` *output* channels by largest L1 norm (tiny-training's criterion).
      The counts agree: 240x24 = 120x48 = 5,760 values for v11_conv_0, 192x24 = 96x48 =
      4,608 for v10_conv_0, 144x12 = 36x48 = 1,728 for v9_conv_0, and so do the weight-gradient
      MACs (8x8 positions x that many values: 368,640 + 294,912 + 110,592, plus 1,600 for the
      classifier = 775,744).
    - **Backward data path.** Both stop at v8_conv_1, the earliest trainable layer (its bias):
      input gradients are computed for v15 down to v8_conv_2 (20 layers, 9,153,856 MACs, the
      partially trained convs included at full size on both sides). Global average pooling
      and the residual ADDs move gradients without MACs.
    - So pockengine's backward MACs equal TinyEngine's 9,929,600 exactly
      (``tests/test_mcunet.py`` checks it).
    - **Learning rates.** TinyEngine uses lr 0.0008 for weights and 0.0004 for biases
      (``genNN.h``); a pockengine spec has one learning rate (0.0008 here). Its QAS and update
      rounding also differ (TinyEngine truncates the bias step and converts weight steps
      implicitly; pockengine rounds and saturates). Neither changes the work per step.
    """
    return ("bias:last21+weight:v15+weight:v11_conv_0/v10_conv_0@0.5+weight:v9_conv_0@0.25,"
            "opt=sgd,lr=0.0008,loss=cross_entropy,backward=fp32,master_weights=none")


# -- MACs ---------------------------------------------------------------------------------------

def forward_macs(graph: Graph) -> int:
    """Multiply-accumulates of the forward ops (``codegen.summary.op_macs``)."""
    return sum(op_macs(graph, op) for op in graph.ops)


def grad_op_macs(graph: Graph, op: Op) -> int:
    """MACs of one backward op: input and weight gradients of conv, depthwise and FC (the
    transposed products of the forward op, weight gradients over the trained channels only);
    0 for the rest (sums, masks, copies)."""
    t = graph.tensors
    if op.type in ("conv2d_grad_input", "depthwise_conv2d_grad_input",
                   "fully_connected_grad_input"):
        dy, w = t[op.inputs[0]], t[op.inputs[-1]]
        if op.type == "conv2d_grad_input":
            return dy.size * w.shape[1] * w.shape[2] * w.shape[3]
        if op.type == "depthwise_conv2d_grad_input":
            return dy.size * w.shape[1] * w.shape[2]
        return dy.size * w.shape[1]
    if op.type in ("conv2d_grad_weight", "depthwise_conv2d_grad_weight"):
        dy, dw = t[op.inputs[1]], t[op.outputs[0]]
        return dw.size * dy.shape[1] * dy.shape[2]
    if op.type == "fully_connected_grad_weight":
        dy, dw = t[op.inputs[1]], t[op.outputs[0]]
        return dw.size * (dy.size // dy.shape[-1])
    return 0


def backward_macs(training_graph: Graph) -> dict[str, int]:
    """Backward MACs of a training graph: ``data`` (input gradients), ``weight_grad`` and
    ``total``, counted as TinyEngine's table counts them."""
    data = weight = 0
    for op in training_graph.ops:
        n = grad_op_macs(training_graph, op)
        if op.type.endswith("_grad_weight"):
            weight += n
        else:
            data += n
    return {"data": data, "weight_grad": weight, "total": data + weight}


# -- the graph ----------------------------------------------------------------------------------

def _padding(p: Any) -> tuple[int, int, int, int]:
    """The table's padding (one int, [h, w] or [t, b, l, r]) as the IR's (t, b, l, r)."""
    if isinstance(p, int):
        return (p, p, p, p)
    if len(p) == 2:
        return (p[0], p[0], p[1], p[1])
    return tuple(int(v) for v in p)  # type: ignore[return-value]


def _activation(text: str) -> str:
    """The IR activation of the table's description ("relu6-like clamp ...", "linear")."""
    if text.startswith("relu6"):
        return "relu6"
    if text == "linear":
        return "none"
    raise ValueError(f"MCUNet table: unknown activation {text!r}")


def _round_scale(s: float) -> float:
    """A scale with 3 significant digits (float32), so that the last bits of the float64
    calibration (BLAS, platform) do not change the graph."""
    return float(np.float32(float(f"{s:.3g}")))


def output_scale(y: np.ndarray, zero_point: int, relu6: bool) -> float:
    """The scale under which the ``PERCENTILE`` of real values ``y`` fit on either side of
    ``zero_point`` (a ReLU6 layer: the positive side, at most ``RELU6_MAX_SCALE``)."""
    hi = max(float(np.percentile(y, PERCENTILE)), 0.0)
    lo = max(-float(np.percentile(y, 100.0 - PERCENTILE)), 0.0)
    if relu6:
        s = min(hi / (127 - zero_point), RELU6_MAX_SCALE)
    else:
        s = max(hi / (127 - zero_point), lo / (zero_point + 128) if zero_point > -128 else 0.0)
    return _round_scale(max(s, 1e-5))


def _conv_real(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int, int, int],
               depthwise: bool) -> np.ndarray:
    """Real-valued conv (OHWI weights) or depthwise conv (1HWC) of x (H, W, C), float64:
    the calibration's simulation of a layer (padding is real zero, as int8 pads with the
    zero point)."""
    kh, kw = w.shape[1], w.shape[2]
    xp = np.pad(x, ((pads[0], pads[1]), (pads[2], pads[3]), (0, 0)))
    oh = conv_out_size(x.shape[0], kh, stride, 1, pads[0], pads[1])
    ow = conv_out_size(x.shape[1], kw, stride, 1, pads[2], pads[3])
    out = np.zeros((oh, ow, w.shape[0] if not depthwise else w.shape[3]))
    for i in range(kh):
        for j in range(kw):
            patch = xp[i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            out += patch * w[0, i, j] if depthwise else patch @ w[:, i, j, :].T
    return out


@dataclass
class _Act:
    """The current activation: tensor name, its quantization and its simulated real values."""

    name: str
    quant: QuantParams
    real: np.ndarray          # (H, W, C) float64, what the int8 tensor holds, dequantized


@dataclass
class _Builder:
    """The graph under construction, a weight generator and the calibration simulation."""

    rng: np.random.Generator
    g: Graph = field(default_factory=lambda: Graph(name="mcunet_5fps_128"))

    def activation(self, name: str, real: np.ndarray, quant: QuantParams,
                   shape: tuple[int, ...] | None = None) -> _Act:
        """A new int8 activation tensor (``shape``, default (1, *real.shape)) holding ``real``
        rounded to ``quant`` (saturated to int8, which is also every layer's activation clamp
        here: ReLU6 layers have zero point -128 and scale <= 6/255)."""
        q = quantize_array(real, quant).astype(np.int64)
        shape = (1, *real.shape) if shape is None else shape
        self.g.add_tensor(Tensor(name, shape, "int8", Role.ACTIVATION, quant))
        return _Act(name, quant, (q - quant.zp) * np.float64(quant.s))

    def weights(self, name: str, shape: tuple[int, ...], axis: int, fan_in: int
                ) -> tuple[Tensor, np.ndarray]:
        """He-normal float weights quantized per channel along ``axis`` (TFLite: symmetric,
        [-127, 127]); the int8 tensor and its dequantized values."""
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape).astype(np.float32)
        wq = weight_params(w, axis)
        data = quantize_array(w, wq, narrow=True)
        t = self.g.add_tensor(Tensor(f"{name}/weight", shape, "int8", Role.WEIGHT, wq, data))
        shape_c = [1] * len(shape)
        shape_c[axis] = -1
        return t, data.astype(np.float64) * wq.scale.astype(np.float64).reshape(shape_c)

    def bias(self, name: str, s_in: float, w: Tensor) -> tuple[Tensor, np.ndarray]:
        """int32 bias with scale ``s_in * s_w[c]``; the tensor and its dequantized values."""
        assert w.quant is not None
        bq = bias_params(s_in, w.quant)
        real = self.rng.normal(0.0, BIAS_STD, size=bq.scale.size)
        data = quantize_array(real, bq, "int32")
        t = self.g.add_tensor(Tensor(f"{name}/bias", (bq.scale.size,), "int32", Role.BIAS, bq,
                                     data))
        return t, data.astype(np.float64) * bq.scale.astype(np.float64)


def _check(layer: dict[str, Any], what: str, table: Any, built: Any) -> None:
    if list(table) != list(built):
        raise ValueError(f"MCUNet table, layer {layer['name']}: {what} {table} but the graph "
                         f"has {built}")


def _conv_layer(b: _Builder, layer: dict[str, Any], x: _Act) -> _Act:
    """One conv2d / depthwise_conv2d / classifier layer of the table after activation ``x``."""
    name, (h, w_, c) = layer["name"], x.real.shape
    _check(layer, "in_shape_hwc", layer["in_shape_hwc"], [h, w_, c])
    _check(layer, "in_zero_point", [layer["in_zero_point"]], [x.quant.zp])
    kh, kw = layer["kernel"]
    oc = layer["out_shape_hwc"][2]
    groups = layer["groups"]
    # a 1x1 conv on a 1x1 map (the classifier on the pooled vector) is a fully-connected layer
    fc = layer["in_shape_hwc"][:2] == [1, 1] and (kh, kw) == (1, 1) and groups == 1
    if fc:
        op_type, shape, axis, fan_in = "fully_connected", (oc, c), 0, c
    elif groups == 1:
        op_type, shape, axis, fan_in = "conv2d", (oc, kh, kw, c), 0, kh * kw * c
    elif groups == c == oc:                         # depthwise, depth multiplier 1
        op_type, shape, axis, fan_in = "depthwise_conv2d", (1, kh, kw, c), 3, kh * kw
    else:
        raise ValueError(f"MCUNet table, layer {name}: groups {groups} with {c} -> {oc} "
                         "channels is neither a conv nor a depthwise conv")
    ohwi = {"fully_connected": (oc, 1, 1, c), "conv2d": shape,
            "depthwise_conv2d": (c, kh, kw, 1)}[op_type]
    _check(layer, "weight_shape_OHWI", layer.get("weight_shape_OHWI", ohwi), ohwi)
    wt, w_real = b.weights(name, shape, axis, fan_in)
    bt, b_real = b.bias(name, x.quant.s, wt)
    act = _activation(layer["activation"])
    pads = _padding(layer.get("padding", 0))
    stride = int(layer.get("stride", 1))
    if fc:
        y = (x.real.reshape(1, c) @ w_real.T).reshape(1, 1, oc) + b_real
    else:
        y = _conv_real(x.real, w_real, stride, pads, op_type == "depthwise_conv2d") + b_real
    _check(layer, "out_shape_hwc", layer["out_shape_hwc"], y.shape)
    zp = int(layer["out_zero_point"])
    q = QuantParams(np.float32(output_scale(y, zp, act == "relu6")), zp)
    if fc:
        out = b.activation(f"{name}/out", y, q, shape=(1, oc))
        attrs: dict[str, Any] = {"activation": act, "keep_num_dims": False}
    else:
        out = b.activation(f"{name}/out", y, q)
        attrs = {"stride": (stride, stride), "dilation": (1, 1), "padding": pads,
                 "activation": act}
        if op_type == "depthwise_conv2d":
            attrs["depth_multiplier"] = 1
    b.g.add_op(Op(op_type, name, (x.name, wt.name, bt.name), (out.name,), attrs))
    return out


def _pool_layer(b: _Builder, layer: dict[str, Any], x: _Act) -> _Act:
    """Global average pooling: AVERAGE_POOL_2D over the whole map, sharing x's parameters."""
    h, w, c = x.real.shape
    _check(layer, "in_shape_hwc", layer["in_shape_hwc"], [h, w, c])
    _check(layer, "out_shape_hwc", layer["out_shape_hwc"], [1, 1, c])
    name = layer["name"]
    out = b.activation(f"{name}/out", x.real.mean(axis=(0, 1), keepdims=True), x.quant)
    b.g.add_op(Op("avg_pool2d", name, (x.name,), (out.name,), {
        "filter": (h, w), "stride": (h, w), "padding": (0, 0, 0, 0), "activation": "none"}))
    return out


def _add(b: _Builder, block: str, a: _Act, skip: _Act, zero_point: int) -> _Act:
    """The residual ADD of ``block`` with its own output quantization (zero point: the
    table's ``in_zero_point`` of the layer that reads it)."""
    y = a.real + skip.real
    q = QuantParams(np.float32(output_scale(y, zero_point, relu6=False)), zero_point)
    out = b.activation(f"{block}_add/out", y, q)
    b.g.add_op(Op("add", f"{block}_add", (a.name, skip.name), (out.name,),
                  {"activation": "none"}))
    return out


def _calibration_input(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """The int8 input the scales are calibrated on (uniform over the int8 range, as the
    benchmarks' random samples)."""
    return np.random.default_rng([seed, 1]).integers(-128, 128, size=shape, dtype=np.int8)


def mcunet_graph(seed: int = 0, table: Path = TABLE) -> Graph:
    """The verified int8 graph of the table's MCUNet (input ``input`` (1, 128, 128, 3) int8,
    output ``v15/out`` (1, 10) int8 logits). Op names are the table's layer names (``v0``,
    ``v1_conv_0`` .. ``v14_conv_2``, ``avgpool``, ``v15``) plus ``<block>_add`` for the residual
    ADDs. Weights, biases and scales depend only on ``seed``. TableMissing when the table is
    absent; ValueError when the table contradicts itself (shapes, zero points)."""
    return table_graph(load_table(table), seed, "mcunet_5fps_128", table.name)


def table_graph(t: dict[str, Any], seed: int, name: str, source: str) -> Graph:
    """The verified int8 graph of a layer table in the MCUNet table's format (``input``,
    ``architecture``: ``layers``, ``residual_blocks``, ``residual_adds``)."""
    arch = t["architecture"]
    b = _Builder(np.random.default_rng(seed), Graph(name=name))
    in_shape = tuple(t["input"]["shape_nhwc"])
    in_q = QuantParams(np.float32(INPUT_SCALE), int(t["input"].get("zero_point", 0)))
    x_q = _calibration_input(seed, in_shape).astype(np.int64)
    b.g.add_tensor(Tensor("input", in_shape, "int8", Role.ACTIVATION, in_q))
    x = _Act("input", in_q, ((x_q - in_q.zp) * np.float64(in_q.s))[0])
    layers = arch["layers"]
    residual = set(arch["residual_blocks"])
    adds = {a["block"]: a for a in arch.get("residual_adds", [])}
    block_in = x
    for i, layer in enumerate(layers):
        block = layer["block"]
        if i == 0 or layers[i - 1]["block"] != block:
            block_in = x
        if layer["op"] in ("conv2d", "depthwise_conv2d", "fully_connected"):
            x = _conv_layer(b, layer, x)
        elif layer["op"] in ("global_avg_pool", "pooling", "avg_pool2d"):
            x = _pool_layer(b, layer, x)
        else:
            raise ValueError(f"MCUNet table, layer {layer['name']}: unknown op {layer['op']!r}")
        last_of_block = i + 1 == len(layers) or layers[i + 1]["block"] != block
        if last_of_block and block in residual:
            if i + 1 == len(layers) or "in_zero_point" not in layers[i + 1]:
                raise ValueError(f"MCUNet table: residual block {block} has no reader")
            x = _add(b, block, x, block_in, int(layers[i + 1]["in_zero_point"]))
            n = adds.get(block, {}).get("elements")
            if n is not None and n != x.real.size:
                raise ValueError(f"MCUNet table: residual add of {block} has {n} elements, "
                                 f"the graph {x.real.size}")
    g = b.g
    g.inputs, g.outputs = ["input"], [x.name]
    g.metadata.update({"source_format": "test", "source": "tests/mcunet.py",
                       "mcunet_table": source, "seed": seed})
    return verify(g)


# -- MobileNetV2 ------------------------------------------------------------------------------------
MBV2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                 (6, 160, 3, 2), (6, 320, 1, 1))     # torchvision: (t, c, n, s) per stage


def make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's channel rounding (_make_divisible)."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def mbv2_table(width: float = 0.35, resolution: int = 128, classes: int = 10
               ) -> dict[str, Any]:
    """MobileNetV2 (torchvision's layers and channel rounding) as a layer table in the MCUNet
    table's format: stem conv 3x3/2, 17 inverted-residual blocks ``b1`` .. ``b17`` (expand 1x1
    when t > 1, depthwise 3x3, project 1x1; a residual ADD when stride 1 and in == out), the
    last 1x1 conv to 1280, global average pooling, the classifier ``fc``. ReLU6 outputs have
    zero point -128, linear ones 0."""
    layers: list[dict[str, Any]] = []
    residual: list[str] = []

    def layer(name: str, block: str, op: str, k: int, stride: int, hwc: list[int], oc: int,
              relu6: bool) -> list[int]:
        h, w, c = hwc
        pad = k // 2
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        groups = c if op == "depthwise_conv2d" else 1
        layers.append({"name": name, "block": block, "op": op, "kernel": [k, k],
                       "stride": stride, "padding": pad, "in_shape_hwc": [h, w, c],
                       "out_shape_hwc": [oh, ow, oc], "groups": groups,
                       "activation": "relu6-like clamp" if relu6 else "linear",
                       "out_zero_point": -128 if relu6 else 0,
                       "in_zero_point": layers[-1].get("out_zero_point", -128) if layers
                       else 0})
        return [oh, ow, oc]

    x = layer("stem", "stem", "conv2d", 3, 2, [resolution, resolution, 3],
              make_divisible(32 * width), True)
    n_block = 0
    for t, c, n, s in MBV2_SETTINGS:
        oc = make_divisible(c * width)
        for i in range(n):
            n_block += 1
            blk = f"b{n_block}"
            stride = s if i == 0 else 1
            inp = x[2]
            y, k = x, 0
            if t != 1:
                y = layer(f"{blk}_conv_{k}", blk, "conv2d", 1, 1, y, round(inp * t), True)
                k += 1
            y = layer(f"{blk}_conv_{k}", blk, "depthwise_conv2d", 3, stride, y, y[2], True)
            y = layer(f"{blk}_conv_{k + 1}", blk, "conv2d", 1, 1, y, oc, False)
            if stride == 1 and inp == oc:
                residual.append(blk)
            x = y
    x = layer("last", "last", "conv2d", 1, 1, x, 1280 if width <= 1.0 else
              make_divisible(1280 * width), True)
    layers.append({"name": "avgpool", "block": "pool", "op": "global_avg_pool",
                   "in_shape_hwc": x, "out_shape_hwc": [1, 1, x[2]]})
    x = [1, 1, x[2]]
    layer("fc", "fc", "conv2d", 1, 1, x, classes, False)      # pooled ReLU6: zero point -128
    for a, b in pairwise(layers):                   # an ADD's output: the reader's zero point
        if b.get("op") != "global_avg_pool" and a["block"] in residual and \
                a["block"] != b["block"]:
            b["in_zero_point"] = 0
    return {"input": {"shape_nhwc": [1, resolution, resolution, 3], "zero_point": 0},
            "architecture": {"layers": layers, "residual_blocks": residual,
                             "residual_adds": []}}


def mbv2_graph(seed: int = 0, width: float = 0.35, resolution: int = 128,
               classes: int = 10) -> Graph:
    """MobileNetV2-w``width`` at ``resolution`` as a verified int8 graph with random weights
    (``mbv2_table``; op names ``stem``, ``b1_conv_0`` .., ``last``, ``avgpool``, ``fc``)."""
    return table_graph(mbv2_table(width, resolution, classes), seed,
                       f"mobilenetv2_w{width}_{resolution}", "mbv2_table")


def mbv2_spec() -> str:
    """The issue's scheme: biases of the last 20 layers, the classifier's weights and a
    quarter of the output channels of two late pointwise convs (the expansions of the last
    two blocks); plain SGD, fp32 backward."""
    return ("bias:last20+weight:fc+weight:b17_conv_0/b16_conv_0@0.25,"
            "opt=sgd,lr=0.0008,loss=cross_entropy,backward=fp32,master_weights=none")
