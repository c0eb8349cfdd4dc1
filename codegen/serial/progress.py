"""A one-line progress bar on stderr (no dependency): redrawn in place on a terminal, a line
every 10 % otherwise (logs, CI).

    bar = Progress(total, "train")
    bar.update(k, loss=0.41, acc="87.5%")
    bar.close()
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

WIDTH = 24


class Progress:
    def __init__(self, total: int, label: str, *, stream: TextIO | None = None,
                 enabled: bool = True, unit: str = "", interval: float = 0.1,
                 initial: int = 0):
        self.total = max(0, int(total))
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.unit = unit
        self.interval = interval
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.start = initial            # a resumed run: the rate counts from here
        self.done = initial
        self._last_draw = 0.0
        self._last_decile = -1
        self._fields: dict[str, Any] = {}
        self._width = 0

    def update(self, done: int, **fields: Any) -> None:
        self.done = done
        self._fields.update(fields)
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if now - self._last_draw >= self.interval or done >= self.total:
                self._draw(now)
        else:
            decile = (10 * done // self.total) if self.total else 10
            if decile != self._last_decile:
                self._last_decile = decile
                self.stream.write(self._text(now) + "\n")
                self.stream.flush()

    def _text(self, now: float) -> str:
        frac = self.done / self.total if self.total else 1.0
        fill = round(WIDTH * frac)
        rate = (self.done - self.start) / max(now - self.t0, 1e-9)
        bar = "#" * fill + "." * (WIDTH - fill)
        parts = [f"{self.label} [{bar}] {self.done}/{self.total}{self.unit}"]
        for k, v in self._fields.items():
            if v is None:
                continue
            parts.append(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}")
        if self.done > self.start:
            parts.append(f"{rate:.1f}/s")
            left = (self.total - self.done) / rate if rate > 0 else 0.0
            if self.done < self.total:
                parts.append(f"eta {left:.0f}s")
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        text = self._text(now)
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._last_draw = now

    def close(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            self._draw(now)
            self.stream.write("\n")
        elif self._last_decile != 10:
            self.stream.write(self._text(now) + "\n")
        self.stream.flush()
