"""``master_weights: int32`` in specs and the builder: accepted forms, the backward-mode rules
(int32 needs backward int8, fp32 needs backward fp32: one-line SpecErrors) and the state it
creates (docs/training.md)."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.errors import SpecError
from codegen.ir.ops import UPDATE_INPUTS
from codegen.train import build_training_graph, load_spec, training_summary
from codegen.train.optimizer import int32_master_init

from .test_graph import digits_int8


def test_short_and_yaml_forms_accept_int32(tmp_path):
    assert load_spec("bias:all,backward=int8,master_weights=int32").master_weights == "int32"
    p = tmp_path / "spec.yaml"
    p.write_text("trainable: [{layers: last 2, params: both}]\nbackward: int8\n"
                 "master_weights: int32\noptimizer: {name: sgd, lr: 0.01, momentum: 0.9}\n")
    spec = load_spec(p)
    assert (spec.master_weights, spec.backward) == ("int32", "int8")
    g = build_training_graph(digits_int8(), spec)
    assert g.metadata["training"]["master_weights"] == "int32"


@pytest.mark.parametrize("short,words", [
    ("bias:all+weight:last2,master_weights=int32", "master_weights int32 needs backward: int8"),
    ("bias:all,master_weights=int32,backward=fp32,opt=adam",
     "master_weights int32 needs backward: int8"),
    ("bias:all,master_weights=fp32,backward=int8", "master_weights fp32 needs backward: fp32"),
])
def test_master_kind_must_match_the_backward_mode(short, words):
    spec = load_spec(short)                       # parses; the builder checks the mode
    with pytest.raises(SpecError) as e:
        build_training_graph(digits_int8(), spec)
    msg = str(e.value)
    assert "\n" not in msg and words in msg and msg.startswith("--train"), msg


@pytest.mark.parametrize("value", ["int16", "fp16", "int8", "yes"])
def test_unknown_master_kinds_are_one_line_errors(value, tmp_path):
    with pytest.raises(SpecError) as e:
        load_spec(f"bias:all,backward=int8,master_weights={value}")
    msg = str(e.value)
    assert "\n" not in msg and "none, fp32 or int32" in msg
    p = tmp_path / "spec.yaml"
    p.write_text(f"trainable: [{{layers: last 2}}]\nmaster_weights: {value}\n")
    with pytest.raises(SpecError) as e:
        load_spec(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_int32_master_state_per_trainable_parameter():
    fwd = digits_int8()
    g = build_training_graph(fwd, load_spec(
        "bias:last2+weight:last2@0.5,backward=int8,master_weights=int32,opt=momentum"))
    ups = [op for op in g.ops if op.type == "sgd_update"]
    assert len(ups) == 4
    masters = []
    for op in ups:
        slot = dict(zip(UPDATE_INPUTS, op.inputs))
        param, grad, master = (g.tensors[slot[k]] for k in ("param", "grad", "master"))
        assert master.dtype == "int32" and master.shape == grad.shape
        assert set(op.attrs["updates"]) == {slot["param"], slot["buf1"], slot["master"],
                                            slot["saturated"]}
        assert op.attrs["master_frac_bits"] == 16
        if param.dtype == "int8":
            ch = op.attrs["channels"]
            assert ch is not None and master.shape[0] == len(ch) < param.shape[0]
            np.testing.assert_array_equal(
                master.data, np.take(param.data, list(ch), axis=0).astype(np.int64) << 16)
        else:
            assert not master.data.any()         # int32 bias: sub-quantum remainder, 0
        masters.append(master)
    meta = g.metadata["training"]
    kinds = [s for s in meta["state"] if s["kind"] == "master"]
    assert {s["tensor"] for s in kinds} == {m.name for m in masters}
    assert all(s["bytes"] == 4 * int(np.prod(m.shape)) for s, m in
               zip(sorted(kinds, key=lambda s: s["tensor"]), sorted(masters,
                                                                    key=lambda m: m.name)))
    assert training_summary(g)["optimizer_state_bytes"] >= sum(m.nbytes for m in masters)
    # fp32 mode never carries the attr; none creates no master
    g0 = build_training_graph(fwd, load_spec("bias:last2,backward=int8"))
    assert all(not dict(zip(UPDATE_INPUTS, op.inputs))["master"] and
               "master_frac_bits" not in op.attrs for op in g0.ops if op.type == "sgd_update")


def test_int32_master_init_helper():
    w = np.array([[127, -127, 0], [1, -1, 5]], np.int8)
    np.testing.assert_array_equal(int32_master_init(w, "weight", None, 0),
                                  w.astype(np.int64) << 16)
    np.testing.assert_array_equal(int32_master_init(w, "weight", (1,), 0), [[65536, -65536,
                                                                             5 << 16]])
    b = np.array([2**31 - 1, -5], np.int32)
    assert int32_master_init(b, "bias", None, 0).tolist() == [0, 0]
    assert int32_master_init(w, "weight", None, 0).dtype == np.int32
