"""Issue #6 acceptance under QEMU (mps2-an386, the UART on TCP, pyserial socket://):

- streaming the digits training split over the UART trains to the same params_sha256 as the
  embedded-data firmware run (and the golden model) over the same sample sequence;
- pull gives a .tflite that the importer reads and whose accuracy in the TFLM interpreter equals
  what EVAL reported on the device;
- through a fault proxy (1% corrupted bytes, dropped and duplicated frames) the final hash is
  the same;
- QEMU killed at >= 5 random points and restarted: training resumes from the checkpoints and
  ends equal to the uninterrupted run;
- malformed frames are rejected and the firmware keeps serving.

Small sample counts keep CI cost modest (24 training digits, 2 epochs, 24 eval digits).
"""

from __future__ import annotations

import random
import shutil
import threading

import numpy as np
import pytest

from codegen import models
from codegen.cli import main
from codegen.serial import protocol as P
from codegen.serial.client import Device
from codegen.serial.fault_proxy import FaultProxy
from codegen.serial.firmware import CHECKPOINT_FILE, build_serial_firmware, start_serial_firmware
from codegen.serial.session import eval_over_serial, train_over_serial

pytestmark = [pytest.mark.emulator, pytest.mark.slow]

from ..benchmark_serial import SEED, SPEC, free_port

TRAIN, EVAL, EPOCHS = 24, 24, 2


def _need_tools() -> None:
    for tool in ("qemu-system-arm", "arm-none-eabi-gcc", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (the serial firmware runs under QEMU)")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The int8 digits model as a .tflite (the 'original' for pull), the train/eval splits as
    .npz, a project compiled for mps2-an386 with the same data embedded, the embedded run's
    result, and the serial firmware built from the same project."""
    _need_tools()
    from ..benchmark_serial import prepare

    d = tmp_path_factory.mktemp("qemu-serial")
    s = prepare(d, train=TRAIN, evals=EVAL, epochs=EPOCHS)
    return {"dir": d, "tflite": s.tflite, "project": s.extra["project"],
            "embedded": s.extra["embedded"], "fw": s.fw, "train": s.train, "eval": s.eval,
            "evals": s.extra["evals"]}


@pytest.fixture(scope="module")
def golden_sha(setup):
    from codegen.fit import fit_model

    r = fit_model(setup["tflite"], SPEC, setup["train"], None, epochs=EPOCHS,
                  engine="golden", seed=SEED)
    return r["params_sha256"]


@pytest.fixture
def firmware(setup, tmp_path):
    """The serial firmware under QEMU, checkpoints in a fresh directory."""
    run = start_serial_firmware(setup["fw"], f"tcp:127.0.0.1:{free_port()}", tmp_path)
    yield run
    run.kill()


def _json(capsys, argv):
    import json

    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_stream_train_eval_pull(setup, golden_sha, firmware, capsys, tmp_path):
    emb = setup["embedded"]
    assert emb.params_sha256 == golden_sha
    r = _json(capsys, ["train", "--port", firmware.url, "--data", str(setup["train"]),
                       "--epochs", str(EPOCHS), "--seed", str(SEED), "--json"])
    assert r["steps"] == EPOCHS * TRAIN and r["applied"] == EPOCHS * TRAIN
    assert r["params_sha256"] == emb.params_sha256
    assert np.array_equal(np.array(r["loss"], np.float32).view(np.uint32), emb.loss_bits)
    assert r["board"] == "mps2-an386" and r["checkpoint_generation"] >= 1

    ev = _json(capsys, ["eval", "--port", firmware.url, "--data", str(setup["eval"]),
                        "--json"])
    assert ev["samples"] == EVAL and ev["accuracy"] == emb.accuracy("after")

    out = tmp_path / "tuned.tflite"
    p = _json(capsys, ["pull", "--port", firmware.url, "-o", str(out), "--model",
                       str(setup["tflite"]), "--json"])
    assert p["params_sha256"] == r["params_sha256"]
    from codegen.data import fit_input
    from codegen.frontend import load_model

    from ..golden.tflm import Tflm

    g = load_model(out)                     # the importer reads it back
    xe = fit_input(g, setup["evals"]["x"])
    interp = Tflm(out.read_bytes())
    pred = [int(interp.invoke([xe[i:i + 1]]).reshape(-1).argmax()) for i in range(len(xe))]
    acc = float(np.mean(np.array(pred) == setup["evals"]["y"]))
    assert acc == ev["accuracy"]
    # resumable: a second train with the same data and seed has nothing left to do
    again = _json(capsys, ["train", "--port", firmware.url, "--data", str(setup["train"]),
                           "--epochs", str(EPOCHS), "--seed", str(SEED), "--json"])
    assert again["applied"] == 0 and again["params_sha256"] == r["params_sha256"]


def test_fault_proxy(setup, firmware):
    with FaultProxy((firmware.host, firmware.port), corrupt=0.01, drop=0.02, duplicate=0.02,
                    seed=6) as px:
        with Device(px.url, timeout=1.0, retries=200) as dev:
            r = train_over_serial(dev, setup["train"], epochs=EPOCHS, seed=SEED)
        counts = px.counts()
    assert r["params_sha256"] == setup["embedded"].params_sha256
    for direction in ("to_device", "to_host"):
        c = counts[direction]
        assert c["corrupted_bytes"] > 0 and c["dropped"] > 0 and c["duplicated"] > 0, counts
    assert r["link"]["retransmissions"] > 0 and r["device"]["crc_errors"] > 0


def test_power_cuts(setup, tmp_path):
    """QEMU is SIGKILLed at 6 random sample counts and restarted on the same port with the
    same checkpoint file; the host reconnects and resumes; the result is the uninterrupted
    run's."""
    port = free_port()
    uart = f"tcp:127.0.0.1:{port}"
    runs = [start_serial_firmware(setup["fw"], uart, tmp_path)]
    rng = random.Random(5)
    total = EPOCHS * TRAIN
    cut_at = sorted(rng.sample(range(2, total - 1), 6))
    go = threading.Event()
    restarts: list[str] = []

    def chaos():
        while cut_at or go.is_set():
            if not go.wait(120):
                return
            go.clear()
            runs[-1].kill()
            runs.append(start_serial_firmware(setup["fw"], uart, tmp_path))
            restarts.append(runs[-1].wait_ready(1))

    def progress(done, _total, _fields):
        if cut_at and done >= cut_at[0] and not go.is_set():
            cut_at.pop(0)
            go.set()

    t = threading.Thread(target=chaos, daemon=True)
    t.start()
    try:
        with Device(runs[0].url, timeout=2.0, reconnect=60) as dev:
            r = train_over_serial(dev, setup["train"], epochs=EPOCHS, seed=SEED,
                                  checkpoint_every=5, progress=progress)
        t.join(timeout=60)
    finally:
        for run in runs:
            run.kill()
    assert len(restarts) == 6, restarts
    assert (tmp_path / CHECKPOINT_FILE).is_file()
    restored = [ln for ln in restarts if "restored=1" in ln]
    assert len(restored) >= 4, restarts
    assert r["link"]["reconnects"] >= 6 and r["rewinds"] >= 1
    assert r["params_sha256"] == setup["embedded"].params_sha256


def test_malformed_frames_keep_the_firmware_serving(setup, firmware):
    from .test_device_server import _junk

    rng = random.Random(3)
    with Device(firmware.url, timeout=2.0) as dev:
        info = dev.info()
        for i in range(150):
            dev.link.write(_junk(rng))
            if i % 25 == 24:
                assert dev.info().max_body == info.max_body
        dev.link.write(b"\x00")
        stats = dev.stats()
        assert stats["crc_errors"] > 0 and stats["oversize"] > 0 and stats["bad_header"] > 0
        assert stats["train_applied"] == 0
        r = train_over_serial(dev, setup["train"], epochs=EPOCHS, seed=SEED)
        assert r["params_sha256"] == setup["embedded"].params_sha256
        e = eval_over_serial(dev, setup["eval"])
        assert e["accuracy"] == setup["embedded"].accuracy("after")
        m = dev.request(P.CMD_TRAIN, b"\x01\x02")
        assert m.status == P.ST_BAD_LENGTH


@pytest.mark.parametrize("board", ["mps2-an385", "mps3-an547", "netduinoplus2",
                                   "stm32f746g-disco", "nrf52840dk"])
def test_other_boards(board, tmp_path):
    """The serial firmware on the other UART drivers: CMSDK UART on a Cortex-M3 (int8
    backward) and a Cortex-M55, the STM32 USART under QEMU (streamed training equals the
    embedded-data run); STM32F7 USART and nRF UARTE boards (Renode, a UART console shared
    with the protocol) are built and linked."""
    _need_tools()
    from codegen.board import load_board
    from codegen.pipeline import build_project, compile_model, run_device
    from codegen.targets import emulator_available

    from ..firmware.helpers import digits_graph

    x, y = models.digits("train")
    train = {"x": x[100:108], "y": y[100:108]}
    proj = compile_model(digits_graph(), board=board, spec=SPEC, out_dir=tmp_path / "p",
                         data=train, epochs=1, seed=SEED)
    fw = build_serial_firmware(proj)
    assert fw.elf.is_file() and fw.sizes["sram_bytes"] <= load_board(board).sram_budget
    if load_board(board).emulator != "qemu-system-arm" or not emulator_available(fw.board)[0]:
        return
    embedded = run_device(proj, build=build_project(proj), profile=False)
    run = start_serial_firmware(fw, f"tcp:127.0.0.1:{free_port()}", tmp_path / "w")
    try:
        with Device(run.url, timeout=2.0) as dev:
            r = train_over_serial(dev, (train["x"], train["y"]), epochs=1, seed=SEED)
    finally:
        run.kill()
    assert r["params_sha256"] == embedded.params_sha256


def test_sim_uart_cli(setup, tmp_path):
    """``pockengine sim DIR --uart tcp:HOST:PORT`` serves until interrupted."""
    import signal
    import subprocess
    import sys
    import time

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "codegen", "sim", str(setup["project"].dir),
                             "--uart", f"tcp:127.0.0.1:{port}", "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        info = None
        while info is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with Device(f"socket://127.0.0.1:{port}", timeout=1.0) as dev:
                    info = dev.info()
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.2)
        assert info is not None and info.board == "mps2-an386" and info.training
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "serving the pockengine serial protocol" in err
    assert (setup["project"].dir / CHECKPOINT_FILE).is_file()


def test_five_percent_corruption_and_an_emulator_reset(setup, tmp_path):
    """The CI slice of ``python -m tests.benchmark_serial``: 5 % of the bytes corrupted, 2 %
    of the frames dropped, 2 % duplicated, 1 % delayed (both directions, fixed seeds) and the
    emulator killed once mid-training: training, eval and pull complete; the device's trace
    shows every sample applied exactly once to the final parameters, which equal the golden
    model's on the same samples; EVAL's accuracy equals the golden's."""
    from codegen.fit import fit_model

    from ..benchmark_serial import Case, Setup, faults, format_table, run_case

    n, ne = 8, 8
    x, y = np.load(setup["train"])["x"][:n], np.load(setup["train"])["y"][:n]
    xe, ye = setup["evals"]["x"][:ne], setup["evals"]["y"][:ne]
    np.savez(tmp_path / "train.npz", x=x, y=y)
    np.savez(tmp_path / "eval.npz", x=xe, y=ye)
    ref = fit_model(setup["tflite"], SPEC, {"x": x, "y": y}, {"x": xe, "y": ye}, epochs=1,
                    engine="golden",
                    seed=SEED)
    s = Setup(tmp_path, setup["tflite"], tmp_path / "train.npz", tmp_path / "eval.npz", n, 1,
              setup["fw"], ref["params_sha256"], ref["accuracy_after"])
    row = run_case(s, Case("5 %", **faults(0.05), resets=1, seed=50), tmp_path / "row",
                   one_session=True)
    assert "error" not in row, row["error"]
    assert row["done"] == {"train": True, "eval": True, "pull": True}
    assert row["resets"] == 1 and row["lives"] >= 2
    assert row["lost"] == 0 and row["twice"] == 0 and row["in_order"]
    assert row["sha_equal"] and row["eval_equal"]
    assert row["link"]["frame_min"] < 48 and row["link"]["retransmissions"] > 100
    for direction in ("to_device", "to_host"):
        c = row["proxy"][direction]
        assert min(c["corrupted_bytes"], c["dropped"], c["duplicated"], c["delayed"]) > 0
    line = format_table([row], s).splitlines()[2].split()
    assert line[:7] == ["5", "%", "y/y/y", "0", "0", "yes", "yes"]
