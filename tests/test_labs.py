"""Labs are generated from solutions by nbgrader's preprocessors, and empty answers fail checks."""

import csv
import json
import shutil

import nbformat
import pytest

from course_utils.tools import grading
from course_utils.tools.labs import LABS, SOLUTIONS, check_all, render_lab

SOLVED = sorted(SOLUTIONS.glob("*.ipynb"))


def _graded_cells(nb):
    return [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def test_committed_labs_are_what_build_produces():
    assert check_all() == []


def test_a_hand_edited_lab_is_reported(tmp_path):
    solutions, labs = tmp_path / "solutions", tmp_path / "labs"
    solutions.mkdir()
    labs.mkdir()
    source = SOLVED[0]
    (solutions / source.name).write_bytes(source.read_bytes())
    lab = json.loads(render_lab(source))
    lab["cells"][0]["source"] = "edited by hand"
    (labs / source.name).write_text(json.dumps(lab), encoding="utf-8")
    (labs / "99_orphan.ipynb").write_text("{}", encoding="utf-8")
    problems = check_all(solutions, labs)
    assert len(problems) == 2
    assert "differs from what its solution builds" in problems[0]
    assert "has no solution" in problems[1]


@pytest.mark.parametrize("solution", SOLVED, ids=[p.name for p in SOLVED])
def test_lab_hides_solutions_and_hidden_tests_but_keeps_graded_cells(solution):
    text = render_lab(solution)
    assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    lab = nbformat.reads(text, as_version=4)
    graded = _graded_cells(lab)
    assert graded, "a lab needs graded test cells"
    assert all("checksum" in c.metadata.nbgrader and c.metadata.nbgrader["locked"] for c in graded)
    assert len(graded) == len(_graded_cells(nbformat.read(solution, as_version=4)))


@pytest.mark.parametrize("solution", SOLVED, ids=[p.name for p in SOLVED])
def test_grading_gives_the_solution_full_marks_and_the_untouched_lab_zero(solution, tmp_path):
    """Through the instructor's grade command: every check of the solution passes, and no check
    passes on an empty answer (each graded cell of the untouched lab scores 0)."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(solution, subs / "solved.ipynb")
    shutil.copy(LABS / solution.name, subs / "untouched.ipynb")
    out = tmp_path / "gradebook.csv"
    assert grading.main([solution.stem, str(subs), "--out", str(out), "--jobs", "2"]) == 0
    rows = {row["student"]: row for row in csv.DictReader(out.open(encoding="utf-8"))}
    tests = {
        c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
        for c in _graded_cells(nbformat.read(solution, as_version=4))
    }
    for student in ("solved", "untouched"):
        assert rows[student]["status"] == "graded", rows[student]["reason"]
    solved = {t: float(rows["solved"][t]) for t in tests}
    assert solved == {t: float(p) for t, p in tests.items()}, "the solution must earn every point"
    passing = [t for t in tests if float(rows["untouched"][t]) != 0]
    assert not passing, f"these checks pass on an empty answer: {passing}"
