"""A class as an LMS hands it over and takes it back: hand-ins named by Canvas's, Moodle's and
Blackboard's bulk downloads (plain and late, with Blackboard's receipt beside them), Canvas's
gradebook export as the roster, a due date with a late penalty, an adjustments file; then the
late student re-graded alone, and a gradebook edited by hand refused."""

from __future__ import annotations

import contextlib
import io
import os
from datetime import datetime

import pytest
from grading_helpers import (
    FIXTURE,
    LAB,
    TIMEOUT,
    feedback_of,
    grade_folder,
    lab,
    read_rows,
    save,
    solved,
)

from course_utils.grading import command as grading

DUE = "2026-12-01T23:59"
CANVAS_ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,Grading fixture (1234),Lab 04: other (1235),Current Score
    Points Possible,,,,,6,10,
"Smith, Jane",12345,S001,jsmith,Section A,,,
"Lee, Ann",23456,S002,alee,Section A,,,
"Haddad, Omar",34567,S003,ohaddad,Section B,,,
"Kim, Min",45678,S004,kim,Section B,,,
"Zero, Zed",56789,S005,zzero,Section B,,,
"""  # noqa: E501  (as Canvas exports it: one line a row)
ADJUSTMENTS = """student,exercise,points,reason
34567,ex3_test,1,regrade request: partial credit
"Kim, Min",total,0.5,found a typo in the lab
nobody,total,1,a row for no one
"""
JANE = "smithjane_12345_67890_grading_fixture-1.ipynb"  # Canvas, on time by Canvas's mark
ANN = "leeann_LATE_23456_78901_grading_fixture.ipynb"  # Canvas, marked late
OMAR = "Omar Haddad_4711_assignsubmission_file_grading_fixture.ipynb"  # Moodle, by name
KIM = "Grading fixture_kim_attempt_2026-12-02-09-00-00_grading_fixture.ipynb"  # Blackboard
RECEIPT = "Grading fixture_kim_attempt_2026-12-02-09-00-00.txt"
STRANGER = "stranger_99999_11111_grading_fixture.ipynb"  # Canvas, on no roster row
OPTIONS = ["--due", DUE, "--late-penalty", "10%", "--late-cap", "50%", "--format", "canvas"]


def at(path, when: str):
    stamp = datetime.fromisoformat(when).timestamp()
    os.utime(path, (stamp, stamp))


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    root = tmp_path_factory.mktemp("lms")
    subs = root / "submissions"
    at(save(solved(lab()), subs / JANE), "2026-12-05T10:00")  # Canvas's mark says on time
    at(save(solved(lab()), subs / ANN), "2026-12-03T12:00")  # 2 days (begun) late
    at(save(solved(lab(), "ex1_answer", "ex2_answer"), subs / OMAR), "2026-12-01T20:00")
    save(solved(lab()), subs / KIM)  # its time is Blackboard's, in its name: 1 day late
    (subs / RECEIPT).write_text("Name: Min Kim (kim)\nAssignment: Grading fixture\n", "utf-8")
    at(save(lab(), subs / STRANGER), "2026-12-01T09:00")
    roster, adjustments = root / "canvas_export.csv", root / "adjustments.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    adjustments.write_text(ADJUSTMENTS, encoding="utf-8")
    options = ["--roster", str(roster), "--adjustments", str(adjustments), *OPTIONS]
    with contextlib.redirect_stdout(io.StringIO()) as log:
        run = grade_folder(root, *options)
    run["log"] = log.getvalue()
    run["canvas"] = (root / "gradebook.canvas.csv").read_text(encoding="utf-8")
    run["ann"] = feedback_of(run, "23456")
    # Ann re-graded alone (her file passed): every row and the Canvas file as they were
    with contextlib.redirect_stdout(io.StringIO()) as log:
        code = grading_main(root, subs / ANN, options)
    run["alone"] = (code, read_rows(run["out"]), log.getvalue())
    run["canvas_alone"] = (root / "gradebook.canvas.csv").read_text(encoding="utf-8")
    # a +2 typed into the gradebook: the next run refuses, in one line, and keeps it
    edited = run["out"].read_text(encoding="utf-8").replace(",4,6,graded", ",6,6,graded")
    run["out"].write_text(edited, encoding="utf-8")
    with contextlib.redirect_stderr(io.StringIO()) as err:
        code = grading_main(root, subs, options)
    run["edited"] = (code, err.getvalue(), run["out"].read_text(encoding="utf-8"), edited)
    return run


def grading_main(root, submissions, options):
    """The grade command on ``submissions`` (a folder, or one hand-in), as grade_folder runs it."""
    argv = [str(FIXTURE), str(submissions), "--out", str(root / "gradebook.csv"), "--feedback",
            str(root / "feedback"), "--timeout", str(TIMEOUT), *options]  # fmt: skip
    return grading.main(argv)


def closing_block(log: str) -> list[str]:
    return log[log.index("needs your attention") :].splitlines()


def test_every_student_is_on_one_row_with_the_right_score(klass):
    totals = {s: (r["name"], r["total"], r["status"]) for s, r in klass["rows"].items()}
    assert totals == {
        "12345": ("Smith, Jane", "6", "graded"),  # Canvas: not marked late, so not late
        "23456": ("Lee, Ann", "4.8", "graded"),  # 6 - 2 days x 10% of 6
        "34567": ("Haddad, Omar", "4", "graded"),  # 3, + 1 adjusted on ex3_test
        "45678": ("Kim, Min", "5.9", "graded"),  # 6 - 1 day x 0.6 + 0.5 adjusted
        "56789": ("Zero, Zed", "0", "missing"),
        "99999": ("stranger", "0", "graded"),  # on no roster row: its own
    }
    assert LAB in klass["rows"]["99999"]["file"]


def test_the_row_says_what_changed_its_total(klass):
    ann, omar = klass["rows"]["23456"], klass["rows"]["34567"]
    changes = (ann["late"], ann["adjusted"], omar["adjusted"], omar["ex3_test"])
    assert changes == ("1.2", "", "1", "0")
    assert ann["notes"] == (
        "2 days late (handed in 2026-12-03 12:00 by the file's time; due 2026-12-01 23:59): "
        "-1.2, 10% a day"
    )
    kim = klass["rows"]["45678"]["notes"]
    assert kim.startswith("1 day late (handed in 2026-12-02 09:00 by Blackboard's file name;")
    assert kim.endswith("; total: +0.5 (found a typo in the lab)")
    assert "- 2 days late" in klass["ann"] and "Score: **4.8 / 6**" in klass["ann"]


def test_the_run_ends_with_one_block_naming_who_matched_nothing(klass):
    assert klass["code"] == 3
    assert closing_block(klass["log"]) == [
        "needs your attention (exit status 3):",
        "  1 hand-in(s) match no roster student (in the gradebook, not in the LMS file): add "
        "them to the roster or rename them",
        f"    {STRANGER} (Canvas user id 99999): graded",
        "  1 roster student(s) with no hand-in (status missing, empty in the LMS file):",
        "    56789 Zero, Zed",
        "  1 adjustment(s) not applied:",
        "    adjustments.csv line 4: no student 'nobody' in the gradebook (use its student "
        "column); not applied",
    ]


def test_canvas_gets_its_import_file(klass):
    assert klass["canvas"].splitlines() == [
        "Student,ID,SIS User ID,SIS Login ID,Section,Grading fixture (1234)",
        "Points Possible,,,,,6",
        '"Smith, Jane",12345,S001,jsmith,Section A,6',
        '"Lee, Ann",23456,S002,alee,Section A,4.8',
        '"Haddad, Omar",34567,S003,ohaddad,Section B,4',
        '"Kim, Min",45678,S004,kim,Section B,5.9',
        '"Zero, Zed",56789,S005,zzero,Section B,',
    ]


def test_the_late_student_regraded_alone_leaves_every_row_as_it_was(klass):
    code, rows, log = klass["alone"]
    assert (code, closing_block(log)) == (3, closing_block(klass["log"]))  # the same block
    assert "graded 1/1: 23456: 4.8/6" not in log  # from the cache: her hand-in is unchanged
    assert rows == klass["rows"]
    assert klass["canvas_alone"] == klass["canvas"]


def test_a_gradebook_edited_by_hand_is_refused_and_kept(klass):
    code, err, after, edited = klass["edited"]
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "was changed since the grader wrote it" in err and "--adjustments" in err
    assert after == edited
