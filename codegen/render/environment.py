"""The one Jinja2 environment of the code generator (templates ship as package data)."""

from __future__ import annotations

from functools import cache

import jinja2

from ..resources import data_dir


@cache
def environment() -> jinja2.Environment:
    """Templates from ``data_dir('templates')``: StrictUndefined (a missing record field is an
    error, never an empty string), trim_blocks + lstrip_blocks, no autoescape (C, not HTML),
    "\\n" line endings, trailing newline kept."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        newline_sequence="\n",
    )


def render(template: str, **records: object) -> str:
    return environment().get_template(template).render(**records)
