"""Run the training-kernel cases and whole training steps against a library built with
AddressSanitizer (+UBSan).

    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
        python -m tests.kernels.asan_train_check LIB N_CASES N_STEPS

The ASan runtime must be preloaded into the Python process, hence a subprocess. Exits 1 on any
mismatch with the golden model; an ASan or UBSan report aborts the process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SPECS = ("all,opt=sgd,lr=0.01,momentum=0.9", "all,opt=adam,lr=0.001,master_weights=fp32",
         "all,opt=sgd,lr=0.01,momentum=0.9,backward=int8,master_weights=int32")


def main(argv: list[str]) -> int:
    from .c_runner import RefKernels
    from .train_cases import MODES, TRAIN_CASES
    from .train_runner import check_train_case, digits_setup, run_training

    lib = RefKernels(Path(argv[0]))
    n_cases, n_steps = int(argv[1]), int(argv[2])
    failed = 0
    for op_type, build in TRAIN_CASES.items():
        for mode in MODES:
            rng = np.random.default_rng(4321)
            bad = cases = 0
            for _ in range(n_cases):
                case = build(rng, mode)
                if case is None:
                    break
                cases += 1
                bad += check_train_case(lib, *case)[0] != 0
            if cases:
                print(f"{op_type} {mode}: {cases} cases, {bad} with mismatches")
            failed += bad
    q, xs, ys = digits_setup()
    for spec in SPECS:
        report = run_training(lib, q, spec, xs, ys, n_steps)
        print(f"{spec}: {report['steps']} steps, {report['mismatches']} mismatches")
        failed += report["mismatches"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
