"""``python -m tests.fuzz --count N [--seed S] [--kind K ...] [--jobs J]``: the fuzz campaign.

Prints a table of cases per kind and outcome, then every failure with its case number (rerun
one with ``--start I --count 1 --keep DIR`` to get its input files). Exit status 1 if any
case failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .cases import KINDS
from .runner import run_campaign


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=1000, help="number of cases")
    p.add_argument("--seed", type=int, default=0, help="campaign seed")
    p.add_argument("--start", type=int, default=0, help="first case number")
    p.add_argument("--kind", action="append", choices=KINDS,
                   help="only these kinds (repeat; default: all, weighted)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    p.add_argument("--mem-gib", type=float, default=3.0, help="address-space limit per worker")
    p.add_argument("--subprocess-every", type=int, default=100,
                   help="every Nth case through `python -m codegen` (0: never)")
    p.add_argument("--keep", type=Path, help="copy the inputs of failing cases here")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    args = p.parse_args(argv)
    last = [0.0]

    def progress(rep) -> None:
        if args.quiet or time.monotonic() - last[0] < 10:
            return
        last[0] = time.monotonic()
        print(f"  {rep.total}/{args.count} cases, {rep.failed} failed", file=sys.stderr,
              flush=True)

    rep = run_campaign(args.count, args.seed, tuple(args.kind) if args.kind else None,
                       jobs=args.jobs, timeout=args.timeout, mem_gib=args.mem_gib,
                       subprocess_every=args.subprocess_every, keep=args.keep,
                       start=args.start, progress=progress)
    print(rep.table())
    for r in sorted(rep.failures, key=lambda r: r.index):
        print(f"case {r.index} [{r.kind}, {r.via}] {r.outcome}: {r.detail}\n"
              f"    input: {r.note[:200]}\n    commands: {r.commands}")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
