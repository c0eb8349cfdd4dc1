"""The serial harness is part of a device project (codegen/render/serial_harness.py):
``pockengine compile --board BOARD`` writes main_serial.c, the serial runtime and the UART
driver for a board with a ``uart`` section, lists them in the manifest, and ``make serial``
builds the serial firmware in build-serial/ as ``build_serial_firmware`` does (which uses
the files as written, and renders them for a project compiled before they were part of it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from codegen.errors import PockError
from codegen.pipeline import compile_model
from codegen.render.output import MANIFEST, open_project
from codegen.render.serial_harness import (
    MAIN_SERIAL,
    SERIAL_RUNTIME,
    describe,
    model_hash_of,
)
from codegen.resources import data_dir
from codegen.serial.firmware import build_serial_firmware, model_hash, serial_files

from ..firmware.helpers import digits_graph

SPEC = "bias:all+weight:last2"
SERIAL_SECTION = re.compile(r"\n# make serial: .*?CFLAGS=\"\$\(strip [^\n]*\n", re.DOTALL)


@pytest.fixture(scope="module")
def graph():
    return digits_graph()


def _compile(graph, out: Path, board: str, **kw):
    return compile_model(graph, board=board, out_dir=out, measure=False, **kw)


def _serial_names(proj) -> list[str]:
    return sorted(rel for rel in proj.manifest["files"]
                  if rel == MAIN_SERIAL or rel.startswith("runtime/serial/"))


def _array(text: str, name: str) -> bytes:
    """The bytes of a ``static const uint8_t NAME[N] = {...};`` of generated C."""
    body = text[text.index(f" {name}["):].split("{", 1)[1].split("}", 1)[0]
    return bytes(int(v, 16) for v in body.replace(",", " ").split())


def _need_build_tools() -> None:
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-objcopy", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (needed to build the serial firmware)")


def _image(elf: Path) -> bytes:
    out = elf.with_suffix(".bin")
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", str(elf), str(out)], check=True)
    return out.read_bytes()


def _as_if_compiled_before(proj) -> None:
    """Make the project look like one compiled before the serial harness was part of it: no
    serial files, none in the manifest, a Makefile without the serial target."""
    gone = set(serial_files(proj)) - {"runtime/uart/pe_uart.h"}    # that one is the board's
    for rel in gone:
        (proj.dir / rel).unlink()
    m = json.loads((proj.dir / MANIFEST).read_text())
    m["files"] = [f for f in m["files"] if f not in gone]
    (proj.dir / MANIFEST).write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    make = proj.dir / "Makefile"
    text, n = SERIAL_SECTION.subn("", make.read_text())
    assert n == 1
    make.write_text(text.replace("# make serial             the serial firmware (main_serial.c) "
                                 "in build-serial/\n", ""))
    assert "serial" not in make.read_text()


@pytest.mark.parametrize("board,kw", [
    ("mps2-an386", {"spec": SPEC}),                 # semihosting console: own UART driver
    ("mps2-an385", {"prefix": "net"}),              # inference only, another prefix
    ("nrf52840dk", {"spec": SPEC}),                 # the console is the UART
    ("stm32f746g-disco", {}),
])
def test_compile_writes_the_serial_harness(graph, tmp_path, board, kw):
    proj = _compile(graph, tmp_path / "p", board, **kw)
    listed = set(proj.manifest["files"])
    want = serial_files(proj)       # what the serial stage renders for the project on disk
    assert MAIN_SERIAL in want and set(want) <= listed
    assert {f"runtime/serial/{n}" for n in SERIAL_RUNTIME} <= listed
    for rel, blob in want.items():
        assert (proj.dir / rel).read_bytes() == blob, rel
    # the same DESCRIBE and model hash as the serial stage computes from the project
    p = proj.prefix
    text = (proj.dir / MAIN_SERIAL).read_text()
    blob = json.dumps(describe(proj), sort_keys=True, separators=(",", ":")).encode()
    assert _array(text, f"{p}_serial_describe") == blob
    assert model_hash(proj) == model_hash_of(p, {n: (proj.dir / n).read_bytes() for n in (
        f"{p}_model.h", f"{p}_model.c", f"{p}_weights.c")})
    assert _array(text, f"{p}_serial_model_hash") == model_hash(proj)
    make = (proj.dir / "Makefile").read_text()
    assert "\nserial:\n" in make and ".PHONY: serial" in make
    srcs = re.search(r"^SERIAL_SRCS = (.*)$", make, re.MULTILINE).group(1).split()
    assert srcs[0] == MAIN_SERIAL and all((proj.dir / s).is_file() for s in srcs)
    cflags = re.search(r"^SERIAL_CFLAGS = (.*)$", make, re.MULTILINE).group(1)
    if proj.board_record().console_kind == "uart":
        assert "-DPE_SERIAL_QUIET=1 -DPE_SERIAL_STORAGE_NONE=1" in cflags
        assert not any(s.startswith("runtime/uart/") for s in srcs)
    else:
        assert "-DPE_UART_BASE=0x" in cflags and srcs[-1].startswith("runtime/uart/")
    # recompiling leaves the harness in place (write_project removes only what is not listed)
    again = _compile(graph, tmp_path / "p", board, **kw)
    assert _serial_names(again) == _serial_names(proj)
    assert (proj.dir / MAIN_SERIAL).read_bytes() == want[MAIN_SERIAL]


def test_no_serial_harness_without_a_uart(graph, tmp_path):
    host = _compile(graph, tmp_path / "host", "host", spec=SPEC)
    assert not _serial_names(host) and not (host.dir / MAIN_SERIAL).exists()
    assert not (host.dir / "runtime" / "serial").exists()
    hexagon = _compile(graph, tmp_path / "hex", "hexagon-v66")
    assert hexagon.board_record().uart is None
    assert not _serial_names(hexagon) and not (hexagon.dir / MAIN_SERIAL).exists()
    assert "serial" not in (hexagon.dir / "Makefile").read_text()
    # a board file of the user's own without a uart section: no harness either, and the
    # serial stage says why as before
    text = (data_dir("boards") / "mps2-an386.yaml").read_text()
    mine = tmp_path / "nouart.yaml"
    mine.write_text(re.sub(r"^uart:.*\n", "", text.replace("mps2-an386", "nouart"),
                           flags=re.MULTILINE))
    proj = _compile(graph, tmp_path / "mine", str(mine), spec=SPEC)
    assert not _serial_names(proj) and not (proj.dir / MAIN_SERIAL).exists()
    with pytest.raises(PockError, match="has no uart section"):
        build_serial_firmware(proj.dir)


def test_a_prefix_that_clashes_with_the_serial_runtime(graph, tmp_path):
    # pe_proto_init is the serial runtime's (pe_proto.h): the generated <p>_init clashes
    with pytest.raises(PockError, match=r"clash with the serial runtime: .*pe_proto_init.*"
                                        r"another --prefix"):
        _compile(graph, tmp_path / "p", "mps2-an386", prefix="pe_proto")
    # a project without the serial harness does not care
    _compile(graph, tmp_path / "h", "hexagon-v66", prefix="pe_proto")


def test_make_serial_builds_what_build_serial_firmware_builds(graph, tmp_path):
    """``make serial`` in the project, without pockengine: build-serial/<p>_firmware.elf, the
    same image as build_serial_firmware's; a project compiled before the harness was part of
    it gets the same files and the same image from build_serial_firmware."""
    _need_build_tools()
    proj = _compile(graph, tmp_path / "p", "mps2-an386", spec=SPEC)
    r = subprocess.run(["make", "-C", str(proj.dir), "serial"], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    elf = proj.dir / "build-serial" / "pe_firmware.elf"
    assert elf.is_file()
    made = _image(elf)
    assert not (proj.dir / "build").exists()        # the data harness is not built

    # build_serial_firmware uses the project's files as written (an edit stays) and the
    # serial target
    main = proj.dir / MAIN_SERIAL
    main.write_bytes(main.read_bytes() + b"/* the user's */\n")
    shutil.rmtree(proj.dir / "build-serial")
    fw = build_serial_firmware(proj.dir)
    assert main.read_bytes().endswith(b"/* the user's */\n")
    assert fw.elf == elf and _image(elf) == made
    assert " serial" in (proj.dir / "build-serial" / "build.log").read_text().splitlines()[0]

    # the project as an earlier pockengine wrote it
    old = _compile(graph, tmp_path / "old", "mps2-an386", spec=SPEC)
    want = {rel: (old.dir / rel).read_bytes() for rel in serial_files(old)}
    _as_if_compiled_before(old)
    old = open_project(old.dir)
    fw = build_serial_firmware(old)
    for rel, blob in want.items():
        assert (old.dir / rel).read_bytes() == blob, rel
    assert _image(fw.elf) == made
