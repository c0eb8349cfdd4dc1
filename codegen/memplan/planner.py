"""Offline placement of buffers with known lifetimes (TFLite Micro's planner interface).

``add_buffer(size, first_use, last_use)`` (steps, inclusive) returns a buffer index; ``offset(i)``
and ``peak()`` give the placement; ``verify()`` checks that no two buffers live at the same step
share an address; ``describe()`` prints the plan as a step × address picture.

Placement algorithms (``PLACEMENTS``) all place buffers one by one, in some order, at the lowest
aligned offset where they fit between the already placed buffers they conflict with in time
(first fit; ``best_fit`` takes the tightest gap instead):

- ``greedy_by_size``: largest first (TFLM's ``GreedyMemoryPlanner``);
- ``greedy_by_conflicts``: the buffers with most conflicting bytes first;
- ``greedy_by_breadth``: buffers live at the busiest steps first (largest live total over their
  lifetime), then by size;
- ``greedy_by_lifetime``: longest-lived first, then by size;
- ``greedy_by_first_use``: in order of first use (a linear scan).

``SearchPlanner`` runs them all (first and best fit), then a seeded local search over placement
orders (move a buffer that reaches the peak earlier, swap two, reverse a run), deterministic for
a seed and bounded by a number of iterations; it stops as soon as the peak meets the lower bound.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..schedule.storage import align_up

Order = list[int]


class OverlapError(AssertionError):
    """Two buffers live at the same step share bytes (a planner bug)."""


@dataclass(frozen=True)
class Interval:
    size: int
    first: int
    last: int
    name: str = ""


def conflict_lists(buffers: Sequence[Interval]) -> list[list[int]]:
    """For each buffer, the others alive at some common step (zero-size buffers conflict with
    nothing)."""
    idx = sorted((i for i, b in enumerate(buffers) if b.size > 0),
                 key=lambda i: (buffers[i].first, i))
    out: list[list[int]] = [[] for _ in buffers]
    active: list[int] = []
    for i in idx:
        f = buffers[i].first
        active = [j for j in active if buffers[j].last >= f]
        for j in active:
            out[i].append(j)
            out[j].append(i)
        active.append(i)
    return out


def live_profile(buffers: Sequence[Interval]) -> list[int]:
    """Bytes live at each step."""
    steps = max((b.last for b in buffers), default=-1) + 1
    diff = [0] * (steps + 1)
    for b in buffers:
        if b.size > 0:
            diff[b.first] += b.size
            diff[b.last + 1] -= b.size
    prof, run = [], 0
    for k in range(steps):
        run += diff[k]
        prof.append(run)
    return prof


def lower_bound(buffers: Sequence[Interval]) -> int:
    return max(live_profile(buffers), default=0)


def place(order: Order, buffers: Sequence[Interval], conflicts: list[list[int]],
          alignment: int, best_fit: bool = False) -> tuple[list[int], int]:
    """Offsets of the buffers placed in ``order``; and the resulting peak."""
    offsets = [-1] * len(buffers)
    peak = 0
    for i in order:
        size = buffers[i].size
        if size <= 0:
            offsets[i] = 0
            continue
        taken = sorted((offsets[j], offsets[j] + buffers[j].size)
                       for j in conflicts[i] if offsets[j] >= 0)
        cand, best, best_gap = 0, -1, -1
        for start, end in taken:
            if start - cand >= size:
                gap = start - cand
                if not best_fit:
                    best = cand
                    break
                if best < 0 or gap < best_gap:
                    best, best_gap = cand, gap
            if end > cand:
                cand = align_up(end, alignment)
        if best < 0:
            best = cand
        offsets[i] = best
        peak = max(peak, best + size)
    return offsets, peak


def check_overlaps(buffers: Sequence[Interval], offsets: Sequence[int], alignment: int = 1,
                   conflicts: list[list[int]] | None = None) -> None:
    """Raise OverlapError naming two buffers that are live together and share an address, or a
    misaligned / negative offset."""
    for i, (b, off) in enumerate(zip(buffers, offsets)):
        if off < 0 or (b.size > 0 and off % alignment):
            raise OverlapError(f"buffer {i} {b.name!r}: offset {off} not a non-negative "
                               f"multiple of {alignment}")
    for i, others in enumerate(conflicts if conflicts is not None else conflict_lists(buffers)):
        a = buffers[i]
        for j in others:
            if j <= i:
                continue
            c = buffers[j]
            if offsets[i] < offsets[j] + c.size and offsets[j] < offsets[i] + a.size:
                raise OverlapError(
                    f"buffers {i} {a.name!r} [{offsets[i]}, {offsets[i] + a.size}) steps "
                    f"{a.first}..{a.last} and {j} {c.name!r} [{offsets[j]}, "
                    f"{offsets[j] + c.size}) steps {c.first}..{c.last} overlap")


# -- placement orders ---------------------------------------------------------------------------

def _by_size(bufs: Sequence[Interval], conf: list[list[int]]) -> Order:
    return sorted(range(len(bufs)), key=lambda i: (-bufs[i].size, bufs[i].first, i))


def _by_conflicts(bufs: Sequence[Interval], conf: list[list[int]]) -> Order:
    weight = [sum(bufs[j].size for j in conf[i]) for i in range(len(bufs))]
    return sorted(range(len(bufs)), key=lambda i: (-weight[i] - bufs[i].size, -bufs[i].size, i))


def _by_breadth(bufs: Sequence[Interval], conf: list[list[int]]) -> Order:
    prof = live_profile(bufs)
    breadth = [max(prof[b.first:b.last + 1], default=0) if b.size else 0 for b in bufs]
    return sorted(range(len(bufs)), key=lambda i: (-breadth[i], -bufs[i].size, bufs[i].first, i))


def _by_lifetime(bufs: Sequence[Interval], conf: list[list[int]]) -> Order:
    return sorted(range(len(bufs)),
                  key=lambda i: (-(bufs[i].last - bufs[i].first), -bufs[i].size, i))


def _by_first_use(bufs: Sequence[Interval], conf: list[list[int]]) -> Order:
    return sorted(range(len(bufs)), key=lambda i: (bufs[i].first, -bufs[i].size, i))


PLACEMENTS: dict[str, Callable[[Sequence[Interval], list[list[int]]], Order]] = {
    "greedy_by_size": _by_size,
    "greedy_by_conflicts": _by_conflicts,
    "greedy_by_breadth": _by_breadth,
    "greedy_by_lifetime": _by_lifetime,
    "greedy_by_first_use": _by_first_use,
}


# -- the planner interface -------------------------------------------------------------------------

class MemoryPlanner:
    """Collects buffers, places them on first query. Subclasses choose the placement."""

    name = "planner"

    def __init__(self, alignment: int = 16):
        if alignment < 1 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        self.alignment = alignment
        self.buffers: list[Interval] = []
        self._offsets: list[int] | None = None
        self.algorithm = self.name

    def add_buffer(self, size: int, first_use: int, last_use: int, name: str = "") -> int:
        if size < 0 or first_use < 0 or last_use < first_use:
            raise ValueError(f"bad buffer {name!r}: size {size}, steps {first_use}..{last_use}")
        self.buffers.append(Interval(align_up(size, self.alignment), first_use, last_use, name))
        self._offsets = None
        return len(self.buffers) - 1

    @property
    def buffer_count(self) -> int:
        return len(self.buffers)

    @property
    def offsets(self) -> list[int]:
        if self._offsets is None:
            conf = conflict_lists(self.buffers)
            self._offsets = self._place(conf)
        return self._offsets

    def offset(self, index: int) -> int:
        return self.offsets[index]

    def peak(self) -> int:
        return max((o + b.size for o, b in zip(self.offsets, self.buffers)), default=0)

    def lower_bound(self) -> int:
        return lower_bound(self.buffers)

    def verify(self) -> None:
        check_overlaps(self.buffers, self.offsets, self.alignment)

    def _place(self, conf: list[list[int]]) -> list[int]:
        raise NotImplementedError

    def describe(self, width: int = 64) -> str:
        """One line per step: which buffer (a letter) occupies each slice of the address range."""
        peak = self.peak()
        head = (f"{self.algorithm}: {len(self.buffers)} buffers, peak {peak} B, "
                f"lower bound {self.lower_bound()} B")
        lines = [head]
        if not self.buffers or peak == 0:
            return "\n".join(lines)
        marks = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        steps = max(b.last for b in self.buffers) + 1
        for k in range(steps):
            row = ["."] * width
            for i, (b, off) in enumerate(zip(self.buffers, self.offsets)):
                if b.size and b.first <= k <= b.last:
                    lo = off * width // peak
                    hi = max(lo + 1, (off + b.size) * width // peak)
                    for c in range(lo, min(hi, width)):
                        row[c] = marks[i % len(marks)]
            live = sum(b.size for b in self.buffers if b.first <= k <= b.last)
            lines.append(f"{k:4d} {''.join(row)} {live}")
        return "\n".join(lines)


class GreedyPlanner(MemoryPlanner):
    """One placement order of ``PLACEMENTS``, first fit (or best fit)."""

    def __init__(self, alignment: int = 16, order: str = "greedy_by_size",
                 best_fit: bool = False):
        super().__init__(alignment)
        if order not in PLACEMENTS:
            raise ValueError(f"unknown placement {order!r} (known: {', '.join(PLACEMENTS)})")
        self.order, self.best_fit = order, best_fit
        self.algorithm = order + ("+best_fit" if best_fit else "")

    def _place(self, conf: list[list[int]]) -> list[int]:
        order = PLACEMENTS[self.order](self.buffers, conf)
        return place(order, self.buffers, conf, self.alignment, self.best_fit)[0]


class GreedyBySizePlanner(GreedyPlanner):
    """TFLM's greedy planner: largest buffer first, lowest offset that fits."""

    def __init__(self, alignment: int = 16):
        super().__init__(alignment, "greedy_by_size")


class GreedyByConflictsPlanner(GreedyPlanner):
    def __init__(self, alignment: int = 16):
        super().__init__(alignment, "greedy_by_conflicts")


class SearchPlanner(MemoryPlanner):
    """Every greedy placement, then a seeded improvement search; keeps the best.

    Each iteration places all buffers once, in an order that is either
    - *squeaky wheel*: by a priority (initially the size) that grows for the buffers the last
      such placement put above the lower-bound line, or
    - *local move* of the best order so far: a buffer that reaches the peak moved earlier, a
      swap of two, or a reversed run (first fit or best fit).
    Equal peaks are accepted (plateau moves). Deterministic for a seed; ``iterations`` bounds
    the placements and ``work_budget`` the total conflict-list scans; the search stops at the
    lower bound.
    """

    name = "search"

    def __init__(self, alignment: int = 16, iterations: int = 400, seed: int = 0,
                 placements: Sequence[str] | None = None, work_budget: int = 4_000_000):
        super().__init__(alignment)
        self.iterations, self.seed = iterations, seed
        self.placements = tuple(placements or PLACEMENTS)
        self.work_budget = work_budget
        self.stats: dict[str, object] = {}

    def _perturb(self, order: Order, offs: list[int], peak: int, rng: random.Random) -> Order:
        bufs = self.buffers
        n = len(order)
        cand = list(order)
        move = rng.random()
        if move < 0.5:
            top = [k for k, i in enumerate(order) if offs[i] + bufs[i].size == peak]
            i = rng.choice(top) if top else rng.randrange(n)
            j = rng.randrange(0, i + 1)
            cand.insert(j, cand.pop(i))
        elif move < 0.8:
            i, j = rng.randrange(n), rng.randrange(n)
            cand[i], cand[j] = cand[j], cand[i]
        else:
            i, j = sorted((rng.randrange(n), rng.randrange(n)))
            cand[i:j + 1] = reversed(cand[i:j + 1])
        return cand

    def _place(self, conf: list[list[int]]) -> list[int]:
        bufs, align = self.buffers, self.alignment
        lb = lower_bound(bufs)
        results: dict[str, int] = {}
        best: tuple[int, Order, bool, str] | None = None
        for name in self.placements:
            order = PLACEMENTS[name](bufs, conf)
            for bf in (False, True):
                _, peak = place(order, bufs, conf, align, bf)
                label = name + ("+best_fit" if bf else "")
                results[label] = peak
                if best is None or peak < best[0]:
                    best = (peak, order, bf, label)
        if best is None:
            self.stats = {"placements": results, "iterations": 0}
            return []
        peak, order, bf, label = best
        offs = place(order, bufs, conf, align, bf)[0]
        work = max(1, len(bufs) + sum(len(c) for c in conf))
        iters = min(self.iterations, self.work_budget // work)
        rng = random.Random(self.seed)
        n = len(order)
        prio = [float(b.size) for b in bufs]
        done = stale = 0
        improved = False
        while done < iters and peak > lb and n > 1:
            done += 1
            squeaky = rng.random() < 0.5
            if squeaky:
                cand = sorted(range(n), key=lambda i: (-prio[i], bufs[i].first, i))
                cbf = False
            else:
                cand = self._perturb(order, offs, peak, rng)
                cbf = bf if rng.random() < 0.8 else not bf
            coffs, cpeak = place(cand, bufs, conf, align, cbf)
            if squeaky:
                for i in range(n):
                    if coffs[i] + bufs[i].size > lb:
                        prio[i] += bufs[i].size * rng.uniform(0.1, 1.0)
            if cpeak <= peak:
                if cpeak < peak:
                    improved, stale = True, 0
                peak, order, bf, offs = cpeak, cand, cbf, coffs
            else:
                stale += 1
                if stale >= 100:      # restart the priorities, with noise
                    prio = [b.size * rng.uniform(0.8, 1.2) for b in bufs]
                    stale = 0
        if improved:
            label = f"search({label})"
        self.algorithm = label
        self.stats = {"placements": results, "iterations": done, "lower_bound": lb}
        return offs
