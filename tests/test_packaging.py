"""The wheel carries templates/, runtime_c/, boards/ and the bundled models, and works installed.

Builds the wheel, installs it into a fresh virtual environment (dependencies come from the
system site-packages, so no network is needed), then runs the installed console script and loads
the bundled model from outside the source tree.
"""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(check=False, args=[sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(ROOT)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("pockengine-*.whl")
    return whl


def test_wheel_contains_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for d in ("templates", "runtime_c", "boards"):
        assert any(n.startswith(f"codegen/_data/{d}/") for n in names), f"{d}/ missing from wheel"
    assert "codegen/models/digits_cnn.onnx" in names
    assert "codegen/models/digits.npz" in names
    assert not any(n.startswith("tests/") for n in names)


def test_installed_wheel_runs(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    # pip from the outer interpreter installs into the venv's site-packages
    r = subprocess.run(check=False, args=[sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                        "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run(check=False, args=[str(env_dir / "bin" / "pockengine"), "--help"], capture_output=True,
                       text=True, cwd=work, timeout=120)
    assert r.returncode == 0 and "inspect" in r.stdout, r.stderr
    code = (
        "import codegen, codegen.models as m\n"
        "from codegen.frontend import load_model\n"
        "from codegen.resources import data_dir\n"
        "assert '/venv/' in codegen.__file__, codegen.__file__\n"
        "g = load_model(m.path('digits_cnn.onnx'))\n"
        "print(len(g.ops), data_dir('templates'), data_dir('runtime_c'), data_dir('boards'))\n"
    )
    r = subprocess.run(check=False, args=[str(py), "-c", code], capture_output=True, text=True, cwd=work,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    n_ops, *dirs = r.stdout.split()
    assert int(n_ops) > 5
    assert all("/venv/" in d and "_data" in d for d in dirs), dirs
