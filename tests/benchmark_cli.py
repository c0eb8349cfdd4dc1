"""What the benchmark scripts' command lines share: comma-separated selections, the output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable


def selected(ap: argparse.ArgumentParser, text: str, known: Iterable[str], what: str
             ) -> list[str]:
    """The names of a comma-separated option; an unknown one is an argparse error (exit 2)."""
    names = [n for n in text.split(",") if n]
    known = list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown {what}(s) {unknown} (choose from {', '.join(known)})")
    return names


def report(rows: list[dict], as_json: bool, table: Callable[[list[dict]], str]) -> int:
    """Print the rows (JSON or the script's table); progress went to stderr."""
    print(json.dumps(rows, indent=1) if as_json else table(rows))
    return 0


def log(line: str) -> None:
    print(line, file=sys.stderr)
