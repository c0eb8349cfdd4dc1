"""Acceptance: transfer fine-tuning with `pockengine fit --engine golden` tracks PyTorch.

Runs the transfer benchmark (tests/transfer.py) on the bundled pretrained CNN and checks the
mean over 3 seeds: fp32 and int8 backward within 3 points of PyTorch float fine-tuning, and both
at least 60 points above no fine-tuning.

Why these margins hold on any machine: pockengine's side is exact (the bundled model is a file;
quantization, integer arithmetic and float32 in fixed summation orders give the same bits on
every CPU — the golden equals the generated C on x86 hosts, Cortex-M and Hexagon). Only
PyTorch's side moves between machines. `python -m tests.transfer --spread` measures how far,
rerunning it with 1 and 2 threads, oneDNN off and in float64: at most 0.22 points on one seed,
0.07 on the 3-seed mean (AMD EPYC, 2026-12-01). The gaps themselves are 2.5 (fp32) and 2.2
(int8) points: the quantized model fine-tunes with int8 activations at source-domain scales,
which PyTorch's float model does not have, and one seed of the three generalizes worse
(81.7 % vs 88.0 % at the same training loss). 3 points = the measured gap + the measured
spread + a margin of about the spread again. The exact counterpart — gradients equal to
PyTorch float64 along this very fine-tune, step by step — is
tests/test_backward_vs_torch.py::test_gradients_track_torch_along_the_transfer_fine_tune.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_transfer_tracks_pytorch():
    from tests.transfer import TransferConfig, run

    lines: list[str] = []
    rows = run(3, TransferConfig(), log=lines.append)
    print("\n".join(lines))
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("no_finetune", "pytorch",
                                                               "fp32", "int8")}
    for mode in ("fp32", "int8"):
        assert abs(mean[mode] - mean["pytorch"]) <= 0.03, lines
        assert mean[mode] >= mean["no_finetune"] + 0.60, lines
    # every engine started from the same file: no fine-tuning is the same on every seed
    assert len({r["no_finetune"] for r in rows}) == 1
