"""C identifiers for generated code: sanitised, prefixed, checked against C keywords and clashes.

Every global symbol of a generated project starts with the project prefix (``pe`` by default:
``pe_init``, ``pe_w_conv1_weight``, ``PE_ARENA_BYTES``). IR names are arbitrary strings
(``1:conv/weights;int``), so a :class:`Namer` turns each into a fragment of ``[A-Za-z0-9_]``,
unique case-insensitively (macros use the upper-case spelling) and never a C keyword.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import PockError

# C99 keywords, plus C11/C23 and C++ ones a C99 header might meet in a C++ or newer-C user.
C_KEYWORDS = frozenset((
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
    "_Alignas", "_Alignof", "_Atomic", "_Generic", "_Noreturn", "_Static_assert", "_Thread_local",
    "alignas", "alignof", "bool", "constexpr", "false", "nullptr", "static_assert",
    "thread_local", "true", "typeof", "typeof_unqual", "class", "delete", "new", "namespace",
    "private", "protected", "public", "template", "this", "throw", "try", "catch", "operator",
    "virtual", "friend", "mutable", "explicit", "typename", "using",
))

_VALID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}\Z")
MAX_FRAGMENT = 40


def is_reserved(ident: str) -> bool:
    """A C keyword or an identifier reserved to the implementation (``__x``, ``_X``)."""
    return (ident in C_KEYWORDS or ident.startswith("__")
            or (len(ident) > 1 and ident[0] == "_" and ident[1].isupper()))


def check_prefix(prefix: str) -> str:
    """The project prefix: a short C identifier that is not a keyword (PockError otherwise)."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix) or prefix.endswith("_"):
        raise PockError(f"prefix {prefix!r}: must be a C identifier of 1 to 16 letters, digits "
                        "and underscores, starting with a letter and not ending with '_'")
    if is_reserved(prefix) or prefix.upper() in C_KEYWORDS:
        raise PockError(f"prefix {prefix!r} is a C keyword")
    return prefix


def sanitize(name: str) -> str:
    """A non-empty identifier fragment for an arbitrary IR name (not yet unique). TFLite's
    fused names (``a/Relu;a/BiasAdd``) keep their first part."""
    head = name.split(";", 1)[0]
    if re.search(r"[A-Za-z0-9]", head):
        name = head
    frag = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
    frag = frag[:MAX_FRAGMENT].rstrip("_")
    return frag or "x"


class Namer:
    """Hands out unique fragments for IR names within one namespace (case-insensitive)."""

    def __init__(self, reserved: Iterable[str] = ()):
        self._by_name: dict[str, str] = {}
        self._taken: set[str] = {r.lower() for r in reserved}

    def __call__(self, name: str) -> str:
        hit = self._by_name.get(name)
        if hit is not None:
            return hit
        base = sanitize(name)
        frag, i = base, 1
        while frag.lower() in self._taken or is_reserved(frag):
            i += 1
            frag = f"{base}_{i}"
        self._taken.add(frag.lower())
        self._by_name[name] = frag
        return frag

    def names(self) -> dict[str, str]:
        return dict(self._by_name)


def check_identifiers(idents: Iterable[str], foreign: Iterable[str] = (), *,
                      serial: Iterable[str] = ()) -> None:
    """Every generated global identifier valid, not reserved, unique and not one of the
    runtime's own identifiers (``foreign``). Raises ValueError (an internal error) if not.

    ``serial``: the identifiers of the serial runtime (the serial harness of a device
    project, ``serial_harness``); the prefix is the user's, so a clash with them is the
    user's to fix: a PockError naming them."""
    seen: set[str] = set()
    foreign_set = set(foreign)
    for ident in idents:
        if not _VALID.match(ident) or is_reserved(ident):
            raise ValueError(f"generated identifier {ident!r} is not a valid C identifier")
        if ident in seen:
            raise ValueError(f"generated identifier {ident!r} defined twice")
        if ident in foreign_set:
            raise ValueError(f"generated identifier {ident!r} clashes with the kernel runtime")
        seen.add(ident)
    clash = sorted(seen & set(serial))
    if clash:
        raise PockError(f"generated identifiers clash with the serial runtime: "
                        f"{', '.join(clash[:5])} (compile with another --prefix)")


def comment_text(text: str) -> str:
    """Text safe inside a C block comment: printable ASCII, no comment delimiters, no trigraphs
    (``??/`` would splice lines under -std=c99)."""
    s = "".join(c if " " <= c <= "~" else "?" for c in str(text))
    s = s.replace("*/", "*_/").replace("/*", "/_*")
    while "??" in s:
        s = s.replace("??", "?_?")
    return s


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./=+,:@%-]+\Z")


def _no_newline(text: str, where: str) -> str:
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"{where}: {text!r} cannot be written on one line")
    return text


def make_word(text: str) -> str:
    """One word for a Makefile variable that a recipe hands to the shell: shell-quoted,
    ``$`` doubled (make would expand it), ``#`` escaped (a comment); plain words unchanged."""
    s = _no_newline(str(text), "Makefile")
    if not _PLAIN_WORD.match(s):
        s = "'" + s.replace("'", "'\\''") + "'"
    return s.replace("$", "$$").replace("#", "\\#")


def cmake_word(text: str) -> str:
    """One CMake argument: quoted (``\\``, ``"`` and ``$`` escaped) unless plain."""
    s = _no_newline(str(text), "CMakeLists.txt")
    if _PLAIN_WORD.match(s) and "@" not in s:
        return s
    return '"' + "".join("\\" + c if c in '\\"$' else c for c in s) + '"'


def hash_comment(text: str) -> str:
    """Text for a ``#`` comment line (Makefile, Renode scripts): printable, and no trailing
    backslash (make would continue the comment onto the next line)."""
    return comment_text(text).rstrip("\\")


def make_assignment(name: str, value: str) -> str:
    """``NAME=value`` for a make command line (one argv word, no shell): make expands ``$``
    in it, so it is doubled."""
    return f"{name}={_no_newline(str(value), 'make command line').replace('$', '$$')}"
