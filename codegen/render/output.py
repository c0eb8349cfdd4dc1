"""A generated project on disk: writing it (without clobbering user files) and opening it."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..board import load_board, load_board_file
from ..errors import PockError, brief
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

    def board_record(self) -> Any:
        """The project's board (a ``codegen.board.Board``): the copy of its board file that
        the project keeps when it was compiled with ``--board PATH.yaml`` (manifest
        ``board_file``), else the catalogue's board of that name."""
        rel = self.manifest.get("board_file")
        if rel is None:
            try:
                return load_board(self.board)
            except PockError as e:
                if not str(e).startswith("unknown board"):
                    raise
                raise PockError(f"{self.dir}: compiled for board {self.board!r}, which is not "
                                f"in the catalogue, and the project has no copy of its board "
                                f"file: compile again with --board PATH/{self.board}.yaml "
                                f"({e})") from None
        if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts \
                or not (self.dir / rel).is_file():
            raise PockError(f"{self.dir}: the board file {rel!r} that {MANIFEST} names is "
                            "missing: compile again with --board PATH.yaml")
        return load_board_file(self.dir / rel)

    @property
    def kind(self) -> str:
        """``training`` or ``inference``: what the project was compiled for."""
        return "training" if self.has_training else "inference"


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


def check_out_dir(directory: str | Path, force: bool, *, training: bool | None = None
                  ) -> Path:
    """Refuse a non-empty directory that is not earlier pockengine output (unless force).
    With ``training`` (whether the new project trains): refuse, unless force, earlier output
    of the other kind too (an inference project that a training project would replace, or
    the other way round: more likely a mistyped -o than a wish to lose it); recompiling the
    same kind in place goes on as before."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise PockError(f"{d}: exists and is not a directory")
    old = read_manifest(d) if d.is_dir() else None
    if d.is_dir() and old is None and any(d.iterdir()) and not force:
        raise PockError(f"{d}: directory is not empty and was not written by pockengine "
                        "(use --force to write into it)")
    if old is not None and training is not None and not force:
        was = Project(d, old).kind
        new = "training" if training else "inference"
        if was != new:
            board = brief(old.get("board"), 60, quote=False)
            raise PockError(f"{d}: holds {_a(was)} project (board {board}); compiling "
                            f"{_a(new)} project there replaces it (use --force to overwrite, "
                            "or another -o directory)")
    return d


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


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
        root = d.resolve()
        for rel in old.get("files", []):
            if rel in rendered.files or not isinstance(rel, str):
                continue
            stale = d / rel
            # only files inside the project: never an absolute path, a '..' or a symlinked
            # directory out of it (the manifest is a file anyone could have edited)
            if (Path(rel).is_absolute() or ".." in Path(rel).parts
                    or not stale.resolve().is_relative_to(root)):
                continue
            if stale.is_file():
                stale.unlink()
        if changed and old.get("prefix") != rendered.manifest["prefix"]:
            for build in d.glob("build*"):
                if build.is_dir():
                    shutil.rmtree(build)
    return Project(d, rendered.manifest)


def refuse_overwrite(path: Path, force: bool) -> None:
    """An output file: refuse to overwrite it without --force, and say before any work is
    done when it cannot be written (a directory, a missing folder)."""
    if path.is_dir():
        raise PockError(f"{path}: is a directory (give a file name)")
    if path.exists() and not force:
        raise PockError(f"{path}: already exists (use --force to overwrite)")
    parent = path.parent
    if not parent.is_dir():
        raise PockError(f"{path}: cannot write: directory {parent} "
                        f"{'is not a directory' if parent.exists() else 'does not exist'}")
