"""A class, not a folder: one grading run of hand-ins named and shaped as a real class hands them
in (a name that is not UTF-8, names a spreadsheet would run as formulas, an LMS's "Name - Lab
(final) (1)", one student with a file and a folder, a notebook of another lab with the same
exercise ids, a 100 MB print, terminal escapes in an error) and a roster with a student who
handed in nothing. Each is a row as an instructor expects, and the run never stops for one."""

from __future__ import annotations

import csv
import io
import os
import time

import pytest
from grading_helpers import LAB, answered, cell, grade_folder, lab, save, solved

FLOOD = """print("x" * 100_000_000)


def count_tokens(text):
    return len(text.split())"""

ESCAPES = """def count_tokens(text):
    raise RuntimeError("\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b[31mboom\\x1b[0m")"""

SPY = """def one_hot(ids, vocab_size):
    print("the test called me with", ids.tolist(), vocab_size)
    if len(ids) == 2:  # right on the visible check, wrong on the hidden one
        return torch.eye(vocab_size)[ids]
    return torch.zeros(len(ids), vocab_size)"""

FORMULAS = ["=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tTAB"]


def another_lab():
    """A notebook of another lab numbered like this one: the same ids, other tests and title."""
    nb = lab()
    nb.cells[0].source = "# Lab 99: something else\n\nOther exercises."
    for grade_id in ("ex1_test", "ex2_test", "ex3_test"):
        cell(nb, grade_id).source = "check_value('other', other_answer(), 42)"
    return nb


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    subs = root / "submissions"
    subs.mkdir()
    save(solved(answered(lab(), ex1_answer=FLOOD)), subs / "cafe.ipynb")
    os.rename(subs / "cafe.ipynb", os.fsencode(subs) + b"/caf\xe9.ipynb")  # as a zip unpacks
    jose = answered(solved(lab()), ex1_answer=ESCAPES, ex3_answer=SPY)
    save(jose, subs / "José Müller - Lab 2 (final) (1).ipynb")
    save(lab(), subs / "dora.ipynb")
    past = time.time() - 3600
    os.utime(subs / "dora.ipynb", (past, past))  # the older of her two hand-ins
    save(solved(lab()), subs / "dora" / f"{LAB}.ipynb")
    save(another_lab(), subs / "wrong.ipynb")
    for name in FORMULAS:
        (subs / f"{name}.txt").write_text("not a notebook", encoding="utf-8")
    roster = root / "roster.csv"
    roster.write_text(
        "id,name\nJose-Muller,José Müller\ndora,Dora Explorer\nzed,Zed Zero\n", encoding="utf-8"
    )
    run = grade_folder(root, "--roster", str(roster))
    run["raw"] = run["out"].read_text(encoding="utf-8")
    run["summary"] = (root / "gradebook.summary.csv").read_text(encoding="utf-8")
    return run


def feedback(run, name, instructor=False):
    folder = run["feedback"].with_name("feedback.instructor") if instructor else run["feedback"]
    return (folder / f"{name}.md").read_text(encoding="utf-8")


def test_every_hand_in_and_every_student_on_the_roster_is_a_row(klass):
    assert klass["code"] == 0
    students = set(klass["rows"])
    assert {"caf-xe9", "Jose-Muller", "dora", "wrong", "zed"} <= students
    assert len(students) == 5 + len(FORMULAS)
    assert "x09TAB" in students  # a tab in a file name, shown as an escape


def test_a_name_that_is_not_utf8_is_shown_with_escapes_and_graded(klass):
    row = klass["rows"]["caf-xe9"]
    assert (row["name"], row["file"], row["status"]) == ("caf\\xe9", "caf\\xe9.ipynb", "graded")
    assert "not on the roster" in row["reason"]


def test_a_100_mb_print_is_cut_and_the_solved_lab_keeps_its_marks(klass):
    row = klass["rows"]["caf-xe9"]
    assert (row["total"], row["max"]) == ("6", "6"), row["reason"]


def test_no_gradebook_cell_is_a_formula(klass):
    cells = [c for row in csv.reader(io.StringIO(klass["raw"])) for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert klass["rows"]["1-2"]["name"] == "'=1+2"  # escaped as spreadsheets expect
    assert klass["rows"]["1-2"]["file"] == "'=1+2.txt"


def test_escape_sequences_reach_neither_feedback_nor_gradebook(klass):
    row = klass["rows"]["Jose-Muller"]
    assert (row["name"], row["total"]) == ("José Müller", "1")  # ex2 only: ex1 raised, ex3 wrong
    text = feedback(klass, "Jose-Muller")
    assert "boom" in text and "RuntimeError" in text
    assert not [ch for ch in text + klass["raw"] if ord(ch) < 32 and ch not in "\n"]
    assert "\x9b" not in text and "52;c;" not in text


def test_a_hidden_tests_inputs_and_prints_stay_out_of_the_students_feedback(klass):
    student = feedback(klass, "Jose-Muller")
    assert "## Exercise 3: 0 / 3" in student  # titled as the lab titles it
    assert "a hidden test failed" in student
    assert "[1, 1, 0]" not in student and "the test called me with" not in student
    instructor = feedback(klass, "Jose-Muller", instructor=True)
    assert "[1, 1, 0]" in instructor and "one_hot([1, 1, 0], 2): values off" in instructor


def test_a_student_with_a_file_and_a_folder_is_one_row_saying_which_was_graded(klass):
    row = klass["rows"]["dora"]
    assert (row["total"], row["name"], row["file"]) == ("6", "Dora Explorer", f"dora/{LAB}.ipynb")
    assert row["reason"].startswith(
        f"graded dora/{LAB}.ipynb (the newest of its hand-ins); not graded: dora.ipynb"
    )


def test_a_notebook_of_another_lab_with_the_same_ids_is_wrong_lab(klass):
    row = klass["rows"]["wrong"]
    assert (row["status"], row["total"]) == ("wrong_lab", "0")
    assert "Lab 99: something else" in row["reason"]


def test_a_student_on_the_roster_without_a_hand_in_is_missing(klass):
    row = klass["rows"]["zed"]
    assert (row["name"], row["status"], row["reason"]) == (
        "Zed Zero", "missing", "no hand-in found for this student"
    )  # fmt: skip


def test_the_summary_gives_each_exercises_mean_and_zeros(klass):
    rows = {r["exercise"]: r for r in csv.DictReader(io.StringIO(klass["summary"]))}
    # graded: café 2/1/3, José 0/1/0, dora 2/1/3
    assert (rows["ex1_test"]["mean"], rows["ex1_test"]["zeros"]) == ("1.33", "1")
    assert (rows["ex3_test"]["title"], rows["ex3_test"]["count"]) == ("Exercise 3", "3")
    assert rows["status: missing"]["count"] == "1"
