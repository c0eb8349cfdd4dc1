"""The TFLite schema facts shared by the reader and the writer: op codes, option tables, enums.

Field slots are the TFLite schema's (schema.fbs) field numbers: a table's field ``n`` lives at
vtable offset ``4 + 2 * n``. They are written out here once so the checked reader and the
builder agree on them.
"""

from __future__ import annotations

from tflite.ActivationFunctionType import ActivationFunctionType
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions
from tflite.Padding import Padding
from tflite.TensorType import TensorType

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
# Model metadata entry in which write_tflite records the IR op names (JSON list of strings, one
# per TFLite operator); TFLite and TFLM ignore it, read_tflite restores the names from it.
OP_NAMES_METADATA = "pockengine_op_names"


def _enum_names(enum: type) -> dict[int, str]:
    """A generated flatbuffers enum class's value -> member name."""
    return {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}


# builtin operator code -> IR op type (one row per supported TFLite op)
OPCODE_TO_IR: dict[int, str] = {
    BuiltinOperator.CONV_2D: "conv2d",
    BuiltinOperator.DEPTHWISE_CONV_2D: "depthwise_conv2d",
    BuiltinOperator.FULLY_CONNECTED: "fully_connected",
    BuiltinOperator.AVERAGE_POOL_2D: "avg_pool2d",
    BuiltinOperator.MAX_POOL_2D: "max_pool2d",
    BuiltinOperator.ADD: "add",
    BuiltinOperator.MUL: "mul",
    BuiltinOperator.RESHAPE: "reshape",
    BuiltinOperator.SOFTMAX: "softmax",
    BuiltinOperator.MEAN: "mean",
    BuiltinOperator.PAD: "pad",
    BuiltinOperator.PADV2: "pad",
    BuiltinOperator.CONCATENATION: "concat",
    BuiltinOperator.QUANTIZE: "quantize",
    BuiltinOperator.DEQUANTIZE: "dequantize",
    BuiltinOperator.RELU: "relu",
    BuiltinOperator.RELU6: "relu6",
}

# IR op type -> (builtin operator code, builtin options type) used by the writer
IR_TO_OPCODE: dict[str, tuple[int, int]] = {
    "conv2d": (BuiltinOperator.CONV_2D, BuiltinOptions.Conv2DOptions),
    "depthwise_conv2d": (BuiltinOperator.DEPTHWISE_CONV_2D, BuiltinOptions.DepthwiseConv2DOptions),
    "fully_connected": (BuiltinOperator.FULLY_CONNECTED, BuiltinOptions.FullyConnectedOptions),
    "avg_pool2d": (BuiltinOperator.AVERAGE_POOL_2D, BuiltinOptions.Pool2DOptions),
    "max_pool2d": (BuiltinOperator.MAX_POOL_2D, BuiltinOptions.Pool2DOptions),
    "add": (BuiltinOperator.ADD, BuiltinOptions.AddOptions),
    "mul": (BuiltinOperator.MUL, BuiltinOptions.MulOptions),
    "reshape": (BuiltinOperator.RESHAPE, BuiltinOptions.ReshapeOptions),
    "softmax": (BuiltinOperator.SOFTMAX, BuiltinOptions.SoftmaxOptions),
    "mean": (BuiltinOperator.MEAN, BuiltinOptions.ReducerOptions),
    "pad": (BuiltinOperator.PAD, BuiltinOptions.PadOptions),
    "concat": (BuiltinOperator.CONCATENATION, BuiltinOptions.ConcatenationOptions),
    "quantize": (BuiltinOperator.QUANTIZE, BuiltinOptions.QuantizeOptions),
    "dequantize": (BuiltinOperator.DEQUANTIZE, BuiltinOptions.DequantizeOptions),
    "relu": (BuiltinOperator.RELU, BuiltinOptions.NONE),
    "relu6": (BuiltinOperator.RELU6, BuiltinOptions.NONE),
}

# The options table each supported builtin expects (NONE: no options).
EXPECTED_OPTIONS: dict[int, int] = {code: IR_TO_OPCODE[ir][1] for code, ir in OPCODE_TO_IR.items()}
EXPECTED_OPTIONS[BuiltinOperator.PADV2] = BuiltinOptions.PadV2Options

OPCODE_NAMES: dict[int, str] = _enum_names(BuiltinOperator)

TENSOR_TYPES: dict[int, str] = {
    TensorType.FLOAT32: "float32",
    TensorType.INT32: "int32",
    TensorType.UINT8: "uint8",
    TensorType.INT64: "int64",
    TensorType.BOOL: "bool",
    TensorType.INT16: "int16",
    TensorType.INT8: "int8",
}
DTYPE_TO_TENSOR_TYPE: dict[str, int] = {v: k for k, v in TENSOR_TYPES.items()}
TENSOR_TYPE_NAMES: dict[int, str] = _enum_names(TensorType)

ACTIVATION_TO_IR: dict[int, str] = {
    ActivationFunctionType.NONE: "none",
    ActivationFunctionType.RELU: "relu",
    ActivationFunctionType.RELU_N1_TO_1: "relu_n1_to_1",
    ActivationFunctionType.RELU6: "relu6",
}
IR_TO_ACTIVATION: dict[str, int] = {v: k for k, v in ACTIVATION_TO_IR.items()}
ACTIVATION_NAMES: dict[int, str] = _enum_names(ActivationFunctionType)

PADDING_SAME = Padding.SAME
PADDING_VALID = Padding.VALID

# Operator versions the writer records when the graph carries none (TFLM ignores them; TFLite
# uses them to pick kernels). int8 / float32.
DEFAULT_OP_VERSIONS: dict[int, tuple[int, int]] = {
    BuiltinOperator.CONV_2D: (3, 1),
    BuiltinOperator.DEPTHWISE_CONV_2D: (3, 1),
    BuiltinOperator.FULLY_CONNECTED: (4, 1),
    BuiltinOperator.AVERAGE_POOL_2D: (2, 1),
    BuiltinOperator.MAX_POOL_2D: (2, 1),
    BuiltinOperator.ADD: (2, 1),
    BuiltinOperator.MUL: (2, 1),
    BuiltinOperator.RESHAPE: (1, 1),
    BuiltinOperator.SOFTMAX: (2, 1),
    BuiltinOperator.MEAN: (2, 1),
    BuiltinOperator.PAD: (2, 1),
    BuiltinOperator.PADV2: (2, 1),
    BuiltinOperator.CONCATENATION: (2, 1),
    BuiltinOperator.QUANTIZE: (2, 1),
    BuiltinOperator.DEQUANTIZE: (2, 1),
    BuiltinOperator.RELU: (2, 1),
    BuiltinOperator.RELU6: (2, 1),
}


class Slot:
    """Field numbers of the tables the frontend reads and writes."""

    class Model:
        VERSION, OPERATOR_CODES, SUBGRAPHS, DESCRIPTION, BUFFERS, METADATA_BUFFER, METADATA = \
            range(7)

    class Metadata:
        NAME, BUFFER = 0, 1

    class OperatorCode:
        DEPRECATED_BUILTIN_CODE, CUSTOM_CODE, VERSION, BUILTIN_CODE = 0, 1, 2, 3

    class SubGraph:
        TENSORS, INPUTS, OUTPUTS, OPERATORS, NAME = 0, 1, 2, 3, 4

    class Tensor:
        SHAPE, TYPE, BUFFER, NAME, QUANTIZATION, IS_VARIABLE, SPARSITY = 0, 1, 2, 3, 4, 5, 6

    class Buffer:
        DATA, OFFSET, SIZE = 0, 1, 2

    class Quantization:
        MIN, MAX, SCALE, ZERO_POINT, DETAILS_TYPE, DETAILS, QUANTIZED_DIMENSION = range(7)

    class Operator:
        OPCODE_INDEX, INPUTS, OUTPUTS, BUILTIN_OPTIONS_TYPE, BUILTIN_OPTIONS = 0, 1, 2, 3, 4

    class Conv2D:
        PADDING, STRIDE_W, STRIDE_H, ACTIVATION, DILATION_W, DILATION_H = range(6)

    class DepthwiseConv2D:
        PADDING, STRIDE_W, STRIDE_H, DEPTH_MULTIPLIER, ACTIVATION, DILATION_W, DILATION_H = \
            range(7)

    class FullyConnected:
        ACTIVATION, WEIGHTS_FORMAT, KEEP_NUM_DIMS = 0, 1, 2

    class Pool2D:
        PADDING, STRIDE_W, STRIDE_H, FILTER_W, FILTER_H, ACTIVATION = range(6)

    class Add:
        ACTIVATION = 0

    class Mul:
        ACTIVATION = 0

    class Reshape:
        NEW_SHAPE = 0

    class Softmax:
        BETA = 0

    class Reducer:
        KEEP_DIMS = 0

    class Concatenation:
        AXIS, ACTIVATION = 0, 1
