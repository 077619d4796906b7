"""Quotations of the source documents are word for word (course_utils/tools/quotations.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_utils.tools import quotations

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT.parent / "shared" / "seeds"  # the CI clone has shared/ beside the repository


def test_every_quotation_in_the_course_is_in_the_sources_table():
    assert quotations.quotations_in(ROOT), "the course quotes its documents: none found?"
    problems = quotations.not_listed(ROOT)
    assert not problems, "\n" + "\n".join(problems)


def test_every_listed_quotation_is_used():
    files = quotations.figures.course_files(ROOT)
    text = quotations.normal(" ".join(p.read_text(encoding="utf-8") for p in files))
    text = text.replace('\\"', '"')  # a notebook's JSON escapes its quotes
    unused = [q for q in quotations.listed() if f'"{q}"' not in text]
    assert not unused, f"quotations the course no longer makes: {unused}"


@pytest.mark.skipif(not SEEDS.is_dir(), reason="no shared/seeds/ beside the repository")
def test_every_listed_quotation_is_word_for_word_in_its_document():
    problems = quotations.not_in_source(SEEDS)
    assert not problems, "\n" + "\n".join(problems)


def _course(tmp_path: Path, markdown: str, table: str) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# A course\n")
    (tmp_path / "docs" / "sources.md").write_text(
        "# Sources\n\n## Quotations\n\n| quotation | document | quoted in |\n| --- | --- | --- |\n"
        + table
    )
    cell = {"cell_type": "markdown", "id": "a", "metadata": {}, "source": markdown}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "11_x.ipynb").write_text(json.dumps(nb))
    return tmp_path


# The two inexact quotations, as the course made them, and one quoted exactly.
CARRY = (
    '| "because this aligns the carry operation with the autoregressive direction of the model" '
    "| `003_657e21ef4304a9ae.txt` | 11 |\n"
)
CARRY_THEN = (
    'The write-up reversed it "because this aligns the carry with the\nautoregressive direction".'
)
CARRY_NOW = (
    'The write-up reversed it "because this aligns the carry operation with the autoregressive\n'
    'direction of the model".'
)
ERROR = 'A plain tensor is the classic source of "expected all tensors to be on the same device".'


@pytest.mark.parametrize(
    "markdown, flagged",
    [
        (CARRY_THEN, True),
        ('The torch.nn internals chapter\'s "15-20% faster kernels" is timed here.', True),
        (CARRY_NOW, False),
        (ERROR, False),
        ('The chapter\'s `make_batch(["A B C"])` is code.', False),
    ],
)
def test_a_quotation_not_in_the_table_is_named(tmp_path, markdown, flagged):
    problems = quotations.not_listed(_course(tmp_path, markdown, CARRY))
    assert bool(problems) == flagged, problems
    if flagged:
        assert problems[0].startswith("notebooks/11_x.ipynb cell 0 (a): ")


def test_a_listed_quotation_its_document_does_not_hold_is_named(tmp_path):
    document = "I reversed them because this aligns the carry\noperation with the autoregressive"
    (tmp_path / "003.txt").write_text(document + " direction of the model.")
    page = tmp_path / "sources.md"
    page.write_text("## Quotations\n\n" + CARRY.replace("003_657e21ef4304a9ae.txt", "003.txt"))
    assert quotations.not_in_source(tmp_path, page) == []
    page.write_text('## Quotations\n\n| "because this aligns the carry with the" | `003.txt` |\n')
    assert quotations.not_in_source(tmp_path, page) == [
        "'because this aligns the carry with the' is not word for word in 003.txt"
    ]
