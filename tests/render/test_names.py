"""Identifier sanitising, prefix checks and exact C literals."""

from __future__ import annotations

import numpy as np
import pytest

from codegen.errors import PockError
from codegen.render import Namer, check_identifiers, check_prefix, comment_text, sanitize
from codegen.render.literals import array_rows, c_float, c_int
from codegen.render.names import C_KEYWORDS


def test_sanitize_arbitrary_names():
    assert sanitize("1:conv/weights;int") == "1_conv_weights"
    assert sanitize("a/Relu;a/BiasAdd") == "a_Relu"
    assert sanitize(";;") == "x"
    assert sanitize("héllo wörld") == "h_llo_w_rld"
    assert len(sanitize("x" * 300)) <= 40


def test_namer_unique_case_insensitive_and_not_keywords():
    n = Namer()
    names = ["a-b", "a_b", "A_B", "a b", "int", "static", "1:conv/weights;int", "1:conv/weights"]
    frags = [n(x) for x in names]
    assert len({f.lower() for f in frags}) == len(frags)
    assert all(f not in C_KEYWORDS for f in frags)
    assert n("a-b") == frags[0]                      # stable for the same name
    assert frags[4] != "int" and frags[5] != "static"


def test_prefix_checked():
    assert check_prefix("pe") == "pe"
    assert check_prefix("kws2") == "kws2"
    for bad in ("", "1pe", "int", "_pe", "pe_", "a-b", "x" * 17, "static"):
        with pytest.raises(PockError):
            check_prefix(bad)


def test_check_identifiers():
    check_identifiers(["pe_a", "pe_b"], foreign=["pe_conv2d_s8"])
    with pytest.raises(ValueError, match="twice"):
        check_identifiers(["pe_a", "pe_a"])
    with pytest.raises(ValueError, match="clashes"):
        check_identifiers(["pe_conv2d_s8"], foreign=["pe_conv2d_s8"])
    with pytest.raises(ValueError, match="valid"):
        check_identifiers(["1abc"])
    # the serial runtime's names: a clash is the user's prefix, a PockError saying so
    check_identifiers(["pe_a"], serial=["pe_proto_init"])
    with pytest.raises(PockError, match=r"serial runtime: x_init, x_ready \(compile with "
                                        r"another --prefix\)"):
        check_identifiers(["x_ready", "x_init", "x_b"], serial=["x_init", "x_ready"])


def test_comment_text_is_inert():
    s = comment_text("a */ b /* c ??/ \n é")
    assert "*/" not in s and "/*" not in s and "??" not in s and "\n" not in s


def test_literals_exact():
    assert c_int(-(2**31)) == "(-2147483647 - 1)"
    with pytest.raises(ValueError):
        c_int(128, "int8_t")
    for v in (0.1, -3.75, 1e-40, 3.4e38, 0.0, 1.0 / 3.0):
        text = c_float(v, "PE_INF")
        assert text.endswith("f")
        assert np.float32(float.fromhex(text[:-1])) == np.float32(v)
    assert c_float(float("inf"), "PE_INF") == "PE_INF"
    assert c_float(float("-inf"), "PE_INF") == "(-PE_INF)"
    rows = array_rows(np.arange(45, dtype=np.int8), "int8_t", "PE_INF")
    assert len(rows) == 3 and rows[0].endswith(",") and not rows[-1].endswith(",")
    assert "(-2147483647 - 1)" in array_rows(np.array([-(2**31)], np.int32), "int32_t", "I")[0]
