"""The `pockengine` command line. Bad input: one line on stderr, exit status 2.

The verbs import what they run inside their functions, on purpose: the CLI starts light, so
``--help``, ``boards`` and argument errors load neither onnx nor the importers, quantizer,
trainer or pipeline.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .errors import PockError, PockWarning, plural

EXIT_BAD_INPUT = 2
# stdout closed early (`pockengine inspect MODEL | head -1`): 128 + SIGPIPE, the status the shell
# reports for a program that the signal ended (what `cat` or `yes` end with in that pipe), so
# `set -o pipefail` scripts see pockengine as any other Unix tool; nothing is printed
EXIT_BROKEN_PIPE = 141


def _load(path: str):
    from .frontend import load_model

    return load_model(path)


def _refuse_overwrite(path: Path, force: bool) -> None:
    """``render.output.refuse_overwrite`` (imported when used: the CLI starts light)."""
    from .render.output import refuse_overwrite

    refuse_overwrite(path, force)


def cmd_inspect(args: argparse.Namespace) -> int:
    from .summary import format_summary, summarize

    s = summarize(_load(args.model))
    print(json.dumps(s, indent=1) if args.json else format_summary(s))
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    from .data import fit_input, load_npz
    from .frontend import export_model
    from .quant import quantize

    graph = _load(args.model)
    x, _ = load_npz(args.calib)
    if args.samples is not None:
        x = x[: args.samples]
    if len(x) == 0:
        raise PockError(f"{args.calib}: no calibration samples")
    if graph.tensors[graph.inputs[0]].dtype != "float32":
        raise PockError(f"{args.model}: model is already quantized "
                        f"(input {graph.inputs[0]!r} is {graph.tensors[graph.inputs[0]].dtype})")
    out = Path(args.output)
    _refuse_overwrite(out, args.force)
    q = quantize(graph, fit_input(graph, x, f"{args.calib} x"), per_channel=not args.per_tensor)
    fmt = export_model(q, out)
    print(f"wrote {out}: int8 model ({fmt}), calibrated on {len(x)} samples", file=sys.stderr)
    return 0


def cmd_infer(args: argparse.Namespace) -> int:
    from .data import fit_input, load_npy

    out = Path(args.output)
    _refuse_overwrite(out, args.force)
    graph = _load(args.model)
    x = fit_input(graph, load_npy(args.input), args.input)
    summary: dict = {"engine": args.engine, "backend": args.backend}
    y, facts = _run_engine(graph, x, args.engine, args.timeout, args.backend,
                           not args.no_measure)
    summary.update(facts)
    _save_outputs(out, y)
    summary.update(output=str(out), shape=list(y.shape), dtype=str(y.dtype))
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"wrote {out}: {list(y.shape)} {y.dtype}", file=sys.stderr)
        ins = summary.get("instructions")
        if ins and ins.get("infer") is not None:
            chain = ", ".join(summary["chain"] or ())
            print(f"{ins['unit']} per inference on {args.engine} ({chain}): {ins['infer']:,}",
                  file=sys.stderr)
    return 0


def _run_engine(graph, x, engine: str, timeout: float | None, backend: str = "auto",
                measure: bool = True):
    """Outputs of ``graph`` on ``x`` with an engine (golden, host or a board; what ``infer``
    and ``validate`` run) and what the run tells besides: the backend chain, and on a board
    the instructions it counted."""
    facts: dict = {}
    if engine == "host":
        import tempfile

        from .pipeline import compile_model, run_host_infer

        with tempfile.TemporaryDirectory(prefix="pockengine-infer-") as tmp:
            proj = compile_model(graph, out_dir=Path(tmp) / "host", backend=backend)
            facts["chain"] = proj.manifest.get("chain")
            y = run_host_infer(proj, x)
    elif engine == "golden":
        from . import golden

        (y,) = golden.run(graph, x)[:1]
    else:
        y, res, chain = _infer_on_board(graph, x, engine, timeout, backend, measure)
        facts["chain"] = chain
        facts["instructions"] = res.instructions
    return y, facts


def _save_outputs(out: Path, y) -> None:
    """Write ``y`` to exactly ``out`` (np.save to a path would append .npy): .txt and .csv as
    text, one sample per line; .npz as an archive with 'y'; anything else in .npy format."""
    import numpy as np

    suffix = out.suffix.lower()
    try:
        with open(out, "wb") as f:
            if suffix in (".txt", ".csv"):
                rows = y.reshape(len(y), int(np.prod(y.shape[1:], dtype=np.int64)))
                np.savetxt(f, rows, fmt="%d" if y.dtype.kind in "iu" else "%.9g",
                           delimiter="," if suffix == ".csv" else " ")
            elif suffix == ".npz":
                np.savez(f, y=y)
            else:
                np.save(f, y)
    except OSError as e:
        raise PockError(f"{out}: cannot write ({e.strerror or e})") from None


def _infer_on_board(graph, x, engine: str, timeout: float | None, backend: str = "auto",
                    measure: bool = True):
    """pe_infer on a board's emulator: the inputs embedded as the eval split, the outputs
    printed by the firmware; returns (outputs, the run's result, the backend chain)."""
    import tempfile

    import numpy as np

    from .fit import _engine_board
    from .pipeline import build_project, compile_model, run_device
    from .run.device import DEFAULT_TIMEOUT

    board = _engine_board(engine)
    if board is None:
        raise PockError(f"engine {engine!r} is not available for infer (use golden, host or "
                        "a device board)")
    with tempfile.TemporaryDirectory(prefix="pockengine-infer-") as tmp:
        proj = compile_model(graph, board=engine, out_dir=Path(tmp) / board.name,
                             evals=(x, None), print_outputs=True, backend=backend,
                             measure=measure)
        res = run_device(proj, build=build_project(proj), timeout=timeout or DEFAULT_TIMEOUT)
        shape = proj.manifest["output"]["shape"][1:]
    y = np.stack([np.frombuffer(res.outputs[i], np.int8).reshape(shape)
                  for i in range(len(x))]) if len(x) else np.zeros((0, *shape), np.int8)
    return y, res, proj.manifest.get("chain")


def cmd_validate(args: argparse.Namespace) -> int:
    """The golden model and an engine on the same inputs: bit-exact? Exit 0 when they agree
    bit for bit, 1 when they do not (2: bad input)."""
    from .validate import compare, format_validation, random_inputs

    if args.engine == "golden":
        raise PockError("--engine golden: validate compares an engine with the golden model; "
                        "choose host or a board (pockengine boards)")
    if args.engine != "host":
        from .fit import _engine_board

        try:
            board = _engine_board(args.engine)
        except PockError as e:          # golden is no choice here
            raise PockError(str(e).replace("choose from golden, ", "choose from ")) from None
        if board is None:
            raise PockError(f"engine {args.engine!r} is not available for validate (use host "
                            "or a device board)")
    if args.samples < 1:
        raise PockError(f"--samples {args.samples}: give at least 1 sample")
    graph = _load(args.model)
    if args.input:
        from .data import fit_input, load_npy

        x = fit_input(graph, load_npy(args.input), args.input)
        if len(x) == 0:
            raise PockError(f"{args.input}: no samples (axis 0 is empty)")
    else:
        x = random_inputs(graph, args.samples, args.seed)
    from . import golden

    (ref,) = golden.run(graph, x)[:1]
    y, facts = _run_engine(graph, x, args.engine, args.timeout, args.backend,
                           not args.no_measure)
    result = {"model": graph.name, "engine": args.engine, "backend": args.backend,
              "chain": facts.get("chain"), "input": args.input,
              "seed": None if args.input else args.seed} | compare(ref, y)
    if facts.get("instructions"):
        result["instructions"] = facts["instructions"]
    if args.json:
        print(json.dumps(result))
    else:
        print(format_validation(result))
    return 0 if result["bit_exact"] else 1


def cmd_report(args: argparse.Namespace) -> int:
    from .render.output import open_project
    from .report import write_report

    out = Path(args.output)
    open_project(args.dir)                      # a project first: its error before the file's
    _refuse_overwrite(out, args.force)
    result = write_report(args.dir, out)
    if args.json:
        print(json.dumps(result))
        return 0
    what = ", ".join(w for w, ok in (("memory plan", result["plan"]),
                                      ("run", result["run"])) if ok)
    print(f"wrote {out}: {plural(result['ops'], 'kernel call')}"
          + (f", {what}" if what else ""), file=sys.stderr)
    for note in result["notes"]:
        print(f"  note: {note}", file=sys.stderr)
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    import numpy as np

    from .data import load_npz
    from .fit import fit_model, tuned_graph

    out = Path(args.output) if args.output else None
    check = None
    if out is not None:
        _refuse_overwrite(out, args.force)
        from .frontend import export_format

        if export_format(out) == "onnx":        # an op ONNX export cannot take: before training
            from .frontend.onnx_writer import check_onnx_export as check
    calib = load_npz(args.calib)[0] if args.calib else None
    train = _auto_train(args, board_name=args.board or _device_engine(args.engine),
                        data=args.data)
    steps = [0]
    from .progress import show_progress, step_bar

    show = show_progress(args)
    total = max(0, args.epochs) * len(load_npz(args.data)[0]) if show else None
    bar = step_bar(total, f"fit {args.engine}", enabled=show and total != 0)

    def progress(epoch: int, step: int, loss: float) -> None:
        steps[0] = step + 1
        bar.step(loss=loss)
        if not (args.json or args.quiet) and (step + 1) % args.log_every == 0:
            bar.write(f"  epoch {epoch + 1} step {step + 1}: loss {loss:.4f}")

    try:
        r = fit_model(args.model, train, args.data, args.eval, epochs=args.epochs,
                      engine=args.engine, calib=calib, seed=args.seed,
                      shuffle=not args.no_shuffle, progress=progress,
                      profile_ops=args.profile_ops, timeout=args.timeout, keep_dir=args.keep,
                      board=args.board, backend=args.backend, measure=not args.no_measure,
                      check_graph=check, stream="off" if args.no_stream else "auto",
                      blocks="off" if args.no_block_updates else "auto",
                      partial="off" if args.no_partial_weights else "auto")
    finally:
        bar.close()
    if out is not None:
        from .frontend import export_model

        r["output_format"] = export_model(tuned_graph(r.graph, r.state), out)
        r["output"] = str(out)
    result = dict(r)
    if args.train == "auto":
        result["train_auto"] = train.source.removeprefix("--train ")
    if args.json:
        print(json.dumps(result))
        return 0
    acc = lambda v: "-" if v is None else f"{v:.2%}"
    losses = result["loss"]
    print(f"engine {result['engine']}: {plural(result['steps'], 'step')} "
          f"({plural(result['epochs'], 'epoch')}, backward {result['backward']}, "
          f"{result['optimizer']})")
    if losses:
        k = max(1, len(losses) // 10)
        print(f"loss: first {np.mean(losses[:k]):.4f} -> last {np.mean(losses[-k:]):.4f} "
              f"(mean of {k} steps)")
    print(f"accuracy: before {acc(result['accuracy_before'])} -> after "
          f"{acc(result['accuracy_after'])}")
    if result["steps"]:
        from .train.report import saturation_line

        print(saturation_line(result["saturated_updates"], result["saturated_per_step"]))
    ins = result.get("instructions")
    if ins:
        infer = ins.get("infer")         # measured only where there was data to infer on
        print(f"{ins['unit']} per step: forward {ins['forward']:,}, backward "
              f"{ins['backward']:,}, update {ins['update']:,} (whole step {ins['step']:,})"
              + (f"; per inference {infer:,}" if infer else ""))
    if result.get("memory"):
        mem = result["memory"]
        print(f"memory: flash {mem['flash_bytes']:,} B, SRAM {mem['sram_bytes']:,} B "
              f"(budget {mem['budget']['flash_bytes']:,} / {mem['budget']['sram_bytes']:,} B)")
    print(f"params_sha256 {result['params_sha256']}")
    if out is not None:
        print(f"wrote {out}")
    return 0


def _search(args: argparse.Namespace, *, model, board_name: str | None, data: str,
            evals: str | None, verify: bool, quiet: bool):
    """Run the sparse-update search for ``search`` and ``--train auto`` (a progress bar with an
    ETA on a terminal)."""
    from .data import load_npz
    from .fit import prepare_model
    from .progress import step_bar
    from .search import Budget, default_base, parse_size, run_search

    board = None
    if board_name is not None:
        from .pipeline import resolve_board

        board = resolve_board(board_name)
    sram_arg = getattr(args, "sram", None)
    if board is None and sram_arg is None:
        raise PockError("search needs a budget: --board BOARD (its SRAM and flash) or "
                        "--sram BYTES")
    sram = parse_size(sram_arg, "--sram") if sram_arg else board.sram_budget
    flash_arg = getattr(args, "flash", None)
    flash = parse_size(flash_arg, "--flash") if flash_arg else \
        (board.flash_budget if board is not None else None)
    latency = getattr(args, "latency", None)
    if latency is not None and latency <= 0:
        raise PockError(f"--latency must be a positive number of instructions, got {latency}")
    budget = Budget(sram=sram, flash=flash, latency=latency, board=board,
                    board_arg=board_name)
    x, y = load_npz(data)
    ev = None
    if evals is not None:
        xe, ye = load_npz(evals)
        ev = {"x": xe, "y": ye}
    calib = load_npz(args.calib)[0] if getattr(args, "calib", None) else None
    graph = prepare_model(model, calib, x)
    base_arg = getattr(args, "base", None)
    if base_arg:
        from .train.spec import load_spec

        base = load_spec(base_arg)
        if getattr(args, "backward", None):
            from dataclasses import replace

            base = replace(base, backward=args.backward, backward_given=True)
    else:
        mode = getattr(args, "backward", None) or \
            (board.default_backward if board is not None else "fp32")
        base = default_base(mode, max(1, args.epochs) * len(x))
    if board is not None:
        base = base.with_default_backward(board.default_backward)
    bar = step_bar(None, "search", enabled=not quiet, unit="fine-tune")

    def progress(name: str, done: int, total: int) -> None:
        bar.set_total(total)
        bar.step(spec=name)

    from .backends.cost import cache_dir

    try:
        return run_search(graph, {"x": x, "y": y}, ev, budget, base=base,
                          epochs=max(1, args.epochs),
                          engine=getattr(args, "search_engine", None) or "host",
                          seed=args.seed, holdout=getattr(args, "holdout", 0.25),
                          backend=getattr(args, "backend", "auto"),
                          jobs=max(1, getattr(args, "jobs", None) or min(2, os.cpu_count() or 1)),
                          cache=cache_dir() / "search",
                          measure=not getattr(args, "no_measure", False), verify=verify,
                          link=not getattr(args, "no_link", False),
                          progress=progress)
    finally:
        bar.close()


def _device_engine(engine: str) -> str | None:
    return None if engine in ("golden", "host") else engine


def _auto_train(args: argparse.Namespace, *, board_name: str | None, data: str | None):
    """``--train auto``: the spec ``search`` finds for the board's budget (from the training
    data alone; its line on stderr says what it chose); any other --train as given."""
    if args.train != "auto":
        return args.train
    if board_name is None or board_name == "host":
        raise PockError("--train auto searches for the trainable set that fits a board's "
                        "budget: give --board BOARD (or --engine BOARD)")
    if not data:
        raise PockError("--train auto fine-tunes candidate sets on the training data: give "
                        "--data")
    if getattr(args, "epochs", None) is None:
        args.epochs = 1
    if getattr(args, "engine", None) == "golden":
        args.search_engine = "golden"      # fit --engine golden: fine-tune candidates there too
    from .progress import show_progress

    r = _search(args, model=args.model, board_name=board_name, data=data, evals=None,
                verify=False, quiet=not show_progress(args))
    if not getattr(args, "json", False):
        print(f"--train auto: {r.json['spec']} (SRAM {r.json['sram_bytes']:,} B, validation "
              f"score {r.json['validation_score']:.4f}; baselines "
              + ", ".join(f"{b['spec']} {b['validation_score']:.4f}"
                          for b in r.json["baselines"]) + ")", file=sys.stderr)
    return r.spec


def cmd_fleet(args: argparse.Namespace) -> int:
    try:
        import flwr  # noqa: F401  (Flower: the server and client apps of a fleet)
    except ImportError:
        raise PockError("pockengine fleet runs on Flower, which is not installed: pip install "
                        "'pockengine[fleet]'") from None
    from .data import load_npz
    from .fit import tuned_graph
    from .fleet import parse_fault, run_fleet

    out = Path(args.output) if args.output else None
    if out is not None:
        _refuse_overwrite(out, args.force)
    engine = args.engine
    if args.port and engine not in (None, "golden", "host"):
        raise PockError("--port and --engine BOARD are two kinds of devices: give one")
    if args.port:
        clients = len(args.port)
        if args.clients not in (None, clients):
            raise PockError(f"--clients {args.clients} but {clients} --port given")
    elif args.clients is None:
        raise PockError("give --clients N (or the devices with --port, repeated)")
    else:
        clients = args.clients
    log = (lambda s: None) if args.json or args.quiet else \
        (lambda s: print(s, file=sys.stderr, flush=True))
    r = run_fleet(args.model, args.train, args.data, args.eval, clients=clients,
                  rounds=args.rounds, local_epochs=args.local_epochs, split=args.split,
                  engine=engine or "golden", runtime=args.runtime, seed=args.seed,
                  timeout=args.timeout, jobs=args.jobs or 2, board=args.board,
                  faults=dict(parse_fault(f) for f in args.fault or ()),
                  centralized=args.centralized, server_lr=args.server_lr,
                  server_momentum=args.server_momentum, ports=args.port, baud=args.baud,
                  calib=load_npz(args.calib)[0] if args.calib else None, log=log)
    result = dict(r.summary)
    if out is not None:
        from .frontend import export_model

        result["output_format"] = export_model(tuned_graph(r.graph, r.state), out)
        result["output"] = str(out)
    if args.json:
        print(json.dumps(result))
        return 0
    acc = lambda v: "-" if v is None else f"{v:.2%}"
    print(f"{clients} clients, {args.split}, {len(result['rounds'])} rounds x "
          f"{result['local_epochs']} local epochs ({result['engine']}, {result['runtime']})")
    rows = [("round", "accuracy", "updates", "dropped", "refused", "bytes up", "bytes down")]
    for rd in result["rounds"]:
        st = [c["status"] for c in rd["clients"]]
        rows.append((str(rd["round"]), acc(rd["accuracy"]), str(st.count("ok")),
                     str(st.count("dropped")), str(st.count("rejected")),
                     f"{rd['bytes_up']:,}", f"{rd['bytes_down']:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    print(f"accuracy: before {acc(result['accuracy_before'])} -> after "
          f"{acc(result['accuracy_after'])}"
          + (f" (centralized, same samples and epochs: {acc(result['accuracy_centralized'])})"
             if "accuracy_centralized" in result else ""))
    print(f"params_sha256 {result['params_sha256']}")
    if out is not None:
        print(f"wrote {out}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from .board import format_size
    from .progress import show_progress
    from .search import spec_yaml

    out = Path(args.output)
    _refuse_overwrite(out, args.force)
    if args.epochs < 1:
        raise PockError(f"--epochs must be >= 1, got {args.epochs}")
    if not 0.0 < args.holdout < 1.0:
        raise PockError(f"--holdout must be between 0 and 1, got {args.holdout}")
    r = _search(args, model=args.model, board_name=args.board, data=args.data,
                evals=args.eval, verify=True, quiet=not show_progress(args))
    j = r.json
    acc = lambda v: "-" if v is None else f"{v:.2%}"
    header = [f"pockengine search: {Path(args.model).name}, budget "
              f"{format_size(j['budget']['sram_bytes'])} SRAM"
              + (f", {format_size(j['budget']['flash_bytes'])} flash"
                 if j["budget"]["flash_bytes"] else "")
              + (f", {j['budget']['instructions_per_step']:,} instructions per step"
                 if j["budget"]["instructions_per_step"] else "")
              + (f" ({j['budget']['board']})" if j["budget"]["board"] else ""),
              (f"trainable set {j['spec']}: SRAM {j['sram_bytes']:,} B, flash "
              f"{j['flash_bytes']:,} B, about {j['instructions_per_step']:,} instructions "
              "per step (cost model)"),
              (f"validation score {j['validation_score']:.4f} (predicted "
              f"{j['predicted_score']:.4f}), accuracy on {args.eval or 'no eval set'}: "
              f"{acc(j['accuracy'])}"),
              "baselines: " + "; ".join(f"{b['name']} {b['spec']} {acc(b['accuracy'])} "
                                         f"({b['sram_bytes']:,} B)" for b in j["baselines"]),
              f"{args.epochs} epochs, seed {args.seed}"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(spec_yaml(r.spec, header))
    j["output"] = str(out)
    if args.json:
        print(json.dumps(j))
        return 0
    ft = j["fine_tunes"]
    print(f"contribution analysis: {ft['analysis']} fine-tunes ({ft['analysis_cached']} "
          f"cached) of {ft['epochs']} epochs on {ft['train_samples']} samples, scored on "
          f"{ft['validation_samples']} held back; {j['seconds']:.0f} s")
    a = j["additivity"]
    if a["sets"]:
        print(f"additivity: predicted vs measured score of {a['sets']} sets differ by "
              f"{a['mean_abs_error']:.3f} on average (at most {a['max_abs_error']:.3f})")
    rows = [("", "spec", "SRAM", "validation", "accuracy")]
    rows.append(("found", j["spec"], f"{j['sram_bytes']:,}", f"{j['validation_score']:.3f}",
                 acc(j["accuracy"])))
    for b in j["baselines"]:
        rows.append((b["name"], b["spec"], f"{b['sram_bytes']:,}",
                     f"{b['validation_score']:.3f}", acc(b["accuracy"])))
    widths = [max(len(r[k]) for r in rows) for k in range(5)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if j["linked"]:
        lk = j["linked"]
        print(f"linked firmware: SRAM {lk['sram_bytes']:,} B, flash {lk['flash_bytes']:,} B"
              + "".join(f"; {u['spec']} linked at {u['sram_bytes']:,} B, over the budget"
                        for u in lk["over_budget"]))
    print(f"wrote {out}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from .backends import chain_for
    from .data import load_npz
    from .fit import prepare_model
    from .memplan import plot_plan
    from .pipeline import (
        check_device_budget,
        check_pins,
        fit_budget,
        kernel_costs,
        own_board_file,
        plan_lowered,
        plan_project,
        resolve_board,
        resolve_spec,
        training_graph,
    )

    csv_out = Path(args.csv) if args.csv else None
    if csv_out is not None:
        _refuse_overwrite(csv_out, args.force)
    calib = load_npz(args.calib)[0] if args.calib else None
    graph = prepare_model(args.model, calib, None)
    board = resolve_board(args.board) if args.board else None
    cost = kernel_costs(graph, board, chain_for(board, args.backend),
                        measure=not args.no_measure,
                        board_file=own_board_file(args.board) if args.board else None)
    streaming = "off" if args.no_stream else "auto"
    infer, _ = plan_project(graph, None, board, args.backend, cost=cost, streaming=streaming)
    train, unordered, pins = None, None, {}
    if args.train:
        from .train import build_training_graph

        spec = resolve_spec(args.train, board)
        pins = dict(spec.kernels or {})
        tg = training_graph(graph, spec)
        check_pins(pins, graph, tg)
        infer, train = plan_project(graph, tg, board, args.backend, pins, cost, streaming,
                                    "off" if args.no_block_updates else "auto",
                                    "off" if args.no_partial_weights else "auto")
        unordered = plan_lowered(build_training_graph(graph, spec, reorder=False), board,
                                 args.backend, pins, cost).plan
    if board is not None:              # what compile would build: the kernels that fit
        infer, train = fit_budget(board, infer, train, None, pins)
    target = train if train is not None else infer
    plan = target.plan
    result = plan.to_json()
    result["backend"] = {"requested": args.backend, "chain": list(target.lowering.chain)}
    result["kernels"] = target.lowering.table()
    result["stream"] = target.stream
    if train is not None:
        result["infer_stream"] = infer.stream
    if unordered is not None:
        result["peak_bytes_without_reordering"] = unordered.peak_bytes
    if args.plot:
        result["plot"] = str(plot_plan(plan, args.plot))
    if csv_out is not None:
        write_kernel_csv(csv_out, result["kernels"], target.lowering.graph)
        result["csv"] = str(csv_out)
    if board is not None:
        result["board"] = {"name": board.name, "sram_budget_bytes": board.sram_budget,
                           "flash_budget_bytes": board.flash_budget}
        result["project_memory"] = check_device_budget(board, infer, train)
    if args.json:
        print(json.dumps(result))
        return 0
    print(plan.describe())
    for line in stream_lines(target.stream):
        print(line)
    if unordered is not None:
        print(f"arena without update reordering: {unordered.peak_bytes:,} B")
    if args.kernels:
        print(format_kernel_table(result["kernels"]))
    return 0


def stream_lines(info: dict | None) -> list[str]:
    """What the stream stage (and, for a training graph, the blocked-update stage) did to
    one graph, as printed by plan and compile."""
    if not info:
        return []
    return _stream_lines(info) + block_lines(info.get("update_blocks")) \
        + partial_lines(info.get("partial_weights"))


def block_lines(info: dict | None) -> list[str]:
    """What the blocked-update stage did to a training graph."""
    if not info or not info["updates"]:
        return []
    ups = info["updates"]
    return [f"weight gradients in blocks: {plural(len(ups), 'update')}; training arena "
            f"{info['unblocked_arena_bytes']:,} B whole -> blocks of "
            + ", ".join(f"{u['param']} {u['blocks']} x {u['block_bytes']:,} B" for u in ups)
            + " (--no-block-updates: off)"]


def partial_lines(info: dict | None) -> list[str]:
    """What the partial-weight stage did to a training graph."""
    if not info or not info["weights"]:
        return []
    ws = info["weights"]
    return [f"partial trainable weights: {plural(len(ws), 'weight')} keep only their trained "
            "channels in RAM: " + ", ".join(f"{w['weight']} {w['channels']}/"
                                            f"{w['total_channels']} ({w['flash_bytes']:,} B "
                                            "in flash)" for w in ws)
            + " (--no-partial-weights: off)"]


def _stream_lines(info: dict) -> list[str]:
    chains = info["chains"]
    base = info["unstreamed"]
    if not chains:
        why = "off" if info["mode"] == "off" else "nothing lowers the arena"
        return [f"streamed: none ({why})"]
    lines = [(f"streamed in row bands: {plural(len(chains), 'chain')} "
              f"({sum(len(c['ops']) for c in chains)} ops); arena {base['arena_bytes']:,} -> "
              f"{info['arena_bytes']:,} B, lower bound {base['lower_bound_bytes']:,} -> "
              f"{info['lower_bound_bytes']:,} B (--no-stream: off)")]
    for c in chains:
        lines.append(f"  {c['op']}: {c['bands']} bands of {c['band_rows']} rows, row buffers "
                     f"{c['scratch_bytes']:,} B instead of {c['intermediate_bytes']:,} B of "
                     f"intermediates ({c['backend']}:{c['kernel']})")
    return lines


def format_kernel_rows(rows: list[dict]) -> list[tuple[str, ...]]:
    """The header and the rows of ``plan --kernels``' table, as printed."""
    def cost(c: dict) -> str:
        return f"{c['backend']}" + (f" {c['cost']:,.0f}" if c["cost"] is not None else "")

    table = [("op", "type", "candidates (instructions)", "chosen", "why", "scratch B")]
    for r in rows:
        table.append((r["op"], r["type"], ", ".join(cost(c) for c in r["candidates"]),
                      f"{r['backend']}:{r['kernel']}", r["reason"], f"{r['scratch_bytes']:,}"))
    return table


def format_kernel_table(rows: list[dict]) -> str:
    """op | candidates (backend: cost) | choice | scratch — the lowering's decisions."""
    table = format_kernel_rows(rows)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()
                     for row in table)


KERNEL_CSV_RAW = ("backend", "kernel", "scratch_bytes", "macs", "instructions")


def write_kernel_csv(path: Path, rows: list[dict], graph) -> None:
    """``plan --csv``: the per-op table of ``plan --kernels`` (its columns as printed), then the
    raw numbers (backend, kernel, scratch bytes, MACs, the chosen kernel's price in
    instructions when the lowering priced it)."""
    import csv

    from .summary import kernel_macs

    ops = {op.name: op for op in graph.ops}
    text = format_kernel_rows(rows)
    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow([*text[0], *KERNEL_CSV_RAW])
            for shown, r in zip(text[1:], rows):
                chosen = next((c["cost"] for c in r["candidates"]
                               if c["backend"] == r["backend"] and c["kernel"] == r["kernel"]),
                              None)
                macs = kernel_macs(graph, ops[r["op"]]) if r["op"] in ops else r["macs"]
                w.writerow([*shown, r["backend"], r["kernel"], r["scratch_bytes"], macs,
                            "" if chosen is None else f"{chosen:.0f}"])
    except OSError as e:
        raise PockError(f"{path}: cannot write ({e.strerror or e})") from None


def cmd_compile(args: argparse.Namespace) -> int:
    from .data import load_npz
    from .pipeline import compile_model

    if args.epochs is not None and not args.data:
        raise PockError(f"--epochs {args.epochs}: epochs are passes over training data; give "
                        "--data with it (without --data nothing is trained on the device)")
    from .pipeline import COMPILE_STAGES
    from .progress import show_progress, step_bar

    calib = load_npz(args.calib)[0] if args.calib else None
    bar = step_bar(len(COMPILE_STAGES), "compile", enabled=show_progress(args), unit="stage")
    seen: list[str] = []

    def progress(name: str) -> None:               # the bar counts the stages done
        if seen:
            bar.step()
        seen.append(name)
        bar.step(0, stage=name)

    train = _auto_train(args, board_name=args.board, data=args.data)
    try:
        proj = compile_model(args.model, board=args.board, spec=train, calib=calib,
                             out_dir=args.output, prefix=args.prefix, backend=args.backend,
                             force=args.force, data=args.data, evals=args.eval,
                             epochs=1 if args.epochs is None else args.epochs, seed=args.seed,
                             shuffle=not args.no_shuffle, measure=not args.no_measure,
                             stack=args.stack, stream="off" if args.no_stream else "auto",
                             blocks="off" if args.no_block_updates else "auto",
                             partial="off" if args.no_partial_weights else "auto",
                             progress=progress)
        bar.step()
    finally:
        bar.close()
    m = proj.manifest
    if args.json:
        print(json.dumps({"dir": str(proj.dir), **m}))
        return 0
    mem = m["memory"]
    what = "inference + training" if m["training"] else "inference"
    if m["training"]:
        what += f" ({m['training']['backward']} backward)"
    print(f"wrote {proj.dir}: {what} for board {m['board']}, prefix {m['prefix']}, "
          f"{len(m['files'])} files; arena {mem['arena_bytes']:,} B, parameters "
          f"{mem['params_bytes']:,} B, constants {mem['constant_bytes']:,} B")
    streams = mem.get("stream") or {}
    for line in stream_lines(streams.get("train") or streams.get("infer")):
        print(line)
    dev = m.get("device") or {}
    if "stack_measured_bytes" in dev:
        print(f"stack: {dev['stack_bytes']:,} B reserved, measured high-water mark "
              f"{dev['stack_measured_bytes']:,} B on the emulator")
    data = dev.get("data")
    if data is not None:
        print(f"embedded data: {plural(data['train_samples'], 'training sample')} x "
              f"{plural(data['epochs'], 'epoch')} = {plural(data['steps'], 'step')}, "
              f"{plural(data['eval_samples'], 'evaluation sample')} "
              f"({data['flash_bytes']:,} B of flash)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from .pipeline import build_project

    res = build_project(args.dir, cc=args.cc, sanitize=args.sanitize,
                        profile_ops=args.profile_ops)
    result = res.to_json()
    if args.json:
        print(json.dumps(result))
        return 0
    if "budget" in result and "sram_static_bytes" in result:        # a board's firmware
        from .board import format_size

        b = result["budget"]
        print(f"built {res.binary} for {result['board']} with {res.cc}: flash "
              f"{result['flash_bytes']:,} B of {format_size(b['flash_bytes'])} (code and "
              f"constants {result['flash_bytes'] - result['data_flash_bytes']:,} + embedded "
              f"data {result['data_flash_bytes']:,}), SRAM {result['sram_bytes']:,} B of "
              f"{format_size(b['sram_bytes'])} (arena {result['arena_bytes']:,} + parameters "
              f"{result['params_bytes']:,} + other data/bss "
              f"{result['sram_static_bytes'] - result['arena_bytes'] - result['params_bytes']:,}"
              f" + stack {result['stack_bytes']:,}): fits")
        return 0
    print(f"built {res.binary} with {res.cc}: flash {result['flash_bytes']:,} B "
          f"(text {result['text_bytes']:,} + data {result['data_bytes']:,}), "
          f"SRAM {result['sram_bytes']:,} B (data + bss; arena {result['arena_bytes']:,} B, "
          f"parameters {result['params_bytes']:,} B)")
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    from .pipeline import build_project, open_project, run_device
    from .render.embed import embed_data, project_data
    from .run.summary import format_result, loss_progress, result_json

    if args.uart:                   # the serial firmware instead (codegen/serial/firmware.py)
        from .serial.firmware import sim_uart

        return sim_uart(args.dir, args.uart, timeout=args.timeout,
                        log=lambda s: print(s, file=sys.stderr, flush=True))
    proj = open_project(args.dir)
    if "device" not in proj.manifest:
        raise PockError(f"{proj.dir}: compiled for {proj.board}; sim runs firmware on a board's "
                        "emulator (compile with --board BOARD; host: pockengine fit --engine "
                        "host)")
    if args.data or args.eval or args.epochs is not None or args.seed is not None \
            or args.no_shuffle:
        proj = embed_data(proj, project_data(proj, args.data, args.eval, epochs=args.epochs,
                                             seed=args.seed,
                                             shuffle=False if args.no_shuffle else None))
    fw = build_project(proj, profile_ops=args.profile_ops)
    from .progress import show_progress, step_bar
    from .report import save_run_record
    from .targets import emulator_available

    talk = not (args.json or args.quiet)
    if talk and emulator_available(fw.board)[0]:
        print(f"running {fw.elf.name} on {proj.board} ({fw.board.emulator})...",
              file=sys.stderr)
    data = proj.manifest["device"]["data"]
    bar = step_bar(data["steps"], f"sim {proj.board}",
                   enabled=show_progress(args) and data["steps"] > 0)
    lines = loss_progress(data["steps"], data["epochs"], bar.write) if talk else None

    def on_line(line: str) -> None:
        if lines is not None:
            lines(line)
        if bar.active and line.startswith("@pe:loss "):
            bar.step(loss=_loss_of(line))

    try:
        res = run_device(proj, build=fw, timeout=args.timeout, profile_ops=args.profile_ops,
                         on_line=on_line if lines is not None or bar.active else None)
    finally:
        bar.close()
    summary = result_json(proj, res)
    save_run_record(proj, summary | {"memory": fw.to_json()})     # for pockengine report
    if args.json:
        print(json.dumps(summary | {"memory": fw.to_json()}))
    else:
        print(format_result(summary, fw.to_json()))
    return 0


def _loss_of(line: str) -> float | None:
    """The loss of a firmware's ``@pe:loss STEP BITS ...`` line (float32 bits in hex)."""
    import struct

    try:
        return struct.unpack("<f", struct.pack("<I", int(line.split()[2], 16)))[0]
    except (IndexError, ValueError, struct.error):
        return None


def cmd_boards(args: argparse.Namespace) -> int:
    from .board import format_boards, list_boards

    if args.json:
        import dataclasses

        print(json.dumps([dataclasses.asdict(b) for b in list_boards()]))
    else:
        print(format_boards(), end="")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(Path(args.output), calib_samples=args.calib_samples)
    return 0


def _stream_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--no-stream", action="store_true",
                    help="materialize every activation whole: no frozen chain of convolutions "
                    "is run in row bands (by default those whose intermediates set the arena "
                    "are; docs/memory.md)")
    sp.add_argument("--no-block-updates", action="store_true",
                    help="compute every weight gradient whole before its update (by default "
                    "a gradient that sets the training arena is computed and applied in "
                    "blocks of output channels; docs/memory.md)")
    sp.add_argument("--no-partial-weights", action="store_true",
                    help="keep a weight whose training updates some of its channels whole in "
                    "RAM (by default its frozen channels stay in flash when that lowers the "
                    "RAM; docs/memory.md)")


def _backend_option(sp: argparse.ArgumentParser) -> None:
    from .backends import CHOICES

    sp.add_argument("--backend", default="auto", metavar="|".join(CHOICES),
                    help="kernel backend chain: auto (the board's default: on cores with "
                    "DSP/MVE arm, then cmsis-nn when CMSIS-NN is checked out, then ref; the "
                    "cheapest kernel per op), ref (portable C), or a backend first with ref "
                    "for the ops it does not take")
    sp.add_argument("--no-measure", action="store_true",
                    help="choose among candidate kernels by the static cost model instead of "
                    "measuring them on the board's emulator (measurements are cached)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pockengine",
        description="Compile pretrained TFLite/ONNX models into C firmware that trains in place "
                    "on microcontrollers and DSPs.")
    p.add_argument("--version", action="version", version=f"pockengine {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    def verb(name: str, fn: Callable[[argparse.Namespace], int], help_: str):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        return sp

    sp = verb("inspect", cmd_inspect,
              "show ops, shapes, dtypes, quantization, MACs and memory of a model")
    sp.add_argument("model", help=".tflite or .onnx file")
    sp.add_argument("--json", action="store_true", help="machine-readable output")

    sp = verb("quantize", cmd_quantize, "post-training quantization: float model -> int8 .tflite")
    sp.add_argument("model", help="float .tflite or .onnx file")
    sp.add_argument("--calib", required=True, help=".npz with calibration inputs 'x' (N, ...)")
    sp.add_argument("-o", "--output", required=True, help="output .tflite")
    sp.add_argument("--samples", type=int, help="use only the first N calibration samples")
    sp.add_argument("--per-tensor", action="store_true", help="per-tensor instead of "
                    "per-channel weight scales")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")

    sp = verb("infer", cmd_infer, "run a model on a batch of inputs (int8 in, int8 out)")
    sp.add_argument("model", help=".tflite or .onnx file")
    sp.add_argument("--input", required=True, help=".npy batch, samples on axis 0")
    sp.add_argument("--output", required=True, help=".npy file for the outputs")
    sp.add_argument("--engine", default="golden",
                    help="golden (NumPy reference), host (generated C, built with the host "
                    "compiler) or a board (firmware on its emulator; pockengine boards)")
    sp.add_argument("--timeout", type=float, help="emulator timeout in seconds (boards)")
    _backend_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable summary (boards: "
                    "instructions per inference)")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")
    sp = verb("fit", cmd_fit, "fine-tune a model: quantize if float, build the training graph, "
              "train on an engine, evaluate before/after")
    sp.add_argument("model", help=".tflite or .onnx file (float models are quantized first)")
    sp.add_argument("--train", required=True, metavar="SPEC",
                    help="training spec: YAML file or short form such as bias:last4; auto: "
                    "search for the set that fits the board's budget (pockengine search)")
    sp.add_argument("--data", required=True, help=".npz with training 'x' and 'y'")
    sp.add_argument("--eval", help=".npz with evaluation 'x' and 'y'")
    sp.add_argument("--epochs", type=int, default=1)
    sp.add_argument("--engine", default="golden",
                    help="golden (NumPy reference), host (generated C on this machine) or a "
                    "board: the firmware trains on the board's emulator (pockengine boards)")
    sp.add_argument("--board", help="apply this board's defaults (its backward mode when the "
                    "spec does not choose one) on any engine; implied by --engine BOARD")
    sp.add_argument("--profile-ops", action="store_true",
                    help="boards: also count instructions per kernel call")
    sp.add_argument("--timeout", type=float, help="emulator timeout in seconds (boards)")
    sp.add_argument("--keep", metavar="DIR", help="boards: build the firmware in DIR and keep "
                    "it (default: a temporary directory)")
    _backend_option(sp)
    _stream_option(sp)
    sp.add_argument("--calib", help=".npz with calibration inputs for a float model "
                    "(default: the first 100 training samples)")
    sp.add_argument("--seed", type=int, default=0, help="sample order seed")
    sp.add_argument("--no-shuffle", action="store_true", help="visit samples in file order")
    sp.add_argument("-o", "--output", help="write the fine-tuned model: .tflite, or .onnx "
                    "for a QDQ ONNX model (int8 weights, int32 biases, QuantizeLinear / "
                    "DequantizeLinear around float ops; onnxruntime runs it)")
    sp.add_argument("--json", action="store_true", help="machine-readable result")
    sp.add_argument("--log-every", type=int, default=200, help="progress line every N steps")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress (bar and lines) "
                    "on stderr; by default a bar is drawn when stderr is a terminal")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")

    sp = verb("plan", cmd_plan, "schedule and memory plan (arena, parameters, constants) of a "
              "model or its training graph")
    sp.add_argument("model", help=".tflite or .onnx file (float models are quantized first)")
    sp.add_argument("--train", metavar="SPEC", help="plan the training graph of this spec")
    sp.add_argument("--board", help="check the plan against this board's SRAM/flash budget")
    sp.add_argument("--calib", help=".npz with calibration inputs for a float model")
    sp.add_argument("--plot", metavar="FILE", help="draw the plan (.svg, or .png with "
                    "matplotlib)")
    _backend_option(sp)
    _stream_option(sp)
    sp.add_argument("--kernels", action="store_true", help="list each op's kernel "
                    "candidates, their cost, the choice and its scratch")
    sp.add_argument("--csv", metavar="FILE", help="write the per-op table of --kernels as CSV "
                    "(its columns, then raw numbers: backend, kernel, scratch_bytes, macs, "
                    "instructions)")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the --csv file")
    sp.add_argument("--json", action="store_true", help="machine-readable output")

    sp = verb("search", cmd_search, "find the trainable set that gains the most accuracy "
              "under a memory budget (contribution analysis, search, verification) and write "
              "it as a training spec")
    sp.add_argument("model", help=".tflite or .onnx file (float models are quantized first)")
    sp.add_argument("--data", required=True, help=".npz with training 'x' and 'y' (a part is "
                    "held back to score the candidates)")
    sp.add_argument("--eval", help=".npz with evaluation 'x' and 'y': only to report the "
                    "accuracy of the found set and the baselines, never to choose")
    sp.add_argument("--board", help="plan for this board; its SRAM and flash are the budget "
                    "unless --sram/--flash say otherwise")
    sp.add_argument("--sram", metavar="BYTES", help="SRAM budget (131072, 128KiB, 1MiB)")
    sp.add_argument("--flash", metavar="BYTES", help="flash budget")
    sp.add_argument("--latency", type=int, metavar="INSTRUCTIONS",
                    help="instructions per training step (the cost model's estimate)")
    sp.add_argument("--epochs", type=int, default=3, help="epochs of every fine-tune")
    sp.add_argument("--backward", choices=("fp32", "int8"),
                    help="backward mode (default: the board's)")
    sp.add_argument("--base", metavar="SPEC", help="spec whose loss, optimizer, schedule and "
                    "modes the candidates use (its trainable set is ignored; default SGD, "
                    "lr 0.01, momentum 0.9, master copies)")
    sp.add_argument("--engine", dest="search_engine", choices=("golden", "host"),
                    default="host", help="engine of the fine-tunes (default host)")
    sp.add_argument("--holdout", type=float, default=0.25,
                    help="share of --data held back to score candidates (default 0.25)")
    sp.add_argument("--jobs", type=int, help="fine-tunes run in parallel (default: up to 2)")
    sp.add_argument("--no-link", action="store_true", help="take the planner's SRAM and flash "
                    "for the winner instead of building and linking its firmware")
    sp.add_argument("--seed", type=int, default=0, help="split, sample order and search seed")
    _backend_option(sp)
    sp.add_argument("--calib", help=".npz with calibration inputs for a float model")
    sp.add_argument("-o", "--output", required=True, metavar="SPEC.yaml",
                    help="the training spec to write")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")
    sp.add_argument("--json", action="store_true", help="machine-readable result")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    sp = verb("fleet", cmd_fleet, "federated sparse fine-tuning of many devices on Flower: "
              "clients train the trainable subset, send deltas, the server averages them "
              "exactly")
    sp.add_argument("model", help=".tflite or .onnx file (float models are quantized first)")
    sp.add_argument("--train", required=True, metavar="SPEC",
                    help="training spec: YAML file or short form such as bias:all+weight:last2")
    sp.add_argument("--data", required=True, help=".npz with training 'x' and 'y' (split "
                    "over the clients)")
    sp.add_argument("--eval", help=".npz with evaluation 'x' and 'y' (the server's "
                    "accuracy after every round)")
    sp.add_argument("--clients", type=int, help="number of clients (default: one per --port)")
    sp.add_argument("--rounds", type=int, default=5)
    sp.add_argument("--local-epochs", type=int, default=1,
                    help="epochs over its own samples a client trains per round")
    sp.add_argument("--split", default="iid", help="how the samples are spread: iid, "
                    "dirichlet:ALPHA (label skew) or shards:K (K label-sorted shards each)")
    sp.add_argument("--engine", help="golden (default), host or a board: the clients are "
                    "that board's serial firmware under QEMU")
    sp.add_argument("--port", action="append", metavar="PORT", help="a device running the "
                    "serial firmware (/dev/ttyUSB0, tcp:HOST:PORT); repeat for each client")
    sp.add_argument("--baud", type=int, help="baud rate of the --port devices (default 115200)")
    sp.add_argument("--board", help="apply this board's defaults (backward mode) on any "
                    "engine; implied by --engine BOARD")
    sp.add_argument("--runtime", choices=("local", "simulation"), help="local: client apps "
                    "in threads of this process; simulation: Flower's simulation engine (Ray). "
                    "Default: local up to 16 clients and for devices")
    sp.add_argument("--server-lr", default="1", help="server learning rate (FedAvg: 1)")
    sp.add_argument("--server-momentum", default="0", help="server momentum (FedAvgM; 0: "
                    "plain FedAvg)")
    sp.add_argument("--timeout", type=float, default=600.0, help="seconds a round waits for "
                    "its clients; the late ones are dropped from it")
    sp.add_argument("--jobs", type=int, help="clients training at once (default 2)")
    sp.add_argument("--fault", action="append", metavar="WHAT@CLIENT:ROUND",
                    help="rehearse a failure: drop, corrupt (bad CRC), shape, model (another "
                    "model's hash), reboot (QEMU boards: a power cut); repeatable")
    sp.add_argument("--centralized", action="store_true", help="also fine-tune centrally on "
                    "all samples for rounds x local epochs, for comparison")
    sp.add_argument("--seed", type=int, default=0, help="split and sample order seed")
    sp.add_argument("--calib", help=".npz with calibration inputs for a float model "
                    "(default: the first 100 training samples)")
    sp.add_argument("-o", "--output", help="write the fine-tuned global model (.tflite or "
                    ".onnx)")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")
    sp.add_argument("--json", action="store_true", help="machine-readable result")
    sp.add_argument("-q", "--quiet", action="store_true", help="no per-round lines on stderr")

    sp = verb("compile", cmd_compile, "generate a C project: pe_init, pe_infer, "
              "pe_train_step, parameter export/import, a fixed memory plan")
    sp.add_argument("model", help=".tflite or .onnx file (float models are quantized first)")
    sp.add_argument("--board", required=True,
                    help="target board: host, a device board (pockengine boards) or a board "
                    "file of your own (PATH.yaml; the project keeps a copy)")
    sp.add_argument("--train", metavar="SPEC", help="training spec: YAML file or short form; "
                    "auto: search for the set that fits the board's budget (needs --data)")
    sp.add_argument("--calib", help=".npz with calibration inputs for a float model")
    sp.add_argument("--data", help="device boards: .npz with training 'x' and 'y' to embed "
                    "in flash")
    sp.add_argument("--eval", help="device boards: .npz with evaluation 'x' (and 'y') to embed")
    sp.add_argument("--epochs", type=int, help="device boards: epochs over --data (default 1)")
    sp.add_argument("--seed", type=int, default=0, help="sample order seed")
    sp.add_argument("--no-shuffle", action="store_true", help="visit samples in file order")
    _backend_option(sp)
    _stream_option(sp)
    sp.add_argument("--prefix", default="pe", help="prefix of every generated C symbol")
    sp.add_argument("--stack", metavar="BYTES|auto", help="device boards: the stack the "
                    "firmware reserves (default: the board's); auto: measured on the "
                    "board's emulator (high-water mark + max(256 B, 25 %%))")
    sp.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory")
    sp.add_argument("-f", "--force", action="store_true",
                    help="write into a non-empty directory not made by pockengine, or replace "
                    "a project of the other kind there (inference by training or back)")
    sp.add_argument("--json", action="store_true", help="print the project manifest")
    sp.add_argument("-q", "--quiet", action="store_true",
                    help="no progress bar (drawn on a terminal only)")

    sp = verb("build", cmd_build, "build a generated project (host: make with gcc or clang; "
              "boards: the board's cross compiler) and report its flash and SRAM use, checked "
              "against the board's budget")
    sp.add_argument("dir", help="directory written by pockengine compile")
    sp.add_argument("--cc", help="C compiler (default: $CC, else gcc, clang, cc)")
    sp.add_argument("--sanitize", action="store_true", help="build with ASan + UBSan")
    sp.add_argument("--profile-ops", action="store_true",
                    help="boards: instruction markers per kernel call too (build-ops/)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")

    sp = verb("sim", cmd_sim, "run a board project's firmware on the board's emulator: train "
              "on the embedded data, report accuracy, losses, instructions per phase, memory")
    sp.add_argument("dir", help="directory written by pockengine compile --board BOARD")
    sp.add_argument("--data", help=".npz with training 'x' and 'y' (replaces the embedded data)")
    sp.add_argument("--eval", help=".npz with evaluation 'x' and 'y' (replaces the embedded "
                    "eval split)")
    sp.add_argument("--epochs", type=int, help="epochs over the training data")
    sp.add_argument("--seed", type=int, help="sample order seed")
    sp.add_argument("--no-shuffle", action="store_true", help="visit samples in file order")
    sp.add_argument("--timeout", type=float, default=600.0, help="emulator timeout (seconds)")
    sp.add_argument("--profile-ops", action="store_true",
                    help="also count instructions per kernel call of the training step")
    sp.add_argument("--uart", metavar="tcp:HOST:PORT",
                    help="serve the serial protocol on the board's UART (a TCP port, 1..65535; "
                    "socket://HOST:PORT is accepted too) instead "
                    "of training on embedded data, until Ctrl-C or --timeout; checkpoints in "
                    "DIR/pe_checkpoint.bin")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress (bar and lines) "
                    "on stderr; by default a bar is drawn when stderr is a terminal")
    sp.add_argument("--json", action="store_true", help="machine-readable output")

    sp = verb("validate", cmd_validate, "run the golden model and an engine (host, or a "
              "board under its emulator) on the same inputs and compare: bit-exact, max |diff|, "
              "top-1 agreement. Exit status 0 when the outputs are bit-exact, 1 when they "
              "differ, 2 on bad input")
    sp.add_argument("model", help=".tflite or .onnx file")
    sp.add_argument("--engine", required=True,
                    help="host (generated C, built with the host compiler) or a board "
                    "(firmware on its emulator; pockengine boards)")
    sp.add_argument("--input", help=".npy batch, samples on axis 0 (default: random inputs)")
    sp.add_argument("--samples", type=int, default=8,
                    help="random inputs: how many (default 8)")
    sp.add_argument("--seed", type=int, default=0, help="random inputs: the seed (default 0)")
    sp.add_argument("--timeout", type=float, help="emulator timeout in seconds (boards)")
    _backend_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable result")

    sp = verb("report", cmd_report, "write one self-contained HTML page about a compiled "
              "project: memory plan, kernel calls, SRAM/flash against the budget and, after "
              "pockengine sim, the loss curve and accuracy")
    sp.add_argument("dir", help="directory written by pockengine compile")
    sp.add_argument("-o", "--output", required=True, metavar="FILE", help="the .html file")
    sp.add_argument("-f", "--force", action="store_true", help="overwrite the output file")
    sp.add_argument("--json", action="store_true", help="machine-readable summary")

    sp = verb("boards", cmd_boards, "the board catalogue (boards/*.yaml)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")

    sp = verb("demo", cmd_demo, "the main job on the bundled digits CNN: import, quantize, "
              "run, report")
    sp.add_argument("-o", "--output", default="pockengine-demo", help="output directory")
    sp.add_argument("--calib-samples", type=int, default=100, help="calibration samples")

    from .serial.cli import add_serial_verbs  # train, eval, pull, flash

    add_serial_verbs(verb)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """PockWarnings as one line (``pockengine: warning: ...``); others as Python prints them."""
    if issubclass(category, PockWarning):
        print(f"pockengine: warning: {' '.join(str(message).split())}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _os_error(e: OSError) -> str:
    """One line for a file the system refused: the path(s) and the system's reason."""
    name = lambda f: str(f) if isinstance(f, int) else os.fsdecode(f)
    path = name(e.filename)
    what = path if e.filename2 is None else f"{path} -> {name(e.filename2)}"
    line = f"{what}: {e.strerror or e}"
    parent = Path(path).parent
    if e.errno == errno.ENOENT and not parent.is_dir():
        line += f" (directory {parent} does not exist)"
    return line


def _stdout_broken() -> bool:
    """Whether stdout is a pipe whose reader has gone (rather than, say, a serial socket that
    broke: that is an error to report)."""
    try:
        import select

        poll = select.poll()
        poll.register(sys.__stdout__.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (AttributeError, ValueError, OSError):
        return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always", PockWarning)
        warnings.showwarning = _show_warning
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        try:
            status = args.fn(args)
            sys.stdout.flush()      # a closed pipe shows here, not in the interpreter's exit
            return status
        except BrokenPipeError:
            if not _stdout_broken():
                raise
            # the reader of our stdout has gone (`| head -1`): stop quietly, and point stdout
            # at /dev/null so that the interpreter's final flush does not complain either
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.__stdout__.fileno())
                os.close(devnull)
            except (AttributeError, ValueError, OSError):
                pass
            return EXIT_BROKEN_PIPE
        except OSError as e:
            # a file the system refused (an output folder that does not exist, a path under
            # a file, no permission): the user's to fix, so one line with the path and reason
            if e.filename is None or os.environ.get("POCKENGINE_DEBUG"):
                raise
            raise PockError(_os_error(e)) from None
    except PockError as e:
        print(f"pockengine: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("pockengine: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("pockengine: error: out of memory", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # an internal bug: say so on one line unless debugging
        if os.environ.get("POCKENGINE_DEBUG"):
            raise
        print(f"pockengine: internal error: {type(e).__name__}: {e} "
              "(set POCKENGINE_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
