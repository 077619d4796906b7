"""Atomic writes: a file (or a folder) is either the old one or the whole new one, never half.

Every writer in the course goes through here: checkpoints, training logs, the prepared corpus, the
gradebook and the core's own bf16 probe cache (which is why it lives in the core, the layer that
imports nothing of ours; ``course_utils.engine.io`` re-exports it). A file is written to a
temporary name in the same folder (so the same file system), flushed and fsynced, then renamed over
the target in one step (``os.replace``). A crash, a full disk or Ctrl-C mid-write leaves the
previous file intact and no temporary behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(f)`` on a temporary file next to ``path``, fsync it, rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would otherwise become the file's mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically."""
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_synced(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` and fsync it, for files inside a folder that :func:`atomic_folder` swaps
    in: a completed rename must never point at data still in a cache."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_folder(out_dir: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` to fill a fresh folder next to ``out_dir``, then swap it into place.

    If ``write`` fails (or is interrupted) the temporary folder is removed and ``out_dir`` is
    untouched. Linux cannot swap two folders in one call, so a previous ``out_dir`` is renamed
    aside, the new one renamed in (the old one put back if that fails), then the old one deleted.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()  # not tempfile.mkdtemp: its 0700 mode would become the folder's
    try:
        write(tmp)
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(out_dir, old)
            try:
                os.rename(tmp, out_dir)
            except BaseException:
                os.rename(old, out_dir)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
