"""Searching a topological order of minimal peak live bytes.

``simulate`` evaluates one order. ``search`` is a dynamic program over the sets of executed ops
(the downsets of the dependence order), level by level: after k steps every reachable set S of
k ops is kept with the smallest peak of any order reaching it; the bytes live after S depend on
S alone, so this is exact. When a level holds more than ``max_states`` sets, only the best
(smallest peak so far, then fewest live bytes, then closest to the given order) are kept: a beam
search, which is how large graphs (many independent act_mask ops, wide residual graphs) stay
fast. The result reports whether any level was cut (``exact``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .problem import Problem


@dataclass(frozen=True)
class Step:
    op: int                        # op index in graph.ops
    live: int                      # bytes live while it runs (incl. scratch)
    inplace: tuple[str, str] | None  # (output, input) written in place


def _start(p: Problem) -> tuple[int, int]:
    live0 = dead0 = 0
    for g, b in enumerate(p.birth):
        if b < 0:
            if p.cons[g] or p.pinned[g]:
                live0 += p.size[g]
            else:
                dead0 += p.size[g]
    return live0, dead0


def simulate(p: Problem, order: list[int]) -> list[Step]:
    """Bytes live at each step of ``order`` and the in-place choices made."""
    live, dead0 = _start(p)
    done = 0
    steps = []
    size, pinned, cons = p.size, p.pinned, p.cons
    for k, o in enumerate(order):
        done |= 1 << o
        alloc = sum(size[h] for h in p.births[o])
        saving, chosen = 0, None
        for g, _h, x, y in p.candidates[o]:
            if not pinned[g] and not cons[g] & ~done:
                saving, chosen = size[g], (y, x)
                break
        steps.append(Step(o, live + alloc - saving + p.scratch[o] + (dead0 if k == 0 else 0),
                          chosen))
        freed = sum(size[g] for g in p.reads[o] if not pinned[g] and not cons[g] & ~done)
        freed += sum(size[h] for h in p.births[o] if not cons[h] and not pinned[h])
        live += alloc - freed
    return steps


def peak_of(p: Problem, order: list[int]) -> int:
    return max((s.live for s in simulate(p, order)), default=0)


def is_topological(p: Problem, order: list[int]) -> bool:
    done = 0
    for o in order:
        if p.preds[o] & ~done:
            return False
        done |= 1 << o
    return len(order) == p.n and done == (1 << p.n) - 1


def search(p: Problem, max_states: int) -> tuple[list[int], int, bool]:
    """(order, peak, exact): minimal-peak order by DP over executed-op sets (beam-limited)."""
    n = p.n
    if n == 0:
        return [], 0, True
    size, pinned, cons, births, reads = p.size, p.pinned, p.cons, p.births, p.reads
    cands, scratch, preds, succs = p.candidates, p.scratch, p.preds, p.succs
    alloc = [sum(size[h] for h in births[o]) for o in range(n)]
    doa = [sum(size[h] for h in births[o] if not cons[h] and not pinned[h]) for o in range(n)]
    live0, dead0 = _start(p)
    ready0 = sum(1 << o for o in range(n) if not preds[o])
    # level: S -> (peak, live, ready)
    level: dict[int, tuple[int, int, int]] = {0: (0, live0, ready0)}
    back: list[dict[int, tuple[int, int]]] = []
    exact = True
    for k in range(n):
        nxt: dict[int, tuple[int, int, int, int, int]] = {}
        extra = dead0 if k == 0 else 0
        for s, (peak, live, ready) in level.items():
            r = ready
            while r:
                low = r & -r
                r ^= low
                o = low.bit_length() - 1
                s2 = s | low
                saving = 0
                for g, _h, _x, _y in cands[o]:
                    if not pinned[g] and not cons[g] & ~s2:
                        saving = size[g]
                        break
                step = live + alloc[o] - saving + scratch[o] + extra
                peak2 = max(peak, step)
                prev = nxt.get(s2)
                if prev is not None and prev[0] <= peak2:
                    continue
                if prev is None:
                    freed = doa[o]
                    for g in reads[o]:
                        if not pinned[g] and not cons[g] & ~s2:
                            freed += size[g]
                    live2 = live + alloc[o] - freed
                    ready2 = ready ^ low
                    for q in succs[o]:
                        if not preds[q] & ~s2:
                            ready2 |= 1 << q
                else:
                    live2, ready2 = prev[1], prev[2]
                nxt[s2] = (peak2, live2, ready2, s, o)
        if len(nxt) > max_states:
            exact = False
            best = sorted(nxt.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))[:max_states]
            nxt = dict(best)
        back.append({s2: (v[3], v[4]) for s2, v in nxt.items()})
        level = {s2: (v[0], v[1], v[2]) for s2, v in nxt.items()}
    full = (1 << n) - 1
    if full not in level:   # a cycle in the constraints
        raise ValueError("the op order constraints contain a cycle")
    peak = level[full][0]
    order: list[int] = []
    s = full
    for k in range(n - 1, -1, -1):
        prev_s, o = back[k][s]
        order.append(o)
        s = prev_s
    order.reverse()
    return order, peak, exact
