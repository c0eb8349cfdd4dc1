"""The one Jinja2 environment of the code generator (templates ship as package data)."""

from __future__ import annotations

from functools import cache

import jinja2

from ..resources import data_dir
from .names import cmake_word, hash_comment, make_word


@cache
def environment() -> jinja2.Environment:
    """Templates from ``data_dir('templates')``: StrictUndefined (a missing record field is an
    error, never an empty string), trim_blocks + lstrip_blocks, no autoescape (C, not HTML),
    "\\n" line endings, trailing newline kept; filters ``mk``, ``cmk`` and ``hash_comment``
    quote values for Makefiles, CMake files and ``#`` comments."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        newline_sequence="\n",
    )
    # quoting for build files: every value written into a Makefile or CMakeLists.txt goes
    # through one of these (board files and environment variables are data, not make syntax)
    env.filters.update(mk=make_word, cmk=cmake_word, hash_comment=hash_comment)
    return env


def render(template: str, **records: object) -> str:
    return environment().get_template(template).render(**records)
