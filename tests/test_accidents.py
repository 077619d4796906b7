"""Fair scores for the accidents students make: each hand-in below is the solved fixture lab with
one accident, and gets full marks with a line in its reason saying what was repaired."""

import copy
import json

import nbformat
import pytest
from grading_helpers import FULL, cell, grade_folder, lab, points, save, solved


def index(nb, grade_id):
    return nb.cells.index(cell(nb, grade_id))


def copied_answer():
    """JupyterLab copies a cell with its nbgrader metadata; the copy holds the work."""
    nb = solved(lab(), "ex1_answer", "ex3_answer")
    original = cell(nb, "ex2_answer")
    work = copy.deepcopy(original)
    work["id"] = "pasted"
    work.source = cell(solved(lab()), "ex2_answer").source
    nb.cells.insert(index(nb, "ex2_test") + 1, work)  # pasted below the test, even
    return nb


def copied_test():
    nb = solved(lab())
    paste = copy.deepcopy(cell(nb, "ex1_test"))
    paste["id"] = "pasted"
    nb.cells.insert(index(nb, "ex1_answer"), paste)  # above the answer it tests
    return nb


def moved():
    nb = solved(lab())
    answer = nb.cells.pop(index(nb, "ex3_answer"))
    nb.cells.insert(index(nb, "ex3_test") + 1, answer)
    return nb


def as_markdown():
    nb = solved(lab())
    answer = cell(nb, "ex2_answer")
    nb.cells[index(nb, "ex2_answer")] = nbformat.from_dict(
        {
            "cell_type": "markdown",
            "id": answer["id"],
            "metadata": answer.metadata,
            "source": answer.source,
        }  # fmt: skip
    )
    return nb


def markdown_and_back():
    """What a round trip through markdown leaves: attachments on a code cell, no outputs."""
    data = json.loads(nbformat.writes(solved(lab())))
    answer = next(c for c in data["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "ex2_answer")
    del answer["outputs"], answer["execution_count"]
    answer["attachments"] = {}
    return data


def older_jupyterlab():
    data = json.loads(nbformat.writes(solved(lab())))
    data["nbformat_minor"] = 4
    for c in data["cells"]:
        del c["id"]
    return data


def other_kernel():
    nb = solved(lab())
    nb.metadata["kernelspec"] = {"name": "gpt-course", "display_name": "Python (gpt-course)",
                                 "language": "python"}  # fmt: skip
    return nb


def scratch(source):
    nb = solved(lab())
    nb.cells.append(nbformat.v4.new_code_cell(source))
    return nb


ACCIDENTS = {
    "copied_answer": (copied_answer, "ran 1 of the 2 copies of ex2_answer in its place"),
    "copied_test": (copied_test, "removed 1 copy of locked cell ex1_test"),
    "moved": (moved, "put back in the lab's order: ex3_answer"),
    "as_markdown": (as_markdown, "turned back into the lab's cell type: ex2_answer (markdown"),
    "markdown_and_back": (markdown_and_back, "repaired cells left invalid"),
    "older_jupyterlab": (older_jupyterlab, "upgraded from notebook format 4.4"),
    "other_kernel": (other_kernel, "ran with the lab's kernel (python3), not gpt-course"),
    "scratch_error": (lambda: scratch("1 / 0  # trying something"), "did not run 1 cell(s)"),
    "scratch_exit": (lambda: scratch("import os\n\nos._exit(1)"), "did not run 1 cell(s)"),
}


@pytest.fixture(scope="module")
def accidents(tmp_path_factory):
    root = tmp_path_factory.mktemp("accidents")
    for name, (build, _) in ACCIDENTS.items():
        nb = build()
        path = root / "submissions" / f"{name}.ipynb"
        if isinstance(nb, nbformat.NotebookNode):
            save(nb, path)
        else:  # not a valid notebook any more: written as JSON
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(nb), encoding="utf-8")
    return grade_folder(root)


@pytest.mark.parametrize("accident", sorted(ACCIDENTS))
def test_an_accident_keeps_the_score_of_the_work_and_says_what_was_repaired(accidents, accident):
    row = accidents["rows"][accident]
    assert (row["status"], points(row)) == ("graded", FULL), row["reason"]
    assert ACCIDENTS[accident][1] in row["reason"]


def test_a_stub_copy_of_an_answer_is_dropped_when_another_copy_holds_the_work():
    from course_utils.grading.repair import repair

    nb, notes = repair(copied_answer(), lab())
    answers = [c for c in nb.cells if "def char_vocab" in c.source]
    assert len(answers) == 1 and "sorted(set(text))" in answers[0].source
    assert answers[0].metadata["nbgrader"]["grade_id"] == "ex2_answer"
    assert index(nb, "ex2_answer") < index(nb, "ex2_test")  # the work was pasted below it
    assert notes == [
        "ran 1 of the 2 copies of ex2_answer in its place",
        "put back in the lab's order: ex2_answer",
    ]


def test_an_untouched_hand_in_needs_no_repair():
    from course_utils.grading.repair import repair

    nb, notes = repair(lab(), lab())
    assert notes == []
    assert [c.source for c in nb.cells] == [c.source for c in lab().cells]
