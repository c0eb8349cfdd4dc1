"""A generated project on disk: writing it (without clobbering user files) and opening it."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PockError
from .project import MANIFEST, RenderedProject


@dataclass(frozen=True)
class Project:
    """A directory written by ``pockengine compile`` (its ``pockengine.json`` manifest)."""

    dir: Path
    manifest: dict[str, Any]

    @property
    def prefix(self) -> str:
        return str(self.manifest["prefix"])

    @property
    def board(self) -> str:
        return str(self.manifest["board"])

    @property
    def has_training(self) -> bool:
        return self.manifest.get("training") is not None

    def binary(self, build_dir: str = "build") -> Path:
        return self.dir / build_dir / Path(self.manifest["binary"]).name


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of a pockengine output directory, or None."""
    path = directory / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("generator") != "pockengine":
        return None
    return data


def open_project(directory: str | Path) -> Project:
    d = Path(directory)
    if not d.is_dir():
        raise PockError(f"{d}: no such directory")
    manifest = read_manifest(d)
    if manifest is None:
        raise PockError(f"{d}: not a pockengine project (no {MANIFEST}; run pockengine "
                        "compile first)")
    return Project(d, manifest)


def check_out_dir(directory: str | Path, force: bool) -> Path:
    """Refuse a non-empty directory that is not earlier pockengine output (unless force)."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise PockError(f"{d}: exists and is not a directory")
    if d.is_dir() and any(d.iterdir()) and read_manifest(d) is None and not force:
        raise PockError(f"{d}: directory is not empty and was not written by pockengine "
                        "(use --force to write into it)")
    return d


def write_project(rendered: RenderedProject, directory: str | Path, *, force: bool = False
                  ) -> Project:
    """Write the files; a file whose bytes are unchanged is left alone (its timestamp too, so
    an incremental build stays incremental). Files of an earlier pockengine output that the
    new project no longer has are removed, and so is its build directory when the sources
    changed."""
    d = check_out_dir(directory, force)
    old = read_manifest(d) if d.is_dir() else None
    d.mkdir(parents=True, exist_ok=True)
    changed = False
    for rel, data in rendered.files.items():
        path = d / rel
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        changed = True
    if old is not None:
        for rel in old.get("files", []):
            if rel not in rendered.files and isinstance(rel, str) and ".." not in rel:
                stale = d / rel
                if stale.is_file():
                    stale.unlink()
        if changed and old.get("prefix") != rendered.manifest["prefix"]:
            for build in d.glob("build*"):
                if build.is_dir():
                    shutil.rmtree(build)
    return Project(d, rendered.manifest)
