"""Labs are generated from solutions by nbgrader's preprocessors, and empty answers fail checks."""

import json

import nbformat
import pytest
from nbclient import NotebookClient

from course_utils.labs import LABS, SOLUTIONS, check_all, render_lab

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


@pytest.mark.parametrize("lab", sorted(LABS.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_check_passes_on_an_untouched_lab(lab):
    nb = nbformat.read(lab, as_version=4)
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(LABS)}},
    ).execute()
    graded = _graded_cells(nb)
    passed = [
        c.metadata.nbgrader["grade_id"]
        for c in graded
        if not any(o.output_type == "error" for o in c.outputs)
    ]
    assert not passed, f"these checks pass on an empty answer: {passed}"
