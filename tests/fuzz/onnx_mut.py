"""Mutations of ONNX ModelProtos, and the small hand-built models the campaign starts from.

``mutate(data, rng)`` parses a model and applies one to three mutations at the protobuf level:
node attributes (ints to 0 / -1 / 2**31-1 / 2**62, another type, removed, doubled), pads and
shape initializers with huge or negative values, tensor dims (0, -1, 2**62, symbolic),
element types (any ONNX type), initializers (dims that disagree with the data, truncated
raw_data, another data type, external data pointing outside, removed, doubled), node inputs
and outputs (missing, cycles, duplicated outputs), op types swapped, opset versions, graph
outputs removed or doubled — and sometimes byte damage of the serialized result.
"""

from __future__ import annotations

import numpy as np

BIG_INTS = [0, -1, 1, 2, -2**31, 2**31 - 1, 2**62, -2**62, 2**63 - 1, 65536, 3]
OP_TYPES = ["Conv", "Gemm", "MatMul", "Add", "Mul", "Sub", "Div", "MaxPool", "AveragePool",
            "GlobalAveragePool", "ReduceMean", "Softmax", "Concat", "Pad", "Reshape", "Flatten",
            "Squeeze", "Unsqueeze", "Transpose", "Relu", "Clip", "BatchNormalization",
            "Identity", "Dropout", "Cast", "QuantizeLinear", "DequantizeLinear", "Shape",
            "Constant", "ConstantOfShape", "Expand", "Tile", "Range", "Gather", "Slice",
            "Sigmoid", "LSTM", "Loop", "If", "Einsum"]


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _ints(rng: np.random.Generator, n: int) -> list[int]:
    return [int(_pick(rng, BIG_INTS)) for _ in range(n)]


def _mutate_attribute(node, rng: np.random.Generator) -> str:
    from onnx import AttributeProto, helper

    if not node.attribute or rng.random() < 0.15:
        name = _pick(rng, ["pads", "strides", "kernel_shape", "dilations", "group", "axis",
                           "axes", "perm", "transB", "alpha", "auto_pad", "keepdims", "to",
                           "value", "mode", "ceil_mode", "count_include_pad"])
        node.attribute.append(helper.make_attribute(name, _ints(rng, int(rng.integers(1, 9)))))
        return f"added attribute {name}"
    a = _pick(rng, list(node.attribute))
    choice = int(rng.integers(6))
    if choice == 0 and a.type == AttributeProto.INTS and len(a.ints):
        k = int(rng.integers(len(a.ints)))
        a.ints[k] = int(_pick(rng, BIG_INTS))
        return f"{node.op_type}.{a.name}[{k}]"
    if choice == 1:
        a.type = _pick(rng, [AttributeProto.FLOAT, AttributeProto.INT, AttributeProto.STRING,
                             AttributeProto.INTS, AttributeProto.FLOATS, AttributeProto.TENSOR,
                             AttributeProto.GRAPH, AttributeProto.STRINGS,
                             AttributeProto.UNDEFINED])
        return f"{node.op_type}.{a.name} type"
    if choice == 2:
        node.attribute.remove(a)
        return f"removed {node.op_type}.{a.name}"
    if choice == 3:
        node.attribute.append(helper.make_attribute(a.name, _ints(rng, 4)))
        return f"doubled {node.op_type}.{a.name}"
    if choice == 4 and a.type == AttributeProto.INT:
        a.i = int(_pick(rng, BIG_INTS))
        return f"{node.op_type}.{a.name}"
    if a.type == AttributeProto.FLOAT:
        a.f = float(_pick(rng, [np.nan, np.inf, -np.inf, 0.0, -1.0, 3.4e38]))
        return f"{node.op_type}.{a.name} float"
    del a.ints[:]
    a.ints.extend(_ints(rng, int(rng.integers(1, 9))))
    a.type = AttributeProto.INTS
    return f"{node.op_type}.{a.name} ints"


def _mutate_initializer(g, rng: np.random.Generator) -> str:
    from onnx import TensorProto, numpy_helper

    if not g.initializer:
        return "no initializer"
    t = _pick(rng, list(g.initializer))
    choice = int(rng.integers(9))
    if choice == 0 and len(t.dims):
        k = int(rng.integers(len(t.dims)))
        t.dims[k] = int(_pick(rng, [0, 1, -1, 2**31 - 1, 2**62, t.dims[k] + 1]))
        return f"initializer {t.name} dims"
    if choice == 1 and t.raw_data:
        t.raw_data = t.raw_data[: int(rng.integers(len(t.raw_data)))]
        return f"initializer {t.name} truncated"
    if choice == 2:
        t.data_type = int(_pick(rng, list(range(24)) + [99]))
        return f"initializer {t.name} data type"
    if choice == 3:
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        e = t.external_data.add()
        e.key, e.value = "location", _pick(rng, ["../../../etc/passwd", "/etc/passwd",
                                                   "missing.bin", "x" * 300])
        t.raw_data = b""
        return f"initializer {t.name} external"
    if choice == 4:
        g.initializer.remove(t)
        return f"removed initializer {t.name}"
    if choice == 5:
        g.initializer.append(t)
        return f"doubled initializer {t.name}"
    if choice == 6:
        try:
            a = numpy_helper.to_array(t).copy()
        except Exception:  # noqa: BLE001 - a corrupt tensor from an earlier mutation
            return "unreadable initializer"
        if a.size:
            flat = a.reshape(-1)
            k = int(rng.integers(flat.size))
            if a.dtype.kind == "f":
                flat[k] = _pick(rng, [np.nan, np.inf, -np.inf, 1e38, -1e38, 0.0])
            elif a.dtype.kind in "iu":
                info = np.iinfo(a.dtype)
                flat[k] = _pick(rng, [info.max, info.min, 0, -1 if info.min < 0 else 0])
            t.CopyFrom(numpy_helper.from_array(flat.reshape(a.shape), t.name))
        return f"initializer {t.name} value"
    if choice == 7:
        del t.dims[:]
        t.dims.extend(int(_pick(rng, [0, 1, 2, 3, 2**31 - 1])) for _ in
                      range(int(rng.integers(0, 6))))
        return f"initializer {t.name} rank"
    # a shape / pads / axes constant with huge values
    int_inits = [i for i in g.initializer if i.data_type == TensorProto.INT64]
    if int_inits:
        t = _pick(rng, int_inits)
        try:
            shape = numpy_helper.to_array(t).shape
        except Exception:  # noqa: BLE001 - a corrupt tensor from an earlier mutation
            return "unreadable int64 initializer"
        a = numpy_helper.to_array(t).copy().reshape(-1)
        if a.size:
            a[int(rng.integers(a.size))] = int(_pick(rng, BIG_INTS))
            t.CopyFrom(numpy_helper.from_array(a.reshape(shape), t.name))
        return f"int64 initializer {t.name}"
    return "no int64 initializer"


def _mutate_value_info(g, rng: np.random.Generator) -> str:
    infos = list(g.input) + list(g.output) + list(g.value_info)
    if not infos:
        return "no value info"
    v = _pick(rng, infos)
    tt = v.type.tensor_type
    choice = int(rng.integers(4))
    if choice == 0 and len(tt.shape.dim):
        d = tt.shape.dim[int(rng.integers(len(tt.shape.dim)))]
        if rng.random() < 0.2:
            d.dim_param = _pick(rng, ["N", "batch", "", "?"])
        else:
            d.dim_value = int(_pick(rng, [0, 1, -1, 2**31 - 1, 2**62, 7, 1000003]))
        return f"dim of {v.name}"
    if choice == 1:
        tt.elem_type = int(rng.integers(0, 25))
        return f"elem type of {v.name}"
    if choice == 2:
        tt.shape.dim.add().dim_value = int(_pick(rng, [1, 2, 0]))
        return f"rank of {v.name}"
    v.type.ClearField("tensor_type")
    return f"type of {v.name} removed"


def _mutate_node(g, rng: np.random.Generator) -> str:
    if not g.node:
        return "no node"
    nodes = list(g.node)
    i = int(rng.integers(len(nodes)))
    node = nodes[i]
    choice = int(rng.integers(8))
    names = [o for n in nodes for o in n.output] + [x.name for x in g.input] + \
        [t.name for t in g.initializer]
    if choice == 0 and node.input:
        k = int(rng.integers(len(node.input)))
        node.input[k] = _pick(rng, names + ["", "missing", node.output[0] if node.output
                                            else "x"])
        return f"input {k} of {node.op_type}"
    if choice == 1 and node.output:
        node.output[0] = _pick(rng, names + [""])
        return f"output of {node.op_type}"
    if choice == 2:
        node.op_type = _pick(rng, OP_TYPES)
        return f"op type -> {node.op_type}"
    if choice == 3:
        g.node.remove(node)
        return f"removed {node.op_type}"
    if choice == 4:
        g.node.insert(int(rng.integers(len(nodes) + 1)), node)
        return f"doubled {node.op_type}"
    if choice == 5 and len(nodes) > 1:
        j = int(rng.integers(len(nodes)))
        a, b = type(node)(), type(node)()
        a.CopyFrom(nodes[i])
        b.CopyFrom(nodes[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)
        return "swapped nodes"
    if choice == 6:
        node.domain = _pick(rng, ["com.microsoft", "ai.onnx.ml", "x", "ai.onnx"])
        return "domain"
    node.input.append(_pick(rng, names))
    return f"extra input of {node.op_type}"


def _mutate_model(m, rng: np.random.Generator) -> str:
    choice = int(rng.integers(5))
    if choice == 0 and m.opset_import:
        m.opset_import[0].version = int(_pick(rng, [0, 1, 6, 7, 11, 13, 21, 99, 2**62]))
        return "opset"
    if choice == 1:
        m.ir_version = int(_pick(rng, [0, 1, 3, 11, 99, 2**62]))
        return "ir version"
    if choice == 2 and m.graph.output:
        if rng.random() < 0.5:
            m.graph.output.append(m.graph.output[0])
            return "doubled output"
        del m.graph.output[:]
        return "no outputs"
    if choice == 3:
        m.graph.input.append(m.graph.input[0] if m.graph.input else m.graph.output[0])
        return "doubled input"
    m.graph.name = _pick(rng, ["", "*/ #include \"x\"", "../../x", "a" * 5000])
    return "graph name"


def mutate(data: bytes, rng: np.random.Generator) -> tuple[bytes, list[str]]:
    import onnx

    m = onnx.ModelProto()
    m.ParseFromString(data)
    done = []
    for _ in range(int(rng.integers(1, 4))):
        what = int(rng.integers(10))
        g = m.graph
        if what <= 2:
            nodes = [n for n in g.node if n.attribute] or list(g.node)
            done.append(_mutate_attribute(_pick(rng, nodes), rng) if nodes else "no node")
        elif what <= 4:
            done.append(_mutate_initializer(g, rng))
        elif what == 5:
            done.append(_mutate_value_info(g, rng))
        elif what <= 7:
            done.append(_mutate_node(g, rng))
        else:
            done.append(_mutate_model(m, rng))
    out = bytearray(m.SerializeToString())
    if rng.random() < 0.1 and out:
        for _ in range(int(rng.integers(1, 6))):
            out[int(rng.integers(len(out)))] ^= 1 << int(rng.integers(8))
        done.append("bit flips")
    return bytes(out), done


def small_models() -> dict[str, bytes]:
    """Hand-built float models over the ops the importer knows (NCHW, opset 13)."""
    from onnx import TensorProto, helper, numpy_helper

    r = np.random.default_rng(0)

    def w(name: str, *shape: int, dtype=np.float32) -> object:
        a = r.normal(0, 0.5, size=shape).astype(dtype) if dtype == np.float32 else \
            np.asarray(shape, dtype=dtype)
        return numpy_helper.from_array(a, name)

    def i64(name: str, values: list[int]) -> object:
        return numpy_helper.from_array(np.asarray(values, np.int64), name)

    def model(name: str, nodes, x_shape, y_shape, inits) -> bytes:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)
        g = helper.make_graph(nodes, name, [x], [y], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m.SerializeToString()

    n = helper.make_node
    out = {}
    out["pad_conv_pool"] = model("pad_conv_pool", [
        n("Pad", ["x", "pads"], ["p"], name="/pad"),
        n("Conv", ["p", "w1", "b1"], ["c"], name="/conv", kernel_shape=[3, 3], strides=[1, 1]),
        n("Relu", ["c"], ["r"], name="/relu"),
        n("MaxPool", ["r"], ["m"], name="/pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Flatten", ["m"], ["f"], name="/flatten", axis=1),
        n("Gemm", ["f", "w2", "b2"], ["g"], name="/fc", transB=1),
        n("Softmax", ["g"], ["y"], name="/softmax", axis=1),
    ], [1, 3, 8, 8], [1, 10], [i64("pads", [0, 0, 1, 1, 0, 0, 1, 1]), w("w1", 4, 3, 3, 3),
                               w("b1", 4), w("w2", 10, 64), w("b2", 10)])
    out["dw_bn_gap"] = model("dw_bn_gap", [
        n("Conv", ["x", "dw"], ["d"], name="/dw", kernel_shape=[3, 3], group=2,
          pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["d", "s", "bb", "mu", "var"], ["bn"], name="/bn"),
        n("Clip", ["bn", "lo", "hi"], ["cl"], name="/relu6"),
        n("GlobalAveragePool", ["cl"], ["gp"], name="/gap"),
        n("Reshape", ["gp", "shape"], ["rs"], name="/reshape"),
        n("Gemm", ["rs", "w3"], ["y"], name="/fc", transB=1),
    ], [1, 2, 6, 6], [1, 5], [w("dw", 2, 1, 3, 3), w("s", 2), w("bb", 2), w("mu", 2),
                              numpy_helper.from_array(np.ones(2, np.float32), "var"),
                              numpy_helper.from_array(np.float32(0), "lo"),
                              numpy_helper.from_array(np.float32(6), "hi"),
                              i64("shape", [1, -1]), w("w3", 5, 2)])
    out["matmul_concat"] = model("matmul_concat", [
        n("MatMul", ["x", "m1"], ["a"], name="/mm1"),
        n("Add", ["a", "c1"], ["a1"], name="/add"),
        n("Relu", ["a1"], ["ar"], name="/relu"),
        n("MatMul", ["x", "m2"], ["b"], name="/mm2"),
        n("Concat", ["ar", "b"], ["cc"], name="/concat", axis=1),
        n("Mul", ["cc", "k"], ["mk"], name="/mul"),
        n("Unsqueeze", ["mk", "ax"], ["u"], name="/unsqueeze"),
        n("ReduceMean", ["u"], ["rm"], name="/mean", axes=[1], keepdims=0),
        n("MatMul", ["rm", "m3"], ["y"], name="/mm3"),
    ], [1, 16], [1, 4], [w("m1", 16, 8), w("c1", 8), w("m2", 16, 8), w("k", 16),
                         i64("ax", [1]), w("m3", 16, 4)])
    return out
