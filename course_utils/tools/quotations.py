"""Quotations of the source documents, word for word: each one the course makes is listed in
``docs/sources.md`` (its *Quotations* table), and each listed one is in its document's text.

A quotation is a double-quoted span of two words or more in a sentence that names a source
document ("the torch.nn internals chapter", "the write-up", "the source", ...), in a lesson's or
a solved lab's markdown or a docs page. The documents live in ``shared/seeds/`` beside the
repository (``../shared/seeds`` from its root); where they are absent only the first half is
checked. ``python -m course_utils.tools.quotations`` prints what fails.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import figures

ROOT = figures.ROOT
SOURCES_PAGE = ROOT / "docs" / "sources.md"
SEEDS = ROOT.parent / "shared" / "seeds"
NAMES_A_SOURCE = re.compile(
    r"\b(?:the|its) (?:stacked-model |torch\.nn internals |frozen-decoder |FLOPs/SumGPT/BookGPT )?"
    r"(?:chapter|write-up|audit|source)\b",
    re.I,
)
QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')


def normal(text: str) -> str:
    """Text compared word for word: whitespace runs as one space, LaTeX's ``$`` dropped (the
    documents write ``$1.0$`` where the course writes 1.0)."""
    return " ".join(text.replace("$", "").split())


def quotations_in(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """Every quotation of a source document the course makes: (file, cell, quotation)."""
    found = []
    for path in figures.course_files(root):
        name = path.relative_to(root).as_posix()
        if path.suffix == ".ipynb":
            cells, _ = figures.notebook_texts(path)
        else:
            cells = [("-", path.read_text(encoding="utf-8"))]
        for label, text in cells:
            for sentence in figures.sentences(text):
                sentence = re.sub(r"`[^`]*`", "", sentence)  # code is no quotation
                unquoted = QUOTED.sub("", sentence)
                if not NAMES_A_SOURCE.search(unquoted):
                    continue
                for m in QUOTED.finditer(sentence):
                    quotation = normal(m[1] or m[2])
                    if len(quotation.split()) >= 2:
                        found.append((name, label, quotation))
    return found


def listed(page: Path = SOURCES_PAGE) -> dict[str, str]:
    """The *Quotations* table of ``docs/sources.md``: quotation -> the document's file name."""
    text = re.split(r"^## Quotations$", page.read_text(encoding="utf-8"), flags=re.M)[-1]
    rows = re.findall(r'^\| "(.+?)" \| `([\w.]+)` \|', text, flags=re.M)
    return {normal(quotation): file for quotation, file in rows}


def not_listed(root: Path = ROOT) -> list[str]:
    """A line for each quotation in the course that the table does not hold."""
    table = listed(root / "docs" / "sources.md")
    return [
        f"{name} cell {label}: {quotation!r} is not in docs/sources.md's Quotations table"
        for name, label, quotation in quotations_in(root)
        if quotation not in table
    ]


def not_in_source(seeds: Path = SEEDS, page: Path = SOURCES_PAGE) -> list[str]:
    """A line for each listed quotation that its document does not contain word for word (a
    quotation may start a sentence of ours with a capital its document does not have)."""
    wrong = []
    for quotation, file in listed(page).items():
        text = normal((seeds / file).read_text(encoding="utf-8"))
        if quotation not in text and quotation[0].lower() + quotation[1:] not in text:
            wrong.append(f"{quotation!r} is not word for word in {file}")
    return wrong


def main() -> int:
    problems = not_listed() + (not_in_source() if SEEDS.is_dir() else [])
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
