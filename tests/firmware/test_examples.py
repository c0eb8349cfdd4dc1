"""The firmware examples run as their READMEs say: digits_finetune's run.sh end to end (small
data), and an example whose model is missing stops with a clear message."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.targets.helpers import runnable

from .helpers import ROOT

EXAMPLES = ROOT / "firmware_examples"


def _run(example: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    work = tmp_path / example
    shutil.copytree(EXAMPLES / example, work)
    bindir = str(Path(sys.executable).parent)       # python3 and pockengine of this venv
    full = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), **env}
    return subprocess.run(["bash", str(work / "run.sh")], capture_output=True, text=True,
                          timeout=600, env=full, check=False)


def test_every_example_has_readme_and_commands():
    for name in ("digits_finetune", "kws_finetune", "vww_sparse_update", "hexagon_finetune",
                 "integrate"):
        d = EXAMPLES / name
        for f in ("README.md", "run.sh", "make_data.py", "spec.yaml"):
            assert (d / f).is_file(), f"{name}/{f}"
        assert "pockengine compile" in (d / "README.md").read_text()


@pytest.mark.emulator
def test_digits_finetune_runs(tmp_path):
    runnable("mps2-an386")
    if shutil.which("pockengine") is None and not (Path(sys.executable).parent
                                                  / "pockengine").exists():
        pytest.skip("the pockengine command is not installed")
    r = _run("digits_finetune", tmp_path, SAMPLES="60", EPOCHS="1")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "digits_finetune: mps2-an386 and the golden model agree" in r.stdout
    assert "instructions per training step" in r.stdout
    assert (tmp_path / "digits_finetune" / "out" / "mps2-an386" / "build"
            / "pe_firmware.elf").is_file()


def test_missing_model_is_explained(tmp_path):
    r = _run("kws_finetune", tmp_path, KWS_MODEL=str(tmp_path / "absent.tflite"))
    assert r.returncode == 2
    assert "not found" in r.stderr and "KWS_MODEL" in r.stderr
