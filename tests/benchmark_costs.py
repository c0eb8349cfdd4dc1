"""Kernel cost benchmark: instructions per call of every forward kernel, per backend, on a board.

For each model and backend of the board's chain, one profiling build runs one inference on the
emulator (``pipeline.measure_kernel_costs``: the same measurement compile uses to choose
kernels); the per-call counts are printed per op with MACs and instructions per MAC, and a
least-squares fit per (backend, kernel family) gives the static cost model's factors
(``codegen/backends/cost.py`` STATIC_FACTORS: per MAC, per output element, per call).

    python -m tests.benchmark_costs [--board mps2-an386] [--models kws,vww,ic,ad]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

MODELS = {"kws": "kws_ref_model.tflite", "vww": "vww_96_int8.tflite",
          "ic": "pretrainedResnet_quant.tflite", "ad": "ad01_int8.tflite"}
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "models"


def measure(board_name: str, models: list[str], log=print) -> dict:
    import os
    import tempfile

    from codegen import pipeline
    from codegen.backends import chain_for, lower_graph
    from codegen.backends.cost import call_key, core_class, kernel_family
    from codegen.board import load_board
    from codegen.summary import op_macs

    board = load_board(board_name)
    chain = chain_for(board, "auto")
    samples: dict[tuple[str, str, str], list] = defaultdict(list)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["POCKENGINE_CACHE_DIR"] = cache          # measure afresh
        for key in models:
            graph = pipeline.load(SHARED / MODELS[key]).graph
            counts = pipeline.measure_kernel_costs(graph, board, chain)
            log(f"\n{key} on {board.name} ({', '.join(chain.names)})")
            log(f"{'op':<40} {'backend:kernel':<44} {'MACs':>10} {'instr':>11} {'/MAC':>6}")
            for backend in chain.backends:
                sub = (backend,) if backend.name == "ref" else (backend, chain.backends[-1])
                low = lower_graph(graph, sub, target=chain.target)
                for op in graph.ops:
                    call = low.calls[op.name]
                    n = counts.get(call_key(call, chain.target))
                    if n is None or (backend.name != "ref" and call.backend == "ref"):
                        continue
                    macs = op_macs(graph, op)
                    per = f"{n / macs:6.2f}" if macs else "     -"
                    log(f"{op.name[:40]:<40} {call.backend + ':' + call.kernel:<44} "
                        f"{macs:>10,} {n:>11,} {per}")
                    elems = graph.tensors[op.outputs[0]].size
                    samples[(call.backend, kernel_family(call), core_class(chain.target))
                            ].append((macs, elems, n))
    factors = {}
    log("\nstatic cost model (least squares: instructions = a*MACs + b*elements + c)")
    for k, rows in sorted(samples.items()):
        a = np.array([[m, e, 1.0] for m, e, _ in rows], dtype=np.float64)
        y = np.array([n for *_, n in rows], dtype=np.float64)
        if not a[:, 0].any():
            a = a[:, 1:]
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        coef = np.maximum(coef, 0.0)
        if len(coef) == 2:
            coef = np.concatenate([[0.0], coef])
        factors[k] = tuple(round(float(v), 2) for v in coef)
        log(f"    {k!r}: {factors[k]},   # {len(rows)} calls")
    return factors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--models", default="kws,vww,ic,ad")
    args = ap.parse_args(argv)
    measure(args.board, args.models.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
