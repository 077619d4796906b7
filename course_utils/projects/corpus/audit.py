"""The corpus audit: paragraphs repeated across books, validation text that is also in train,
and rare characters, counted book by book so that a gigabyte of books never sits in memory.

The FLOPs/SumGPT/BookGPT write-up's first corpus was full of machine translations and duplicated
fragments, and the model learned to copy them; a paragraph in one book's train part and
another's val part leaks.
:func:`scan_paragraphs` turns one book into compact hashes (numpy arrays); a
:class:`DuplicateTally` adds books one at a time and remembers, per distinct paragraph, how
often and in how many books it occurs; :func:`leaked` compares the val hashes with the train
hashes at the end.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DUPLICATE_MIN_CHARS = 40  # shorter paragraphs ("CHAPTER I.", "THE END") repeat legitimately
RARE_MAX_COUNT = 10  # a character seen at most this often in the whole corpus is "rare"


# ASCII bytes that are not word characters (``\\w``) become spaces; newlines and ``_`` stay.
_ASCII_SPACES = bytes(b if chr(b).isalnum() or b in (10, 95) else 32 for b in range(128)) + bytes(
    range(128, 256)
)
_ASCII = bytes(range(128))
_NEWLINE, _SPACE, _MARK = 10, 32, 0  # a paragraph break becomes a NUL byte: the mark
_FEW = 16  # up to this many distinct non-ASCII characters, each is folded on its own


def _word_bytes(text: str) -> np.ndarray:
    """``text`` NFKC-normalized and case-folded, with every character that is not a word
    character or a newline replaced by spaces, as a writable array of UTF-8 bytes: ASCII by
    ``lower`` and one ``translate`` (NFKC leaves ASCII as it is; case folding is ``lower``
    there), then each distinct non-ASCII character replaced by its folded form (folding maps
    each character on its own), in place where that has as many bytes (a non-word character
    becomes as many spaces as it had bytes: keys collapse runs of spaces anyway). A book with
    many distinct non-ASCII characters (a Greek or Russian novel) is folded whole instead."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    data = text.encode("utf-8")
    others = set(data.translate(None, _ASCII).decode("utf-8"))  # the distinct non-ASCII ones
    if len(others) > _FEW:
        data = text.casefold().encode("utf-8")
        others = set(data.translate(None, _ASCII).decode("utf-8"))
    a = np.frombuffer(data.lower().translate(_ASCII_SPACES), np.uint8).copy()
    for ch in others:
        old = ch.encode("utf-8")
        new = "".join(
            chr(_ASCII_SPACES[ord(c)]) if c.isascii() else c if c.isalnum() else " " * len(old)
            for c in ch.casefold()
        ).encode("utf-8")
        if new == old:
            continue
        if len(new) == len(old):
            _overwrite(a, old, new)
        else:
            a = np.frombuffer(a.tobytes().replace(old, new), np.uint8).copy()
    return a


def _overwrite(a: np.ndarray, old: bytes, new: bytes) -> None:
    """Replace every occurrence of the UTF-8 character ``old`` in ``a`` by ``new``, which has
    as many bytes (a character's bytes never overlap another's)."""
    at = np.flatnonzero(a[: len(a) - len(old) + 1] == old[0])
    for j in range(1, len(old)):
        at = at[a[at + j] == old[j]]
    for j, byte in enumerate(new):
        a[at + j] = byte


def _mark_breaks(a: np.ndarray, paragraph_break: str) -> np.ndarray:
    """``a`` (from :func:`_word_bytes`) with every paragraph break a mark and every other newline
    a space; a break of one newline or of two (without longer runs) in place."""
    newline = a == _NEWLINE
    if paragraph_break == "\n":
        a[newline] = _MARK
        return a
    if paragraph_break == "\n\n" and not (newline[:-2] & newline[1:-1] & newline[2:]).any():
        pairs = np.flatnonzero(newline[:-1] & newline[1:])
        a[pairs], a[pairs + 1] = _MARK, _SPACE
    else:
        a = np.frombuffer(a.tobytes().replace(paragraph_break.encode("utf-8"), b"\0"), np.uint8)
        a = a.copy()
    a[a == _NEWLINE] = _SPACE
    return a


def _paragraph_keys(a: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """Every paragraph's key from :func:`_mark_breaks`'s output, in vectorized passes over the
    whole book rather than one per paragraph: a space after a space, a mark or the start goes,
    and then one before a mark or the end. Returns the keys (UTF-8, words joined by single
    spaces) and each key's length in characters."""
    space = a == _SPACE
    blank = np.concatenate(([True], space[:-1] | (a[:-1] == _MARK)))  # the byte before
    a = a[~space | ~blank]
    space = a == _SPACE
    a = a[~space | np.concatenate((a[1:] != _MARK, [False]))]  # the byte after
    keys = a.tobytes().split(b"\0")
    chars = np.fromiter(map(len, keys), np.int64, len(keys))
    tails = np.flatnonzero((a & 0xC0) == 0x80)  # UTF-8 continuation bytes: no characters
    if len(tails):
        stops = np.concatenate((np.flatnonzero(a == _MARK), [len(a)]))
        chars -= np.diff(np.searchsorted(tails, stops), prepend=0)
    return keys, chars


def _hash(key: str) -> int:
    return _hash_bytes(key.encode("utf-8"))


def _hash_bytes(key: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


@dataclass
class ParagraphScan:
    """One text's paragraphs of at least ``min_chars`` key characters: their 64-bit hashes,
    lengths and start offsets (in characters of the text) and positions among all its
    paragraphs (``text.split(paragraph_break)``)."""

    hashes: np.ndarray  # uint64
    chars: np.ndarray  # int64
    starts: np.ndarray  # int64
    index: np.ndarray  # int64


def scan_paragraphs(text: str, paragraph_break: str, min_chars: int) -> ParagraphScan:
    """Hash every paragraph of ``text`` whose key has at least ``min_chars`` characters.

    Vectorized per book rather than per paragraph: the text is normalized and case-folded once
    (neither changes a newline, so its paragraphs line up with the original's), every character
    that is not a word character (``\\w``) becomes a space (:func:`_word_bytes`), and a
    paragraph's key is then its words joined by single spaces (:func:`_paragraph_keys`). The same
    passage hard-wrapped differently, or with other quotes or punctuation, gets the same key."""
    keys, key_chars = _paragraph_keys(_mark_breaks(_word_bytes(text), paragraph_break))
    starts = _paragraph_starts(text, paragraph_break)
    chars = np.append(starts[1:] - len(paragraph_break), len(text)) - starts
    index = np.flatnonzero(key_chars >= min_chars)
    hashes = np.fromiter((_hash_bytes(keys[i]) for i in index.tolist()), np.uint64, len(index))
    return ParagraphScan(hashes, chars[index], starts[index].astype(np.int64), index)


def _paragraph_starts(text: str, paragraph_break: str) -> np.ndarray:
    """Where each paragraph of ``text.split(paragraph_break)`` starts, found by ``str.find``
    without copying the text into a list of paragraphs."""
    starts, step = [0], len(paragraph_break)
    at = text.find(paragraph_break)
    while at != -1:
        starts.append(at + step)
        at = text.find(paragraph_break, at + step)
    return np.array(starts, dtype=np.int64)


def split_scan(scan: ParagraphScan, text: str, paragraph_break: str, cut: int, min_chars: int):
    """The hashes of the train part ``text[:cut]`` and of the val part ``text[cut:]``, taken
    from the whole text's scan: a paragraph the cut falls inside is scanned again, as its two
    pieces (a paragraph too short to count has pieces too short to count)."""
    ends = scan.starts + scan.chars
    train, val = [scan.hashes[ends <= cut]], [scan.hashes[scan.starts >= cut]]
    inside = (scan.starts < cut) & (ends > cut)
    for start, end in zip(scan.starts[inside].tolist(), ends[inside].tolist()):
        train.append(scan_paragraphs(text[start:cut], paragraph_break, min_chars).hashes)
        val.insert(0, scan_paragraphs(text[cut:end], paragraph_break, min_chars).hashes)
    return np.concatenate(train), np.concatenate(val)


class DuplicateTally:
    """Paragraphs that occur in more than one book, added one book at a time.

    Per distinct paragraph hash it keeps ``[count, chars, books, first book, first index]``;
    :meth:`result` ranks the duplicates (most books first) and fetches the text of the top
    ones through ``paragraph_text(book, index)``.
    """

    def __init__(self) -> None:
        self.seen: dict[int, list] = {}
        self.compared = 0
        self.names: list[str] = []

    def add(self, name: str, scan: ParagraphScan) -> None:
        book = len(self.names)
        self.names.append(name)
        self.compared += len(scan.hashes)
        for h, n, i in zip(scan.hashes.tolist(), scan.chars.tolist(), scan.index.tolist()):
            entry = self.seen.get(h)
            if entry is None:
                self.seen[h] = [1, n, [book], book, i]
            else:
                entry[0] += 1
                entry[1] += n
                if entry[2][-1] != book:
                    entry[2].append(book)

    def result(self, paragraph_text: Callable[[int, int], str], examples: int = 5) -> dict:
        """``{"compared", "duplicated", "occurrences", "chars", "examples"}``; each example is
        ``{"text", "books", "count"}``."""
        dups = [e for e in self.seen.values() if len(e[2]) > 1]  # dict order: first seen
        ranked = sorted(dups, key=lambda e: (-len(e[2]), -e[0]))[:examples]
        return {
            "compared": self.compared,
            "duplicated": len(dups),
            "occurrences": sum(e[0] for e in dups),
            "chars": sum(e[1] for e in dups),
            "examples": [
                {
                    "text": shorten(" ".join(paragraph_text(e[3], e[4]).split()), 100),
                    "books": [self.names[b] for b in e[2]],
                    "count": e[0],
                }
                for e in ranked
            ],
        }


def leaked(val_hashes: Sequence[np.ndarray], train_hashes: Sequence[np.ndarray]) -> dict:
    """How many val paragraphs also occur (after normalization) in some book's train part:
    text the model may have memorized, so those val windows measure recall rather than
    generalization."""
    val = np.concatenate([np.asarray(v, dtype=np.uint64) for v in val_hashes] or [np.zeros(0)])
    train = np.concatenate([np.asarray(t, dtype=np.uint64) for t in train_hashes] or [val[:0]])
    count = int(np.isin(val.astype(np.uint64), train.astype(np.uint64)).sum())
    return {"val_paragraphs": int(len(val)), "also_in_train": count}


def rare_characters(counts: dict[str, int], max_count: int = RARE_MAX_COUNT) -> list[dict]:
    """Characters seen at most ``max_count`` times, rarest first, each with its count and
    Unicode name: typically stray symbols, OCR noise or a foreign word. Each still costs a
    vocabulary row and the model sees too few examples to learn it."""
    rare = sorted((n, ch) for ch, n in counts.items() if n <= max_count)
    return [
        {"char": ch, "count": n, "name": unicodedata.name(ch, f"U+{ord(ch):04X}")} for n, ch in rare
    ]


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_audit(meta: dict, max_books: int | None = None) -> str:
    """The audit of a prepared corpus (its ``meta.json`` as a dict) as plain text: totals,
    per-book train/val counts, duplicated paragraphs across books, rare characters."""
    audit = meta["audit"]
    total = meta["train_tokens"] + meta["val_tokens"]
    lines = [
        f"source: {meta['source']}",
        f"books: {len(meta['books'])}   characters: {audit['characters']:,}   vocabulary: "
        f"{meta['vocab_size']} characters ({meta['dtype']})",
        f"train: {meta['train_tokens']:,} tokens   val: {meta['val_tokens']:,} tokens   "
        f"(val {meta['val_tokens'] / total:.1%}, a blank line between books)",
        "",
        f"{'book':<28}{'characters':>12}{'train':>12}{'val':>10}{'val %':>8}",
    ]
    books = meta["books"] if max_books is None else meta["books"][:max_books]
    for b in books:
        lines.append(
            f"{shorten(b['name'], 27):<28}{b['chars']:>12,}{b['train_chars']:>12,}"
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
    lines += [f"  {r['char']!r} x{r['count']}  {r['name']}" for r in rare]
    return "\n".join(lines)
