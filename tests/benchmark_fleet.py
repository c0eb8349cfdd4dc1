"""Benchmark of `pockengine fleet`: federated sparse fine-tuning against a centralized
fine-tune on the same samples for the same number of epochs.

    python -m tests.benchmark_fleet [--clients 8] [--rounds 5] [--epochs 1,3,5]
                                    [--lrs 0.002,0.01] [--splits iid,dirichlet:0.5]
                                    [--engine host] [--seed 0] [--samples 0]

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
        clients: int | Sequence[int], rounds: int, engine: str = "host", seed: int = 0,
        samples: int = 0, runtime: str | None = None,
        log: Callable[[str], None] = lambda s: None) -> list[dict[str, Any]]:
    """One row per (clients, E, lr, split): fleet and centralized accuracy, bytes, seconds."""
    from codegen import models
    from codegen.fleet import run_fleet

    model = models.path("digits_cnn.onnx")
    train, evals = data(samples)
    rows: list[dict[str, Any]] = []
    centralized: dict[tuple[int, float], float] = {}
    fleets = [clients] if isinstance(clients, int) else list(clients)
    for n, e, lr, split in ((n, e, lr, split) for n in fleets for e in epochs for lr in lrs
                            for split in splits):
        need = (e, lr) not in centralized
        t0 = time.perf_counter()
        r = run_fleet(model, SPEC.format(lr=lr), train, evals, clients=n,
                      rounds=rounds, local_epochs=e, split=split, engine=engine,
                      seed=seed, centralized=need, runtime=runtime)
        wall = time.perf_counter() - t0
        s = r.summary
        if need:
            centralized[(e, lr)] = s["accuracy_centralized"]
        rds = s["rounds"]
        row = {"clients": n, "runtime": s["runtime"], "local_epochs": e, "lr": lr,
               "split": split,
               "accuracy_before": s["accuracy_before"],
               "accuracy": s["accuracy_after"],
               "accuracy_centralized": centralized[(e, lr)],
               "bytes_up": float(np.mean([rd["bytes_up"] for rd in rds])),
               "bytes_down": float(np.mean([rd["bytes_down"] for rd in rds])),
               "updates": sum(c["status"] == "ok" for rd in rds for c in rd["clients"]),
               "sent": sum(len(rd["clients"]) for rd in rds),
               "seconds": sum(rd["seconds"] or 0.0 for rd in rds),
               "wall": wall, "trained_bytes": s["trained_bytes"],
               "samples": s["samples"]}
        row["gap"] = row["accuracy_centralized"] - row["accuracy"]
        rows.append(row)
        log(f"{n} clients E={e} lr={lr} {split}: fleet {row['accuracy']:.2%}, centralized "
            f"{row['accuracy_centralized']:.2%} ({wall:.0f} s)")
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = ("clients", "runtime", "E", "lr", "split", "fleet", "centralized", "gap", "updates",
            "B up/round", "B down/round", "seconds")
    body = [(str(r["clients"]), r["runtime"], str(r["local_epochs"]), f"{r['lr']:g}",
             r["split"], f"{r['accuracy']:.2%}",
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
    ap.add_argument("--samples", type=int, default=0, help="first N training digits (0: all)")
    args = ap.parse_args(argv)

    epochs = [int(v) for v in args.epochs.split(",")]
    lrs = [float(v) for v in args.lrs.split(",")]
    splits = args.splits.split(",")
    rows = run(epochs, lrs, splits, clients=[int(v) for v in args.clients.split(",")],
               rounds=args.rounds, engine=args.engine, seed=args.seed, samples=args.samples,
               runtime=args.runtime,
               log=lambda s: print(s, file=sys.stderr, flush=True))
    r0 = rows[0]
    print(f"\ndigits transfer task: {sum(r0['samples'])} samples, {args.rounds} rounds, {args.engine} engine, seed {args.seed}; "
          f"{r0['trained_bytes']:,} B trained; accuracy before {r0['accuracy_before']:.2%}; "
          f"centralized: all samples, rounds x E epochs")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
