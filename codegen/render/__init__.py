"""Code generation: a lowered program (memory plans + kernel call records) -> a C project.

One Jinja2 environment (``environment.environment()``) renders thin templates from
``data_dir('templates')``; every name, number and C expression is prepared in Python
(``records``), identifiers are sanitised, prefixed and clash-checked (``names``), literals are
exact (``literals``). ``render_project`` returns the files in memory; ``codegen.pipeline``
writes them.
"""

from .names import Namer, check_identifiers, check_prefix, comment_text, sanitize
from .project import (
    C_FLAGS,
    GENERATOR,
    MANIFEST,
    SANITIZE_FLAGS,
    RenderedProject,
    render_project,
    runtime_files,
)
from .records import Lowered, LoweredGraph, SourceInfo

__all__ = ["C_FLAGS", "GENERATOR", "MANIFEST", "SANITIZE_FLAGS", "Lowered", "LoweredGraph",
           "Namer", "RenderedProject", "SourceInfo", "check_identifiers", "check_prefix",
           "comment_text", "render_project", "runtime_files", "sanitize"]
