"""A class, not a folder: one grading run of hand-ins named and shaped as a real class hands them
in (a name that is not UTF-8, names a spreadsheet would run as formulas, an LMS's "Name - Lab
(final) (1)", one student with a file and a folder, a notebook of another lab with the same
exercise ids, a 100 MB print, terminal escapes in an error) and a roster with a student who
handed in nothing. Each is a row as an instructor expects, and the run never stops for one."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import time

import nbformat
import pytest
from grading_helpers import (
    FIXTURE,
    LAB,
    answered,
    cell,
    grade_folder,
    lab,
    read_rows,
    save,
    solved,
)

from course_utils.grading import cache, gradebook, orchestrate, submissions
from course_utils.grading import command as grading
from course_utils.grading import roster as rosters
from course_utils.grading.settings import Settings

FLOOD = """print("x" * 100_000_000)


def count_tokens(text):
    print("y" * 100_000_000)  # in the test cell, whose output the feedback shows
    return len(text.split())"""

ESCAPES = """def count_tokens(text):
    raise RuntimeError("\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b[31mboom\\x1b[0m")"""

SPY = """def one_hot(ids, vocab_size):
    print("the test called me with", ids.tolist(), vocab_size)
    if len(ids) == 2:  # right on the visible check, wrong on the hidden one
        return torch.eye(vocab_size)[ids]
    return torch.zeros(len(ids), vocab_size)"""

LEAK = """def one_hot(ids, vocab_size):
    if len(ids) != 2:  # a hidden test's input: raised in text the grader itself uses
        raise ValueError(f"timed out NameError kernel died scores 0 {ids.tolist()}")
    return torch.eye(vocab_size)[ids]"""

PROGRESS = re.compile(r"^graded \d+/\d+: ", re.MULTILINE)  # a hand-in graded, not cached
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
    save(answered(solved(lab()), ex1_answer=FLOOD), subs / "cafe.ipynb")
    os.rename(subs / "cafe.ipynb", os.fsencode(subs) + b"/caf\xe9.ipynb")  # as a zip unpacks
    jose = answered(solved(lab()), ex1_answer=ESCAPES, ex3_answer=SPY)
    save(jose, subs / "José Müller - Lab 2 (final) (1).ipynb")
    save(answered(solved(lab()), ex3_answer=LEAK), subs / "leaky.ipynb")
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
    run["texts"] = {  # before the runs below write theirs
        (p.parent.name, p.stem): p.read_text(encoding="utf-8")
        for p in root.glob("feedback*/*.md")
    }  # fmt: skip
    # the same class with another --jobs and --timeout: nothing graded again
    with contextlib.redirect_stdout(io.StringIO()) as log:
        grade_folder(root, "--roster", str(roster), "--jobs", "1", "--timeout", "30")
    run["again"] = log.getvalue()
    # leaky fixes exercise 3 and is re-graded alone: only its row and its feedback change
    save(solved(lab()), subs / "leaky.ipynb")
    before = {p: p.read_bytes() for p in root.glob("feedback*/*.md")}
    outcomes_before = outcome_rows(run["out"])
    argv = [str(FIXTURE), str(subs / "leaky.ipynb"), "--out", str(run["out"])]
    with contextlib.redirect_stdout(io.StringIO()):
        code = grading.main([*argv, "--feedback", str(run["feedback"]), "--roster", str(roster)])
    run["alone"] = {"code": code, "before": before, "rows": read_rows(run["out"]),
                    "after": {p: p.read_bytes() for p in root.glob("feedback*/*.md")},
                    "outcomes": (outcomes_before, outcome_rows(run["out"]))}  # fmt: skip
    # then a test's points fixed in the solution: every hand-in re-scored from its stored
    # outcome, no kernel run, and no student told they edited the test cell
    fixed = nbformat.read(FIXTURE, as_version=4)
    cell(fixed, "ex2_test").metadata.nbgrader["points"] = 2
    nbformat.write(fixed, root / f"{LAB}.ipynb")
    with contextlib.redirect_stdout(io.StringIO()) as log:
        fixed_run = grade_folder(root, "--roster", str(roster), lab=root / f"{LAB}.ipynb")
    run["fixed"], run["fixed_log"] = fixed_run["rows"], log.getvalue()
    return run


def outcome_rows(out):
    """student -> the row's outcome as stored beside the gradebook (feedback and all)."""
    data = json.loads(gradebook.outcomes_path(out).read_text(encoding="utf-8"))
    return {row["student"]: row for row in data["rows"]}


def feedback(run, name, instructor=False):
    return run["texts"][("feedback.instructor" if instructor else "feedback", name)]


def test_every_hand_in_and_every_student_on_the_roster_is_a_row(klass):
    assert klass["code"] == 3  # written, with a hand-in on no roster row and a student missing
    students = set(klass["rows"])
    assert {"caf-xe9", "Jose-Muller", "dora", "wrong", "zed", "leaky"} <= students
    assert len(students) == 6 + len(FORMULAS)
    assert "x09TAB" in students  # a tab in a file name, shown as an escape


def test_a_name_that_is_not_utf8_is_shown_with_escapes_and_graded(klass):
    row = klass["rows"]["caf-xe9"]
    assert (row["name"], row["file"], row["status"]) == ("caf\\xe9", "caf\\xe9.ipynb", "graded")
    assert "not on the roster" in row["reason"]


def test_a_100_mb_print_is_cut_and_the_solved_lab_keeps_its_marks(klass):
    row = klass["rows"]["caf-xe9"]
    assert (row["total"], row["max"]) == ("6", "6"), row["reason"]
    assert "[the grader cut this output: 99,000,000 more characters]" in feedback(klass, "caf-xe9")


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


def test_an_error_raised_on_a_hidden_input_reaches_the_instructor_alone(klass):
    student = feedback(klass, "leaky")
    assert "## Exercise 3: 0 / 3" in student
    assert "ValueError while this exercise's tests ran, hidden tests included" in student
    assert "[1, 1, 0]" not in student and "timed out" not in student
    instructor = feedback(klass, "leaky", instructor=True)
    assert "ValueError: timed out NameError kernel died scores 0 [1, 1, 0]" in instructor


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
    # graded: café 2/1/3, José 0/1/0, dora 2/1/3, leaky 2/1/0
    assert (rows["ex1_test"]["mean"], rows["ex1_test"]["zeros"]) == ("1.50", "1")
    assert (rows["ex3_test"]["title"], rows["ex3_test"]["count"]) == ("Exercise 3", "4")
    assert rows["status: missing"]["count"] == "1"
    # the same code in two hand-ins or more, named as a hint (the lab's stubs never are)
    hints = {e: r["title"] for e, r in rows.items() if e.startswith("hint: identical")}
    assert hints == {
        "hint: identical ex1_answer": "dora, leaky",
        "hint: identical ex2_answer": "Jose-Muller, caf-xe9, dora, leaky",
        "hint: identical ex3_answer": "caf-xe9, dora",
    }


def test_another_jobs_and_timeout_keep_the_cache(klass):
    assert "wrote " in klass["again"]
    assert PROGRESS.findall(klass["again"]) == [], klass["again"]


def test_one_student_regraded_alone_keeps_every_other_row_and_feedback(klass):
    alone = klass["alone"]
    assert alone["code"] == 3  # the class still has its missing student and unmatched hand-in
    changed = sorted(p.name for p in alone["before"] if alone["before"][p] != alone["after"][p])
    assert changed == ["leaky.md", "leaky.md"]  # the student's file and the instructor's copy
    assert alone["after"].keys() == alone["before"].keys()
    assert alone["rows"]["leaky"]["total"] == "6"
    others = {s: r for s, r in alone["rows"].items() if s != "leaky"}
    assert others == {s: r for s, r in klass["rows"].items() if s != "leaky"}
    # the stored outcomes too, which the next run reads: everyone's feedback kept as data (the
    # scores are the CSV's, above; a row not graded gets its zeros written out, as rescored)
    before, after = alone["outcomes"]
    assert after.keys() == before.keys()
    kept = ("feedback", "status", "reason", "limits", "answers", "adjustments", "name", "file")
    assert {s: {k: r[k] for k in kept} for s, r in after.items() if s != "leaky"} == {
        s: {k: r[k] for k in kept} for s, r in before.items() if s != "leaky"
    }
    assert before["dora"]["feedback"]["ex1_test"]["message"] == "passed"
    assert after["leaky"]["feedback"] != before["leaky"]["feedback"]


def test_a_points_only_fix_rescores_every_hand_in_without_a_kernel(klass):
    assert PROGRESS.findall(klass["fixed_log"]) == [], klass["fixed_log"]  # nothing graded
    rows = klass["fixed"]
    assert {row["max"] for row in rows.values()} == {"7"}
    assert (rows["dora"]["total"], rows["dora"]["ex2_test"]) == ("7", "2")
    assert (rows["Jose-Muller"]["total"], rows["Jose-Muller"]["ex2_test"]) == ("2", "2")
    assert not [r["reason"] for r in rows.values() if "restored edited" in r["reason"]]


# ---------------------------------------------------------------------------------------------
# Names, cells and the cache, without a kernel


@pytest.mark.parametrize(
    ("cell", "safe"),
    [
        ("=1+2", "'=1+2"),
        ("+SUM(A1)", "'+SUM(A1)"),
        ("-2", "'-2"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("alice", "alice"),
        ("a=b", "a=b"),
    ],
)
def test_a_cell_a_spreadsheet_would_run_gets_a_leading_quote(cell, safe):
    assert gradebook.spreadsheet_safe(cell) == safe


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("\x1b]52;c;ZXZpbA==\x07boom", "boom"),  # OSC 52: write the clipboard
        ("\x1b]0;title\x1b\\ok", "ok"),  # OSC ended by ST
        ("\x1b[2J\x1b[H\x1b[31mred\x1b[0m", "red"),  # clear, home, colours
        ("a\x1bcb", "ab"),  # RIS: reset the terminal
        ("x\x9b2Jy", "xy"),  # 8-bit CSI
        ("bell\x07 back\x08 cr\r nul\x00", "bell back cr nul"),
        ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
    ],
)
def test_escape_sequences_and_control_characters_are_removed(text, clean):
    assert gradebook.without_controls(text) == clean


@pytest.mark.parametrize(
    ("stem", "name", "sid"),
    [
        ("José Müller - Lab 2 (final) (1)", "José Müller", "Jose-Muller"),
        (os.fsdecode(b"caf\xe9"), "caf\\xe9", "caf-xe9"),
        ("alice_grading_fixture", "alice", "alice"),
        ("bob (2)", "bob", "bob"),
        ("s001", "s001", "s001"),
        ("=1+2", "=1+2", "1-2"),
    ],
)
def test_a_student_id_and_name_are_read_from_the_file_name(stem, name, sid):
    assert submissions.display_name(stem, LAB) == name
    assert submissions.student_id(name) == sid


def test_a_roster_names_the_hand_ins_and_adds_who_handed_in_nothing(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("Student ID,Full Name\n17,José Müller\n18,Ann Lee\n", encoding="utf-8")
    found = [
        submissions.Submission("Jose-Muller", tmp_path / "a.ipynb", name="José Müller"),
        submissions.Submission("18", tmp_path / "b.ipynb", name="18"),
        submissions.Submission("stranger", tmp_path / "c.ipynb", name="stranger"),
    ]
    rows = rosters.apply_roster(found, rosters.read_roster(roster))
    assert [(r.student, r.name, r.status, r.note) for r in rows] == [
        ("17", "José Müller", "", ""),
        ("18", "Ann Lee", "", ""),
        ("stranger", "stranger", "", "not on the roster"),
    ]
    roster.write_text("who\nann\n", encoding="utf-8")
    with pytest.raises(rosters.RosterError, match="no id column"):
        rosters.read_roster(roster)


def test_the_cache_keeps_results_across_jobs_and_limits_unless_a_limit_decided_them(tmp_path):
    solution = tmp_path / "solution.ipynb"
    solution.write_bytes(FIXTURE.read_bytes())
    key = cache.run_key(solution, Settings().key())
    store = cache.ResultCache(tmp_path / "c", key)
    points = {"ex1_test": 2.0}
    passed = gradebook.Result("ann", "graded", "", {"ex1_test": 2.0}, points=points)
    slow = gradebook.Result("bob", "graded", "", {"ex1_test": 0.0}, limits=["time"], points=points)
    big = gradebook.Result("cy", "graded", "", {"ex1_test": 0.0}, limits=["memory"], points=points)
    old = {"time": [5, 1800], "memory": [2**30, "systemd-run"]}
    longer = {**old, "time": [50, 1800]}
    larger = {**old, "memory": [2**31, "systemd-run"]}
    for result in (passed, slow, big):
        store.put(result.student, result.student.encode(), result, old)
    assert store.get("ann", b"ann", longer) == passed  # another --timeout: kept
    assert store.get("ann", b"ann", larger) == passed  # another --memory (or --jobs): kept
    assert store.get("bob", b"bob", longer) is None  # it timed out: graded again
    assert store.get("bob", b"bob", larger) == slow  # more memory changes nothing for it
    assert store.get("cy", b"cy", larger) is None  # it ran out of memory: graded again
    assert store.get("cy", b"cy", longer) == big
    # another point count re-scores from the stored outcome
    assert store.get("ann", b"ann", old, {"ex1_test": 5.0}).scores == {"ex1_test": 5.0}
    # outputs of a re-published solution keep the key; so do a test's points; its code not
    nb = nbformat.read(solution, as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="hi")]
    nbformat.write(nb, solution)
    assert cache.run_key(solution, Settings().key()) == key
    cell(nb, "ex2_test").metadata.nbgrader["points"] = 2
    nbformat.write(nb, solution)
    assert cache.run_key(solution, Settings().key()) == key
    cell(nb, "ex2_test").source += "\n# a fix"
    nbformat.write(nb, solution)
    assert cache.run_key(solution, Settings().key()) != key


def test_an_empty_folder_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    argv = [str(FIXTURE), str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv")]
    assert grading.main([*argv, "--no-sandbox"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it is empty" in err[0]
    assert not (tmp_path / "g.csv").exists()


def test_a_timeout_close_to_the_solutions_own_time_is_warned():
    assert orchestrate.timeout_warning({orchestrate.SLOWEST: 3.0}, 5).startswith(
        "warning: --timeout 5 s is under twice the solution's slowest cell (3.0 s here)"
    )
    assert orchestrate.timeout_warning({orchestrate.SLOWEST: 3.0}, 6) == ""


def test_one_student_regraded_replaces_their_row_and_keeps_the_others(tmp_path):
    lab_ = gradebook.Lab(LAB, tmp_path / "db", tmp_path / "release", {"ex1_test": 2.0})
    out = tmp_path / "gradebook.csv"
    before = [
        gradebook.Result("=ann", "graded", "", {"ex1_test": 2.0}, name="=ann", file="=ann.ipynb"),
        gradebook.Result("bob", "graded", "timed out", {"ex1_test": 0.0}, name="Bob"),
    ]
    gradebook.write_gradebook(before, lab_, out)
    again = gradebook.Result("bob", "graded", "", {"ex1_test": 2.0}, name="Bob", file="bob.ipynb")
    rows = orchestrate.merged([again], out, lab_)
    gradebook.write_gradebook(rows, lab_, out)
    assert out.read_text(encoding="utf-8").splitlines() == [
        "student,name,file,ex1_test,total,max,status,reason",
        "'=ann,'=ann,'=ann.ipynb,2,2,2,graded,",  # read back and written again, escaped once
        "bob,Bob,bob.ipynb,2,2,2,graded,",
    ]
    ann = gradebook.Result("=ann", "graded", "", {"ex1_test": 1.0}, name="=ann")
    merged = orchestrate.merged([ann], out, lab_)
    assert [r.student for r in merged] == ["=ann", "bob"]  # replaced, once


def test_a_file_for_submissions_is_graded_as_one_students_hand_in(tmp_path):
    subs = tmp_path / "subs"
    save(lab(), subs / "ann.ipynb")
    save(lab(), subs / "bob.ipynb")
    (only,) = submissions.find_submissions(subs, LAB, only=subs / "bob.ipynb")
    assert (only.student, only.file) == ("bob", "bob.ipynb")


def test_the_per_cell_timeout_is_derived_from_the_solutions_slowest_cell(monkeypatch, tmp_path):
    lines = []
    for slowest, timeout in ((4.21, 43), (0.5, 30), (0.0, 30)):
        monkeypatch.setattr(
            orchestrate, "reference_records", lambda *a, s=slowest: {orchestrate.SLOWEST: s}
        )
        settings, _ = orchestrate.derive_timeout(None, FIXTURE, Settings(), None, tmp_path,
                                             lines.append)  # fmt: skip
        assert settings.timeout == timeout
    assert lines[0] == (
        "grade: per-cell timeout 43 s (10x the solution's slowest cell, 4.2 s here, at least "
        "30 s; --timeout sets another)"
    )
