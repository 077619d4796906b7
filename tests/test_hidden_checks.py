"""Hidden checks stay hidden, in every lab: no hidden check shares a visible check's label, and
whatever a hand-in raises, prints or records while a hidden test runs (its inputs, its values)
reaches the instructor's feedback only, never the student's file or Gradescope's results.json.

These read the solutions and build each failure as the worker would read it back from the
graded notebook: no kernel runs (tests/test_grading_class.py has one that does)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from course_utils.core.paths import SOLUTIONS
from course_utils.grading import gradebook, gradescope
from course_utils.grading.autograde import KERNEL_DIED, TIMED_OUT, read_feedback
from course_utils.grading.gradebook import GRADED, Lab, Result
from course_utils.grading.scoring import verified
from course_utils.lessons import recording

MARK = "### BEGIN HIDDEN TESTS"
LABS = sorted(SOLUTIONS.glob("*.ipynb"))


def hidden_cells(path: Path) -> list[tuple[str, str, str]]:
    """(test id, the visible part, the hidden part) of each test cell with hidden tests."""
    nb = nbformat.read(path, as_version=4)
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code" and MARK in cell.source:
            visible, hidden = cell.source.split(MARK, 1)
            found.append((cell.metadata.nbgrader["grade_id"], visible, hidden))
    return found


def check_labels(source: str) -> list[tuple[re.Pattern, str, ast.expr]]:
    """Each check call's label as a pattern (an f-string's fields match anything), a string it
    can take (fields as ``X``) and the call's arguments node."""
    labels = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if not name.startswith("check_"):
            continue
        parts = first.values if isinstance(first, ast.JoinedStr) else [first]
        if not all(isinstance(p, (ast.Constant, ast.FormattedValue)) for p in parts):
            raise AssertionError(f"a check label that is not a string: {ast.unparse(first)}")
        literal = [p.value if isinstance(p, ast.Constant) else None for p in parts]
        pattern = "".join(".+" if v is None else re.escape(str(v)) for v in literal)
        sample = "".join("X" if v is None else str(v) for v in literal)
        labels.append((re.compile(pattern, re.DOTALL), sample, node))
    return labels


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.stem)
def test_no_hidden_check_shares_a_visible_checks_label(path):
    cells = hidden_cells(path)
    assert cells, f"{path.name} has no hidden tests"
    shared = []
    for test, visible, hidden in cells:
        for hidden_pattern, hidden_sample, _ in check_labels(hidden):
            for visible_pattern, visible_sample, _ in check_labels(visible):
                if visible_pattern.fullmatch(hidden_sample) or hidden_pattern.fullmatch(
                    visible_sample
                ):
                    shared.append(f"{test}: {hidden_sample!r} ~ {visible_sample!r}")
    assert not shared


def graded_cell(test: str, source: str, outputs: list) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": test, "points": 1}
    cell.outputs = outputs
    return cell


def error(ename: str, evalue: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[evalue])


def leaks(secret: str) -> dict[str, list]:
    """Ways a hand-in's code can put ``secret`` (a hidden test's input) into a test cell's
    failure: raised in an exception's text (also under names the grader's own errors use, or
    as a stub's note), as its exception's name, on stderr, printed."""
    stub = f"\u274c Exercise 1 is not done yet: {secret} still raises NotImplementedError"
    printed = nbformat.v4.new_output("stream", name="stdout", text=f"saw {secret}\n")
    return {
        "raised": [printed, error("ValueError", f"timed out {secret} NameError scores 0")],
        "as the kernel dying": [error(KERNEL_DIED, f"the kernel died here ({secret})")],
        "as a timeout": [error("CellTimeoutError", secret)],
        "as a stub's note": [error("NotImplementedError", stub)],
        "as the error's name": [error(f"Error_{secret}", "")],
        "on stderr": [nbformat.v4.new_output("stream", name="stderr", text=f"{secret}\n")],
    }


def hidden_check_cases():
    for path in LABS:
        for test, visible, hidden in hidden_cells(path):
            for index, (_, sample, node) in enumerate(check_labels(hidden)):
                yield pytest.param(path.stem, test, visible, hidden, index, sample, node,
                                   id=f"{path.stem}-{test}-{index}")  # fmt: skip


@pytest.mark.parametrize(
    "lab_name,test,visible,hidden,index,label,node", list(hidden_check_cases())
)
def test_a_hidden_checks_inputs_reach_only_the_instructor(
    lab_name, test, visible, hidden, index, label, node
):
    inputs = ast.get_source_segment(hidden, node) or ""
    secret = f"SECRET{index}<{inputs}>"  # the check's own code: its label, inputs, expected
    lab = Lab(lab_name, Path("db"), Path("release"), {test: 1.0}, hidden={test: visible})
    source = visible + MARK + hidden
    for how, outputs in leaks(secret).items():
        nb = nbformat.v4.new_notebook(cells=[graded_cell(test, source, outputs)])
        feedback, _, _ = read_feedback(nb, lab.tests, 30, lab.hidden)
        result = verified(Result("s", GRADED, scores={test: 0.0}, feedback=feedback), {}, {}, lab)
        shown(result, lab, secret, how)  # a hand-in's "CellTimeoutError" is no timeout
    # a hidden check's own failure: the hand-in recorded the input where the value belongs
    reference = [{"check": "value", "name": "v", "expected": recording.to_plain(1)},
                 {"check": "value", "name": label, "expected": recording.to_plain(2),
                  "hidden": True}]  # fmt: skip
    records = [{"check": "value", "name": "v", "got": recording.to_plain(1)},
               {"check": "value", "name": label, "got": recording.to_plain(secret)}]  # fmt: skip
    nb = nbformat.v4.new_notebook(cells=[graded_cell(test, source, [])])
    feedback, _, _ = read_feedback(nb, lab.tests, 30, lab.hidden)
    result = Result("s", GRADED, scores={test: 1.0}, feedback=feedback)
    result = verified(result, {test: records}, {test: reference}, lab)
    assert result.scores[test] == 0.0
    shown(result, lab, secret, "recorded as the checked value")


def shown(result: Result, lab: Lab, secret: str, how: str) -> None:
    """The student's file and results.json hold nothing of ``secret``; the instructor's does."""
    student = gradebook.feedback_markdown(result, lab)
    results = json.dumps(gradescope.results_json(result, lab), ensure_ascii=False)
    instructor = gradebook.feedback_markdown(result, lab, student_facing=False)
    for text in (student, results):
        assert "SECRET" not in text, f"{how}: {text}"
    assert "SECRET" in instructor, how
    assert ": 0 / 1" in student and "passed" not in student, how  # told it failed


def test_a_visible_checks_failure_and_a_timeout_stay_the_students(tmp_path):
    """Not everything is hidden: a visible check's message, the grader's timeout note."""
    lab = Lab("lab", Path("db"), Path("release"), {"t": 1.0}, hidden={"t": "check_value(...)"})
    reference = [{"check": "value", "name": "v", "expected": recording.to_plain(1)},
                 {"check": "value", "name": "h", "expected": recording.to_plain(2),
                  "hidden": True}]  # fmt: skip
    records = [{"check": "value", "name": "v", "got": recording.to_plain(5)}]
    nb = nbformat.v4.new_notebook(cells=[graded_cell("t", "x", [])])
    feedback, _, _ = read_feedback(nb, lab.tests, 30, lab.hidden)
    result = Result("s", GRADED, scores={"t": 1.0}, feedback=feedback)
    result = verified(result, {"t": records}, {"t": reference}, lab)
    assert "\u274c v: expected 1 got 5" in gradebook.feedback_markdown(result, lab)
    # a timeout is what the executor recorded in that cell, whatever errors the cell shows
    nb = nbformat.v4.new_notebook(cells=[graded_cell("t", "x", [error("KeyboardInterrupt", "")])])
    timed_out = {"what": TIMED_OUT, "cell": 0, "limit": "time", "seconds": 30}
    feedback, timeouts, _ = read_feedback(nb, lab.tests, 30, lab.hidden, events=[timed_out])
    result = Result("s", GRADED, scores={"t": 0.0}, feedback=feedback)
    assert "timed out after 30 s" in gradebook.feedback_markdown(result, lab)
    assert timeouts == ["t"]
    assert feedback["t"]["limit"] == {"kind": "time", "cell": "t", "seconds": 30}


def test_the_labs_own_stub_note_reaches_the_student_only_for_this_exercise_and_a_visible_name():
    from course_utils.grading.autograde import stub_note

    visible = "check_value('itos', list(itos), [...])\nbuild_vocab(sentence)"
    note = "\u274c Exercise 1 is not done yet: build_vocab still raises NotImplementedError"
    assert stub_note(note, visible, ("1", set()))
    assert not stub_note(note, visible, ("2", set()))  # another exercise's number: forged
    assert not stub_note(note.replace("build_vocab", "_secret_97"), visible, ("1", set()))
    assert not stub_note(note + " 97", visible, ("1", set()))
    method = note.replace("build_vocab", "__init__")  # a stub's method, not in the checks
    assert stub_note(method, visible, ("1", {"__init__"}))
    assert not stub_note(method, visible, ("1", set()))
    undefined = (
        "\u274c Exercise 1 is not done yet: its answer cell still raises NotImplementedError, "
        "so itos is not defined"
    )
    assert stub_note(undefined, visible, ("1", set()))
