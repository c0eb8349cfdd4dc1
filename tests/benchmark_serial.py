"""Serial fault campaign: training, evaluation and pull over a noisy, interrupted link.

The bundled digits CNN is compiled for mps2-an386 (the embedded-data firmware's run is the
undisturbed reference: its params_sha256 and accuracy) and its serial firmware, built with
the device trace (``PE_SERIAL_TRACE``), runs under QEMU behind the fault proxy
(``codegen.serial.fault_proxy``): bytes corrupted, frames dropped, duplicated and delayed in
both directions, from fixed seeds. Per row: ``pockengine train`` (in-process; the emulator
killed and restarted mid-training, or the host process killed and restarted), then eval and
pull through the same proxy. Columns:

- done: train / eval / pull completed;
- lost, twice: samples the device's final parameters never saw / saw more than once, from the
  device's own trace of every sample applied, checkpoint saved and state restored over all
  its lives (``tests/serial/ledger.py``) - both must be 0;
- sha ==: the trained and the pulled parameters' SHA-256 equal the undisturbed run's; eval
  ==: the accuracy EVAL reported equals the undisturbed run's;
- retx: retransmissions (host side, all sessions of the row), frame: the frame payload
  limit the link adapted to (smallest..largest, bytes), resets: emulator / host kills,
  seconds: wall time of the row.

    python -m tests.benchmark_serial [--rows 0,1,2,5,host] [--train 24] [--epochs 2]
                                     [--eval 24] [--resets 2] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codegen import models
from codegen.serial.client import Device
from codegen.serial.fault_proxy import FaultProxy
from codegen.serial.firmware import SerialFirmware, build_serial_firmware, start_serial_firmware
from codegen.serial.session import eval_over_serial, pull_model, train_over_serial

from .serial.ledger import replay

SPEC = "bias:all+weight:last2,opt=sgd,lr=0.01,momentum=0.9"
SEED = 3
CHECKPOINT_EVERY = 8


@dataclass(frozen=True)
class Case:
    name: str
    corrupt: float = 0.0            # per byte
    drop: float = 0.0               # per frame (delimited unit)
    duplicate: float = 0.0
    delay: float = 0.0              # per frame: held back up to max_delay (the line stalls)
    max_delay: float = 0.15
    resets: int = 0                 # emulator kills mid-training
    host_kills: int = 0             # host process kills mid-training
    seed: int = 0                   # the fault generator's


def faults(corrupt: float, **kw: Any) -> dict[str, Any]:
    return {"corrupt": corrupt, "drop": 0.02, "duplicate": 0.02, "delay": 0.01} | kw


def cases(resets: int, seed: int) -> dict[str, Case]:
    return {
        "0": Case("0 %", seed=seed),
        "1": Case("1 %", **faults(0.01), resets=resets, seed=seed + 10),
        "2": Case("2 %", **faults(0.02), resets=resets, seed=seed + 20),
        "5": Case("5 %", **faults(0.05), resets=resets, seed=seed + 50),
        "host": Case("1 % host kills", **faults(0.01), host_kills=max(1, resets + 1),
                     seed=seed + 90),
    }


@dataclass
class Setup:
    dir: Path
    tflite: Path
    train: Path
    eval: Path
    steps: int
    epochs: int
    fw: SerialFirmware
    reference_sha: str
    reference_accuracy: float | None
    extra: dict[str, Any] = field(default_factory=dict)  # project, embedded run, eval data


def prepare(work: Path, *, train: int = 24, evals: int = 24, epochs: int = 2,
            fw: SerialFirmware | None = None) -> Setup:
    """The digits model and data, the undisturbed run (embedded-data firmware) and the serial
    firmware with the device trace."""
    from codegen.frontend import save_model
    from codegen.pipeline import build_project, compile_model, load, quantize, run_device

    x, y = models.digits("train")
    xe, ye = models.digits("test")
    tflite = work / "digits_int8.tflite"
    save_model(quantize(load(models.path("digits_cnn.onnx")), x[:100]).graph, tflite)
    tr = {"x": x[100:100 + train], "y": y[100:100 + train]}
    ev = {"x": xe[:evals], "y": ye[:evals]}
    np.savez(work / "train.npz", **tr)
    np.savez(work / "eval.npz", **ev)
    proj = compile_model(tflite, board="mps2-an386", spec=SPEC, out_dir=work / "project",
                         data=tr, evals=ev, epochs=epochs, seed=SEED)
    ref = run_device(proj, build=build_project(proj), profile=False)
    if fw is None:
        fw = build_serial_firmware(proj, trace=True)    # the trace only adds console lines
    return Setup(work, tflite, work / "train.npz", work / "eval.npz", train * epochs, epochs,
                 fw, ref.params_sha256, ref.accuracy("after"),
                 {"project": proj, "embedded": ref, "evals": ev})


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Emulator:
    """The serial firmware under QEMU on a fixed port and checkpoint directory; ``reset()``
    kills it (a power cut) and starts it again. Keeps every life's console (the trace)."""

    def __init__(self, fw: SerialFirmware, work: Path):
        self.fw, self.work = fw, work
        self.uart = f"tcp:127.0.0.1:{free_port()}"
        self.consoles: list[str] = []
        self.run = start_serial_firmware(fw, self.uart, work)

    def reset(self) -> None:
        self.run.kill()
        self.consoles.append(self.run.output())
        self.run = start_serial_firmware(self.fw, self.uart, self.work)

    def stop(self) -> list[str]:
        self.run.kill()
        self.consoles.append(self.run.output())
        return [ln for text in self.consoles for ln in text.splitlines()]


def _merge(into: dict[str, Any], link: dict[str, Any]) -> None:
    for k in ("retransmissions", "reconnects", "timeouts", "nacks"):
        into[k] = into.get(k, 0) + int(link.get(k, 0))
    into["frame_min"] = min(into.get("frame_min", 1 << 30), link.get("frame_bytes_min", 1 << 30))
    into["frame_max"] = max(into.get("frame_max", 0), link.get("frame_bytes_max", 0))


def _train_in_process(s: Setup, case: Case, dev: Device, emu: Emulator,
                      link: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(case.seed)
    cut_at = sorted(rng.sample(range(2, s.steps - 1), case.resets)) if case.resets else []
    go = threading.Event()
    done_resets: list[float] = []

    def chaos() -> None:
        while len(done_resets) < case.resets and go.wait(600):
            go.clear()
            emu.reset()
            done_resets.append(time.monotonic())

    def progress(done: int, _total: int, _fields: dict[str, Any]) -> None:
        if cut_at and done >= cut_at[0] and not go.is_set():
            cut_at.pop(0)
            go.set()

    t = threading.Thread(target=chaos, daemon=True)
    t.start()
    r = train_over_serial(dev, s.train, epochs=s.epochs, seed=SEED,
                          checkpoint_every=CHECKPOINT_EVERY, restart=True, progress=progress)
    t.join(timeout=120)
    r["resets"] = len(done_resets)
    return r


def _device(url: str) -> Device:
    return Device(url, timeout=1.0, reconnect=60, deadline=60)


def _train_as_processes(s: Setup, case: Case, url: str, link: dict[str, Any]
                        ) -> dict[str, Any]:
    """``pockengine train`` as a process, SIGKILLed ``host_kills`` times at random moments
    of the training, restarted each time; the last run finishes."""
    rng = random.Random(case.seed)
    argv = [sys.executable, "-m", "codegen", "train", "--port", url, "--data", str(s.train),
            "--epochs", str(s.epochs), "--seed", str(SEED), "--checkpoint-every",
            str(CHECKPOINT_EVERY), "--timeout", "1", "--json"]
    kills = 0
    first = True
    while True:
        proc = subprocess.Popen(argv + (["--restart"] if first else []), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        first = False
        try:
            out, err = proc.communicate(timeout=rng.uniform(3.0, 10.0)
                                        if kills < case.host_kills else 900)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            kills += 1
            continue
        if proc.returncode != 0:
            raise RuntimeError(f"pockengine train failed: {err.strip()[-300:]}")
        r = json.loads(out)
        _merge(link, r["link"])
        r["resets"] = kills
        return r


def run_case(s: Setup, case: Case, work: Path, *, one_session: bool = False
             ) -> dict[str, Any]:
    """One row: train (with the case's interruptions), eval and pull through the proxy; in
    sessions of their own as the CLI verbs run (DESCRIBE and the parameters are read by
    each), or with ``one_session`` in one, as a script would (each read once)."""
    work.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"case": case.name, "corrupt": case.corrupt, "drop": case.drop,
                           "duplicate": case.duplicate, "delay": case.delay}
    link: dict[str, Any] = {}
    t0 = time.monotonic()
    emu = Emulator(s.fw, work)
    done = {"train": False, "eval": False, "pull": False}
    try:
        with FaultProxy((emu.run.host, emu.run.port), corrupt=case.corrupt, drop=case.drop,
                        duplicate=case.duplicate, delay=case.delay, max_delay=case.max_delay,
                        seed=case.seed, connect_timeout=60) as px:
            dev = None
            try:
                if case.host_kills:
                    r = _train_as_processes(s, case, px.url, link)
                else:
                    dev = _device(px.url)
                    r = _train_in_process(s, case, dev, emu, link)
                    if not one_session:
                        _merge(link, dev.link_report())
                        dev.close()
                        dev = None
                done["train"] = True
                row.update(resets=r["resets"], train_sha=r["params_sha256"],
                           rewinds=r["rewinds"])
                dev = dev or _device(px.url)
                e = eval_over_serial(dev, s.eval)
                done["eval"] = True
                row["accuracy"] = e["accuracy"]
                p = pull_model(dev, work / "tuned.tflite", model=s.tflite)
                done["pull"] = True
                row["pull_sha"] = p["params_sha256"]
            except Exception as ex:  # noqa: BLE001 - a row reports its failure
                row["error"] = f"{type(ex).__name__}: {ex}"
            finally:
                if dev is not None:
                    _merge(link, dev.link_report())
                    dev.close()
            row["proxy"] = px.counts()
    finally:
        lines = emu.stop()
    ledger = replay(lines)
    row.update(done=done, lost=ledger.lost(s.steps), twice=ledger.twice(),
               in_order=ledger.in_order(s.steps), applications=ledger.applications,
               lives=ledger.lives, link=link, seconds=round(time.monotonic() - t0, 1))
    row["sha_equal"] = (row.get("train_sha") == s.reference_sha
                        and row.get("pull_sha") == s.reference_sha)
    row["eval_equal"] = done["eval"] and row.get("accuracy") == s.reference_accuracy
    return row


def format_table(rows: list[dict[str, Any]], s: Setup) -> str:
    head = ("faults", "done", "lost", "twice", "sha ==", "eval ==", "retx", "frame",
            "resets", "seconds")
    lines = [head]
    for r in rows:
        d = r["done"]
        link = r["link"]
        lines.append((r["case"], "/".join("y" if d[k] else "n" for k in ("train", "eval", "pull")),
                      str(r["lost"]), str(r["twice"]), "yes" if r["sha_equal"] else "NO",
                      "yes" if r["eval_equal"] else "NO", str(link.get("retransmissions", 0)),
                      f"{link.get('frame_min', 0)}..{link.get('frame_max', 0)}",
                      str(r.get("resets", 0)), f"{r['seconds']:.1f}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                     enumerate(zip(line, widths, strict=True))).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out += ["", (f"{s.steps} training samples ({s.epochs} epochs of the digits CNN, "
                 f"mps2-an386 under QEMU), checkpoint every {CHECKPOINT_EVERY}; faults per "
                 "direction: byte corruption as given, 2 % of frames dropped, 2 % duplicated, "
                 "1 % delayed up to 0.15 s; done = train/eval/pull; lost/twice from the device "
                 "trace; frame = the adapted frame payload limit (bytes)")]
    out += [f"{r['case']}: {r['error']}" for r in rows if "error" in r]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="serial fault campaign under QEMU")
    ap.add_argument("--rows", default="0,1,2,5,host")
    ap.add_argument("--train", type=int, default=24, help="training samples")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--eval", type=int, default=24, help="evaluation samples")
    ap.add_argument("--resets", type=int, default=2, help="emulator kills per faulty row")
    ap.add_argument("--seed", type=int, default=0, help="fault seed offset")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    for tool in ("qemu-system-arm", "arm-none-eabi-gcc", "make"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed: the campaign runs the firmware under QEMU",
                  file=sys.stderr)
            return 2
    table = cases(args.resets, args.seed)
    names = [n for n in args.rows.split(",") if n]
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error(f"unknown row(s) {unknown} (choose from {', '.join(table)})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="pe-serial-faults-") as tmp:
        s = prepare(Path(tmp), train=args.train, evals=args.eval, epochs=args.epochs)
        for n in names:
            row = run_case(s, table[n], Path(tmp) / f"row-{n}")
            rows.append(row)
            print(f"  {row['case']}: {row['seconds']} s, lost {row['lost']}, twice "
                  f"{row['twice']}, sha {'equal' if row['sha_equal'] else 'DIFFERENT'}"
                  + (f" ({row['error']})" if "error" in row else ""), file=sys.stderr)
    print(json.dumps(rows, indent=1) if args.json else format_table(rows, s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
