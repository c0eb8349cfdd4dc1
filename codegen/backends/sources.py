"""Which C files a project needs: the closure of the kernels it calls.

``CSourceIndex(dir)`` reads every ``.c`` file under a folder once and records, per file, the
functions it defines with external linkage and the identifiers its code uses (comments and
strings left out). ``closure(symbols)`` returns the files defining those functions, plus the
files defining what those files call, and so on — so a generated project compiles exactly the
sources its chosen kernels need, whichever backend's folder (or third-party checkout) they come
from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"", re.DOTALL)
# a function definition at the start of a line: type words, name, '(' ... ')' then '{'
_DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{",
                         re.MULTILINE)
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


class CSourceIndex:
    """Definitions and uses of the ``.c`` files under ``root`` (recursively)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.defined_in: dict[str, Path] = {}
        self.inline_in: dict[str, Path] = {}
        self.uses: dict[Path, frozenset[str]] = {}
        for path in sorted(self.root.rglob("*.[ch]")):
            code = _COMMENTS.sub(" ", path.read_text(encoding="utf-8", errors="replace"))
            names = set()
            where = self.defined_in if path.suffix == ".c" else self.inline_in
            for m in _DEFINITION.finditer(code):
                names.add(m.group(1))
                where.setdefault(m.group(1), path)
            self.uses[path] = frozenset(_IDENT.findall(code)) - names

    def closure(self, symbols: Iterable[str]) -> list[Path]:
        """The files that define ``symbols`` and, transitively, what they call (sorted)."""
        symbols = list(symbols)
        todo = [self.defined_in[s] for s in symbols if s in self.defined_in]
        for s in symbols:
            if s in self.inline_in:
                uses = self.uses[self.inline_in[s]]
                todo.extend(self.defined_in[u] for u in uses if u in self.defined_in)
        seen: set[Path] = set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            todo.extend(self.defined_in[u] for u in self.uses[path] if u in self.defined_in)
        return sorted(seen)

    def missing(self, symbols: Iterable[str]) -> list[str]:
        return [s for s in symbols if s not in self.defined_in and s not in self.inline_in]


@lru_cache(maxsize=8)
def source_index(root: Path) -> CSourceIndex:
    """The (cached) index of a folder of C sources."""
    return CSourceIndex(root)
