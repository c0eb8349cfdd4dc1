"""`pockengine search`: find the trainable set that gains the most under a memory budget.

tiny-training's sparse-update search, which its authors describe but never released, in four
steps (docs/search.md is the user's account):

1. **Contribution analysis.** TRAIN is split (stratified, by ``seed``) into a fine-tune part and
   a held-back validation part; EVAL is never looked at while choosing. Short fine-tunes on the
   fine-tune part, scored on the validation part, measure the gain of updating the biases of
   the last k layers (k = 0 ... all) and, per layer i and channel ratio r in RATIOS, of
   updating layer i's weights (the ``ceil(r * C)`` channels the spec's channel selection
   picks) on top of the biases of layers i ... last. Scores are cached per (model, data,
   settings) in the user's cache directory, so a second search with another budget reruns
   nothing.
2. **Memory and cost per unit.** Every unit (one layer's bias, one layer's weights at one ratio)
   is planned alone with the real planner: arena, parameter bytes (with optimizer state and
   master copies), flash, and instructions per step from the cost model. A set's footprint is
   estimated as the largest arena of its units plus the sum of their parameter bytes (plus the
   board's stack and harness buffers): cheap enough for the search loop.
3. **Search.** An evolutionary search (deterministic with ``seed``), its first population the
   bias-only sets and the usual hand-made sets, maximises the summed gains — tiny-training's
   additivity assumption, measured and reported in ``additivity`` — under SRAM, flash and,
   when given, instructions per step.
4. **Verify.** The best few sets are planned exactly (a set that does not fit after all is
   repaired: its least useful unit per byte is shrunk or dropped until it fits) and fine-tuned
   on the fine-tune part; the best on the validation part wins, the baselines included. The
   winner and the baselines are then fine-tuned on all of TRAIN and evaluated on EVAL: that is
   the reported accuracy.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .backends import chain_for
from .backends.cost import STATIC_FACTORS, core_class, kernel_family
from .board import format_size
from .errors import PockError
from .fit import fit_model
from .ir import Graph, weight_axis
from .ir.stream import STREAM_OP, chain_graph
from .model_store import graph_digest
from .pipeline import (
    build_project,
    compile_model,
    kernel_costs,
    plan_project,
    project_memory,
    training_graph,
)
from .targets import toolchain_available
from .train.spec import Optimizer, Schedule, TrainableRule, TrainSpec, parametric_layers

RATIOS = (0.125, 0.25, 0.5, 1.0)      # channel ratios of a layer's weight update
CACHE_VERSION = 1
VERIFY_TOP = 4                        # candidates fine-tuned in the verification step
VERIFY_FOLDS = 3                      # (held-back split, sample order) pairs per finalist


# -- candidates ---------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Candidate:
    """Biases of the last ``bias`` layers, plus (layer index, channel ratio) weight updates."""

    bias: int = 0
    weights: tuple[tuple[int, float], ...] = ()

    @property
    def empty(self) -> bool:
        return self.bias == 0 and not self.weights

    def short(self) -> str:
        """The spec's short form (``bias:last3+weight:8@0.25``); ``none`` when empty."""
        parts = [f"bias:last{self.bias}"] if self.bias else []
        parts += [f"weight:{i}" if r >= 1 else f"weight:{i}@{r:g}" for i, r in self.weights]
        return "+".join(parts) or "none"

    @classmethod
    def parse(cls, short: str) -> Candidate:
        """The Candidate of a short form ``short()`` wrote."""
        bias, weights = 0, []
        for part in short.split("+") if short != "none" else ():
            kind, _, sel = part.partition(":")
            if kind == "bias":
                bias = int(sel.removeprefix("last"))
            else:
                i, _, r = sel.partition("@")
                weights.append((int(i), float(r) if r else 1.0))
        return cls(bias, tuple(sorted(weights)))

    def units(self, layers: int) -> list[tuple[str, int, float]]:
        """("bias", i, 1) for each trained bias, ("weight", i, r) for each weight update."""
        return ([("bias", i, 1.0) for i in range(layers - self.bias, layers)]
                + [("weight", i, r) for i, r in self.weights])


def candidate_spec(base: Any, cand: Candidate, run_steps: int | None = None,
                   full_steps: int | None = None) -> Any:
    """``base`` (a TrainSpec: loss, optimizer, schedule, modes) training ``cand``. A cosine
    schedule is written for a run of ``full_steps``; a fine-tune of ``run_steps`` gets it
    stretched to its own length (its warmup too)."""
    if run_steps and full_steps and base.schedule.name == "cosine" and run_steps != full_steps:
        sc = base.schedule
        t = max(1, round(sc.total_steps * run_steps / full_steps))
        w = min(round(sc.warmup_steps * run_steps / full_steps), t - 1)
        base = replace(base, schedule=replace(sc, total_steps=t, warmup_steps=w))
    rules = [TrainableRule(layers=f"last {cand.bias}", params="bias")] if cand.bias else []
    rules += [TrainableRule(layers=(i,), params="weight", channels=float(r))
              for i, r in cand.weights]
    return replace(base, trainable=tuple(rules), source=f"--train {cand.short()}")


# -- the budget -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Budget:
    sram: int
    flash: int | None = None
    latency: int | None = None          # instructions per training step
    board: Any = None                   # the board the footprint is planned for (None: host)
    board_arg: str | None = None        # the board as the user gave it (a name or a file)

    def describe(self) -> str:
        parts = [f"SRAM {format_size(self.sram)}"]
        if self.flash is not None:
            parts.append(f"flash {format_size(self.flash)}")
        if self.latency is not None:
            parts.append(f"{self.latency:,} instructions per step")
        where = f" on {self.board.name}" if self.board is not None else ""
        return ", ".join(parts) + where


def parse_size(text: str, what: str) -> int:
    """``131072``, ``128KiB``, ``0.5 MiB``, ``96kB`` -> bytes (one-line PockError otherwise)."""
    s = str(text).strip().replace(" ", "")
    units = {"": 1, "b": 1, "kib": 1024, "kb": 1000, "k": 1024, "mib": 1024 ** 2,
             "mb": 1000 ** 2, "m": 1024 ** 2}
    num = s.rstrip("KMBkmbiI")
    unit = s[len(num):].lower()
    try:
        value = float(num) * units[unit]
    except (ValueError, KeyError):
        raise PockError(f"{what}: cannot read size {text!r} (e.g. 131072, 128KiB, 1MiB)") \
            from None
    if not math.isfinite(value) or value <= 0:
        raise PockError(f"{what}: size must be positive, got {text!r}")
    return int(value)


# -- footprints -------------------------------------------------------------------------------

# instructions per output element of a kernel the static model has no factors for
ELEMENT_INSTRUCTIONS = 8.0


def step_instructions(calls: Sequence[Any], graph: Graph, target: Any) -> int:
    """Instructions of one training step from the cost model's static factors (per MAC, per
    output element, per call; backends.cost): a gradient kernel priced as its forward
    family, a kernel without factors at ELEMENT_INSTRUCTIONS per output element. An
    estimate for the search's latency budget, not a measurement."""
    core = core_class(target) if target is not None else "dsp"
    core = "dsp" if core in ("host", "mve", "hexagon") else core
    total = 0.0
    for call in calls:
        op = graph.op_by_name(call.op)
        family = kernel_family(call).removesuffix("_grad_input").removesuffix("_grad_weight")
        # a streamed chain (codegen.stream) is priced as the ops it stands for
        parts = ([(o.type, chain.tensors[o.outputs[0]].size) for o in chain.ops]
                 if op.type == STREAM_OP and (chain := chain_graph(graph, op)) else
                 [(family, graph.tensors[op.outputs[0]].size if op.outputs else 0)])
        for fam, elements in parts:
            f = (STATIC_FACTORS.get((call.backend, fam, core))
                 or STATIC_FACTORS.get(("ref", fam, core)))
            if f is None:
                total += ELEMENT_INSTRUCTIONS * elements
            else:
                total += f[0] * call.macs + f[1] * elements + f[2]
    return round(total)


class Planner:
    """Exact footprints of training specs on one board (or the host), with the kernel choice
    ``compile`` makes (the same chain and cost model)."""

    def __init__(self, graph: Graph, board: Any, backend: str = "auto", measure: bool = True):
        self.graph, self.board, self.backend = graph, board, backend
        self.chain = chain_for(board, backend)
        self.cost = kernel_costs(graph, board, self.chain, measure=measure)
        self._memo: dict[str, dict[str, int]] = {}

    def footprint(self, spec: Any) -> dict[str, int]:
        """project_memory's fields (arena, params, stack, harness, sram, flash...) and
        ``instructions`` per step, for ``spec`` (memoised by its short form)."""
        key = spec.source
        if key not in self._memo:
            tg = training_graph(self.graph, spec)
            infer, train = plan_project(self.graph, tg, self.board, self.backend,
                                        cost=self.cost)       # streamed as compile does
            m = dict(project_memory(self.board, infer, train))
            m["instructions"] = step_instructions(train.calls, train.graph, self.chain.target)
            self._memo[key] = m
        return self._memo[key]


@dataclass
class UnitCosts:
    """Per unit (kind, layer, ratio): arena, parameter bytes, flash, instructions."""

    layers: int
    fixed_sram: int                   # stack + harness (device boards)
    units: dict[tuple[str, int, float], dict[str, int]] = field(default_factory=dict)

    def estimate(self, cand: Candidate) -> dict[str, int]:
        """The additive model of a set's footprint (module docstring, step 2): the largest
        arena of its units, plus the inputs every further weight update keeps alive for its
        gradient, plus the units' parameter bytes."""
        us = [self.units[u] for u in cand.units(self.layers)]
        if not us:
            return {"sram": 0, "flash": 0, "instructions": 0}
        kept = sorted(self.units[u]["kept"] for u in cand.units(self.layers)
                      if u[0] == "weight")
        arena = max(u["arena"] for u in us) + sum(kept[:-1])
        params = sum(u["params"] for u in us)
        deepest = max(us, key=lambda u: u["instructions"])
        extra = sum(self.units[u]["instructions"] - self.units[("bias", u[1], 1.0)]
                    ["instructions"] for u in cand.units(self.layers) if u[0] == "weight")
        flash = max(u["flash"] for u in us)
        return {"sram": arena + params + self.fixed_sram, "flash": flash,
                "instructions": deepest["instructions"] + max(0, extra)}


def linked_footprint(graph: Graph, spec: Any, budget: Budget, backend: str,
                     measure: bool) -> dict[str, int] | None:
    """SRAM and flash of the firmware image of ``spec`` (compiled, built and linked for the
    budget's board in a temporary directory); None without the board's toolchain."""
    board = budget.board
    if board is None or board.arch == "host" or not toolchain_available(board)[0]:
        return None
    with tempfile.TemporaryDirectory(prefix="pockengine-search-") as tmp:
        proj = compile_model(graph, board=budget.board_arg or board.name, spec=spec,
                             out_dir=Path(tmp) / "fw", backend=backend, measure=measure)
        sizes = build_project(proj, check=False).sizes
    return {"sram": int(sizes["sram_bytes"]), "flash": int(sizes["flash_bytes"])}


def unit_costs(planner: Planner, base: Any, layers: int,
               weight_units: Sequence[tuple[int, float]]) -> UnitCosts:
    """The footprint of every unit planned alone: each layer's bias, each weight update."""
    costs = UnitCosts(layers=layers, fixed_sram=0)
    for i in range(layers):
        spec = replace(base, trainable=(TrainableRule(layers=(i,), params="bias"),),
                       source=f"--train bias:{i}")
        costs.units[("bias", i, 1.0)] = planner.footprint(spec)
    ops = parametric_layers(planner.graph)
    for i, r in weight_units:
        m = dict(planner.footprint(candidate_spec(base, Candidate(weights=((i, r),)))))
        m["kept"] = planner.graph.tensors[ops[i].inputs[0]].nbytes   # the input its gradient reads
        costs.units[("weight", i, r)] = m
    some = next(iter(costs.units.values()))
    costs.fixed_sram = some["stack"] + some["harness"]
    return costs


def fits(m: Mapping[str, int], budget: Budget) -> bool:
    return (m["sram"] <= budget.sram
            and (budget.flash is None or m["flash"] <= budget.flash)
            and (budget.latency is None or m["instructions"] <= budget.latency))


# -- contribution analysis ------------------------------------------------------------------

def holdout_split(y: np.ndarray | None, n: int, fraction: float, seed: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(fine-tune indices, validation indices): ``fraction`` of every class (at least one of a
    class with two or more samples) held back, chosen by ``seed``; without labels, of all."""
    rng = np.random.default_rng(seed)
    groups = [np.arange(n)] if y is None or np.asarray(y).ndim != 1 else \
        [np.flatnonzero(np.asarray(y) == c) for c in np.unique(y)]
    val: list[int] = []
    for g in groups:
        g = rng.permutation(g)
        k = round(len(g) * fraction)
        if len(g) >= 2:
            k = min(max(k, 1), len(g) - 1)
        else:
            k = 0
        val.extend(int(v) for v in g[:k])
    val_idx = np.array(sorted(val), dtype=np.int64)
    fit_idx = np.setdiff1d(np.arange(n), val_idx)
    if len(val_idx) == 0 or len(fit_idx) == 0:
        raise PockError(f"training data: {n} samples are too few to hold back a validation "
                        f"part ({fraction:.0%}) for the search")
    return fit_idx, val_idx


def score_of(result: Mapping[str, Any], loss: str) -> float:
    """Higher is better: accuracy (cross-entropy), minus the MSE (mse)."""
    if loss == "cross_entropy":
        return float(result["accuracy_after"] if result["steps"] else
                     result["accuracy_before"])
    v = result["mse_after"] if result["steps"] else result["mse_before"]
    return -float(v)


def _fine_tune(job: tuple) -> tuple[str, float, dict]:
    """One short fine-tune (runs in a worker process): (short form, score, facts). An empty
    set (spec None) scores the model as it is."""
    graph, spec, train, evals, epochs, engine, seed, backend, base = job
    if spec is None:
        probe = replace(base, trainable=(TrainableRule(layers="last 1"),))
        r = fit_model(graph, probe, train, evals, epochs=0, engine="golden", seed=seed)
        return "none", score_of(r, probe.loss), {"steps": 0}
    r = fit_model(graph, spec, train, evals, epochs=epochs, engine=engine, seed=seed,
                  backend=backend)
    return spec.source.removeprefix("--train "), score_of(r, spec.loss), {
        "steps": r["steps"], "params_sha256": r["params_sha256"],
        "saturated_updates": r["saturated_updates"]}


class FineTunes:
    """Fine-tunes of candidate sets on one (train, evaluation) pair, run in parallel worker
    processes and cached on disk by (model, data, settings)."""

    def __init__(self, graph: Graph, base: Any, train: Mapping[str, np.ndarray],
                 evals: Mapping[str, np.ndarray], *, epochs: int, engine: str, seed: int,
                 backend: str, jobs: int, cache: Path | None, what: str,
                 full_steps: int | None = None):
        self.graph, self.base, self.train, self.evals = graph, base, train, evals
        self.epochs, self.engine, self.seed = epochs, engine, seed
        self.backend, self.jobs, self.what = backend, jobs, what
        self.run_steps, self.full_steps = epochs * len(train["x"]), full_steps
        h = hashlib.sha256()
        h.update(json.dumps([CACHE_VERSION, graph_digest(graph), engine, epochs, seed,
                             backend, base.loss, base.backward, base.master_weights,
                             base.accumulate, repr(base.optimizer), repr(base.schedule), full_steps],
                            sort_keys=True).encode())
        for part in (train, evals):
            for k in ("x", "y"):
                a = part.get(k)
                if a is not None:
                    a = np.ascontiguousarray(a)
                    h.update(f"{k}{a.dtype}{a.shape}".encode())
                    h.update(a.tobytes())
        self.key = h.hexdigest()[:32]
        self.path = None if cache is None else cache / f"{what}-{self.key}.json"
        self.scores: dict[str, float] = {}
        self.facts: dict[str, dict] = {}
        if self.path is not None and self.path.is_file():
            try:
                saved = json.loads(self.path.read_text())
                self.scores = {k: float(v) for k, v in saved.get("scores", {}).items()}
                self.facts = dict(saved.get("facts", {}))
            except (ValueError, OSError, AttributeError):
                self.scores, self.facts = {}, {}
        self.ran = 0

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"scores": self.scores, "facts": self.facts}))
            tmp.replace(self.path)
        except OSError:
            pass                      # a cache that cannot be written only costs time

    def run(self, cands: Sequence[Candidate],
            on_done: Callable[[str], None] | None = None) -> dict[str, float]:
        """Scores of ``cands`` (cached ones not rerun)."""
        todo = list(dict.fromkeys(c for c in cands if c.short() not in self.scores))
        if on_done is not None:
            for c in dict.fromkeys(c for c in cands if c.short() in self.scores):
                on_done(c.short())
        jobs = [(self.graph, None if c.empty else
                 candidate_spec(self.base, c, self.run_steps, self.full_steps), self.train,
                 self.evals, self.epochs, self.engine, self.seed, self.backend, self.base)
                for c in todo]
        if jobs:
            if self.jobs > 1 and len(jobs) > 1:
                # threads: a host fine-tune spends its time in the C compiler and the built
                # program (subprocesses), and threads need no re-import of the caller's script
                with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                    for name, score, facts in pool.map(_fine_tune, jobs):
                        self._record(name, score, facts, on_done)
            else:
                for job in jobs:
                    self._record(*_fine_tune(job), on_done)
        return {c.short(): self.scores[c.short()] for c in cands}

    def _record(self, name: str, score: float, facts: dict,
                on_done: Callable[[str], None] | None) -> None:
        self.scores[name], self.facts[name] = score, facts
        self.ran += 1
        self._save()
        if on_done is not None:
            on_done(name)


@dataclass
class Contributions:
    bias: list[float]                                  # score of biases of the last k layers
    weight: dict[tuple[int, float], float]             # gain of (layer, ratio) weights

    def predict(self, cand: Candidate) -> float:
        return self.bias[cand.bias] + sum(self.weight[u] for u in cand.weights)


def weight_units(graph: Graph, layers: Sequence[Any], ratios: Sequence[float] = RATIOS
                 ) -> list[tuple[int, float]]:
    """(layer, ratio) pairs worth a fine-tune: per layer, ratios that select a different
    number of channels (``ceil(r * C)``) than a smaller ratio does."""
    out = []
    for i, op in enumerate(layers):
        c = graph.tensors[op.inputs[1]].shape[weight_axis(op.type)]
        seen: set[int] = set()
        for r in ratios:
            n = math.ceil(r * c)
            if n not in seen:
                seen.add(n)
                out.append((i, float(r) if n < c else 1.0))
    return out


def analyse(tunes: FineTunes, layers: int, units: Sequence[tuple[int, float]],
            on_done: Callable[[str], None] | None = None) -> Contributions:
    bias_c = [Candidate(bias=k) for k in range(layers + 1)]
    weight_c = [Candidate(bias=layers - i, weights=((i, r),)) for i, r in units]
    s = tunes.run(bias_c + weight_c, on_done)
    bias = [s[c.short()] for c in bias_c]
    weight = {(i, r): s[c.short()] - bias[layers - i] for (i, r), c in zip(units, weight_c)}
    return Contributions(bias, weight)


# -- search -----------------------------------------------------------------------------------

def baselines(layers: int, costs: UnitCosts, budget: Budget,
              exact: Callable[[Candidate], Mapping[str, int]] | None = None
              ) -> list[tuple[str, Candidate]]:
    """The usual hand-made sets that fit (by ``exact``, the planner, else by the estimate):
    the deepest bias-only set, and the most last layers trained whole (biases and
    weights)."""
    out: list[tuple[str, Candidate]] = []
    bias = [Candidate(bias=k) for k in range(layers, 0, -1)]
    full = [Candidate(bias=k, weights=tuple((i, 1.0) for i in range(layers - k, layers)))
            for k in range(layers, 0, -1)]
    for label, family in (("bias-only", bias), ("last-k layers", full)):
        c = next((c for c in family
                  if fits(exact(c) if exact is not None else costs.estimate(c), budget)), None)
        if c is not None:
            out.append((label, c))
    return out


def evolve(contrib: Contributions, costs: UnitCosts, budget: Budget,
           units: Sequence[tuple[int, float]], seeds: Sequence[Candidate], *, seed: int = 0,
           population: int = 64, generations: int = 60) -> list[tuple[float, Candidate]]:
    """Evolutionary search over (bias depth, a ratio or none per layer); fitness: the
    predicted score of a set whose estimated footprint fits, else nothing. Returns every
    feasible set it met, best first (deterministic for ``seed``)."""
    L = costs.layers
    choices: dict[int, list[float]] = {}
    for i, r in units:
        choices.setdefault(i, [0.0]).append(r)
    rng = np.random.default_rng(seed)

    def cand(genome: tuple) -> Candidate:
        k, rs = genome[0], genome[1:]
        return Candidate(bias=int(k), weights=tuple((i, choices[i][g]) for i, g in
                                                    enumerate(rs) if i in choices and g))

    def genome_of(c: Candidate) -> tuple:
        rs = [0] * L
        for i, r in c.weights:
            rs[i] = choices[i].index(r)
        return (c.bias, *rs)

    seen: dict[tuple, float | None] = {}

    def fitness(g: tuple) -> float | None:
        if g not in seen:
            c = cand(g)
            seen[g] = contrib.predict(c) if not c.empty and fits(costs.estimate(c), budget) \
                else None
        return seen[g]

    pop = [genome_of(c) for c in seeds]
    pop += [(int(k),) + (0,) * L for k in range(L + 1)]
    while len(pop) < population:
        pop.append((int(rng.integers(0, L + 1)),) + tuple(
            int(rng.integers(0, len(choices[i]))) if i in choices and rng.random() < 0.3 else 0
            for i in range(L)))
    for _ in range(generations):
        ranked = sorted(set(pop), key=lambda g: (-(fitness(g) if fitness(g) is not None
                                                   else -math.inf), g))
        elite = [g for g in ranked if fitness(g) is not None][: population // 4] or ranked[:2]
        pop = list(elite)
        while len(pop) < population:
            a = elite[int(rng.integers(0, len(elite)))]
            b = elite[int(rng.integers(0, len(elite)))]
            child = [a[j] if rng.random() < 0.5 else b[j] for j in range(L + 1)]
            for j in range(L + 1):
                if rng.random() < 1.5 / (L + 1):
                    if j == 0:
                        child[0] = int(np.clip(child[0] + rng.integers(-2, 3), 0, L))
                    elif (j - 1) in choices:
                        child[j] = int(rng.integers(0, len(choices[j - 1])))
            pop.append(tuple(child))
    found = [(s, cand(g)) for g, s in seen.items() if s is not None]
    return sorted(found, key=lambda t: (-t[0], t[1]))


def repair(cand: Candidate, exact: Callable[[Candidate], Mapping[str, int]], budget: Budget,
           contrib: Contributions, costs: UnitCosts) -> Candidate | None:
    """``cand`` if its exact footprint fits; else, until one fits, the set with its least
    useful unit per estimated byte shrunk (a weight update to the next smaller ratio, or
    dropped; the deepest bias dropped); None when nothing is left."""
    while not cand.empty:
        if fits(exact(cand), budget):
            return cand
        options: list[Candidate] = []
        for j, (i, r) in enumerate(cand.weights):
            smaller = [q for (li, q) in contrib.weight if li == i and q < r]
            rest = list(cand.weights[:j] + cand.weights[j + 1:])
            options.append(Candidate(cand.bias, tuple(sorted(rest + [(i, max(smaller))])))
                           if smaller else Candidate(cand.bias, tuple(rest)))
        if cand.bias:
            options.append(Candidate(cand.bias - 1, cand.weights))
        scored = []
        for nxt in options:
            lost = contrib.predict(cand) - contrib.predict(nxt)
            saved = max(1, costs.estimate(cand)["sram"] - costs.estimate(nxt)["sram"])
            scored.append((lost / saved, nxt))
        cand = min(scored, key=lambda t: (t[0], t[1]))[1]
    return None


# -- the verb -------------------------------------------------------------------------------

@dataclass
class SearchResult:
    spec: Any                          # the winner's TrainSpec
    candidate: Candidate
    footprint: dict[str, int]
    json: dict[str, Any]


def default_base(backward: str, steps: int) -> Any:
    """The optimizer and modes a search uses unless ``--base`` gives others: tiny-training's
    SGD with momentum and a cosine decay over the run's ``steps``, master copies (fp32
    backward; the int8 mode keeps its constant lr)."""
    sched = Schedule(name="cosine", total_steps=max(1, steps)) if backward == "fp32" else \
        Schedule()
    return TrainSpec(optimizer=Optimizer(name="sgd", lr=0.01, momentum=0.9), schedule=sched,
                     backward=backward,
                     master_weights="fp32" if backward == "fp32" else "int32",
                     source="--train search")


def run_search(graph: Graph, train: Mapping[str, np.ndarray],
               evals: Mapping[str, np.ndarray] | None, budget: Budget, *, base: Any,
               epochs: int = 3, engine: str = "host", seed: int = 0, holdout: float = 0.25,
               backend: str = "auto", jobs: int = 2, cache: Path | None = None,
               measure: bool = True, verify: bool = True, link: bool = True,
               progress: Callable[[str, int, int], None] | None = None) -> SearchResult:
    """The whole search (module docstring); ``evals``/``verify``: fine-tune the winner and the
    baselines on all of TRAIN and evaluate them on EVAL (``fit --train auto`` skips it);
    ``link``: on a device board whose toolchain is installed, compile, build and link the
    winner and take its image's SRAM and flash (the next best set when it is over)."""
    t0 = time.perf_counter()
    layers = parametric_layers(graph)
    if not layers:
        raise PockError(f"{graph.name}: the model has no layer with parameters to search over")
    L = len(layers)
    board_name = budget.board.name if budget.board is not None else None
    x, y = np.asarray(train["x"]), train.get("y")
    fit_idx, val_idx = holdout_split(None if base.loss != "cross_entropy" else y, len(x),
                                     holdout, seed)
    full_steps = epochs * len(x)          # a run of the written spec: all of TRAIN
    part = lambda idx: {"x": x[idx], "y": None if y is None else np.asarray(y)[idx]}
    units = weight_units(graph, layers)

    planner = Planner(graph, budget.board, backend, measure)
    costs = unit_costs(planner, base, L, units)
    smallest = Candidate(bias=1)            # the last layer's bias: the least one can train
    if not fits(costs.estimate(smallest), budget):
        m = planner.footprint(candidate_spec(base, smallest))
        if not fits(m, budget):
            kib = lambda n: f"{n / 1024:.1f} KiB"
            parts = f"arena {kib(m['arena'])} + parameters {kib(m['params'])}"
            if m["stack"] or m["harness"]:
                parts += f" + stack {kib(m['stack'])} + harness {kib(m['harness'])}"
            raise PockError(f"{graph.name}: nothing trainable fits {budget.describe()}: the "
                            f"smallest set ({smallest.short()}) needs {kib(m['sram'])} SRAM "
                            f"({parts}), {kib(m['flash'])} flash, {m['instructions']:,} "
                            "instructions per step")

    tunes = FineTunes(graph, base, part(fit_idx), part(val_idx), epochs=epochs, engine=engine,
                      seed=seed, backend=backend, jobs=jobs, cache=cache,
                      what="contrib", full_steps=full_steps)
    analysis = (L + 1) + len(units)
    total = [analysis + VERIFY_FOLDS * (VERIFY_TOP + 2)]     # fine-tunes, cached ones too
    done = [0]

    def step(name: str) -> None:
        done[0] += 1
        if progress is not None:
            progress(name, done[0], max(total[0], done[0]))

    contrib = analyse(tunes, L, units, step)
    analysed = tunes.ran
    def exact(c: Candidate) -> dict[str, int]:
        return planner.footprint(candidate_spec(base, c))

    base_sets = baselines(L, costs, budget, exact)
    found = evolve(contrib, costs, budget, units, [c for _, c in base_sets], seed=seed)

    # verification: the best few (repaired where the estimate was short) and the baselines
    picked: list[Candidate] = []
    repaired: list[dict[str, str]] = []
    for _, c in found:
        if len(picked) >= VERIFY_TOP:
            break
        r = repair(c, exact, budget, contrib, costs)
        if r is None:
            continue
        if r != c:
            repaired.append({"from": c.short(), "to": r.short()})
        if r not in picked:
            picked.append(r)
    base_fit: list[tuple[str, Candidate]] = []
    for label, c in base_sets:
        r = repair(c, exact, budget, contrib, costs)
        if r is not None:
            base_fit.append((label, r))
    if not picked and not base_fit:
        raise PockError(f"{graph.name}: no trainable set fits {budget.describe()}")
    pool = list(dict.fromkeys(picked + [c for _, c in base_fit]))
    total[0] = done[0] + VERIFY_FOLDS * len(pool)
    # the finalists' validation score: the mean over VERIFY_FOLDS held-back splits and sample
    # orders (batch-1 SGD's result moves by tens of points with the order alone on a small
    # set: one run ranks the finalists by chance)
    folds = [tunes.run(pool, step)]
    for f in range(1, VERIFY_FOLDS):
        fi, vi = holdout_split(None if base.loss != "cross_entropy" else y, len(x), holdout,
                               seed + f)
        folds.append(FineTunes(graph, base, part(fi), part(vi), epochs=epochs, engine=engine,
                               seed=seed + f, backend=backend, jobs=jobs, cache=cache,
                               what=f"fold{f}", full_steps=full_steps).run(pool, step))
    val_scores = {k: float(np.mean([fold[k] for fold in folds])) for k in folds[0]}
    # best validation score; then the smaller footprint; then the first in the pool's order
    ranked = sorted(pool, key=lambda c: (-val_scores[c.short()], exact(c)["sram"],
                                         pool.index(c)))
    winner, linked, unlinked = ranked[0], None, []
    if link and budget.board is not None:
        # the firmware as it will be: compiled, built and linked with the board's toolchain;
        # a set whose image is over the budget after all gives way to the next best
        for c in ranked:
            lk = linked_footprint(graph, candidate_spec(base, c), budget, backend, measure)
            if lk is None:                     # no toolchain here: the planner's figures
                break
            if lk["sram"] <= budget.sram and (budget.flash is None
                                               or lk["flash"] <= budget.flash):
                winner, linked = c, lk
                break
            unlinked.append({"spec": c.short(), "sram_bytes": lk["sram"],
                             "flash_bytes": lk["flash"]})
        else:
            raise PockError(f"{graph.name}: no set links within {budget.describe()} "
                            f"(linked: " + ", ".join(f"{u['spec']} {u['sram_bytes']:,} B SRAM"
                                                     for u in unlinked) + ")")
    predicted = {c.short(): contrib.predict(c) for c in pool}
    additivity = [abs(predicted[c.short()] - folds[0][c.short()]) for c in pool
                  if c.weights]

    finals: dict[str, float] = {}
    if verify and evals is not None:
        full = FineTunes(graph, base, {"x": x, "y": y}, evals, epochs=epochs, engine=engine,
                         seed=seed, backend=backend, jobs=jobs, cache=cache,
                         what="final", full_steps=full_steps)
        finals = full.run([winner] + [c for _, c in base_fit])

    spec = candidate_spec(base, winner)
    fp = exact(winner)
    acc = lambda c: finals.get(c.short()) if base.loss == "cross_entropy" else None
    out: dict[str, Any] = {
        "spec": winner.short(),
        "sram_bytes": fp["sram"],
        "flash_bytes": fp["flash"],
        "instructions_per_step": fp["instructions"],
        "accuracy": acc(winner),
        "validation_score": val_scores[winner.short()],
        "predicted_score": predicted[winner.short()],
        "linked": None if linked is None else {"sram_bytes": linked["sram"],
                                               "flash_bytes": linked["flash"],
                                               "over_budget": unlinked},
        "baselines": [{"name": label, "spec": c.short(), "sram_bytes": exact(c)["sram"],
                       "accuracy": acc(c), "validation_score": val_scores[c.short()]}
                      for label, c in base_fit],
        "candidates": [{"spec": c.short(), "predicted_score": predicted[c.short()],
                        "validation_score": val_scores[c.short()],
                        "estimated_sram_bytes": costs.estimate(c)["sram"],
                        "sram_bytes": exact(c)["sram"], "flash_bytes": exact(c)["flash"],
                        "instructions_per_step": exact(c)["instructions"]} for c in pool],
        "repaired": repaired,
        "additivity": {"sets": len(additivity),
                       "mean_abs_error": float(np.mean(additivity)) if additivity else None,
                       "max_abs_error": float(np.max(additivity)) if additivity else None},
        "contributions": {"bias": contrib.bias,
                          "weight": [{"layer": i, "ratio": r, "gain": g}
                                     for (i, r), g in sorted(contrib.weight.items())]},
        "budget": {"sram_bytes": budget.sram, "flash_bytes": budget.flash,
                   "instructions_per_step": budget.latency, "board": board_name},
        "fine_tunes": {"analysis": analysis, "analysis_cached": analysis - analysed,
                       "run": tunes.ran, "epochs": epochs, "engine": engine,
                       "train_samples": len(fit_idx), "validation_samples": len(val_idx)},
        "seconds": time.perf_counter() - t0,
    }
    return SearchResult(spec, winner, fp, out)


def spec_yaml(spec: Any, header: Sequence[str] = ()) -> str:
    """A training spec as the YAML file ``--train`` reads, with ``header`` as comments."""
    def flow(d: Mapping[str, Any]) -> str:
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in d.items()) + "}"

    lines = [f"# {h}" if h else "#" for h in header]
    lines.append(f"loss: {spec.loss}")
    lines.append("trainable:")
    for r in spec.trainable:
        d: dict[str, Any] = {"layers": r.layers, "params": r.params}
        if r.channels < 1:
            d["channels"] = r.channels
        if r.kind:
            d["kind"] = r.kind
        lines.append(f"  - {flow(d)}")
    opt = {k: v for k, v in vars(spec.optimizer).items()
           if k == "name" or k == "lr" or v != getattr(Optimizer(), k)}
    lines.append(f"optimizer: {flow(opt)}")
    if spec.schedule != Schedule():
        sched = {k: v for k, v in vars(spec.schedule).items()
                 if k == "name" or v != getattr(Schedule(), k)}
        lines.append(f"schedule: {flow(sched)}")
    lines.append(f"backward: {spec.backward}")
    lines.append(f"master_weights: {spec.master_weights}")
    if spec.accumulate != 1:
        lines.append(f"accumulate: {spec.accumulate}")
    return "\n".join(lines) + "\n"


def _yaml_value(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)
