"""Run the kernel cases against a library built with AddressSanitizer (+UBSan).

    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
        python -m tests.kernels.asan_check LIB N_CASES [MODEL ...]

The ASan runtime must be preloaded into the Python process (a dlopen()ed library cannot bring
it), hence a subprocess. Exits 1 on any mismatch; an ASan or UBSan report aborts the process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main(argv: list[str]) -> int:
    from codegen import golden
    from codegen.frontend import load_model

    from .c_runner import RefKernels
    from .cases import CASES, check_case, iter_cases

    lib = RefKernels(Path(argv[0]))
    n_cases = int(argv[1])
    failed = 0
    for op_type in CASES:
        bad = sum(check_case(lib, graph, feeds)[0] != 0
                  for graph, feeds in iter_cases(op_type, n_cases, seed=1234))
        print(f"{op_type}: {n_cases} cases, {bad} with mismatches")
        failed += bad
    for path in argv[2:]:
        graph = load_model(Path(path))
        t = graph.tensors[graph.inputs[0]]
        x = np.random.default_rng(0).integers(-128, 128, size=(3,) + t.shape[1:],
                                              dtype=np.int8)
        same = np.array_equal(lib.run_graph(graph, {graph.inputs[0]: x})[0],
                              golden.run(graph, x)[0])
        print(f"{Path(path).name}: {'bit-exact' if same else 'MISMATCH'}")
        failed += not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
