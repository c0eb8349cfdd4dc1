"""Acceptance: transfer fine-tuning with `pockengine fit --engine golden` tracks PyTorch.

Runs the transfer benchmark (tests/transfer.py) and checks, on the mean over 3 seeds:
fp32 backward within 1 point of PyTorch float fine-tuning, int8 backward within 2 points, and
both at least 15 points above no fine-tuning.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")


@pytest.mark.slow
def test_transfer_tracks_pytorch(tmp_path):
    from tests.transfer import TransferConfig, run

    lines: list[str] = []
    rows = run(3, TransferConfig(), tmp_path, log=lines.append)
    print("\n".join(lines))
    mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    assert abs(mean["fp32"] - mean["pytorch"]) <= 0.01, lines
    assert abs(mean["int8"] - mean["pytorch"]) <= 0.02, lines
    for mode in ("fp32", "int8"):
        assert mean[mode] >= mean["no_finetune"] + 0.15, lines
