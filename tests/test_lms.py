"""The LMS at both ends, without a kernel: bulk-download names, the LMS's roster exports, the late
policy, the adjustments file, the hand-edit guard and the import files."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from pathlib import Path

import pytest

from course_utils.grading import adjustments as adj
from course_utils.grading import gradebook, lms_export, lms_names, orchestrate
from course_utils.grading import roster as rosters
from course_utils.grading.late import LatePolicy, parse_amount, parse_due
from course_utils.grading.submissions import Submission, find_submissions

CANVAS = """Student,ID,SIS User ID,SIS Login ID,Section,Lab 03: block assembly (881),Lab 12: audit (882)
    Points Possible,,,,,10,10
"Smith, Jane",12345,S001,jsmith,A,,
"Smith, Jane",23456,S002,jsmith2,A,,
"Lee, Ann",34567,,alee,B,,
"Lee, Ann",34567,,alee,B,,
Student,,,,,(read only),(read only)
"""  # noqa: E501
MOODLE = """Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,Last modified (submission),Last modified (grade),Feedback comments
Participant 4711,Omar Haddad,omar@example.edu,Submitted for grading,,10.00,Yes,"Tuesday, 1 December 2026, 10:00 AM",-,
Participant 4712,Zoë Roe,zoe@example.edu,No submission,,10.00,Yes,-,-,
"""  # noqa: E501
LAB = gradebook.Lab(
    "03_block_assembly", Path("db"), Path("release"), {"ex1": 4.0, "ex2": 6.0},
    titles={"ex1": "Exercise 1: the block", "ex2": "Exercise 2: the stack"},
)  # fmt: skip


def lms(name):
    found = lms_names.parse(name)
    return found and (found.lms, found.user_id, found.name, found.original, found.late)


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("smithjane_12345_67890_03_block_assembly-1.ipynb",
         ("Canvas", "12345", "smithjane", "03_block_assembly-1.ipynb", False)),
        ("smithjane_LATE_12345_67890_03_block_assembly.ipynb",
         ("Canvas", "12345", "smithjane", "03_block_assembly.ipynb", True)),
        ("smithjane_late_12345_67890_03_block_assembly.ipynb",
         ("Canvas", "12345", "smithjane", "03_block_assembly.ipynb", True)),
        ("Omar Haddad_4711_assignsubmission_file_03_block_assembly.ipynb",
         ("Moodle", "4711", "Omar Haddad", "03_block_assembly.ipynb", None)),
        ("Omar Haddad_4711_assignsubmission_file_", ("Moodle", "4711", "Omar Haddad", "", None)),
        ("Lab 03_jdoe_attempt_2026-12-01-10-00-00_03_block_assembly.ipynb",
         ("Blackboard", "jdoe", "", "03_block_assembly.ipynb", None)),
        ("Lab 03_jdoe_attempt_2026-13-01-10-00-00_x.ipynb", None),  # no 13th month
        ("alice.ipynb", None),
        ("José Müller - Lab 2 (final) (1).ipynb", None),
        ("alice_03_block_assembly.ipynb", None),
    ],
)  # fmt: skip
def test_a_bulk_download_name_is_read_as_its_lms_writes_it(name, read):
    assert lms(name) == read


def test_blackboards_time_and_receipt_are_read():
    hand_in = lms_names.parse("Lab 03_jdoe_attempt_2026-12-01-10-00-00_notes.txt")
    receipt = lms_names.parse("Lab 03_jdoe_attempt_2026-12-01-10-00-00.txt")
    assert (hand_in.submitted, hand_in.receipt) == (datetime(2026, 12, 1, 10), False)
    assert (receipt.user_id, receipt.receipt) == ("jdoe", True)


def test_a_folder_of_lms_names_is_one_row_per_lms_id(tmp_path):
    for name in ["smithjane_12345_1_lab.ipynb", "smithjane_12345_2_lab-1.ipynb",
                 "smithjane_23456_3_lab.ipynb", "B_jdoe_attempt_2026-12-01-10-00-00_lab.ipynb",
                 "B_jdoe_attempt_2026-12-01-10-00-00.txt", "plain.ipynb"]:  # fmt: skip
        (tmp_path / name).write_text("{}", encoding="utf-8")
    moodle = tmp_path / "Omar Haddad_4711_assignsubmission_file_"  # Moodle's folder a student
    moodle.mkdir()
    (moodle / "lab.ipynb").write_text("{}", encoding="utf-8")
    found = {(s.student, s.hand_in.get("lms")): s for s in find_submissions(tmp_path, "lab")}
    assert sorted(found) == [
        ("12345", "Canvas"), ("23456", "Canvas"), ("4711", "Moodle"), ("jdoe", "Blackboard"),
        ("plain", None),
    ]  # two Jane Smiths stay two; Blackboard's receipt is no hand-in  # fmt: skip
    assert found[("4711", "Moodle")].name == "Omar Haddad"
    jdoe = found[("jdoe", "Blackboard")]
    assert (jdoe.hand_in["time"], jdoe.note) == ("2026-12-01T10:00:00", "")  # no "not graded"
    assert found[("plain", None)].hand_in["time_from"] == "the file's time"


def test_canvas_gradebook_export_is_a_roster(tmp_path):
    path = tmp_path / "canvas.csv"
    path.write_text(CANVAS, encoding="utf-8-sig")
    roster = rosters.read_roster(path)
    assert roster.lms == "Canvas" and roster.points_row["Student"] == "Points Possible"
    assert [(s.id, s.name, s.lms_ids) for s in roster.students] == [
        ("12345", "Smith, Jane", {"Canvas": "12345", "Blackboard": "jsmith"}),
        ("23456", "Smith, Jane", {"Canvas": "23456", "Blackboard": "jsmith2"}),
        ("34567", "Lee, Ann", {"Canvas": "34567", "Blackboard": "alee"}),
    ]  # the Points Possible and read-only rows skipped, a repeated row once


def test_moodle_grading_worksheet_is_a_roster(tmp_path):
    path = tmp_path / "moodle.csv"
    path.write_text(MOODLE, encoding="utf-8")
    roster = rosters.read_roster(path)
    assert [(s.id, s.name, s.lms_ids) for s in roster.students] == [
        ("4711", "Omar Haddad", {"Moodle": "4711"}),
        ("4712", "Zoë Roe", {"Moodle": "4712"}),
    ]


def sub(student, name="", **hand_in):
    return Submission(student, Path(f"{student}.ipynb"), name=name or student, hand_in=hand_in)


def test_hand_ins_match_by_their_lms_id_else_by_name(tmp_path):
    path = tmp_path / "canvas.csv"
    path.write_text(CANVAS, encoding="utf-8")
    roster = rosters.read_roster(path)
    found = [
        sub("23456", "smithjane", lms="Canvas", lms_id="23456"),  # the second Jane Smith
        sub("99999", "smithjane", lms="Canvas", lms_id="99999"),  # a name alike, no such id
        sub("jsmith", lms="Blackboard", lms_id="jsmith"),  # Blackboard's username: SIS Login ID
        sub("12345", "Ann Lee", lms="Moodle", lms_id="12345"),  # Moodle's id is no Canvas id
        sub("4711", "Jane Smith", lms="Moodle", lms_id="4711"),  # two Jane Smiths: no guess
    ]
    rows = rosters.apply_roster(found, roster)
    assert [(r.student, r.name, r.status, r.hand_in.get("roster")) for r in rows] == [
        ("23456", "Smith, Jane", "", None),
        ("99999", "smithjane", "", "unmatched"),
        ("12345", "Smith, Jane", "", None),
        ("34567", "Lee, Ann", "", None),  # by name, "Ann Lee" is "Lee, Ann"
        ("4711", "Jane Smith", "", "unmatched"),
    ]
    found = [sub("4711", "Ann Lee", lms="Moodle", lms_id="4711")]
    rows = rosters.apply_roster(found, roster)
    assert [(r.student, r.status, r.hand_in.get("roster")) for r in rows] == [
        ("34567", "", None), ("12345", "missing", "missing"), ("23456", "missing", "missing"),
    ]  # fmt: skip


POLICY = LatePolicy(parse_due("2026-12-01T23:59"), parse_amount("10%", "x"), None)


@pytest.mark.parametrize(
    ("hand_in", "policy", "points"),
    [
        ({"lms": "Canvas", "late_mark": False, "time": "2026-12-09T00:00:00"}, POLICY, None),
        ({"time": "2026-12-01T23:59:00", "time_from": "t"}, POLICY, None),
        ({"time": "2026-12-02T00:00:00", "time_from": "t"}, POLICY, -1.0),
        ({"time": "2026-12-03T23:59:00", "time_from": "t"}, POLICY, -2.0),
        ({"time": "2026-12-04T00:00:00", "time_from": "t"}, POLICY, -3.0),
        ({"lms": "Canvas", "late_mark": True, "time": "2026-11-30T00:00:00"}, POLICY, -1.0),
        ({"lms": "Canvas", "late_mark": True}, LatePolicy(), 0.0),
        ({"time": "2026-12-04T00:00:00", "time_from": "t"}, LatePolicy(), None),
        ({"time": "2026-12-30T00:00:00", "time_from": "t"},
         LatePolicy(POLICY.due, POLICY.per_day, parse_amount("2.5", "x")), -2.5),
        ({"time": "2026-12-03T00:00:00", "time_from": "t"},
         LatePolicy(POLICY.due, parse_amount("1.5", "x")), -3.0),
    ],
)  # fmt: skip
def test_the_late_policy_charges_each_day_begun_up_to_its_cap(hand_in, policy, points):
    entry = policy.entry(hand_in, 10.0)
    assert (entry and entry["points"]) == points


def test_late_options_are_checked_in_one_line():
    with pytest.raises(ValueError, match="give points"):
        parse_amount("ten", "--late-penalty")
    with pytest.raises(ValueError, match="like 2026-12-01T23:59"):
        parse_due("Dec 1")


def results():
    return [
        gradebook.Result("12345", "graded", "", {"ex1": 4.0, "ex2": 3.0}, name="Smith, Jane"),
        gradebook.Result("34567", "graded", "", {"ex1": 4.0, "ex2": 6.0}, name="Lee, Ann"),
        gradebook.Result("23456", "missing", "", name="Smith, Jane", hand_in={"roster": "missing"}),
    ]


def test_adjustments_apply_to_an_exercise_or_the_total_and_say_what_they_missed(tmp_path):
    path = tmp_path / "adjustments.csv"
    path.write_text(
        "Student,Exercise,Points,Reason\n12345,Exercise 2: the stack,2,regrade\n"
        '"Lee, Ann",,-1,late form\nbob,total,1,x\n12345,ex9,1,x\n',
        encoding="utf-8",
    )
    rows = results()
    problems = adj.apply_adjustments(rows, adj.read_adjustments(path), LAB, path)
    assert problems == [
        "adjustments.csv line 4: no student 'bob' in the gradebook (use its student column); "
        "not applied",
        "adjustments.csv line 5: no exercise 'ex9' in 03_block_assembly (ex1, ex2, or total); "
        "not applied",
    ]
    assert [gradebook.total(r, LAB) for r in rows] == [9.0, 9.0, 0.0]
    again = adj.apply_adjustments(rows, adj.read_adjustments(path), LAB, path)
    assert again == problems and [gradebook.total(r, LAB) for r in rows] == [9.0, 9.0, 0.0]
    text = gradebook.feedback_markdown(rows[0], LAB)
    assert "Score: **9 / 10**\n\n- Exercise 2: the stack: +2 (regrade)\n" in text


def test_a_bad_adjustments_row_is_named_with_its_line(tmp_path):
    path = tmp_path / "adjustments.csv"
    path.write_text("student,exercise,points,reason\nann,total,two,x\n", encoding="utf-8")
    with pytest.raises(adj.AdjustmentError, match="line 2: points 'two' is not a number"):
        adj.read_adjustments(path)
    path.write_text("who,what\n", encoding="utf-8")
    with pytest.raises(adj.AdjustmentError, match="needs a header row"):
        adj.read_adjustments(path)


def test_a_gradebook_edited_by_hand_is_found(tmp_path):
    out = tmp_path / "gradebook.csv"
    adj.refuse_hand_edits(out)  # none yet
    gradebook.write_gradebook(results(), LAB, out)
    adj.refuse_hand_edits(out)  # one from before hashes were kept
    adj.remember_written(out)
    adj.refuse_hand_edits(out)
    out.write_text(out.read_text().replace("7,10", "9,10"), encoding="utf-8")
    with pytest.raises(adj.AdjustmentError, match="put score changes in an adjustments file"):
        adj.refuse_hand_edits(out)


def test_the_gradebook_adds_its_columns_only_when_something_changed_a_total(tmp_path):
    rows = results()
    plain = gradebook.gradebook_rows(rows, LAB)[0]
    assert plain == ["student", "name", "file", "ex1", "ex2", "total", "max", "status", "reason"]
    rows[0].adjustments = [
        {"kind": "late", "test": "", "points": -1.0, "reason": "1 day late"},
        {"kind": "adjustment", "test": "ex2", "points": 2.0, "reason": "regrade"},
    ]
    table = gradebook.gradebook_rows(rows, LAB)
    assert table[0][5:8] == ["adjusted", "late", "total"] and table[0][-1] == "notes"
    assert table[1][:10] == ["12345", "Smith, Jane", "", "4", "3", "2", "1", "8", "10", "graded"]
    assert table[1][-1] == "1 day late; Exercise 2: the stack: +2 (regrade)"
    out = tmp_path / "gradebook.csv"
    gradebook.write_gradebook(rows, LAB, out)
    kept = orchestrate.merged([], out, LAB)  # read back: the scores as graded, nothing added twice
    assert [(r.student, r.scores, r.adjustments) for r in kept][0] == (
        "12345", {"ex1": 4.0, "ex2": 3.0}, []
    )  # fmt: skip


def roster_of(text, tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return rosters.read_roster(path)


def test_canvas_import_names_the_labs_column_as_the_export_does(tmp_path):
    roster = roster_of(CANVAS, tmp_path)
    rows = results()
    rows[0].adjustments = [{"kind": "late", "test": "", "points": -0.55, "reason": "x"}]
    table = lms_export.canvas_rows(rows, LAB, roster, "Lab 03: block assembly")
    assert table == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 03: block assembly (881)"],
        ["Points Possible", "", "", "", "", "10"],
        ["Smith, Jane", "12345", "S001", "jsmith", "A", "6.45"],
        ["Smith, Jane", "23456", "S002", "jsmith2", "A", ""],  # no hand-in: left as it is
        ["Lee, Ann", "34567", "", "alee", "B", "10"],
    ]
    assert lms_export.assignment_column(roster, "Block assembly!", "03_x") == (
        "Lab 03: block assembly (881)"  # by the lab's number
    )  # fmt: skip
    assert lms_export.assignment_column(roster, "Lab 5: loss", "05_loss") == "Lab 5: loss"


def test_moodle_import_is_its_worksheet_with_the_grade_filled(tmp_path):
    roster = roster_of(MOODLE, tmp_path)
    rows = [gradebook.Result("4711", "graded", "", {"ex1": 4.0, "ex2": 2.5})]
    path = tmp_path / "out.moodle.csv"
    lms_export.write_import("moodle", rows, LAB, roster, "Lab 03", path)
    written = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert [(r["Identifier"], r["Grade"], r["Maximum Grade"]) for r in written] == [
        ("Participant 4711", "6.5", "10.00"), ("Participant 4712", "", "10.00"),
    ]  # fmt: skip
    assert list(written[0]) == MOODLE.splitlines()[0].split(",")


def test_an_export_without_its_lms_roster_is_refused_before_grading(tmp_path):
    with pytest.raises(lms_export.ExportError, match="pass --roster with its gradebook export"):
        lms_export.check_roster("canvas", roster_of(MOODLE, tmp_path))
    with pytest.raises(lms_export.ExportError, match="its grading worksheet"):
        lms_export.check_roster("moodle", None)
