"""The exactly-once ledger of a fault campaign, from the device's own trace.

A firmware built with ``PE_SERIAL_TRACE`` (``build_serial_firmware(..., trace=True)``; the
host-built server with ``--trace FILE``) prints a line for every sample it applies
(``pe_train_step`` returned), every checkpoint it saves and every time its state (re)starts
(boot, RESET: from checkpoint generation G at sample seq, or from the initial parameters).
Replaying those lines over all the device's lives gives the samples that the parameters the
device ends with went through, in order: a checkpoint holds the state as it was when it was
saved, a boot continues from the checkpoint it restored, RAM after the last checkpoint dies
with a power cut. Counting against 1..N is independent of the host's bookkeeping and of the
protocol's sequence numbers, which are what the campaign tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_LINE = re.compile(r"@pe:trace (applied|checkpoint|restored) seq=(\d+) n=(\d+)")


@dataclass(frozen=True)
class Ledger:
    applied: tuple[int, ...]     # the sample seqs in the final state, in the order applied
    applications: int            # pe_train_step calls over all lives (replays included)
    lives: int                   # boots and RESETs

    def lost(self, total: int) -> int:
        """Samples of 1..total the final state never saw."""
        return len(set(range(1, total + 1)) - set(self.applied))

    def twice(self) -> int:
        """Extra applications in the final state (a sample applied more than once)."""
        return len(self.applied) - len(set(self.applied))

    def in_order(self, total: int) -> bool:
        return self.applied == tuple(range(1, total + 1))


def replay(lines: Iterable[str]) -> Ledger:
    """The ledger of a device's trace lines (all its lives, in order)."""
    state: list[int] = []
    saved: dict[int, list[int]] = {}
    applications = lives = 0
    for line in lines:
        m = _LINE.search(line)
        if m is None:
            continue
        event, seq, n = m.group(1), int(m.group(2)), int(m.group(3))
        if event == "applied":
            state.append(seq)
            applications += 1
        elif event == "checkpoint":
            saved[n] = list(state)
        else:
            lives += 1
            if n == 0:
                state = []
            elif n in saved:
                state = list(saved[n])
            else:       # saved just before a power cut cut its trace line: the state then
                state = state[:state.index(seq) + 1] if seq in state else []
            saved = {g: s for g, s in saved.items() if g <= n} if n else {}
    return Ledger(tuple(state), applications, lives)
