"""The figure check: no measured figure in the prose that a cell, a results table or the
allow-list does not stand behind (course_utils/tools/figures.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from course_utils.tools import figures

ROOT = Path(__file__).resolve().parents[1]


def test_every_measured_figure_in_the_course_is_traced():
    flags = figures.check(ROOT)
    assert not flags, "\n" + "\n".join(map(str, flags))


def test_every_allow_list_entry_is_used_and_names_a_file():
    entries = figures.load_allowed()
    names = [p.relative_to(ROOT).as_posix() for p in figures.course_files(ROOT)]
    unused = []
    for entry in entries:
        files = [n for n in names if figures.fnmatch.fnmatch(n, entry["file"])]
        assert files, f"{entry['file']}: no such course file"
        flags = figures.check(ROOT, [e for e in entries if e is not entry])
        if not any(f.figure.lower() == entry["figure"].lower() for f in flags):
            unused.append(entry["figure"])
    assert not unused, f"allow-list entries nothing needs any more: {unused}"


def _course(tmp_path: Path, markdown: str, printed: str = "", results: str = "") -> Path:
    """A course of one lesson (one markdown cell, one code cell printing ``printed``)."""
    (tmp_path / "notebooks").mkdir(parents=True)
    (tmp_path / "docs" / "results").mkdir(parents=True)
    shutil.copy(ROOT / "nbval_sanitize.cfg", tmp_path)
    (tmp_path / "README.md").write_text("# A course\n")
    if results:
        (tmp_path / "docs" / "results" / "page.md").write_text(results)
    cells = [
        {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": markdown},
        {"cell_type": "code", "id": "run", "metadata": {}, "source": "run()",
         "execution_count": 1, "outputs": [{"output_type": "stream", "name": "stdout",
                                            "text": printed}]},
    ]  # fmt: skip
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "12_x.ipynb").write_text(json.dumps(nb))
    return tmp_path


def _flagged(tmp_path, markdown, printed="", results="", allowed=()):
    return [f.figure for f in figures.check(_course(tmp_path, markdown, printed, results),
                                            list(allowed))]  # fmt: skip


# The examples, as the lessons said them before this check.
@pytest.mark.parametrize(
    "markdown, printed, figure",
    [
        (
            "Training takes about a minute on 2 CPU cores.",
            "training wall: 78.9 s",
            "about a minute",
        ),
        ("On AVX-512 without bf16 they are about as fast as fp32.", "", "about as fast as"),
        ("A bf16 product takes about a millisecond.", "wall: 0.28 ms", "about a millisecond"),
        ("It trained in 81.2 s here.", "training wall: 78.9 s", "81.2 s"),
        ("A step is about 20% faster with it.", "measured: 1.3x", "20%"),
    ],
)
def test_a_figure_nothing_prints_is_flagged_with_its_cell_and_sentence(
    tmp_path, markdown, printed, figure
):
    flags = figures.check(_course(tmp_path, markdown, printed), [])
    assert [f.figure for f in flags] == [figure]
    assert flags[0].file == "notebooks/12_x.ipynb" and flags[0].cell == "0 (intro)"
    assert flags[0].sentence == markdown


def test_a_machine_figure_restated_is_flagged_even_when_it_matches(tmp_path):
    flags = figures.check(_course(tmp_path, "The run took 78.9 s.", "training wall: 78.9 s"), [])
    assert [f.why for f in flags] == [figures.MACHINE]


@pytest.mark.parametrize(
    "markdown, printed",
    [
        ("Batch 4 took 0.4 s against 0.9 s.", "took 0.4 s of training, and 0.9 s"),
        ("The range (1 s to 8 s) flags the run.", "new's range: 1.0 to 8.0 s"),
        ("Block 0 gets about 15 times the gradient.", "block 0 / median = 15"),
        ("SwiGLU costs 0.8% more.", "SwiGLU   135,266,304   1.0078"),
        ("About 1.5 GiB for training.", "total:   1536.94 MiB"),
        ("It is 18,016 parameters, 4x the MLP.", ""),  # arithmetic, no measuring word
        ("The cached step is at least 3x faster, under 80% of the ceiling.", ""),  # bounds
        ('The chapter says "15-20% faster" and we time it.', ""),  # a quotation: checked apart
    ],
)
def test_a_printed_figure_arithmetic_bounds_and_quotations_pass(tmp_path, markdown, printed):
    assert _flagged(tmp_path, markdown, printed) == []


def test_a_figure_from_a_results_table_passes_only_at_its_precision(tmp_path):
    table = "# Page\n\n| class | fp32 | bf16 |\n| --- | ---: | ---: |\n| avx512 | 171.9 | 34.2 |\n"
    assert _flagged(tmp_path, "bf16 ran at 34.2 GFLOP/s, slower.", results=table) == []
    assert _flagged(tmp_path / "b", "bf16 ran at 34 GFLOP/s, slower.", results=table) == [
        "34 GFLOP/s"
    ]


def test_the_allow_list_names_a_file_and_a_figure(tmp_path):
    entry = {"file": "notebooks/*", "figure": "About a minute", "kind": "source", "reason": "r"}
    assert _flagged(tmp_path, "It took about a minute.", allowed=[entry]) == []
    other = {**entry, "file": "docs/*"}
    assert _flagged(tmp_path / "b", "It took about a minute.", allowed=[other]) == [
        "about a minute"
    ]


def test_a_bad_allow_list_entry_is_one_clear_error(tmp_path):
    bad = tmp_path / "allowed.toml"
    bad.write_text('[[figure]]\nfile = "x"\nfigure = "3 s"\nkind = "guess"\n')
    with pytest.raises(ValueError, match="needs file, figure, kind .source or fact. and reason"):
        figures.load_allowed(bad)
