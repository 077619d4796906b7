"""What training reads of a prepared corpus: ``meta.json`` (checked against the format this
course_utils writes), each split as a read-only numpy memmap, and the tokenizer.

A memmap leaves the ids on disk and reads only the windows a batch touches, so a corpus larger
than memory trains the same way; batches are drawn by :mod:`course_utils.core.batching`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ...core.tokenizer import CharTokenizer
from .format import (
    PREPARE_COMMAND,
    SPLITS,
    CorpusNotPreparedError,
    check_meta,
    prepare_again,
)


def load_meta(data_dir: str | Path) -> dict:
    """``meta.json`` of a prepared corpus, checked (:func:`~.format.check_meta`: its format
    version first); :class:`CorpusNotPreparedError` with the command to run when there is none
    or it cannot be read."""
    data_dir = Path(data_dir)
    path = data_dir / "meta.json"
    if not path.is_file():
        raise CorpusNotPreparedError(
            f"no prepared corpus in {data_dir} (no meta.json); prepare it first: "
            + PREPARE_COMMAND.format(out=data_dir)
        )
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorpusNotPreparedError(
            f"{path} is not readable JSON ({err}); {prepare_again(data_dir)}"
        ) from None
    return check_meta(meta, data_dir)


def load_split(data_dir: str | Path, split: str) -> np.memmap:
    """The token ids of ``split`` ("train" or "val") as a read-only numpy memmap: the file stays
    on disk and only the windows a batch touches are read, so a corpus larger than memory
    works the same way. Checks the file size against ``meta.json``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    data_dir = Path(data_dir)
    meta = load_meta(data_dir)
    path = data_dir / f"{split}.bin"
    dtype = np.dtype(meta["dtype"])
    expected = meta[f"{split}_tokens"] * dtype.itemsize
    if not path.is_file() or path.stat().st_size != expected:
        raise CorpusNotPreparedError(
            f"{path} is missing or not {expected:,} bytes as meta.json says; "
            + prepare_again(data_dir)
        )
    return np.memmap(path, dtype=dtype, mode="r")


def load_tokenizer(data_dir: str | Path) -> CharTokenizer:
    """The :class:`CharTokenizer` of a prepared corpus (same ids as the ``.bin`` files)."""
    itos = load_meta(data_dir)["itos"]
    tokenizer = CharTokenizer(itos)
    assert tokenizer.itos == itos, "meta.json's itos is not sorted by code point"
    return tokenizer


FINGERPRINT_BYTES = 1 << 16  # how much of each split's start and end the fingerprint reads
NOT_CONTENT = ("source",)  # meta.json fields that say where the books were, not what they are


def corpus_record(data_dir: str | Path) -> dict:
    """What a checkpoint records of the corpus it trained on, cheap to compute on any size:
    the books, the tokens of each split, the vocabulary size, and a ``fingerprint`` (SHA-256
    of ``meta.json`` less where the books came from, each split's size and its first and last
    64 KiB of ids). A folder moved or copied keeps its record; another corpus, even over the
    same alphabet, does not. ``_dir`` (where it was) is a note for messages, not compared."""
    data_dir = Path(data_dir)
    meta = load_meta(data_dir)
    digest = hashlib.sha256()
    content = {k: v for k, v in meta.items() if k not in NOT_CONTENT}
    digest.update(json.dumps(content, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    for split in SPLITS:
        data = load_split(data_dir, split)  # checks the size against meta.json
        raw = data.view(np.uint8)
        digest.update(f"{split}:{raw.size}:".encode())
        digest.update(raw[:FINGERPRINT_BYTES].tobytes() + raw[-FINGERPRINT_BYTES:].tobytes())
    return {
        "fingerprint": digest.hexdigest()[:16], "books": len(meta["books"]),
        "train_tokens": meta["train_tokens"], "val_tokens": meta["val_tokens"],
        "vocab_size": meta["vocab_size"], "_dir": str(data_dir.resolve()),
    }  # fmt: skip


def describe_record(record: dict) -> str:
    """A corpus record in words, for a message."""
    books = record["books"]
    return (
        f"{books} book{'s' * (books != 1)}, {record['train_tokens']:,} train and "
        f"{record['val_tokens']:,} val tokens, fingerprint {record['fingerprint']}"
    )
