"""Names from a model file cannot break or inject into the serial firmware's C: tensor names
with comment delimiters, trigraphs, newlines and include lines end up in main_serial.c's
DESCRIBE comment (and as bytes in its JSON), and the file must compile warning-free."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from codegen.serial.firmware import describe, serial_files

from ..firmware.helpers import digits_graph
from ..render.helpers import rename_graph

HOSTILE = ["a/*b", '*/ #include "x" /*', "??/", "c\n#define int float", "../../x", "tail\\",
           "d*", "/e", "?", "?/"]


def test_hostile_tensor_names_stay_inert(tmp_path):
    cc = shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no host C compiler (gcc or clang) to check main_serial.c")
    from codegen.pipeline import compile_model

    g = digits_graph()
    names = {n: f"{HOSTILE[i % len(HOSTILE)]}{i}" for i, n in enumerate(sorted(g.tensors))}
    proj = compile_model(rename_graph(g, lambda n: names.get(n, n)), board="mps2-an386",
                         spec="bias:all+weight:last2", out_dir=tmp_path / "p")
    params = describe(proj)["training"]["parameters"]
    assert any("/*" in p for p in params) and any("*/" in p for p in params)
    files = serial_files(proj)
    for rel, blob in files.items():
        path = proj.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    text = files["main_serial.c"].decode()
    start = text.index("/* DESCRIBE:")
    comment = text[start + 2:text.index("*/", start)]
    assert "/*" not in comment and "??" not in comment
    assert not any(ln.lstrip().startswith(('#include "x"', "#define int"))
                   for ln in text.splitlines())
    # the JSON the device serves keeps the names as they are (it is bytes, not C text)
    blob = bytes.fromhex("".join(
        ln.strip().replace("0x", "").replace(",", "").replace(" ", "")
        for ln in text[text.index("_serial_describe["):].split("{", 1)[1].split("}", 1)[0]
        .splitlines()))
    assert json.loads(blob)["training"]["parameters"] == params
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla",
                        "-I.", "-Ikernels", "-Ikernels/ref", "-Iruntime", "-Iruntime/uart",
                        "-Iruntime/serial", "-DPE_UART_BASE=0x40004000u", "-fsyntax-only",
                        "main_serial.c"], cwd=proj.dir, capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
