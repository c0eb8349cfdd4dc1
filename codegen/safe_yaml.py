"""YAML documents written by users (training specs, board files): plain data, bounded.

``load_yaml_file(path, what)`` reads a file as strict UTF-8 and parses it as one YAML
document of plain data, refusing what could make a small file expensive or ambiguous:

- aliases (``*a``, merge keys ``<<: *a``): an alias bomb of a few hundred bytes expands to
  gigabytes; specs and boards never need them; explicit tags (``!!int x``, ``!!binary``...)
  too, and a value the constructor cannot build (a date ``2001-13-45``) is an error;
- nesting deeper than ``MAX_DEPTH`` (``[[[[...``: the composer recurses once per level);
- duplicate mapping keys (YAML says keys are unique; PyYAML silently keeps the last);
- files over ``MAX_BYTES`` and integers of more than ``MAX_INT_DIGITS`` digits.

Every problem is a one-line ``SpecError`` naming the file and, where there is one, the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import SpecError, brief

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_INT_DIGITS = 1000


class _Refused(Exception):
    """A document this loader does not accept (the message names the line)."""


def _line(node_or_event: Any) -> str:
    mark = getattr(node_or_event, "start_mark", None)
    return f"line {mark.line + 1}: " if mark is not None else ""


class _Loader(yaml.SafeLoader):
    """SafeLoader without aliases, with a depth bound and unique keys."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"{_line(event)}YAML aliases are not supported (*{event.anchor})")
        event = self.peek_event()
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!":
            raise _Refused(f"{_line(event)}explicit YAML tags are not supported "
                           f"({brief(tag, 60, quote=False)})")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"{_line(self.peek_event())}nested deeper than {MAX_DEPTH} "
                               "levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError) as e:   # e.g. a date 2001-13-45
            raise _Refused(f"{_line(node)}cannot read {brief(node.value, 60)} "
                           f"({brief(e, 100, quote=False)})") from None

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:                # unhashable: the constructor reports it
                    continue
                if dup:
                    raise _Refused(f"{_line(key_node)}duplicate key {brief(key)}")
        return super().construct_mapping(node, deep=deep)


def _construct_int(loader: _Loader, node: Any) -> int:
    if len(node.value) > MAX_INT_DIGITS:             # int() refuses 4,300 digits anyway
        raise _Refused(f"{_line(node)}a number with {len(node.value)} digits")
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def parse_yaml(text: str, where: str) -> Any:
    """One YAML document of plain data (SpecError ``where: line N: problem`` otherwise)."""
    try:
        loader = _Loader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as e:
        raise SpecError(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        raise SpecError(f"{where}:{line} not valid YAML "
                        f"({brief(getattr(e, 'problem', None) or e, 200, quote=False)})") from None
    except RecursionError:                       # a backstop: MAX_DEPTH keeps it away
        raise SpecError(f"{where}: YAML nested too deeply") from None


def load_yaml_file(path: str | Path, what: str) -> Any:
    """Read ``path`` (strict UTF-8, at most MAX_BYTES) and parse it with ``parse_yaml``;
    ``what`` names the kind of file in errors ("training spec", "board file")."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise SpecError(f"{p}: cannot read {what} ({e.strerror or e})") from None
    if len(raw) > MAX_BYTES:
        raise SpecError(f"{p}: {what} is larger than {MAX_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise SpecError(f"{p}: line {line}: {what} is not UTF-8 text (byte "
                        f"0x{raw[e.start]:02x} at offset {e.start})") from None
    return parse_yaml(text, str(p))
