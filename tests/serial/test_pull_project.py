"""``pull`` without ``--model``: the model a project keeps (``DIR/model.tflite``, written by
``compile``) found through ``--project``, the current directory or the local cache keyed by the
device's model hash (codegen/model_store.py), and ``pull -o tuned.onnx``; the resolution on its
own (fast), the CLI wiring against the host-built toy server, and one run of the serial
firmware under QEMU."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from codegen import models
from codegen.cli import main
from codegen.errors import PockError
from codegen.frontend import load_model
from codegen.model_store import MODEL_FILE, cache_model, project_model
from codegen.pipeline import compile_model, graph_digest, load, open_project, quantize
from codegen.serial.firmware import describe, model_hash
from codegen.serial.session import original_graph, resolve_graph

from .helpers import TcpDevice

SPEC = "bias:all+weight:last1,opt=sgd,lr=0.01"


@pytest.fixture(scope="module")
def calib(tmp_path_factory):
    path = tmp_path_factory.mktemp("calib") / "calib.npz"
    np.savez(path, x=models.digits("train")[0][:100])
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory, calib):
    """The float digits CNN compiled (quantized with ``calib``) for mps2-an386 with a
    training spec: what ``sim DIR --uart`` serves."""
    out = tmp_path_factory.mktemp("pull-project") / "fw"
    return compile_model(models.path("digits_cnn.onnx"), board="mps2-an386", spec=SPEC,
                         calib=calib, out_dir=out, measure=False)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("POCKENGINE_CACHE_DIR", str(d))
    return d


def _device_view(project):
    """What a device running the project's serial firmware reports: DESCRIBE and the model
    hash of INFO."""
    return json.loads(json.dumps(describe(project))), model_hash(project)


def test_compile_keeps_the_quantized_model(project, calib):
    rec = project.manifest["model_file"]
    assert rec["path"] == MODEL_FILE and MODEL_FILE in project.manifest["files"]
    data = (project.dir / MODEL_FILE).read_bytes()
    assert rec["sha256"] == hashlib.sha256(data).hexdigest()
    want = quantize(load(models.path("digits_cnn.onnx")), calib).graph
    assert rec["graph_sha256"] == graph_digest(want)
    g = project_model(open_project(project.dir))
    assert graph_digest(g) == graph_digest(want) and g.name == want.name
    assert g.metadata["input_layouts"] == want.metadata["input_layouts"]   # NCHW data fits
    assert load_model(project.dir / MODEL_FILE).tensors.keys() == want.tensors.keys()


def test_the_model_is_found_without_model_or_calib(project, calib, cache, tmp_path,
                                                   monkeypatch):
    desc, h = _device_view(project)
    want = graph_digest(project_model(open_project(project.dir)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(PockError, match="give the original model with --model or the "
                                        "project it was compiled into with --project"):
        original_graph(desc, None, None, model_hash=h)
    # --project DIR
    g, where = resolve_graph(desc, None, None, model_hash=h, project=project.dir)
    assert graph_digest(g) == want and where == {"from": "project", "path": str(project.dir)}
    # the current directory is the project
    monkeypatch.chdir(project.dir)
    g, where = resolve_graph(desc, None, None, model_hash=h)
    assert graph_digest(g) == want and where["from"] == "project"
    # the local cache, keyed by the firmware's model hash (what building the serial firmware
    # writes)
    monkeypatch.chdir(elsewhere)
    path = cache_model(project, h)
    assert path == cache / "models" / f"{h.hex()}.tflite" and path.is_file()
    g, where = resolve_graph(desc, None, None, model_hash=h)
    assert graph_digest(g) == want and where == {"from": "cache", "path": str(path)}
    assert graph_digest(original_graph(desc, None, None, model_hash=h)) == want
    # --model / --calib as before, and the same graph
    g, where = resolve_graph(desc, models.path("digits_cnn.onnx"), calib, model_hash=h)
    assert graph_digest(g) == want and where["from"] == "model"
    with pytest.raises(PockError, match="float model: give the calibration data"):
        original_graph(desc, models.path("digits_cnn.onnx"), None, model_hash=h)
    with pytest.raises(PockError, match="not both"):
        original_graph(desc, models.path("digits_cnn.onnx"), calib, project=project.dir)


def test_stored_models_are_checked(project, cache, tmp_path, monkeypatch):
    desc, h = _device_view(project)
    monkeypatch.chdir(tmp_path)
    other = bytes(32)
    with pytest.raises(PockError, match="not the project of the device's firmware"):
        original_graph(desc, None, None, model_hash=other, project=project.dir)
    with pytest.raises(PockError, match="compiled from another model"):
        original_graph(dict(desc, model=dict(desc["model"], sha256="0" * 64)), None, None,
                       model_hash=h, project=project.dir)
    copy = tmp_path / "copy"
    shutil.copytree(project.dir, copy)
    blob = bytearray((copy / MODEL_FILE).read_bytes())
    blob[-1] ^= 1
    (copy / MODEL_FILE).write_bytes(bytes(blob))
    with pytest.raises(PockError, match="changed after compile"):
        original_graph(desc, None, None, model_hash=h, project=copy)
    # a project of an older pockengine keeps no model
    manifest = json.loads((copy / "pockengine.json").read_text())
    del manifest["model_file"]
    (copy / "pockengine.json").write_text(json.dumps(manifest))
    with pytest.raises(PockError, match="keeps no model"):
        original_graph(desc, None, None, model_hash=h, project=copy)
    assert cache_model(open_project(copy), h) is None and not cache.exists()
    # a damaged cache entry is named
    cache_model(project, h)
    (cache / "models" / f"{h.hex()}.tflite").write_bytes(b"TFL3")
    with pytest.raises(PockError, match="changed after compile"):
        original_graph(desc, None, None, model_hash=h)


def test_a_graph_the_tflite_form_cannot_hold_is_not_stored(tmp_path):
    """compile still works; the manifest says why there is no model.tflite and pull asks for
    --model."""
    from ..frontend.single_op import pool2d_graph

    g = pool2d_graph(np.random.default_rng(0), "avg", (1, 4, 4, 3), (2, 2), (1, 1),
                     (1, 0, 1, 0))
    proj = compile_model(g, out_dir=tmp_path / "p")
    rec = proj.manifest["model_file"]
    assert rec["path"] is None and "AVERAGE_POOL_2D cannot express" in rec["reason"]
    assert not (proj.dir / MODEL_FILE).exists() and MODEL_FILE not in proj.manifest["files"]
    with pytest.raises(PockError, match="keeps no model .*give --model"):
        project_model(open_project(proj.dir))
    # recompiling a model that has a TFLite form in place brings the file back (and the other
    # way round removes it: the stale file goes with the old manifest's list)
    g2 = pool2d_graph(np.random.default_rng(0), "avg", (1, 4, 4, 3), (2, 2), (2, 2),
                      (0, 0, 0, 0))
    assert compile_model(g2, out_dir=tmp_path / "p").manifest["model_file"]["path"] == MODEL_FILE
    assert (proj.dir / MODEL_FILE).is_file()
    compile_model(g, out_dir=tmp_path / "p")
    assert not (proj.dir / MODEL_FILE).exists()


def test_pull_cli_checks_the_project_against_the_device(proto_host, project, tmp_path,
                                                        capsys):
    """The toy server's firmware is not the project's: --project is refused on one line."""
    dev = TcpDevice(proto_host, "--storage", str(tmp_path / "ck.bin")).start()
    try:
        status = main(["pull", "--port", f"socket://127.0.0.1:{dev.port}", "-o",
                       str(tmp_path / "t.onnx"), "--project", str(project.dir)])
    finally:
        dev.stop()
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert "not the project of the device's firmware" in err
    assert not (tmp_path / "t.onnx").exists()


def _params_sha256(graph, names):
    """sha256 of the parameters as the device exports them (in order, little-endian)."""
    return hashlib.sha256(b"".join(
        np.ascontiguousarray(graph.tensors[n].data).astype(
            np.dtype(graph.tensors[n].dtype).newbyteorder("<")).tobytes()
        for n in names)).hexdigest()


@pytest.mark.emulator
@pytest.mark.slow
def test_pull_without_model_from_the_serial_firmware(project, cache, tmp_path, monkeypatch,
                                                     capsys):
    """The serial firmware under QEMU trains a few samples; pull without --model or --calib
    writes the original model with the device's parameters: from the cache (another
    directory), from --project as QDQ ONNX, and from the project directory."""
    for tool in ("qemu-system-arm", "arm-none-eabi-gcc", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (the serial firmware runs under QEMU)")
    from codegen.frontend.onnx_reader import read_onnx
    from codegen.serial.firmware import build_serial_firmware, start_serial_firmware

    from ..benchmark_serial import free_port
    from ..frontend.onnx_helpers import ort_session

    x, y = models.digits("train")
    np.savez(tmp_path / "train.npz", x=models.shift_digits(x)[:12], y=y[:12])
    fw = build_serial_firmware(project.dir)
    assert (cache / "models" / f"{model_hash(project).hex()}.tflite").is_file()
    run = start_serial_firmware(fw, f"tcp:127.0.0.1:{free_port()}", tmp_path / "run")

    def cli(*argv):
        status = main([*argv, "--port", run.url, "--json"])
        out = capsys.readouterr()
        assert status == 0, out.err
        return json.loads(out.out)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        trained = cli("train", "--data", str(tmp_path / "train.npz"))
        assert trained["applied"] == 12
        monkeypatch.chdir(elsewhere)
        a = cli("pull", "-o", "tuned.tflite")
        b = cli("pull", "-o", "tuned.onnx", "--project", str(project.dir))
        monkeypatch.chdir(project.dir)
        c = cli("pull", "-o", str(elsewhere / "again.tflite"))
        assert main(["pull", "--port", run.url, "-o", str(elsewhere / "human.onnx")]) == 0
        line = capsys.readouterr().out
        assert line.startswith(f"wrote {elsewhere / 'human.onnx'}: the original model (the "
                               f"model of project {project.dir}) with the ") and \
            line.rstrip().endswith(", as a QDQ ONNX model"), line
    finally:
        run.kill()
    assert (a["model_from"], a["format"]) == ("cache", "tflite")
    assert (b["model_from"], b["format"]) == ("project", "onnx")
    assert c["model_from"] == "project"
    assert a["params_sha256"] == b["params_sha256"] == trained["params_sha256"]
    names = a["parameters"]
    tflite = load_model(elsewhere / "tuned.tflite")
    onnx = read_onnx((elsewhere / "tuned.onnx").read_bytes(), "tuned.onnx")
    assert _params_sha256(tflite, names) == trained["params_sha256"]
    assert _params_sha256(onnx, names) == trained["params_sha256"]
    assert (elsewhere / "again.tflite").read_bytes() == (elsewhere / "tuned.tflite").read_bytes()
    stored = project_model(open_project(project.dir))
    assert _params_sha256(stored, names) != trained["params_sha256"]     # it did learn
    sess = ort_session((elsewhere / "tuned.onnx").read_bytes())
    logits = sess.run(None, {"input": np.ascontiguousarray(x[:8].transpose(0, 3, 1, 2))})[0]
    assert logits.shape == (8, 10)
