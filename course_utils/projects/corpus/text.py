"""Text normalization and the 90/10 cut: what a book's characters become before they are
counted and encoded.

A Project Gutenberg file carries the same licence in every book (:func:`strip_gutenberg`), files
from Windows or old Macs end their lines differently (:func:`normalize_newlines`), and an
accented letter can be spelled two ways (:func:`normalize_text`); left as they are, each would
put noise into the vocabulary or the duplicate audit. :func:`split_point` chooses where each
book's validation part begins.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

from .format import VAL_FRACTION, CorpusError

_GUTENBERG_START = re.compile(
    r"^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$", re.I | re.M
)
_GUTENBERG_END = re.compile(
    r"^[ \t]*\*{3}[ \t]*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$", re.I | re.M
)
_OLD_SMALL_PRINT_END = re.compile(r"^.*\*END\*THE SMALL PRINT!.*$", re.I | re.M)
_END_OF_LINE = re.compile(r"^[ \t]*End of (?:the )?Project Gutenberg", re.I | re.M)


# The last UTF-8 byte of every character but the newline that str.isspace (and so str.rstrip)
# counts as whitespace; none lies above U+3000 (tests/test_corpus.py checks the whole range).
_SPACE_TAILS = np.zeros(256, dtype=bool)
_SPACE_TAILS[[chr(c).encode("utf-8")[-1] for c in range(0x3001) if chr(c).isspace()]] = True
_SPACE_TAILS[10] = False


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR become LF, and a leading byte-order mark goes: files written on Windows
    or old Macs must give the same characters (and the same vocabulary) as Unix files."""
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _line_ends(text: str) -> tuple[bool, bool]:
    """Whether a line of ``text`` may end in whitespace (its last byte is one a whitespace
    character ends with), and whether three newlines follow each other: one vectorized pass
    over its bytes rather than splitting it into lines (most books need neither fix)."""
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    newlines = np.flatnonzero(data == 10)
    ends = np.append(newlines - 1, len(data) - 1)
    return bool(_SPACE_TAILS[data[ends[ends >= 0]]].any()), bool(
        (newlines[2:] - newlines[:-2] == 2).any()
    )


def strip_gutenberg(text: str) -> str:
    """The book between Project Gutenberg's ``*** START OF THE/THIS PROJECT GUTENBERG EBOOK``
    and ``*** END OF ...`` lines (both spellings, any case). The licence and header are the same
    boilerplate in every file: left in, the model would learn it and the duplicate audit would
    drown in it. Without a START marker an old ``*END*THE SMALL PRINT!`` line ends the header;
    a closing "End of the Project Gutenberg EBook of ..." paragraph goes too. A text with none
    of these comes back unchanged. Expects ``\\n`` line endings (:func:`normalize_newlines`)."""
    marked = "*" in text  # every marker line holds one; most books have none
    start = marked and (_marker(_GUTENBERG_START, text, 0) or _small_print_end(text))
    begin = start.end() if start else 0
    end = marked and _marker(_GUTENBERG_END, text, begin)
    body = text[begin : end.start() if end else len(text)]
    blank = body.rstrip("\n").rfind("\n\n")  # only the last paragraph can be the closing one
    closing = list(_END_OF_LINE.finditer(body, blank + 2 if blank != -1 else 0))
    if closing:
        body = body[: closing[-1].start()]
    return body


def _small_print_end(text: str) -> re.Match | None:
    """The old ``*END*THE SMALL PRINT!`` line, looked for only on lines holding ``*`` (no copy
    of the book is made to find it)."""
    return _marker(_OLD_SMALL_PRINT_END, text, 0, needle="*")


def _marker(pattern: re.Pattern, text: str, start: int, needle: str = "***") -> re.Match | None:
    """The first line at or after ``start`` that ``pattern`` (a ``^...$`` line) matches. Only
    lines holding ``needle`` are tried, so a book is scanned by ``str.find``, not the regex."""
    pos = text.find(needle, start)
    while pos != -1:
        line = text.rfind("\n", 0, pos) + 1
        match = pattern.match(text, max(line, start))
        if match:
            return match
        end = text.find("\n", pos)  # the next line: this one did not match
        pos = text.find(needle, end) if end != -1 else -1
    return None


def normalize_text(text: str) -> str:
    """Unicode NFC (an accented letter is one code point however the file spelled it, so
    "è" is one token, not "e" + a combining accent), LF line endings, no trailing spaces on a
    line, at most one blank line in a row, no blank lines at either end, and exactly one final
    newline. Empty text stays empty."""
    text = unicodedata.normalize("NFC", normalize_newlines(text))
    trailing, blank_runs = _line_ends(text)
    if trailing:
        text = "\n".join(line.rstrip() for line in text.split("\n"))
        blank_runs = "\n\n\n" in text
    if blank_runs:
        text = re.sub(r"\n{3,}", "\n\n", text)
    text = text.strip("\n")
    return text + "\n" if text else ""


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


def build_vocab(*texts: str) -> list[str]:
    """Every distinct character of the texts, sorted by code point (the same order as
    :class:`course_utils.core.tokenizer.CharTokenizer`). Built from train *and* val: a character
    that occurs only in val (a rare accent or symbol) would otherwise make the val file
    unencodable. It only adds an embedding row the model never trains; nothing about val's
    text enters training. :func:`~course_utils.projects.corpus.prepare` counts the same
    characters book by book; lab 01 names this function as the reference its vocabulary
    exercise must not call."""
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    return sorted(chars)
