"""Benchmark of `pockengine fleet`: federated sparse fine-tuning against a centralized
fine-tune on the same samples for the same number of epochs.

    python -m tests.benchmark_fleet [--clients 8] [--rounds 5] [--epochs 1,3,5]
                                    [--lrs 0.002,0.01] [--splits iid,dirichlet:0.5]
                                    [--engine host] [--seed 0 | --seeds 0-9] [--samples 0]

Task: the digits transfer task (the bundled digits CNN meets inverted, shifted digits;
``codegen.models.shifted_digits``), trainable set ``bias:all+weight:last2``, SGD with momentum
0.9 and fp32 master copies. For every (local epochs E, client lr, split) the fleet runs
``--rounds`` rounds over ``--clients`` clients (``codegen.fleet.run_fleet``, the host engine:
the generated C built for this machine); the centralized fine-tune trains on all the samples
for rounds x E epochs with the same lr and seed. It does not depend on the split, so it runs
once per (E, lr) and is shared by the splits. Printed per configuration: accuracy on the test
split of the fleet and of the centralized fine-tune, the gap (centralized - fleet, points),
updates taken / sent over all rounds (less than all: a client dropped or was refused), bytes
up and down per round (all clients) and the fleet's seconds (its rounds, the one-time host
build included; not the centralized fine-tune).

``--seeds`` (a list or a range, e.g. ``0-9``) repeats every configuration for each seed (the
split, the sample orders and the centralized run's order all follow the seed) and adds, per
configuration, the mean and standard deviation over the seeds: one seed's gap is the
difference of two runs whose accuracies each move by several points from seed to seed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

SPEC = "bias:all+weight:last2,opt=sgd,lr={lr},momentum=0.9,master_weights=fp32"


def data(samples: int = 0) -> tuple[dict, dict]:
    from codegen import models

    x, y = models.shifted_digits("train")
    xe, ye = models.shifted_digits("test")
    if samples:
        x, y = x[:samples], y[:samples]
    return {"x": x, "y": y}, {"x": xe, "y": ye}


def run(epochs: Sequence[int], lrs: Sequence[float], splits: Sequence[str], *,
        clients: int | Sequence[int], rounds: int, engine: str = "host",
        seed: int | Sequence[int] = 0,
        samples: int = 0, runtime: str | None = None,
        log: Callable[[str], None] = lambda s: None) -> list[dict[str, Any]]:
    """One row per (clients, E, lr, split, seed): fleet and centralized accuracy, bytes,
    seconds."""
    from codegen import models
    from codegen.fleet import run_fleet

    model = models.path("digits_cnn.onnx")
    train, evals = data(samples)
    rows: list[dict[str, Any]] = []
    centralized: dict[tuple[int, float], float] = {}
    fleets = [clients] if isinstance(clients, int) else list(clients)
    seeds = [seed] if isinstance(seed, int) else list(seed)
    for n, e, lr, split, sd in ((n, e, lr, split, sd) for n in fleets for e in epochs
                                for lr in lrs for split in splits for sd in seeds):
        need = (e, lr, sd) not in centralized
        t0 = time.perf_counter()
        r = run_fleet(model, SPEC.format(lr=lr), train, evals, clients=n,
                      rounds=rounds, local_epochs=e, split=split, engine=engine,
                      seed=sd, centralized=need, runtime=runtime)
        wall = time.perf_counter() - t0
        s = r.summary
        if need:
            centralized[(e, lr, sd)] = s["accuracy_centralized"]
        rds = s["rounds"]
        row = {"clients": n, "runtime": s["runtime"], "local_epochs": e, "lr": lr,
               "split": split, "seed": sd,
               "accuracy_before": s["accuracy_before"],
               "accuracy": s["accuracy_after"],
               "accuracy_centralized": centralized[(e, lr, sd)],
               "bytes_up": float(np.mean([rd["bytes_up"] for rd in rds])),
               "bytes_down": float(np.mean([rd["bytes_down"] for rd in rds])),
               "updates": sum(c["status"] == "ok" for rd in rds for c in rd["clients"]),
               "sent": sum(len(rd["clients"]) for rd in rds),
               "seconds": sum(rd["seconds"] or 0.0 for rd in rds),
               "wall": wall, "trained_bytes": s["trained_bytes"],
               "samples": s["samples"]}
        row["gap"] = row["accuracy_centralized"] - row["accuracy"]
        rows.append(row)
        log(f"{n} clients E={e} lr={lr} {split} seed {sd}: fleet {row['accuracy']:.2%}, centralized "
            f"{row['accuracy_centralized']:.2%} ({wall:.0f} s)")
    return rows


def seed_means(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (clients, E, lr, split): the seeds, the mean fleet and centralized accuracy and the
    mean and standard deviation of the gap over them."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["clients"], r["local_epochs"], r["lr"], r["split"]), []).append(r)
    out = []
    for (n, e, lr, split), rs in groups.items():
        gaps = np.array([r["gap"] for r in rs])
        out.append({"clients": n, "local_epochs": e, "lr": lr, "split": split,
                    "seeds": len(rs), "accuracy": float(np.mean([r["accuracy"] for r in rs])),
                    "accuracy_centralized": float(np.mean([r["accuracy_centralized"]
                                                           for r in rs])),
                    "gap": float(gaps.mean()), "gap_std": float(gaps.std(ddof=1))
                    if len(rs) > 1 else 0.0,
                    "gap_min": float(gaps.min()), "gap_max": float(gaps.max())})
    return out


def format_means(means: Sequence[dict[str, Any]]) -> str:
    head = ("clients", "E", "lr", "split", "seeds", "fleet", "centralized", "gap", "gap sd",
            "gap range")
    body = [(str(m["clients"]), str(m["local_epochs"]), f"{m['lr']:g}", m["split"],
             str(m["seeds"]), f"{m['accuracy']:.2%}", f"{m['accuracy_centralized']:.2%}",
             f"{100 * m['gap']:+.2f}", f"{100 * m['gap_std']:.2f}",
             f"{100 * m['gap_min']:+.2f} .. {100 * m['gap_max']:+.2f}") for m in means]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(v.rjust(w) if i != 3 else v.ljust(w)
                               for i, (v, w) in enumerate(zip(line, widths)))
                     for line in [head, *body])


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = ("clients", "runtime", "E", "lr", "split", "seed", "fleet", "centralized", "gap",
            "updates", "B up/round", "B down/round", "seconds")
    body = [(str(r["clients"]), r["runtime"], str(r["local_epochs"]), f"{r['lr']:g}",
             r["split"], str(r["seed"]), f"{r['accuracy']:.2%}",
             f"{r['accuracy_centralized']:.2%}", f"{100 * r['gap']:+.2f}",
             f"{r['updates']}/{r['sent']}",
             f"{r['bytes_up']:,.0f}", f"{r['bytes_down']:,.0f}", f"{r['seconds']:.1f}")
            for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(v.rjust(w) if i not in (1, 4) else v.ljust(w)
                               for i, (v, w) in enumerate(zip(line, widths)))
                     for line in [head, *body])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="8", help="fleet sizes, a list (e.g. 8,32,64)")
    ap.add_argument("--runtime", choices=("local", "simulation"),
                    help="default: local up to 16 clients, Flower's simulation engine above")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", default="1,3,5", help="local epochs per round (E), a list")
    ap.add_argument("--lrs", default="0.002,0.01", help="client learning rates, a list")
    ap.add_argument("--splits", default="iid,dirichlet:0.5", help="splits, a list")
    ap.add_argument("--engine", default="host", choices=("host", "golden"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", help="seeds, a list or a range (0-9); overrides --seed and adds "
                    "the means over them")
    ap.add_argument("--samples", type=int, default=0, help="first N training digits (0: all)")
    args = ap.parse_args(argv)

    epochs = [int(v) for v in args.epochs.split(",")]
    lrs = [float(v) for v in args.lrs.split(",")]
    splits = args.splits.split(",")
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    rows = run(epochs, lrs, splits, clients=[int(v) for v in args.clients.split(",")],
               rounds=args.rounds, engine=args.engine, seed=seeds, samples=args.samples,
               runtime=args.runtime,
               log=lambda s: print(s, file=sys.stderr, flush=True))
    r0 = rows[0]
    print(f"\ndigits transfer task: {sum(r0['samples'])} samples, {args.rounds} rounds, {args.engine} engine, seeds {', '.join(map(str, seeds))}; "
          f"{r0['trained_bytes']:,} B trained; accuracy before {r0['accuracy_before']:.2%}; "
          f"centralized: all samples, rounds x E epochs")
    print(format_table(rows))
    if len(seeds) > 1:
        print(f"\nmeans over {len(seeds)} seeds (gap: centralized - fleet, points)")
        print(format_means(seed_means(rows)))
    return 0


def parse_seeds(text: str) -> list[int]:
    """``0-9`` or ``0,3,5`` (or a mix: ``0-2,7``) -> the seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


if __name__ == "__main__":
    sys.exit(main())
