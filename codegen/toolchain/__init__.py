"""Toolchains: turn a generated project into a binary (host: make with gcc or clang)."""

from .host import BuildError, BuildResult, build_project, find_cc, object_sizes

__all__ = ["BuildError", "BuildResult", "build_project", "find_cc", "object_sizes"]
