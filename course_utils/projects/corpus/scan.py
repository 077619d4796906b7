"""The first pass of ``prepare``: each book read, normalized, cut and audited on its own, and
the scans folded into ``meta.json`` (vocabulary, every book's spans, the split rule, the audit).

Only the scan of a book (counts and paragraph hashes) outlives its turn; its text waits in a
cache file for the second pass (:mod:`course_utils.projects.corpus.writer`), as ids into the
book's own alphabet, so one book at a time sits in memory, in whichever worker process scanned
it. Each process appends its books to one cache file: creating a file per book cost more than
writing its bytes.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .audit import (
    DUPLICATE_MIN_CHARS,
    RARE_MAX_COUNT,
    DuplicateTally,
    ParagraphScan,
    leaked,
    rare_characters,
    scan_paragraphs,
    split_scan,
)
from .format import BOOK_GAP, FORMAT_VERSION, ids_dtype
from .sources import Book, read_book_file
from .text import split_point


@dataclass
class BookScan:
    """What the first pass learns about one book (its text waits in ``cache``)."""

    name: str
    paragraph_break: str
    chars: int
    cut: int  # text[:cut] is train, text[cut:] val
    pads: tuple[int, int]  # newlines after the train and the val part (BOOK_GAP)
    cache: Path  # the file holding the book's ids into ``alphabet``, from byte ``offset`` on
    offset: int
    alphabet: str  # the book's distinct characters in code-point order
    counts: dict[str, int]
    paragraphs: ParagraphScan
    train_hashes: np.ndarray
    val_hashes: np.ndarray

    def read_ids(self) -> np.ndarray:
        """The book's ids into :attr:`alphabet`, read back from its cache file."""
        dtype = ids_dtype(len(self.alphabet))
        return np.fromfile(self.cache, dtype, count=self.chars, offset=self.offset)

    def read_text(self) -> str:
        """The book's normalized text, decoded from its cache file."""
        points = np.array([ord(c) for c in self.alphabet], dtype="<u4")
        return points[self.read_ids()].tobytes().decode("utf-32-le")


def _pad(text: str, start: int, end: int) -> int:
    """Newlines to append so that ``text[start:end]`` ends in a blank line (:data:`BOOK_GAP`),
    counted in place (no copy of the part)."""
    newlines = 0
    while newlines < len(BOOK_GAP) and end - newlines > start and text[end - newlines - 1] == "\n":
        newlines += 1
    return len(BOOK_GAP) - newlines


def _append(cache_dir: Path, data) -> tuple[Path, int]:
    """Append ``data`` to this process's cache file in ``cache_dir``; (its path, the offset)."""
    path = cache_dir / f"{os.getpid()}.ids"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        offset = os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, data)
    finally:
        os.close(fd)
    return path, offset


def scan_book(source: Book | Path, cache_dir: Path, val_fraction: float) -> BookScan:
    """Pass 1 for one book (a :class:`Book` or a ``.txt`` path): read and normalize it, choose
    the cut, count its characters, hash its paragraphs; its ids go to a cache file in
    ``cache_dir``."""
    book = source if isinstance(source, Book) else read_book_file(source)
    text, brk = book.text, book.paragraph_break
    cut = split_point(text, val_fraction)
    points = np.frombuffer(text.encode("utf-32-le"), "<u4")
    counts = np.bincount(points)  # one pass, no sort
    codes = np.flatnonzero(counts)
    local = np.zeros(len(counts), ids_dtype(len(codes)))
    local[codes] = np.arange(len(codes))
    cache, offset = _append(cache_dir, local[points])  # the array's own buffer: no copy
    scan = scan_paragraphs(text, brk, DUPLICATE_MIN_CHARS)
    train_hashes, val_hashes = split_scan(scan, text, brk, cut, DUPLICATE_MIN_CHARS)
    alphabet = "".join(map(chr, codes.tolist()))
    pads = (_pad(text, 0, cut), _pad(text, cut, len(text)))
    return BookScan(
        book.name, brk, len(text), cut, pads, cache, offset,
        alphabet, dict(zip(alphabet, counts[codes].tolist())), scan, train_hashes, val_hashes,
    )  # fmt: skip


def describe(source: str, kind: str, scans, val_fraction: float) -> tuple[dict, list]:
    """``meta.json`` (vocabulary, per-book sizes and spans, the split rule, the audit) from the
    first pass's scans, consumed as they arrive; returns ``(meta, scans)``."""
    counts: Counter = Counter()
    tally = DuplicateTally()
    kept = []
    for scan in scans:
        counts.update(scan.counts)
        tally.add(scan.name, scan.paragraphs)
        scan.paragraphs = None  # done with it: keep the first pass's memory small
        kept.append(scan)
    scans = kept
    itos = sorted(counts)
    books, pos = [], {"train": 0, "val": 0}
    for scan in scans:
        entry = {"name": scan.name, "chars": scan.chars, "train_chars": scan.cut,
                 "val_chars": scan.chars - scan.cut}  # fmt: skip
        for split, size, pad in (("train", scan.cut, scan.pads[0]),
                                 ("val", scan.chars - scan.cut, scan.pads[1])):  # fmt: skip
            entry[f"{split}_span"] = [pos[split], pos[split] + size]
            pos[split] += size + pad
        books.append(entry)

    def paragraph_text(book: int, index: int) -> str:
        return scans[book].read_text().split(scans[book].paragraph_break)[index]

    return {
        "format": FORMAT_VERSION, "source": source, "source_kind": kind,
        "dtype": ids_dtype(len(itos)).name, "vocab_size": len(itos), "itos": itos,
        "train_tokens": pos["train"], "val_tokens": pos["val"],
        "split": {
            "val_fraction": val_fraction,
            "rule": "per book: train = its first ~90% of characters, val = the rest, cut at the "
            "paragraph (else line) start nearest the mark within 2% of the book",
            "book_gap": "each part is padded with newlines to end in a blank line",
        },
        "books": books,
        "audit": {
            "characters": sum(s.chars for s in scans),
            "duplicate_min_chars": DUPLICATE_MIN_CHARS,
            "duplicates": tally.result(paragraph_text),
            "val_in_train": leaked([s.val_hashes for s in scans], [s.train_hashes for s in scans]),
            "rare_max_count": RARE_MAX_COUNT,
            "rare_characters": rare_characters(counts),
        },
    }, scans  # fmt: skip
