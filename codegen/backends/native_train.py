"""The native backend's training kernels (fp32 backward): records of ref's training ops
under the ref kernel's name plus ``_native`` (runtime_c/kernels/native)."""

from __future__ import annotations

from .base import Builder

TRAIN_BUILDERS: dict[str, Builder] = {}
