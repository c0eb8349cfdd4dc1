"""Run fuzz cases in worker processes with a time and memory limit; classify and count.

Each worker is a fresh interpreter (multiprocessing "spawn") in its own process group with
``RLIMIT_AS`` set, so a case that wants unbounded memory fails inside it (``MemoryError``:
the CLI says "out of memory", counted as a failure) instead of taking the machine. The parent
gives every case ``timeout`` seconds, then kills the worker's process group (make and the
compiler included) and starts a new worker: a hang is counted, not waited for.

A case's commands run in-process through ``codegen.cli.main`` with file descriptors 1 and 2
redirected (C-level output is caught too) and Python warnings recorded; every
``subprocess_every``-th case runs them through the console entry point
(``python -m codegen``) instead. Outcomes:

- ``ok`` (exit 0) and ``error`` (exit 2, exactly one line ``pockengine: error: ...``) pass;
- failures: ``internal`` (exit 1), ``traceback``, ``noisy`` (more than the one line),
  ``warning`` (a Python warning was issued), ``memory`` ("out of memory"), ``timeout``,
  ``crash`` (the worker died or a signal), ``injection`` (the marker file a hostile string
  would create exists), ``escape`` (a file outside the project directory), ``cbuild`` (a
  project compiled from hostile names does not build), ``bug`` (the campaign itself failed).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PASS = ("ok", "error")
FAILURES = ("internal", "traceback", "noisy", "warning", "memory", "timeout", "crash",
            "injection", "escape", "cbuild", "bug")
ESCAPE_PROBE = Path("/tmp/pe_fuzz_escape")


@dataclass
class Result:
    index: int
    kind: str
    outcome: str
    via: str = "in-process"
    detail: str = ""
    note: str = ""
    seconds: float = 0.0
    commands: list[list[str]] = field(default_factory=list)


def classify(status: Any, stderr: str, warns: list[str]) -> tuple[str, str]:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    first = lines[0][:300] if lines else ""
    if "Traceback (most recent call last)" in stderr:
        return "traceback", first
    if warns:
        return "warning", warns[0][:300]
    if status == 0:
        bad = [ln for ln in lines if "Warning" in ln or "warning:" in ln.lower()]
        return ("noisy", bad[0][:300]) if bad else ("ok", "")
    if status == 1:
        return "internal", first
    if status == 2:
        if len(lines) != 1 or not lines[0].startswith("pockengine: error: "):
            return "noisy", " | ".join(lines)[:300]
        if "out of memory" in lines[0]:
            return "memory", first
        return "error", ""
    return "crash", f"status {status}: {first}"


def _in_process(argv: list[str]) -> tuple[Any, str, list[str]]:
    from codegen.cli import main

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        warns: list[str] = []
        try:
            with warnings.catch_warnings(record=True) as rec:
                try:
                    status: Any = main(argv)
                except SystemExit as e:
                    status = e.code if isinstance(e.code, int) else 2
                except BaseException:  # noqa: BLE001 - main() must not let anything out
                    sys.stderr.write(traceback.format_exc())
                    status = "raised"
            warns = [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}"
                     for w in rec]
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return status, text, warns


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _via_subprocess(argv: list[str], timeout: float, mem_limit: int) -> tuple[Any, str,
                                                                              list[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                              ""))
    env.pop("POCKENGINE_DEBUG", None)
    try:
        r = subprocess.run([sys.executable, "-m", "codegen", *argv], capture_output=True,
                           timeout=timeout, env=env, check=False, cwd=str(ROOT),
                           preexec_fn=lambda: _limit_memory(mem_limit))
    except subprocess.TimeoutExpired:
        return "timeout", "", []
    return r.returncode, r.stderr.decode("utf-8", "replace"), []


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.is_dir() else set()


def run_case(index: int, kind: str, case_seed: int, seeds: dict[str, Any], work: Path,
             subprocess_run: bool, timeout: float, mem_limit: int, build_lock: Any,
             keep: Path | None) -> Result:
    from .cases import make_case

    d = work / f"case{index}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    t0 = time.perf_counter()
    res = Result(index, kind, "ok", "subprocess" if subprocess_run else "in-process")
    try:
        case = make_case(kind, case_seed, seeds, d)
        res.note, res.commands = case.note, case.commands
        before = _tree(work.parent)
        for argv in case.commands:
            if argv[0] == "build" and build_lock is not None:
                with build_lock:                     # one C build at a time (-j2)
                    status, err, warns = _run(argv, subprocess_run, timeout, mem_limit)
            else:
                status, err, warns = _run(argv, subprocess_run, timeout, mem_limit)
            res.outcome, res.detail = classify(status, err, warns)
            if argv[0] == "build" and case.build and res.outcome != "ok":
                res.outcome = "cbuild" if res.outcome == "error" else res.outcome
            if res.outcome != "ok":
                break
        if res.outcome in PASS and case.make_dry_run is not None \
                and (case.make_dry_run / "Makefile").is_file():
            subprocess.run(["make", "-n", "-C", str(case.make_dry_run), "CC=true"],
                           capture_output=True, timeout=60, check=False)
        if case.marker.exists() or ESCAPE_PROBE.exists():
            res.outcome, res.detail = "injection", f"{case.marker} was created"
            ESCAPE_PROBE.unlink(missing_ok=True)
        if res.outcome in PASS and case.project is not None:
            new = _tree(work.parent) - before
            inside = str(case.project.relative_to(work.parent))
            outside = sorted(p for p in new if not (p == inside or p.startswith(inside + "/"))
                             and not p.startswith(str(d.relative_to(work.parent))))
            links = [p for p in case.project.rglob("*") if p.is_symlink()]
            if outside or links:
                res.outcome, res.detail = "escape", f"{(outside + links)[:3]}"
    except Exception:  # noqa: BLE001 - a bug of the campaign, reported as such
        res.outcome, res.detail = "bug", traceback.format_exc().strip().splitlines()[-1][:300]
    res.seconds = time.perf_counter() - t0
    if res.outcome not in PASS and keep is not None:
        shutil.copytree(d, keep / f"{kind}-{index}", dirs_exist_ok=True)
    shutil.rmtree(d, ignore_errors=True)
    return res


def _run(argv: list[str], subprocess_run: bool, timeout: float, mem_limit: int):
    return _via_subprocess(argv, timeout, mem_limit) if subprocess_run else _in_process(argv)


def _worker(conn: Any, seeds_dir: str, work: str, timeout: float, mem_limit: int,
            build_lock: Any, keep: str | None) -> None:
    os.setpgrp()                                  # kill(-pid) ends make/gcc children too
    os.environ.pop("POCKENGINE_DEBUG", None)
    os.environ["OMP_NUM_THREADS"] = "1"
    _limit_memory(mem_limit)
    from .seeds import load_seeds

    seeds = load_seeds(Path(seeds_dir))
    conn.send("ready")
    while True:
        job = conn.recv()
        if job is None:
            return
        index, kind, case_seed, via_sub = job
        conn.send(run_case(index, kind, case_seed, seeds, Path(work), via_sub, timeout,
                           mem_limit, build_lock, Path(keep) if keep else None))


class _Slot:
    """One worker process and the case it is running."""

    def __init__(self, ctx: Any, args: tuple):
        self.ctx, self.args = ctx, args
        self.start()

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(300) or self.conn.recv() != "ready":
            raise RuntimeError("fuzz worker did not start")
        self.job: tuple | None = None
        self.started = 0.0

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.join(10)

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.kill()


@dataclass
class Report:
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    failures: list[Result] = field(default_factory=list)
    seconds: float = 0.0
    subprocess_cases: int = 0
    seed: int = 0

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    @property
    def failed(self) -> int:
        return len(self.failures)

    def add(self, r: Result) -> None:
        self.counts[r.kind][r.outcome] += 1
        if r.via == "subprocess":
            self.subprocess_cases += 1
        if r.outcome not in PASS:
            self.failures.append(r)

    def table(self) -> str:
        cols = list(PASS) + [f for f in FAILURES if any(c[f] for c in self.counts.values())]
        rows = [["kind", "cases", *cols]]
        total: Counter = Counter()
        for kind in sorted(self.counts):
            c = self.counts[kind]
            total.update(c)
            rows.append([kind, str(sum(c.values())), *(str(c[k]) for k in cols)])
        rows.append(["total", str(sum(total.values())), *(str(total[k]) for k in cols)])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        fmt = lambda r: "  ".join(v.rjust(w) if i else v.ljust(w)
                                  for i, (v, w) in enumerate(zip(r, widths)))
        lines = [fmt(rows[0]), "  ".join("-" * w for w in widths)]
        lines += [fmt(r) for r in rows[1:-1]] + ["  ".join("-" * w for w in widths),
                                                  fmt(rows[-1])]
        lines.append(f"({self.subprocess_cases} cases through the console entry point; "
                     f"{self.seconds:.0f} s; seed {self.seed})")
        return "\n".join(lines)


def run_campaign(count: int, seed: int = 0, kinds: tuple[str, ...] | None = None,
                 jobs: int = 1, timeout: float = 120.0, mem_gib: float = 3.0,
                 subprocess_every: int = 100, keep: Path | None = None, start: int = 0,
                 progress: Any = None) -> Report:
    """Run cases ``start .. start+count-1`` of campaign ``seed``; returns the counts."""
    from .cases import KINDS, choose_kind
    from .seeds import build_seeds

    kinds = tuple(kinds or KINDS)
    report = Report(seed=seed)
    t0 = time.perf_counter()
    mem_limit = int(mem_gib * 2**30)
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="pe-fuzz-") as tmp:
        root = Path(tmp)
        build_seeds(root / "seeds")
        lock = ctx.Lock()
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        slots = [_Slot(ctx, (str(root / "seeds"), str(root / f"w{i}" / "cases"), timeout,
                             mem_limit, lock, str(keep) if keep else None))
                 for i in range(max(1, jobs))]
        pending = list(range(start, start + count))[::-1]
        try:
            while pending or any(s.job for s in slots):
                for s in slots:
                    if s.job is None and pending:
                        i = pending.pop()
                        kind, cseed = choose_kind(seed, i, kinds)
                        via = subprocess_every > 0 and i % subprocess_every == 0
                        s.job, s.started = (i, kind, cseed, via), time.monotonic()
                        s.conn.send(s.job)
                busy = [s for s in slots if s.job is not None]
                ready = mp.connection.wait([s.conn for s in busy], timeout=1.0)
                for s in busy:
                    if s.conn in ready:
                        try:
                            r = s.conn.recv()
                        except EOFError:
                            r = Result(s.job[0], s.job[1], "crash", detail="worker died")
                            s.kill()
                            s.start()
                        report.add(r)
                        s.job = None
                    elif time.monotonic() - s.started > timeout + 30 or not s.proc.is_alive():
                        dead = not s.proc.is_alive()
                        report.add(Result(s.job[0], s.job[1], "crash" if dead else "timeout",
                                          detail="worker died" if dead else
                                          f"more than {timeout:.0f} s"))
                        s.kill()
                        shutil.rmtree(root / "w", ignore_errors=True)
                        s.start()
                    else:
                        continue
                    if progress is not None:
                        progress(report)
        finally:
            for s in slots:
                s.stop()
    report.seconds = time.perf_counter() - t0
    return report
