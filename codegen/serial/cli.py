"""The serial verbs of ``pockengine``: train, eval, pull (the pockengine protocol) and flash
(the STM32 UART bootloader). ``codegen.cli`` registers them with ``add_serial_verbs``.

Every command line, ``--help`` included, imports this module, so (as in ``codegen.cli``) the
verbs import what they run inside their functions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import PockError, plural

Verb = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def _device(args: argparse.Namespace) -> Any:
    from .client import Device

    log = None if args.json else (lambda s: print(f"  {s}", file=sys.stderr))
    return Device(args.port, baudrate=args.baud, timeout=args.timeout,
                  reconnect=args.reconnect, deadline=args.deadline, log=log)


def _bar(args: argparse.Namespace, label: str) -> tuple[Any, Callable[..., None]]:
    from .progress import Progress

    state: dict[str, Any] = {}

    def update(done: int, total: int, fields: dict[str, Any]) -> None:
        if "bar" not in state:
            state["bar"] = Progress(total, label, enabled=not (args.json or args.no_progress),
                                    initial=done)
        state["bar"].update(done, **fields)

    def close() -> None:
        if "bar" in state:
            state["bar"].close()

    return close, update


def cmd_train(args: argparse.Namespace) -> int:
    from .session import train_over_serial

    close, update = _bar(args, "train")
    with _device(args) as dev:
        try:
            r = train_over_serial(dev, args.data, epochs=args.epochs, seed=args.seed,
                                  shuffle=not args.no_shuffle,
                                  checkpoint_every=args.checkpoint_every,
                                  predict=not args.no_accuracy, restart=args.restart,
                                  progress=update)
        finally:
            close()
    result = {k: v for k, v in r.items() if not k.startswith("_")}
    if args.json:
        print(json.dumps(result))
        return 0
    losses = [v for v in result["loss"] if v is not None]
    if result["resumed_from"]:
        print(f"resumed at sample {result['resumed_from'] + 1} of {result['steps']} (the "
              "device had applied the others)")
    print(f"{result['board']} on {result['port']}: {plural(result['applied'], 'sample')} "
          f"applied ({plural(result['steps'], 'step')}, {plural(result['epochs'], 'epoch')})"
          + (f", {result['rewinds']} restarts recovered" if result["rewinds"] else ""))
    if losses:
        k = max(1, len(losses) // 10)
        print(f"loss: first {sum(losses[:k]) / k:.4f} -> last {sum(losses[-k:]) / k:.4f} "
              f"(mean of {k} steps)")
    if result["online_accuracy"] is not None:
        print(f"online accuracy (prediction before each update): "
              f"{result['online_accuracy']:.2%}")
    link = result["link"]
    print(f"link: {link['requests']} requests, {link['retransmissions']} retransmissions, "
          f"{link['reconnects']} reconnects, frames of {link['frame_bytes_min']}.."
          f"{link['frame_bytes_max']} bytes; checkpoint generation "
          f"{result['checkpoint_generation']}")
    print(f"params_sha256 {result['params_sha256']}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .session import eval_over_serial

    close, update = _bar(args, "eval")
    with _device(args) as dev:
        try:
            r = eval_over_serial(dev, args.data, progress=update)
        finally:
            close()
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k != "predictions"}
                         | ({"predictions": r["predictions"]} if args.predictions else {})))
        return 0
    if r.get("accuracy") is not None:
        print(f"{r['board']} on {r['port']}: accuracy {r['accuracy']:.2%} "
              f"({r['correct']}/{r['samples']})")
    else:
        mse = r.get("mse", r.get("mse_int8"))
        print(f"{r['board']} on {r['port']}: mse {mse:.6g} over {r['samples']} samples")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from ..render.output import refuse_overwrite
    from .session import pull_model

    out = Path(args.output)
    refuse_overwrite(out, args.force)      # and a folder that is missing: before the device
    with _device(args) as dev:
        r = pull_model(dev, out, model=args.model, calib=args.calib, project=args.project)
    if args.json:
        print(json.dumps(r))
        return 0
    origin = {"project": f" (the model of project {r['model_path']})",
              "cache": f" (the model cached as {r['model_path']})"}.get(r["model_from"], "")
    print(f"wrote {r['output']}: the original model{origin} with the "
          f"{len(r['parameters'])} trained parameter tensors of {r['board']} ({r['steps']} "
          f"steps, params_sha256 {r['params_sha256']})"
          + (", as a QDQ ONNX model" if r["format"] == "onnx" else ""))
    return 0


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def cmd_flash(args: argparse.Namespace) -> int:
    from .progress import Progress
    from .stm32 import flash, load_image

    if args.protocol != "stm32":
        raise PockError(f"flash protocol {args.protocol!r} is not available (stm32)")
    pieces = load_image(args.image, args.address)
    bars: dict[str, Progress] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase not in bars:
            for b in bars.values():
                b.close()
            bars.clear()
            bars[phase] = Progress(total, phase, enabled=not (args.json or args.no_progress),
                                   unit=" B" if phase != "erase" else " pages")
        bars[phase].update(done)

    try:
        r = flash(args.port, pieces, verify=not args.no_verify, go=args.go,
                  chip_id=args.chip_id, baudrate=args.baud, timeout=args.timeout,
                  progress=progress)
    finally:
        for b in bars.values():
            b.close()
    if args.json:
        print(json.dumps(r.to_json()))
        return 0
    print(f"flashed {r.bytes_written:,} bytes to {r.chip} (id 0x{r.pid:03x}) on {r.port}"
          + (", verified" if r.verified else "") + (", started" if r.started else ""))
    return 0


def _link_options(sp: argparse.ArgumentParser, timeout: float) -> None:
    sp.add_argument("--port", required=True,
                    help="serial port: /dev/ttyUSB0, COM3, or socket://HOST:PORT or "
                    "tcp:HOST:PORT (an emulator)")
    sp.add_argument("--baud", type=int, default=115200, help="baud rate (default 115200)")
    sp.add_argument("--timeout", type=float, default=timeout,
                    help=f"seconds to wait for an answer (default {timeout:g})")
    sp.add_argument("--json", action="store_true", help="machine-readable result")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")


def _session_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--reconnect", type=float, default=30.0, metavar="SECONDS",
                    help="reopen a lost link for up to this long (default 30)")
    sp.add_argument("--deadline", type=float, default=30.0, metavar="SECONDS",
                    help="give up when the device has not answered for this long "
                    "(default 30; a noisy link only shrinks the frames)")


def add_serial_verbs(verb: Verb) -> None:
    """Register train, eval, pull and flash on the CLI's subparsers (``verb(name, fn, help)``
    returns a subparser)."""
    sp = verb("train", cmd_train, "fine-tune the model on a device over serial: stream the "
              "samples, exactly once each, resumable")
    _link_options(sp, 2.0)
    sp.add_argument("--data", required=True, help=".npz with training 'x' and 'y'")
    sp.add_argument("--epochs", type=int, default=1)
    sp.add_argument("--seed", type=int, default=0, help="sample order seed (as fit)")
    sp.add_argument("--no-shuffle", action="store_true", help="visit samples in file order")
    sp.add_argument("--checkpoint-every", type=int, default=64, metavar="N",
                    help="ask the device to checkpoint every N samples (default 64)")
    sp.add_argument("--restart", action="store_true",
                    help="start over from the initial parameters (erases checkpoints)")
    _session_options(sp)
    sp.add_argument("--no-accuracy", action="store_true",
                    help="skip the prediction before each update (no live accuracy)")

    sp = verb("eval", cmd_eval, "evaluate the model on a device over serial (accuracy or MSE "
              "with its current parameters)")
    _link_options(sp, 2.0)
    sp.add_argument("--data", required=True, help=".npz with 'x' and 'y'")
    _session_options(sp)
    sp.add_argument("--predictions", action="store_true",
                    help="with --json: include every prediction")

    sp = verb("pull", cmd_pull, "read the trained parameters from a device and write the "
              "original model with them (.tflite, or .onnx: a QDQ ONNX model)")
    _link_options(sp, 2.0)
    sp.add_argument("-o", "--output", required=True, help="output model: .tflite, or .onnx "
                    "for a QDQ ONNX model (int8 weights, int32 biases, QuantizeLinear / "
                    "DequantizeLinear around float ops)")
    sp.add_argument("--model", help="the original model the firmware was compiled from "
                    "(default: the model its project keeps: --project DIR, the current "
                    "directory if it is that project, or the local cache keyed by the "
                    "device's model hash; else the file named by the device, if it is here)")
    sp.add_argument("--calib", help="the calibration data it was compiled with (float models, "
                    "with --model)")
    sp.add_argument("--project", metavar="DIR", help="the project the firmware was compiled "
                    "into (pockengine compile -o DIR): its model is used, checked against the "
                    "device's model hash")
    _session_options(sp)
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")

    sp = verb("flash", cmd_flash, "write a firmware image through a bootloader (stm32: the "
              "STM32 system-memory UART bootloader, AN3155)")
    _link_options(sp, 1.0)
    sp.add_argument("image", help="firmware image: .elf (loadable segments) or raw .bin")
    sp.add_argument("--protocol", default="stm32", help="bootloader protocol (stm32)")
    sp.add_argument("--address", type=_int, help="where a raw .bin goes (default 0x08000000)")
    sp.add_argument("--no-verify", action="store_true", help="skip reading the image back")
    sp.add_argument("--go", type=_int, nargs="?", const=0x08000000, metavar="ADDRESS",
                    help="start the program after flashing (default address 0x08000000)")
    sp.add_argument("--chip-id", type=_int, help="require this product id (e.g. 0x413)")
