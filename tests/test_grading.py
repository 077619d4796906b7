"""The grading command: nbgrader's autograder over a folder of submissions, fair under bad input.

The fixture lab (tests/fixtures/grading/grading_fixture.ipynb) has three exercises worth 2, 1 and
3 points; the third has a hidden test. The submissions are built here from that solution and its
generated lab, and one grading run over all of them (module scope, sandboxed) is shared by most
tests. tests/test_sandbox.py, test_tamper.py and test_accidents.py build on the helpers here.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
import types
import uuid
from pathlib import Path

import nbformat
import pytest
from grading_helpers import (
    FIXTURE,
    LAB,
    TESTS,
    TIMEOUT,
    answered,
    cell,
    feedback_of,
    gone,
    grade_folder,
    lab,
    points,
    save,
    solution,
    solved,
)

from course_utils.grading import autograde, gradebook, orchestrate, scoring, submissions, workers
from course_utils.grading import command as grading
from course_utils.grading.settings import Settings

# ---------------------------------------------------------------------------------------------
# Building submissions


WRONG = {
    "ex1_answer": "def count_tokens(text):\n    return len(text)",
    "ex2_answer": "def char_vocab(text):\n    return sorted(text)",
    "ex3_answer": "def one_hot(ids, vocab_size):\n    return ids.float()",
}

ALONE = """import os


def count_tokens(text):
    # scores only if the kernel's working directory is empty: not even the graded notebook,
    # whose restored test cells hold the hidden tests, is in it
    assert os.listdir(".") == [], os.listdir(".")
    return len(text.split())"""

NOISY_ONE_HOT = """def one_hot(ids, vocab_size):
    print("\\n".join(f"debug line {i}" for i in range(3000)))
    print("x" * 100_000)
    return torch.eye(vocab_size)[ids]"""

PATCH_CHECKS = """import course_utils.lessons.checks


def _always_pass(*args, **kwargs):
    print("check skipped")


course_utils.lessons.checks.check_tensor = course_utils.lessons.checks.check_value = _always_pass
check_tensor = check_value = _always_pass


def one_hot(ids, vocab_size):
    return ids.float()"""


KILL_THE_GRADER = """import os
import signal

os.kill(os.getppid(), signal.SIGKILL)
assert os.getpid() == 2, os.getpid()  # pid 2: in a PID namespace of its own


def count_tokens(text):
    return len(text.split())"""


def build_submissions(folder):
    """The hand-ins of the shared run. `messy` and `tamper` each combine three behaviours,
    told apart by their exercises' points and the notes in their rows."""
    shutil.copyfile(FIXTURE, folder / "solution.ipynb")
    save(lab(), folder / "untouched.ipynb")
    save(
        solved(answered(lab(), ex1_answer=ALONE), "ex3_answer"), folder / "partial" / f"{LAB}.ipynb"
    )
    save(answered(lab(), **WRONG), folder / "wrong.ipynb")
    messy = answered(
        lab(),
        ex1_answer='raise RuntimeError("boom")',
        ex2_answer="import time\n\nwhile True:\n    time.sleep(0.1)",  # costs no CPU
        ex3_answer=NOISY_ONE_HOT,
    )
    save(messy, folder / "messy.ipynb")
    tamper = solved(
        answered(lab(), ex1_answer="def count_tokens(text):\n    return 0"), "ex2_answer"
    )
    cell(tamper, "ex1_test").source = 'check_value("count_tokens", 0, 0)  # edited to pass'
    tamper.cells.remove(cell(tamper, "ex2_test"))
    answered(tamper, ex3_answer=PATCH_CHECKS)
    save(tamper, folder / "tamper.ipynb")
    save(answered(lab(), ex1_answer=KILL_THE_GRADER), folder / "killer.ipynb")
    exits = answered(
        solved(lab(), "ex1_answer", "ex3_answer"), ex2_answer="import os\n\nos._exit(3)"
    )
    save(exits, folder / "exits.ipynb")
    text = FIXTURE.read_text(encoding="utf-8")
    (folder / "corrupt.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")
    (folder / "notes.ipynb").write_text("print('my answers')\n", encoding="utf-8")
    (folder / "essay.pdf").write_bytes(b"%PDF-1.4\n\x00\xff\xfe binary")
    other = lab()
    for c in other.cells:
        c.metadata["nbgrader"]["grade_id"] = "other_" + c.metadata["nbgrader"]["grade_id"]
    save(other, folder / "other_lab.ipynb")
    (folder / "empty").mkdir()
    (folder / "empty" / "README.txt").write_text("forgot to attach it", encoding="utf-8")
    (folder / "linked.ipynb").symlink_to(FIXTURE.resolve())  # a link to the answer key
    calls = "import torch.nn.functional as F\n\none_hot = lambda ids, n: F.one_hot(ids, n) * 1.0"
    save(answered(solved(lab()), ex3_answer=calls), folder / "calls_reference.ipynb")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One grading run through the command line entry point, shared by the tests below."""
    root = tmp_path_factory.mktemp("grading")
    (root / "submissions").mkdir()
    build_submissions(root / "submissions")
    return {**grade_folder(root), "finished": time.time(), "submissions": root / "submissions"}


# ---------------------------------------------------------------------------------------------
# The shared run


def test_the_gradebook_has_a_column_per_test_cell_and_a_row_per_student(run):
    assert run["code"] == 0
    header = run["out"].read_text().splitlines()[0]
    assert header == "student,name,file,ex1_test,ex2_test,ex3_test,total,max,status,reason"
    assert sorted(run["rows"]) == [
        "calls_reference", "corrupt", "empty", "essay", "exits", "killer", "linked", "messy",
        "notes", "other_lab", "partial", "solution", "tamper", "untouched", "wrong",
    ]  # fmt: skip
    assert {row["max"] for row in run["rows"].values()} == {"6"}


def test_the_solution_gets_full_marks(run):
    row = run["rows"]["solution"]
    assert (points(row), row["total"], row["status"], row["reason"]) == (TESTS, "6", "graded", "")


def test_the_untouched_lab_gets_zero(run):
    row = run["rows"]["untouched"]
    assert points(row) == {"ex1_test": 0, "ex2_test": 0, "ex3_test": 0}
    assert (row["total"], row["status"]) == ("0", "graded")
    assert "NotImplementedError" in feedback_of(run, "untouched")


def test_a_partly_solved_lab_gets_the_points_of_its_solved_exercises(run):
    row = run["rows"]["partial"]  # submitted as partial/grading_fixture.ipynb
    assert points(row) == {"ex1_test": 2, "ex2_test": 0, "ex3_test": 3}
    assert row["total"] == "5"


def test_each_submission_runs_in_an_empty_folder(run):
    # partial's count_tokens asserts that its working directory is empty
    assert points(run["rows"]["partial"])["ex1_test"] == 2


def test_wrong_answers_get_no_points_and_the_checks_message(run):
    row = run["rows"]["wrong"]
    assert points(row) == {"ex1_test": 0, "ex2_test": 0, "ex3_test": 0}
    text = feedback_of(run, "wrong")
    assert "## Exercise 1: 0 / 2\n\n\u274c count_tokens('a b c'): expected 3 got 5" in text
    assert "char_vocab('hello'): expected 4 items got 5: extra 'l'" in text
    assert "one_hot([0, 2], 3): wrong shape: expected (2, 3) got (2,)" in text


def test_a_cell_that_raises_costs_its_exercise_only(run):
    row = run["rows"]["messy"]
    assert points(row)["ex1_test"] == 0
    text = feedback_of(run, "messy")
    assert "- before it: ex1_answer: RuntimeError: boom" in text
    # the name its failed answer never defined, in the checks' one line (no traceback)
    assert "\u274c count_tokens is not defined: this exercise is not done yet" in text


def test_an_infinite_loop_times_out_and_the_run_goes_on(run):
    row = run["rows"]["messy"]
    assert points(row) == {"ex1_test": 0, "ex2_test": 0, "ex3_test": 3}
    assert row["status"] == "graded"
    assert row["reason"] == f"timed out after {TIMEOUT} s: ex2_answer"
    assert f"ex2_answer: timed out after {TIMEOUT} s and was interrupted" in feedback_of(
        run, "messy"
    )


def test_a_huge_output_is_truncated_in_the_feedback(run):
    # ex3's test has hidden tests: what it printed is in the instructor's copy only
    assert "debug line" not in feedback_of(run, "messy")
    instructor = run["feedback"].with_name("feedback.instructor")
    text = (instructor / "messy.md").read_text(encoding="utf-8")
    assert len(text) < 12_000
    assert "debug line 0\n" in text
    assert "debug line 39\n" in text and "debug line 40\n" not in text
    assert "output truncated" in text


def test_an_edited_test_cell_is_restored_and_earns_nothing(run):
    row = run["rows"]["tamper"]
    assert points(row)["ex1_test"] == 0
    assert "restored edited cells: ex1_test" in row["reason"]


def test_a_deleted_test_cell_is_restored_and_run(run):
    row = run["rows"]["tamper"]
    assert points(row)["ex2_test"] == 1  # the answer is right, and the restored test ran
    assert "restored deleted cells: ex2_test" in row["reason"]


def test_monkeypatched_checks_do_not_fool_the_hidden_tests(run):
    row = run["rows"]["tamper"]
    assert points(row)["ex3_test"] == 0
    assert row["total"] == "1"
    # the patched visible check reported nothing to the grader
    assert "\u274c one_hot([0, 2], 3): this check did not report" in feedback_of(run, "tamper")


def test_a_kernel_that_dies_costs_only_the_cells_it_did_not_run(run):
    row = run["rows"]["exits"]  # its exercise 2 answer ends the kernel's process
    assert (row["status"], points(row)) == ("graded", {"ex1_test": 2, "ex2_test": 0, "ex3_test": 0})
    assert row["reason"] == "the kernel died in ex2_answer; the cells after it did not run"
    assert "not run: the kernel had died" in feedback_of(run, "exits")


def test_unreadable_files_are_reported_in_the_status_column(run):
    rows = run["rows"]
    statuses = {s: (rows[s]["status"], rows[s]["total"]) for s in ("corrupt", "notes", "essay")}
    assert statuses == {
        "corrupt": ("corrupt", "0"),
        "notes": ("not_a_notebook", "0"),
        "essay": ("not_a_notebook", "0"),
    }
    assert rows["corrupt"]["reason"].startswith("corrupt.ipynb is not valid JSON")
    assert rows["essay"]["reason"] == "essay.pdf is not a notebook; expected essay.ipynb"


def test_a_link_to_the_answer_key_scores_0_and_says_why(run):
    row = run["rows"]["linked"]
    assert (row["status"], row["total"]) == ("not_regular", "0")
    assert row["reason"].startswith("linked.ipynb is a symbolic link (to ")
    text = feedback_of(run, "linked")
    assert "Not graded (not_regular): linked.ipynb is a symbolic link" in text


def test_an_answer_that_uses_a_forbidden_callable_scores_0_by_default(run):
    row = run["rows"]["calls_reference"]  # ex3 asks for one_hot without F.one_hot
    note = (
        "Exercise 3: your answer uses torch.nn.functional.one_hot when its test runs; "
        "write it yourself instead"
    )
    assert (points(row), row["reason"]) == ({**TESTS, "ex3_test": 0}, note)
    message = f"\u274c {note}: this exercise scores 0"
    assert f"## Exercise 3: 0 / 3\n\n{message}\n\n- before it: {note}\n" in feedback_of(
        run, "calls_reference"
    )


def test_a_forbidden_call_scores_such_an_exercise_0_and_says_so():
    forbidden = {"ex3_answer": {"forbidden": ["torch.nn.functional.one_hot"], "test": "ex3_test"}}
    lab_ = gradebook.Lab(LAB, Path("db"), Path("release"), TESTS, forbidden=forbidden)
    uses = {"ex3_answer": ["torch.nn.functional.one_hot"]}
    note = (
        "ex3_test: your answer uses torch.nn.functional.one_hot when its test runs; "
        "write it yourself instead"
    )
    for forbid, ex3 in ((False, 3.0), (True, 0.0)):
        row = gradebook.Result(
            "ann", "graded", "", dict(TESTS), {"ex3_test": {"message": "passed"}}
        )
        row = scoring.with_forbidden(row, uses, lab_, forbid)
        assert row.scores == {**TESTS, "ex3_test": ex3}
        assert row.reason == note
    assert row.feedback["ex3_test"]["message"] == f"\u274c {note}: this exercise scores 0"
    parser = grading.configure(argparse.ArgumentParser())
    common = [LAB, str(FIXTURE.parent), "--out", "g.csv", "--no-sandbox"]
    assert grading.settings_from(parser.parse_args(common)).forbid_calls  # the default
    allow = parser.parse_args([*common, "--allow-forbidden"])
    assert not grading.settings_from(allow).forbid_calls  # old names: test_grading_settings


def test_a_notebook_of_another_lab_is_reported(run):
    row = run["rows"]["other_lab"]
    assert (row["status"], row["total"]) == ("wrong_lab", "0")
    assert "not those of grading_fixture" in row["reason"]


def test_a_student_folder_without_the_lab_is_missing(run):
    row = run["rows"]["empty"]
    assert (row["status"], row["reason"]) == (
        "missing",
        "no grading_fixture.ipynb in empty/ (no notebook)",
    )


def test_a_sandboxed_notebook_cannot_kill_its_grader(run):
    # killer's answer cell sends SIGKILL to its parent: in its PID namespace, that is the
    # sandbox's init, which ignores it; the cell goes on to define its answer, which scores
    row = run["rows"]["killer"]
    assert (row["status"], points(row), row["reason"]) == (
        "graded", {"ex1_test": 2, "ex2_test": 0, "ex3_test": 0}, ""
    )  # fmt: skip
    assert run["rows"]["solution"]["total"] == "6"


def test_feedback_has_a_file_per_student_with_points_and_messages(run):
    assert sorted(p.stem for p in run["feedback"].iterdir()) == sorted(run["rows"])
    text = feedback_of(run, "solution")
    assert text.startswith("# grading_fixture: feedback for solution\n\nScore: **6 / 6**\n")
    assert "## Exercise 3: 3 / 3\n\npassed\n" in text
    assert "Not graded (corrupt): corrupt.ipynb is not valid JSON" in feedback_of(run, "corrupt")


def test_a_rerun_gives_the_same_rows_and_feedback(run, tmp_path):
    again = tmp_path / "submissions"
    again.mkdir()
    for name in ("tamper.ipynb", "corrupt.ipynb", "other_lab.ipynb", "empty"):
        source = run["submissions"] / name
        copy = shutil.copytree if source.is_dir() else shutil.copyfile
        copy(source, again / name)
    out, feedback = tmp_path / "gradebook.csv", tmp_path / "feedback"
    argv = [str(FIXTURE), str(again), "--out", str(out), "--feedback", str(feedback)]
    assert grading.main([*argv, "--timeout", str(TIMEOUT), "--jobs", "2"]) == 0
    first = run["out"].read_text().splitlines()
    lines = out.read_text().splitlines()
    assert lines[0] == first[0]
    assert all(line in first for line in lines[1:]), lines
    for md in feedback.iterdir():
        assert md.read_bytes() == (run["feedback"] / md.name).read_bytes()


# ---------------------------------------------------------------------------------------------
# Limits, the gradebook file, the command line (no kernels)


def test_a_worker_past_the_total_limit_is_killed_with_everything_it_started(tmp_path):
    # a worker that starts a child in a session of its own (as a kernel is), then hangs
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " start_new_session=True)\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    started = time.monotonic()
    command = [sys.executable, "-c", script]
    assert workers.run_with_limit(subprocess.run, (command,), tmp_path, limit=3) is None
    assert time.monotonic() - started < 15
    assert gone(int((tmp_path / "child.pid").read_text()), since=time.time())


def test_a_killed_worker_is_a_row_with_status_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(
        orchestrate, "run_with_limit", lambda target, args, workdir, limit, watch: None
    )
    lab_ = gradebook.Lab(LAB, tmp_path / "db", tmp_path / "release", TESTS)
    sub = submissions.Submission("slow", tmp_path / "slow.ipynb")
    settings = Settings(timeout=TIMEOUT, total_timeout=60)
    result, records, calls = orchestrate.grade_safely(lab_, sub, tmp_path / "work", settings)
    assert records == {} and calls == {}
    assert (result.status, result.reason) == (
        "killed",
        "ran past the 60 s limit for one submission (--total-timeout)",
    )


def make_results():
    lab_ = gradebook.Lab(LAB, Path("db"), Path("release"), TESTS)
    results = [
        gradebook.Result("zoe", "graded", "", {"ex1_test": 2.0, "ex2_test": 0.0, "ex3_test": 1.5}),
        gradebook.Result("amy", "corrupt", "amy.ipynb is not valid JSON"),
        gradebook.Result("bo, jr", "graded", "note\nwith a newline", {"ex1_test": 2.0}),
    ]
    return results, lab_


def test_the_gradebook_is_sorted_and_the_same_bytes_whatever_the_order(tmp_path):
    results, lab_ = make_results()
    gradebook.write_gradebook(results, lab_, tmp_path / "a.csv")
    gradebook.write_gradebook(results[::-1], lab_, tmp_path / "b.csv")
    text = (tmp_path / "a.csv").read_bytes()
    assert text == (tmp_path / "b.csv").read_bytes()
    assert text.decode().splitlines() == [
        "student,name,file,ex1_test,ex2_test,ex3_test,total,max,status,reason",
        "amy,amy,,0,0,0,0,6,corrupt,amy.ipynb is not valid JSON",
        '"bo, jr","bo, jr",,2,0,0,2,6,graded,note with a newline',
        "zoe,zoe,,2,0,1.5,3.5,6,graded,",
    ]


def test_a_failed_write_leaves_the_previous_gradebook_whole(tmp_path, monkeypatch):
    out = tmp_path / "gradebook.csv"
    out.write_text("previous gradebook\n")
    results, lab_ = make_results()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(gradebook.atomic_write_text.__globals__["os"], "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        gradebook.write_gradebook(results, lab_, out)
    assert out.read_text() == "previous gradebook\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gradebook.csv"]


def test_submissions_are_found_as_files_or_folders(tmp_path):
    (tmp_path / "ann.ipynb").write_text("{}")
    save(lab(), tmp_path / "bob" / f"{LAB}.ipynb")
    save(lab(), tmp_path / "cat" / LAB / f"{LAB}.ipynb")  # as nbgrader collects it
    save(lab(), tmp_path / "dan" / "my lab.ipynb")
    save(lab(), tmp_path / "dan" / ".ipynb_checkpoints" / "my lab-checkpoint.ipynb")
    (tmp_path / ".DS_Store").write_text("")
    (tmp_path / "gradebook.csv").write_text("")
    found = submissions.find_submissions(tmp_path, LAB, skip=[tmp_path / "gradebook.csv"])
    summary = [
        (s.student, s.path and s.path.relative_to(tmp_path).as_posix(), s.note) for s in found
    ]
    assert summary == [
        ("ann", "ann.ipynb", ""),
        ("bob", f"bob/{LAB}.ipynb", ""),
        ("cat", f"cat/{LAB}/{LAB}.ipynb", ""),
        ("dan", "dan/my lab.ipynb", f"graded dan/my lab.ipynb (expected {LAB}.ipynb)"),
    ]


def test_an_unreadable_hand_in_is_a_row_not_a_crash(tmp_path):
    save(lab(), tmp_path / "subs" / "ann.ipynb")
    (ann,) = submissions.find_submissions(tmp_path / "subs", LAB)
    (tmp_path / "subs" / "ann.ipynb").unlink()  # gone between finding and reading
    row = submissions.private_copy(ann, tmp_path / "subs", tmp_path / "copy")
    assert (row.student, row.path, row.status) == ("ann", None, "not_a_notebook")
    assert row.reason.startswith("ann.ipynb cannot be read (No such file or directory)")


def links_and_special_files(folder):
    """A folder of hand-ins that are not regular files, next to ones that are."""
    outside = save(solution(), folder.parent / "elsewhere" / f"{LAB}.ipynb")
    save(lab(), folder / "ann.ipynb")
    (folder / "bob.ipynb").symlink_to(outside)  # a link to the answer key
    (folder / "cat").symlink_to(outside.parent)  # a student folder that is a link
    (folder / "dan").mkdir()
    (folder / "dan" / f"{LAB}.ipynb").symlink_to(outside)
    os.mkfifo(folder / "eve.ipynb")  # opening it for reading would block
    os.link(outside, folder / "fay.ipynb")  # a hard link to a file outside the folder
    save(lab(), folder / "gus.ipynb")
    os.link(folder / "gus.ipynb", folder / "hal.ipynb")  # both names inside: regular files
    (folder / "ivy.ipynb").symlink_to(folder / "gone.ipynb")  # a broken link
    save(lab(), folder / "jo" / "sub" / f"{LAB}.ipynb")
    (folder / "jo" / "sub").rename(folder / "jo" / "real")
    (folder / "jo" / "sub").symlink_to("real")  # reached only through a linked folder


def test_links_fifos_and_outside_hard_links_are_rows_and_never_opened(tmp_path):
    links_and_special_files(tmp_path / "subs")
    found = {s.student: s for s in submissions.find_submissions(tmp_path / "subs", LAB)}
    graded = sorted(s for s, sub in found.items() if sub.path is not None)
    assert graded == ["ann", "gus", "hal", "jo"]
    assert found["jo"].path.relative_to(tmp_path).as_posix() == f"subs/jo/real/{LAB}.ipynb"
    refused = {s: sub.reason for s, sub in found.items() if sub.status == "not_regular"}
    assert sorted(refused) == ["bob", "cat", "dan", "eve", "fay", "ivy"]
    outside = tmp_path / "elsewhere" / f"{LAB}.ipynb"
    assert refused["bob"] == (
        f"bob.ipynb is a symbolic link (to {outside}), not a regular file: it was not opened; "
        "hand in (or copy in) the notebook file itself"
    )
    assert refused["cat"].startswith(f"cat is a symbolic link (to {outside.parent})")
    assert refused["dan"].startswith(f"dan/{LAB}.ipynb is a symbolic link")
    assert refused["eve"].startswith("eve.ipynb is a FIFO (named pipe), not a regular file")
    assert refused["fay"].startswith("fay.ipynb is a hard link to a file outside the submissions")
    assert refused["ivy"].startswith("ivy.ipynb is a symbolic link")


def test_a_hand_in_is_read_without_following_a_link_on_its_way(tmp_path):
    subs = tmp_path / "subs"
    save(lab(), subs / "ann" / "work" / f"{LAB}.ipynb")
    (ann,) = submissions.find_submissions(subs, LAB)
    assert submissions.read_hand_in(subs, ann.path) == ann.path.read_bytes()
    # the folder on its way is swapped for a link to the answer key after it was found
    (subs / "ann" / "work").rename(subs / "ann" / "old")
    save(solution(), tmp_path / "key" / f"{LAB}.ipynb")
    (subs / "ann" / "work").symlink_to(tmp_path / "key")
    with pytest.raises(submissions.NotRegular, match="work is a symbolic link"):
        submissions.read_hand_in(subs, ann.path)
    row = submissions.private_copy(ann, subs, tmp_path / "copy")
    assert (row.path, row.status) == (None, "not_regular")
    assert not (tmp_path / "copy").exists()


def test_the_result_cache_removes_only_its_own_old_folders(tmp_path):
    from course_utils.grading.cache import ResultCache

    (tmp_path / "0123456789abcdef0123").mkdir()  # an older key's results
    (tmp_path / "alice").mkdir()  # not the cache's: a cache pointed at the wrong folder
    ResultCache(tmp_path, "fedcba9876543210fedc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice", "fedcba9876543210fedc"]


def test_a_missing_lab_is_a_one_line_usage_error(tmp_path, capsys):
    assert grading.main(["no_such_lab", str(tmp_path), "--out", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no lab named 'no_such_lab'" in err and "solutions/no_such_lab.ipynb" in err
    assert not (tmp_path / "g.csv").exists()


def test_a_missing_submissions_folder_is_a_one_line_usage_error(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert grading.main([str(FIXTURE), str(missing), "--out", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"submissions folder {missing} does not exist" in err


def test_a_student_lab_is_refused_as_the_lab_to_grade_against(tmp_path, monkeypatch, capsys):
    import course_utils.core.paths

    monkeypatch.setattr(course_utils.core.paths, "LABS", tmp_path)
    save(lab(), tmp_path / f"{LAB}.ipynb")
    code = grading.main([str(tmp_path / f"{LAB}.ipynb"), str(tmp_path), "--out", "g.csv"])
    assert code == 2
    assert "is the student version; grade against its solution" in capsys.readouterr().err


def test_the_grade_command_is_dispatched(tmp_path, capsys):
    from course_utils.__main__ import main

    assert main(["grade", "no_such_lab", str(tmp_path), "--out", "x.csv"]) == 2
    assert capsys.readouterr().err.startswith("grade: error: no lab named 'no_such_lab'")


def test_truncate_keeps_the_start_and_says_what_was_cut():
    text = "\n".join(f"line {i}" for i in range(1000)) + "\n" + "x" * 10_000
    short = gradebook.truncate(text)
    assert short.splitlines()[0] == "line 0"
    assert short.endswith("[output truncated: 961 more lines]")
    assert len(short) <= gradebook.MAX_OUTPUT_CHARS + 100


def output_cell(*outputs):
    return nbformat.v4.new_code_cell("", outputs=[nbformat.from_dict(o) for o in outputs])


@pytest.mark.parametrize(
    "output, graded, message",
    [
        ({"output_type": "error", "ename": "CheckFailed", "evalue": "x: expected 1 got 2",
          "traceback": []}, True, "\u274c x: expected 1 got 2"),
        ({"output_type": "error", "ename": "CellTimeoutError", "evalue": "", "traceback": []},
         False, "CellTimeoutError"),  # a hand-in's own error of that name: no timeout
        ({"output_type": "error", "ename": "NotImplementedError", "evalue": "", "traceback": []},
         True, "NotImplementedError"),
        ({"output_type": "stream", "name": "stderr", "text": "\nUserWarning: careful\n"},
         True, "wrote to stderr, which counts as a failure: UserWarning: careful"),
        ({"output_type": "stream", "name": "stderr", "text": "UserWarning: careful\n"},
         False, ""),
        ({"output_type": "stream", "name": "stdout", "text": "fine\n"}, True, ""),
    ],
    ids=["check-failed", "timeout-named", "error", "stderr-in-test", "stderr-in-answer",
         "stdout"],
)  # fmt: skip
def test_a_cells_message_is_one_line_saying_why_it_failed(output, graded, message):
    assert autograde.cell_message(output_cell(output), 20, graded=graded) == message


def test_a_timeout_is_told_from_the_executors_record_not_the_cells_errors():
    cell = output_cell({"output_type": "error", "ename": "KeyboardInterrupt", "evalue": "",
                        "traceback": []})  # fmt: skip
    timed_out = [{"what": autograde.TIMED_OUT, "cell": 3, "limit": "time", "seconds": 7}]
    message = autograde.cell_message(cell, 20, graded=False, timed_out=timed_out)
    assert message == "timed out after 7 s and was interrupted"
    ignored = [*timed_out, {**timed_out[0], "ignored": True}]
    assert autograde.cell_message(cell, 20, graded=False, timed_out=ignored) == (
        "timed out after 7 s, ran on when interrupted and was stopped"
    )


def test_the_exception_line_of_a_python_traceback():
    text = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "    f()\n"
        "KeyError: 'ex2_answer'\n"
    )
    assert autograde.exception_line(text) == "KeyError: 'ex2_answer'"


def test_a_killed_runs_temporary_folder_is_removed_by_the_next_run(monkeypatch, tmp_path):
    monkeypatch.setattr(orchestrate.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    stale = tmp_path / f"course-grade-{dead}-abc"
    live = tmp_path / f"course-grade-{os.getpid()}-def"
    other = tmp_path / "course-grade-notes"
    for folder in (stale, live, other):
        (folder / "work").mkdir(parents=True)
    orchestrate.remove_stale_workdirs()
    assert (stale.exists(), live.exists(), other.exists()) == (False, True, True)


# ---------------------------------------------------------------------------------------------
# The caps, each just below and just above its limit (no kernels)


def disk_watch_over(tmp_path, files):
    """A DiskWatch over a worker folder whose kernel folder holds ``files`` empty files (plus
    its two folders): why it stopped ("" if it did not) and what is left."""
    runtime = tmp_path / "k" / "runtime"
    runtime.mkdir(parents=True)
    for i in range(files):
        (runtime / f"f{i}").touch()
    watch = workers.DiskWatch(tmp_path, 2**30, [tmp_path / "k"])
    worker = types.SimpleNamespace(is_alive=lambda: False, pid=-1)  # gone already
    watch.check(worker, marker=uuid.uuid4().hex)
    return watch.stopped, len(list(runtime.iterdir()))


def test_a_hand_ins_folder_may_hold_10000_entries_and_not_one_more(tmp_path):
    assert workers.MAX_FILES == 10_000
    below = disk_watch_over(tmp_path / "below", workers.MAX_FILES - 2)  # + k and runtime
    assert below == ("", workers.MAX_FILES - 2)
    stopped, left = disk_watch_over(tmp_path / "above", workers.MAX_FILES - 1)
    assert stopped.startswith("stopped: it wrote more than 10,000 files to the grading machine")
    assert left == 0


def stream(size):
    """A kernel's stdout message of ``size`` characters."""
    content = {"name": "stdout", "text": "x" * size}
    header = {"msg_type": "stream"}
    return {"msg_type": "stream", "header": header, "parent_header": {"msg_id": "m"},
            "content": content}  # fmt: skip


def kept_outputs(sizes):
    """The outputs SandboxedExecute keeps of one message per cell of these sizes."""
    execute = autograde.SandboxedExecute()
    execute._output_bytes, execute._total_bytes = {}, {False: 0, True: 0}
    execute.clear_before_next_output = False
    outs = []
    for index, size in enumerate(sizes):
        execute.output(outs, stream(size), None, index)
    return outs


def test_a_notebook_keeps_16_mb_of_output_in_all_and_not_a_byte_more():
    per_cell = autograde.MAX_CELL_OUTPUT  # 2,000,000: eight cells reach the notebook's cap
    assert autograde.MAX_TOTAL_OUTPUT == 16_000_000 == 8 * per_cell
    below = kept_outputs([per_cell] * 8)
    assert [len(o["text"]) for o in below] == [per_cell] * 8
    above = kept_outputs([per_cell] * 8 + [1])
    assert [len(o["text"]) for o in above[:8]] == [per_cell] * 8
    assert above[8]["text"].strip() == (
        "[the grader kept only the first 16,000,000 bytes of output in the whole notebook]"
    )
