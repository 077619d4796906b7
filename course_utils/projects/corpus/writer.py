"""The second pass of ``prepare`` and ``prepare`` itself: ``train.bin`` and ``val.bin`` sized
from the first pass (:mod:`course_utils.projects.corpus.scan`), every book's ids written at its
own offsets by whichever worker encodes it, and the folder swapped in whole, atomically.

Both passes share one pool of worker processes (:class:`_Workers`); a failure anywhere leaves
the previous corpus folder as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...engine.io import atomic_folder, write_synced
from .format import DEFAULT_OUT_DIR, VAL_FRACTION, CorpusError
from .scan import BookScan, describe, scan_book
from .sources import Book, Corpus, book_sources


def _check_out_dir(out_dir: Path) -> None:
    """Refuse to replace a folder that is not a prepared corpus: prepare swaps the whole
    folder, and must never delete someone's other files."""
    if out_dir.exists() and not out_dir.is_dir():
        raise CorpusError(f"--out {out_dir} is a file; pass a folder path")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / "meta.json").exists():
        raise CorpusError(
            f"--out {out_dir} is a non-empty folder without a meta.json (not a prepared corpus);"
            f" prepare replaces the whole folder, so pass a new or empty folder"
        )


def write_atomically(out_dir: str | Path, write: Callable[[Path], None]) -> Path:
    """Fill a fresh folder with ``write(tmp)`` and swap it in as ``out_dir`` only when that
    succeeds (:func:`course_utils.engine.io.atomic_folder`): training never reads a
    half-written corpus. Refuses an ``out_dir`` that is not a prepared corpus."""
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    return atomic_folder(out_dir, write)


def _write_json(path: Path, obj: dict) -> None:
    write_synced(path, (json.dumps(obj, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))


class _Workers:
    """``map`` in this process, or over ``jobs`` worker processes shared by both passes, the
    books handed out ``chunksize`` at a time: one task per book would spend more time on
    messages than on a small book."""

    def __init__(self, jobs: int, chunksize: int = 16) -> None:
        self.pool, self.chunksize = None, chunksize
        if jobs > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # fork: the workers need no fresh interpreter (numpy and this module only)
            context = multiprocessing.get_context("fork")
            self.pool = ProcessPoolExecutor(jobs, mp_context=context)

    def map(self, function, *iterables):
        if self.pool is None:
            return map(function, *iterables)
        return self.pool.map(function, *iterables, chunksize=self.chunksize)

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def default_jobs(items: list) -> int:
    """One process for a small corpus; for 64 MB of files or more, one per core (up to 4)."""
    size = sum(p.stat().st_size for p in items if isinstance(p, Path))
    return 1 if size < 64 * 2**20 else max(1, min(4, os.cpu_count() or 1))


def encode_book(scan: BookScan, itos: list[str], dtype: str, folder: Path, starts) -> None:
    """Pass 2 for one book: map its cached ids (into its own alphabet) to the corpus's, and
    write its train and val parts, each followed by its padding newlines, into ``train.bin``
    and ``val.bin`` at ``starts`` (token offsets, the book's spans in ``meta.json``), so the
    workers write in parallel and no ids travel between processes."""
    index = {ch: i for i, ch in enumerate(itos)}
    table = np.array([index[ch] for ch in scan.alphabet], dtype=dtype)
    local = scan.read_ids()
    if local.dtype == table.dtype == np.uint8:  # one byte each way: bytes.translate maps them
        table = np.pad(table, (0, 256 - len(table)))
        ids = np.frombuffer(local.tobytes().translate(table.tobytes()), np.uint8)
    else:
        ids = table[local]
    newline = index.get("\n", 0)
    parts = (ids[: scan.cut], ids[scan.cut :])
    itemsize = np.dtype(dtype).itemsize
    for split, part, pad, start in zip(("train", "val"), parts, scan.pads, starts):
        fd = os.open(folder / f"{split}.bin", os.O_WRONLY)
        try:
            os.pwrite(fd, part, start * itemsize)  # the array's own buffer: no copy
            os.pwrite(fd, np.full(pad, newline, dtype=dtype), (start + len(part)) * itemsize)
        finally:
            os.close(fd)


def write_splits(folder: Path, scans: list[BookScan], meta: dict, workers: _Workers) -> None:
    """Pass 2: ``train.bin`` and ``val.bin`` sized from the first pass, every book's parts
    written at its offsets (:func:`encode_book`), both fsynced, then ``meta.json``."""
    itemsize = np.dtype(meta["dtype"]).itemsize
    for split in ("train", "val"):
        with open(folder / f"{split}.bin", "wb") as f:
            f.truncate(meta[f"{split}_tokens"] * itemsize)
    n = len(scans)
    starts = [(book["train_span"][0], book["val_span"][0]) for book in meta["books"]]
    folders, itos, dtypes = [folder] * n, [meta["itos"]] * n, [meta["dtype"]] * n
    for _ in workers.map(encode_book, scans, itos, dtypes, folders, starts):
        pass  # raises here if a worker failed
    for split in ("train", "val"):
        with open(folder / f"{split}.bin", "rb+") as f:
            os.fsync(f.fileno())
    _write_json(folder / "meta.json", meta)


def prepare(
    corpus: str | Path | Corpus,
    out_dir: str | Path = DEFAULT_OUT_DIR,
    val_fraction: float = VAL_FRACTION,
    jobs: int | None = None,
) -> dict:
    """Prepare a corpus (``"default"``, a folder, or a :class:`Corpus`) into ``out_dir``:
    ``train.bin`` and ``val.bin`` (token ids, ``meta["dtype"]``) and ``meta.json`` (vocabulary
    ``itos``, per-book sizes and split spans, source, dtype, audit), written atomically.

    Two passes, one book in memory at a time: the first reads, normalizes, splits and audits
    each book (in ``jobs`` processes; default: :func:`default_jobs`) and caches its text; the
    second encodes the cached books with the vocabulary the first found. Returns the meta
    dict; :func:`~course_utils.projects.corpus.audit.format_audit` prints its audit."""
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)  # fail before the work, not after it
    source, kind, items = book_sources(corpus)
    if not items:
        raise CorpusError(f"the corpus ({source}) holds no books")
    names = [b.name if isinstance(b, Book) else b.stem for b in items]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise CorpusError(f"book names must be unique, repeated: {dupes}")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    jobs = default_jobs(items) if jobs is None else jobs
    with (
        tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.cache-", dir=out_dir.parent) as tmp,
        _Workers(jobs) as workers,
    ):
        n = len(items)
        scans = workers.map(scan_book, items, [Path(tmp)] * n, [val_fraction] * n)
        meta, scans = describe(source, kind, scans, val_fraction)
        write_atomically(out_dir, lambda folder: write_splits(folder, scans, meta, workers))
    return meta
