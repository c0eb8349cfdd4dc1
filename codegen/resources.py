"""Locate the data directories (templates/, runtime_c/, boards/) in a source tree or a wheel."""

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Path of a shipped data directory: codegen/_data/NAME in a wheel, ../NAME in the source tree."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pockengine data directory {name!r} not found (broken install?)")


def source_root() -> Path | None:
    """The repository root when running from a source checkout (it has pyproject.toml and
    third_party/), else None (an installed wheel)."""
    root = _PKG.parent
    if (root / "pyproject.toml").is_file() and (root / "third_party").is_dir():
        return root
    return None
