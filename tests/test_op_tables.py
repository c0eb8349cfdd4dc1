"""Every per-op table of codegen has the op set of ``ir.OP_SPECS`` (issue #16).

The op facts several stages need (weight axis, shared quantization, fusable activation, fixed
int8 output, update ops) live on ``ir.ops.OpSpec``; what is left per stage is one table per
stage, keyed by op type. Adding an op to OP_SPECS without its entry in each of them fails
here. A table that takes fewer ops on purpose says which and why in ``SUBSETS`` (data, so
that the exception is visible and checked: an op listed there must really be missing).
"""

from __future__ import annotations

import inspect

import pytest

from codegen.backends import arm, cmsis_nn
from codegen.backends.ref_args import CALL_BUILDERS
from codegen.backends.train_args import TRAIN_CALL_BUILDERS
from codegen.frontend import load_model, onnx_writer, tflite_reader, tflite_schema, tflite_writer
from codegen.golden.kernels import KERNEL_BUILDERS
from codegen.golden.train_kernels import TRAIN_KERNEL_BUILDERS
from codegen.ir import ACTIVATIONS, FORWARD_OPS, OP_SPECS, PARAMETRIC_OPS, weight_axis
from codegen.ir.ops import PARAM_UPDATE_OPS, TRAINING_OP_SPECS, UPDATE_INPUTS, UPDATE_OPS
from codegen.ir.verify import SHAPE_CHECKS
from codegen.models import path as model_path
from codegen.train import GRAD_RULES

FORWARD = set(FORWARD_OPS)
TRAINING = set(TRAINING_OP_SPECS)

# table -> (the ops it leaves out on purpose, why). Empty sets are not listed.
_STREAM_IO = ("stream_chain is made by the stream pass from ops of the model "
              "(codegen.stream) and is not an op of any model file: the writers write the ops "
              "it stands for (ir.stream.unstream), the readers never meet it")
SUBSETS: dict[str, tuple[set[str], str]] = {
    "frontend.onnx_writer._Writer.op_<type>": (
        {"dequantize", "stream_chain"},
        ("write_onnx exports int8 QDQ graphs only; a dequantize has a float output, which it "
         "refuses by name; " + _STREAM_IO)),
    "frontend.tflite_schema.OPCODE_TO_IR": ({"stream_chain"}, _STREAM_IO),
    "frontend.tflite_schema.IR_TO_OPCODE": ({"stream_chain"}, _STREAM_IO),
    "frontend.tflite_reader.CONVERTERS": ({"stream_chain"}, _STREAM_IO),
    "frontend.tflite_writer.LOWERINGS": ({"stream_chain"}, _STREAM_IO),
}


def _onnx_writer_ops() -> set[str]:
    """The ops with an ``op_<type>`` method of the ONNX writer (its dispatch)."""
    return {name[3:] for name, _ in inspect.getmembers(onnx_writer._Writer, inspect.isfunction)
            if name.startswith("op_")}


# table name -> (its op types, the op set it must cover)
TABLES = {
    "golden.kernels.KERNEL_BUILDERS": (set(KERNEL_BUILDERS), FORWARD),
    "golden.train_kernels.TRAIN_KERNEL_BUILDERS": (set(TRAIN_KERNEL_BUILDERS), TRAINING),
    "backends.ref_args.CALL_BUILDERS": (set(CALL_BUILDERS), FORWARD),
    "backends.train_args.TRAIN_CALL_BUILDERS": (set(TRAIN_CALL_BUILDERS), TRAINING),
    "train.rules.GRAD_RULES": (set(GRAD_RULES), FORWARD),
    "ir.verify.SHAPE_CHECKS": (set(SHAPE_CHECKS), FORWARD),
    "frontend.tflite_schema.OPCODE_TO_IR": (set(tflite_schema.OPCODE_TO_IR.values()), FORWARD),
    "frontend.tflite_schema.IR_TO_OPCODE": (set(tflite_schema.IR_TO_OPCODE), FORWARD),
    "frontend.tflite_reader.CONVERTERS": (set(tflite_reader.CONVERTERS), FORWARD),
    "frontend.tflite_writer.LOWERINGS": (set(tflite_writer.LOWERINGS), FORWARD),
    "frontend.onnx_writer._Writer.op_<type>": (_onnx_writer_ops(), FORWARD),
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_has_the_ops_of_op_specs(name):
    keys, ops = TABLES[name]
    left_out, _why = SUBSETS.get(name, (set(), ""))
    assert left_out <= ops, f"{name}: SUBSETS names ops that are not in OP_SPECS"
    assert not keys - ops, f"{name}: entries for unknown op types {sorted(keys - ops)}"
    assert ops - keys == left_out, (
        f"{name}: missing {sorted(ops - keys - left_out)}"
        if ops - keys - left_out else f"{name}: has {sorted(left_out & keys)} now; drop them "
                                      "from SUBSETS")


def test_op_specs_split_into_forward_and_training_ops():
    assert FORWARD | TRAINING == set(OP_SPECS) and not FORWARD & TRAINING


def test_onnx_writer_lists_what_it_dispatches():
    assert set(onnx_writer.SUPPORTED) == _onnx_writer_ops()


def test_tflite_options_tables_cover_every_builtin():
    """Each options table a supported builtin has (reader: expected, writer: emitted) has a
    field serializer in the writer, and each builtin a default operator version."""
    written = {getattr(tflite_schema.BuiltinOptions, n) for n in tflite_writer._OPTION_FIELDS}
    options = {ot for _, ot in tflite_schema.IR_TO_OPCODE.values()}
    options |= set(tflite_schema.EXPECTED_OPTIONS.values())
    options.discard(tflite_schema.BuiltinOptions.NONE)
    assert options <= written
    assert set(tflite_schema.OPCODE_TO_IR) <= set(tflite_schema.DEFAULT_OP_VERSIONS)
    assert set(tflite_schema.OPCODE_TO_IR) == set(tflite_schema.EXPECTED_OPTIONS)


def test_accelerating_backends_take_known_ops_only():
    """arm and CMSIS-NN take the ops they speed up (a subset by design: ref, last in every
    chain, runs the rest), never an op type OP_SPECS does not have."""
    for table in (arm.BUILDERS, cmsis_nn.BUILDERS):
        assert set(table) <= set(OP_SPECS)


def test_parametric_ops_have_their_backward_ops():
    """A layer's rule emits ``<op>_grad_input`` and ``<op>_grad_weight``; verify reads the
    weight axis of the latter through the forward type."""
    for t in PARAMETRIC_OPS:
        assert f"{t}_grad_input" in TRAINING and f"{t}_grad_weight" in TRAINING
        assert "channels" in OP_SPECS[f"{t}_grad_weight"].attrs


def test_op_facts_are_consistent():
    for t, spec in OP_SPECS.items():
        if spec.weight_axis is not None:          # (x, weight, bias or "")
            assert spec.min_inputs == 2 and spec.max_inputs == 3, t
        if spec.shares_quant:                     # ptq unites input 0 and output 0
            assert spec.max_inputs == 1 and spec.n_outputs == 1, t
        if spec.fusable_activation:
            assert "activation" in spec.attrs, t
        if spec.is_activation:
            assert t in ACTIVATIONS and not spec.attrs, t
        if spec.int8_output is not None:
            scale, zp = spec.int8_output
            assert spec.n_outputs == 1 and scale > 0 and -128 <= zp <= 127, t
        if t in TRAINING:                         # the forward facts are forward ops' only
            assert spec.weight_axis is None and not spec.shares_quant, t
    assert PARAMETRIC_OPS == tuple(t for t in FORWARD_OPS if OP_SPECS[t].weight_axis is not None)


def test_update_ops():
    assert set(PARAM_UPDATE_OPS) < set(UPDATE_OPS) <= TRAINING
    for t in UPDATE_OPS:
        assert OP_SPECS[t].n_outputs == 0 and "updates" in OP_SPECS[t].attrs, t
    for t in PARAM_UPDATE_OPS:
        assert OP_SPECS[t].max_inputs == len(UPDATE_INPUTS), t


def test_weight_axis_is_the_output_channel_axis():
    """On a real model: the weight's extent on weight_axis is the bias length (conv OHWI,
    depthwise 1HWC with 16 channels, FC (O, I))."""
    g = load_model(model_path("digits_cnn.onnx"))
    seen = set()
    for op in g.ops:
        if op.type in PARAMETRIC_OPS:
            w, b = g.tensors[op.inputs[1]], g.tensors[op.inputs[2]]
            assert w.shape[weight_axis(op.type)] == b.shape[0], op.name
            seen.add(op.type)
    assert seen == set(PARAMETRIC_OPS)
    with pytest.raises(ValueError):
        weight_axis("add")
