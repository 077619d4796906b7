"""In-memory versions of what ``prepare`` does book by book, for the corpus tests to compare the
prepared folder with: a folder read whole, the streams joined, the duplicate audit of a list of
books, a paragraph's comparison key computed the slow, plain way."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from course_utils.projects.corpus import BOOK_GAP, Corpus, folder_files, read_book_file
from course_utils.projects.corpus.audit import DUPLICATE_MIN_CHARS, DuplicateTally, scan_paragraphs

_NOT_WORDS = re.compile(r"\W+")


def load_folder(folder: str | Path) -> Corpus:
    """Every book of ``folder_files(folder)`` read into memory (``read_book_file``), the same
    checks and errors as ``prepare`` gives, which reads a folder one book at a time instead."""
    books = tuple(read_book_file(p) for p in folder_files(folder))
    return Corpus(source=f"folder {Path(folder).resolve()}", books=books, kind="folder")


def join_parts(parts: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Concatenate parts (each book's train or val text) into one stream, each followed by as
    many newlines as it needs to end in a blank line (``BOOK_GAP``), as ``prepare`` writes them.
    Returns ``(stream, spans)`` with ``stream[a:b] == parts[i]`` for ``(a, b) = spans[i]``."""
    pieces, spans, pos = [], [], 0
    for part in parts:
        trailing = len(part) - len(part.rstrip("\n"))
        pad = "\n" * max(0, len(BOOK_GAP) - trailing)
        spans.append((pos, pos + len(part)))
        pieces += [part, pad]
        pos += len(part) + len(pad)
    return "".join(pieces), spans


def find_duplicates(books, min_chars: int = DUPLICATE_MIN_CHARS, examples: int = 5) -> dict:
    """The duplicate audit of in-memory books (objects with ``name``, ``text`` and
    ``paragraph_break``), as ``prepare`` computes it."""
    tally = DuplicateTally()
    for book in books:
        tally.add(book.name, scan_paragraphs(book.text, book.paragraph_break, min_chars))

    def paragraph_text(book: int, index: int) -> str:
        return books[book].text.split(books[book].paragraph_break)[index]

    return tally.result(paragraph_text, examples)


def normalize_paragraph(paragraph: str) -> str:
    """The comparison key of a paragraph, one regex over it: NFKC, case-folded, words only,
    single spaces; the audit's vectorized scan must key every paragraph the same way."""
    folded = unicodedata.normalize("NFKC", paragraph).casefold()
    return _NOT_WORDS.sub(" ", folded).strip()
