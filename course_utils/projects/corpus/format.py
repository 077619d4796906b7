"""The prepared corpus on disk: ``train.bin`` and ``val.bin`` (token ids) beside ``meta.json``,
its format version, the errors a corpus raises, and the check of a ``meta.json`` read back.

The version is written by :func:`course_utils.projects.corpus.prepare` and checked on every read,
so that a folder prepared by another course_utils is refused with the command that fixes it
rather than read with the wrong layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEFAULT_OUT_DIR = Path("data/bookgpt")  # relative to the working directory; data/ is git-ignored
VAL_FRACTION = 0.1  # the write-up's split: the last 10% of every book is validation
PREPARE_COMMAND = "python -m course_utils bookgpt prepare --corpus default --out {out}"
FORMAT_VERSION = 1
SPLITS = ("train", "val")
BOOK_GAP = "\n\n"  # every part ends with a blank line in the streams: one book never runs on
# What a reader needs of meta.json; prepare writes more (the books, the split rule, the audit).
META_KEYS = ("format", "itos", "dtype", "vocab_size", "train_tokens", "val_tokens", "books")


class CorpusError(ValueError):
    """A corpus that cannot be prepared; the message names the file or folder and the fix."""


class CorpusNotPreparedError(FileNotFoundError):
    """No prepared corpus where one was expected; the message gives the command to run."""


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id: uint8 up to 256 characters (one
    byte per character on disk), else uint16 (up to 65,536)."""
    if vocab_size <= 256:
        return np.dtype(np.uint8)
    if vocab_size <= 65536:
        return np.dtype(np.uint16)
    raise CorpusError(f"a vocabulary of {vocab_size} characters does not fit uint16")


def prepare_again(data_dir: str | Path) -> str:
    """The fix for any unreadable corpus folder: the command that prepares it anew."""
    return "prepare it again: " + PREPARE_COMMAND.format(out=data_dir)


def check_meta(meta: object, data_dir: str | Path) -> dict:
    """``meta`` (a parsed ``meta.json`` of ``data_dir``) if this course_utils can read it;
    :class:`CorpusNotPreparedError` naming the folder, what is wrong and the command that fixes
    it for a folder of another format version (older, or written before versions existed) or a
    ``meta.json`` without the fields a reader needs."""
    if not isinstance(meta, dict):
        raise CorpusNotPreparedError(
            f"{data_dir}/meta.json is not a JSON object; {prepare_again(data_dir)}"
        )
    found = meta.get("format")
    if found != FORMAT_VERSION:
        newer = isinstance(found, int) and found > FORMAT_VERSION
        hint = "upgrade course_utils, or " if newer else ""
        raise CorpusNotPreparedError(
            f"{data_dir} was prepared in corpus format {found!r}; this course_utils reads format "
            f"{FORMAT_VERSION}: {hint}{prepare_again(data_dir)}"
        )
    missing = [key for key in META_KEYS if key not in meta]
    if missing:
        raise CorpusNotPreparedError(
            f"{data_dir}/meta.json lacks {', '.join(missing)} (an unfinished or edited corpus); "
            f"{prepare_again(data_dir)}"
        )
    return meta
