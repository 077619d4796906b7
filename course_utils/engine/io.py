"""Atomic writes for the engine and the layers above it: the one writer lives in the core
(:mod:`course_utils.core.atomic`, which the core's own probe cache uses too); this module
re-exports it under the name the engine, the grader and the tools import."""

from ..core.atomic import (
    atomic_folder,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    write_synced,
)

__all__ = [
    "atomic_folder",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "write_synced",
]
