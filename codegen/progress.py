"""Progress bars of long CLI work (``fit`` steps, ``sim`` steps) on stderr, with tqdm.

A bar is drawn only when stderr is a terminal and the verb was not given ``--quiet`` or
``--json``: logs, pipes and CI see the same lines as before, and machine-readable output is
never mixed with progress. Lines printed while a bar is on screen go through ``Bar.write``,
which keeps them above the bar.

    bar = step_bar(1200, "fit golden", enabled=show_progress(args))
    bar.step(loss=0.41)
    bar.close()
"""

from __future__ import annotations

import os
import sys
from typing import Any


def show_progress(args: Any) -> bool:
    """Whether a verb draws bars: stderr is a terminal, and neither --quiet nor --json."""
    if getattr(args, "quiet", False) or getattr(args, "json", False):
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


class Bar:
    """A tqdm bar over ``total`` units, or nothing at all when not ``enabled``."""

    def __init__(self, total: int | None, desc: str, *, enabled: bool, unit: str = "step"):
        self._bar = None
        if enabled:
            from tqdm import tqdm  # heavy (~30 ms): only when a bar is drawn

            # follow the terminal's size; one that reports none (0 x 0: some pseudo-terminals)
            # gets 80 x 24, where tqdm would draw nothing
            try:
                tty = os.get_terminal_size(sys.stderr.fileno())
                sized = tty.columns > 0 and tty.lines > 0
            except (AttributeError, ValueError, OSError):
                sized = False
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr,
                             dynamic_ncols=sized, ncols=None if sized else 80,
                             nrows=None if sized else 24, leave=True, mininterval=0.1)

    @property
    def active(self) -> bool:
        return self._bar is not None

    def step(self, n: int = 1, **postfix: Any) -> None:
        if self._bar is None:
            return
        shown = {k: f"{v:.4f}" if isinstance(v, float) else v for k, v in postfix.items()
                 if v is not None}
        if shown:
            self._bar.set_postfix(shown, refresh=False)
        self._bar.update(n)

    def set_total(self, total: int) -> None:
        """A new total (work that grows as it goes: the ETA follows)."""
        if self._bar is not None and self._bar.total != total:
            self._bar.total = total
            self._bar.refresh()

    def write(self, line: str) -> None:
        """Print ``line`` on stderr (above the bar while one is drawn)."""
        if self._bar is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self._bar.write(line, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def step_bar(total: int | None, desc: str, *, enabled: bool, unit: str = "step") -> Bar:
    return Bar(total, desc, enabled=enabled, unit=unit)
