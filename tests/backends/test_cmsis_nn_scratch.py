"""The CMSIS-NN backend's scratch formulas equal the linked CMSIS-NN's *_get_buffer_size
functions, compiled on the host, for every core: the host build is the plain C core, and
CMSIS-NN's ``_dsp`` / ``_mve`` variants give what a DSP / Helium core computes. Also: the
pe_* structs have the layouts of the cmsis_nn_* structs the wrappers copy them into.

Needs the CMSIS-NN checkout (skips with the backend's reason without it); the values recorded
from these functions for CI machines are in test_cmsis_nn.py.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from codegen.backends import STRUCTS
from codegen.backends import cmsis_nn as cm
from tests.kernels.c_runner import struct_type

from .cmsis_helpers import checkout, includes

SOURCES = ("ConvolutionFunctions/arm_convolve_get_buffer_sizes_s8.c",
           "ConvolutionFunctions/arm_depthwise_conv_get_buffer_sizes_s8.c",
           "FullyConnectedFunctions/arm_fully_connected_get_buffer_sizes_s8.c",
           "PoolingFunctions/arm_avgpool_get_buffer_sizes_s8.c")
VARIANTS = {cm.PLAIN: "", cm.DSP: "_dsp", cm.MVE: "_mve"}
N_SHAPES = 3000


@pytest.fixture(scope="module")
def sizes(tmp_path_factory) -> ctypes.CDLL:
    root = checkout()
    out = tmp_path_factory.mktemp("cmsis_sizes")
    lib = out / "libsizes.so"
    subprocess.run(["gcc", "-std=gnu99", "-O1", "-fPIC", "-shared", *includes(root),
                    *[str(root / "Source" / s) for s in SOURCES], "-o", str(lib)],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def _dims(shape) -> ctypes.Structure:
    return struct_type("pe_dims")(*shape)


def _tile(h: int, w: int) -> ctypes.Structure:
    return struct_type("pe_tile")(w, h)


def _act() -> ctypes.Structure:
    return struct_type("pe_activation")(-128, 127)


def random_geometry(rng: np.random.Generator) -> cm.ConvGeometry:
    """Shapes around every branch: 1x1, one-row 1xN with any padding, grouped, dilated."""
    kind = rng.integers(0, 4)
    c = int(rng.choice([1, 2, 3, 4, 8, 12, 16, 33, 124, 125, 250]))
    n = int(rng.integers(1, 3))
    in_h = 1 if kind == 1 else int(rng.integers(1, 40))
    in_w = int(rng.integers(1, 40))
    k_h = 1 if kind in (0, 1) else int(rng.integers(1, 6))
    k_w = 1 if kind == 0 else int(rng.integers(1, 8))
    s_h, s_w = (int(v) for v in rng.integers(1, 4, 2))
    d_h, d_w = (1, 1) if rng.random() < 0.7 else (int(v) for v in rng.integers(1, 3, 2))
    pads = [0, 0, 0, 0] if rng.random() < 0.4 else [int(v) for v in rng.integers(0, 4, 4)]
    out_h = max(1, (in_h + pads[0] + pads[1] - ((k_h - 1) * d_h + 1)) // s_h + 1)
    out_w = max(1, (in_w + pads[2] + pads[3] - ((k_w - 1) * d_w + 1)) // s_w + 1)
    groups = int(rng.choice([1, 1, 1, c])) if kind == 3 else 1
    k_c = max(1, c // groups)
    out_c = int(rng.choice([1, 3, 8, 16, 64, 130]))
    return cm.ConvGeometry(n, in_h, in_w, c, k_h, k_w, k_c, out_h, out_w, out_c, s_h, s_w,
                           *pads, d_h, d_w)


def _conv_args(g: cm.ConvGeometry):
    params = struct_type("pe_conv_params")(0, 0, _tile(g.stride_h, g.stride_w),
                                           _tile(g.pad_top, g.pad_left),
                                           _tile(g.dil_h, g.dil_w), _act())
    return [ctypes.byref(v) for v in (params, _dims((g.n, g.in_h, g.in_w, g.in_c)),
                                      _dims((g.out_c, g.k_h, g.k_w, g.k_c)),
                                      _dims((g.n, g.out_h, g.out_w, g.out_c)))]


def _dw_args(g: cm.ConvGeometry):
    params = struct_type("pe_dw_conv_params")(0, 0, g.out_c // g.in_c,
                                              _tile(g.stride_h, g.stride_w),
                                              _tile(g.pad_top, g.pad_left),
                                              _tile(g.dil_h, g.dil_w), _act())
    return [ctypes.byref(v) for v in (params, _dims((g.n, g.in_h, g.in_w, g.in_c)),
                                      _dims((1, g.k_h, g.k_w, g.out_c)),
                                      _dims((g.n, g.out_h, g.out_w, g.out_c)))]


@pytest.mark.parametrize("core", sorted(VARIANTS))
def test_conv_and_depthwise_buffer_sizes(sizes, core):
    rng = np.random.default_rng(7)
    conv = getattr(sizes, "arm_convolve_wrapper_s8_get_buffer_size" + VARIANTS[core])
    dw = getattr(sizes, "arm_depthwise_conv_wrapper_s8_get_buffer_size" + VARIANTS[core])
    branches, dw_paths = set(), set()
    for _ in range(N_SHAPES):
        g = random_geometry(rng)
        got = conv(*_conv_args(g))
        assert got == cm.convolve_wrapper_buffer_size(core, g), g
        branches.add(cm.conv_buffer_branch(g))
        mult = int(rng.choice([1, 1, 2, 4, 9]))
        d = cm.ConvGeometry(**{**g.__dict__, "k_c": 1, "out_c": g.in_c * mult})
        assert dw(*_dw_args(d)) == cm.depthwise_wrapper_buffer_size(core, d), d
        dw_paths.add(cm.depthwise_path(core, d))
    assert branches == {"1x1_fast", "1x1", "1xn", "im2col"}
    want = {"generic", "opt"} | ({"conv"} if core == cm.MVE else {"3x3"})
    assert want <= dw_paths, dw_paths


@pytest.mark.parametrize("core", sorted(VARIANTS))
def test_fc_and_avgpool_buffer_sizes(sizes, core):
    fc = getattr(sizes, "arm_fully_connected_s8_get_buffer_size" + VARIANTS[core])
    pool = getattr(sizes, "arm_avgpool_s8_get_buffer_size" + VARIANTS[core])
    for units in (1, 2, 10, 128, 4095):
        for depth in (1, 7, 640):
            assert fc(ctypes.byref(_dims((depth, 1, 1, units)))) == \
                cm.fully_connected_buffer_size(core, units)
    for out_w in (1, 5, 96):
        for ch in (1, 3, 64, 250):
            assert pool(out_w, ch) == cm.avgpool_buffer_size(core, out_w, ch)


def test_pe_structs_have_the_cmsis_layouts(tmp_path):
    """Every struct a wrapper copies has its cmsis_nn_* counterpart's layout (the copies are
    field by field, but a layout change in either would show here first)."""
    root = checkout()
    pairs = {"pe_dims": "cmsis_nn_dims", "pe_tile": "cmsis_nn_tile",
             "pe_context": "cmsis_nn_context", "pe_activation": "cmsis_nn_activation",
             "pe_per_channel_quant": "cmsis_nn_per_channel_quant_params",
             "pe_per_tensor_quant": "cmsis_nn_per_tensor_quant_params",
             "pe_conv_params": "cmsis_nn_conv_params",
             "pe_dw_conv_params": "cmsis_nn_dw_conv_params",
             "pe_fc_params": "cmsis_nn_fc_params", "pe_pool_params": "cmsis_nn_pool_params"}
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "arm_nnfunctions.h"',
             '#include "pe_kernels.h"', "int main(void) {"]
    checks = []
    for pe, cmsis in pairs.items():
        checks.append(f"sizeof({pe}) == sizeof({cmsis})")
        checks += [f"offsetof({pe}, {f}) == offsetof({cmsis}, {f})" for f, _ in STRUCTS[pe]]
    lines += [f'  printf("%d {c}\\n", (int)({c}));' for c in checks]
    lines += ["  return 0;", "}"]
    src = tmp_path / "layouts.c"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run(["gcc", "-std=gnu99", *includes(root), str(src), "-o",
                    str(tmp_path / "layouts")], check=True, capture_output=True, text=True)
    out = subprocess.run([str(tmp_path / "layouts")], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert len(out) == len(checks) > 40
    assert [line for line in out if not line.startswith("1 ")] == []
