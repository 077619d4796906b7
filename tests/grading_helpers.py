"""Building hand-ins of the grading fixture lab and reading the gradebook, for the grading tests.

The fixture lab (tests/fixtures/grading/grading_fixture.ipynb) has three exercises worth 2, 1
and 3 points; the third has a hidden test.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

from course_utils.grading import command as grading
from course_utils.grading import sandbox as sandboxes
from course_utils.tools.labs import render_lab

FIXTURE = Path(__file__).parent / "fixtures" / "grading" / "grading_fixture.ipynb"
LAB = "grading_fixture"
TIMEOUT = 20  # per cell: above a cold `import torch` on a busy machine, and the loop's cost
TESTS = {"ex1_test": 2.0, "ex2_test": 1.0, "ex3_test": 3.0}
FULL = {"ex1_test": 2.0, "ex2_test": 1.0, "ex3_test": 3.0}


def solution():
    return nbformat.read(FIXTURE, as_version=4)


@functools.cache
def lab_text():
    return render_lab(FIXTURE)


def lab():
    return nbformat.reads(lab_text(), as_version=4)


def cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def solved(nb, *answers):
    """``nb`` with the solution's code in the given answer cells (all of them if none given)."""
    for grade_id in answers or ("ex1_answer", "ex2_answer", "ex3_answer"):
        cell(nb, grade_id).source = cell(solution(), grade_id).source
    return nb


def answered(nb, **sources):
    for grade_id, source in sources.items():
        cell(nb, grade_id).source = source
    return nb


def save(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def gone(pid, since):
    """Whether process ``pid`` was killed: no such process, a zombie, or a new process that
    reused the pid after ``since`` (a time.time())."""
    try:
        process = psutil.Process(pid)
        return process.status() == psutil.STATUS_ZOMBIE or process.create_time() > since
    except psutil.NoSuchProcess:
        return True


def read_rows(path):
    return {row["student"]: row for row in csv.DictReader(io.StringIO(path.read_text()))}


def points(row):
    return {test: float(row[test]) for test in TESTS}


def require_sandbox() -> None:
    """Skip outside Linux (the sandbox is Linux only); on Linux, fail saying why bwrap cannot
    run: a missing sandbox must not pass for a working one."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the grading sandbox (bubblewrap) is Linux only")
    try:
        sandboxes.check_sandbox(2**30)
    except sandboxes.SandboxUnavailable as exc:
        pytest.fail(f"the grading tests need the sandbox: {exc}")


def grade_folder(root: Path, *options: str, lab: Path = FIXTURE) -> dict:
    """Grade ``root/submissions`` through the command line into ``root/gradebook.csv``: the
    exit code, the rows by student and the feedback folder."""
    if "--no-sandbox" not in options:
        require_sandbox()
    out, feedback = root / "gradebook.csv", root / "feedback"
    argv = [str(lab), str(root / "submissions"), "--out", str(out), "--feedback", str(feedback)]
    code = grading.main([*argv, "--timeout", str(TIMEOUT), "--jobs", "2", *options])
    rows = read_rows(out) if out.exists() else {}
    return {"code": code, "rows": rows, "feedback": feedback, "out": out}


def grade_folder_in_a_new_process(root: Path, *options: str, env: dict) -> dict:
    """grade_folder, run as ``python -m course_utils grade`` with ``env`` added to this
    process's environment (workers fork from a server that keeps the environment it started
    with, so a variable set later in this process would not reach them)."""
    if "--no-sandbox" not in options:
        require_sandbox()
    out, feedback = root / "gradebook.csv", root / "feedback"
    command = [sys.executable, "-m", "course_utils", "grade", str(FIXTURE),
               str(root / "submissions"), "--out", str(out), "--feedback", str(feedback),
               "--timeout", str(TIMEOUT), "--jobs", "2", *options]  # fmt: skip
    done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True)
    rows = read_rows(out) if out.exists() else {}
    return {"code": done.returncode, "rows": rows, "feedback": feedback, "out": out,
            "stderr": done.stderr}  # fmt: skip


def feedback_of(run: dict, student: str) -> str:
    return (run["feedback"] / f"{student}.md").read_text(encoding="utf-8")
