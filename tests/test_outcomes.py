"""Outcomes as data: the limits a hand-in hit (by kind, set where it happened), a kernel killed
for memory told so, a points-only change re-scored from the stored outcome, the solution's
hidden records flagged. No kernel runs here."""

from __future__ import annotations

import nbformat
import pytest

from course_utils.grading import scoring
from course_utils.grading.autograde import hidden_marked, limits_hit
from course_utils.grading.gradebook import Result
from course_utils.grading.outcomes import entry
from course_utils.grading.settings import Settings


def errored(ename: str, evalue: str = "") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("y"), cell])


@pytest.mark.parametrize(
    ("nb", "timed_out", "flagged", "kinds"),
    [
        (errored("MemoryError"), False, set(), ["memory"]),
        (errored("RuntimeError", "DefaultCPUAllocator: can't allocate memory: you tried"),
         False, set(), ["memory"]),
        (errored("BlockingIOError", "[Errno 11] Resource temporarily unavailable"), False, set(),
         ["tasks"]),
        (errored("RuntimeError", "can't start new thread"), False, set(), ["tasks"]),
        (errored("ValueError", "out of memory?"), True, {"output"}, ["output", "time"]),
        (errored("KernelDied", "the kernel died here"), False, {"memory"}, ["memory"]),
        (errored("ValueError", "no"), False, {"whatever"}, []),
    ],
)  # fmt: skip
def test_the_limits_a_notebook_hit_are_read_from_what_happened(nb, timed_out, flagged, kinds):
    assert limits_hit(nb, timed_out, flagged) == kinds


def test_a_kernel_killed_for_memory_says_so_to_the_student_and_the_instructor():
    feedback = {"t1": entry("passed"), "t2": entry("KernelDied: the kernel died here (...)")}
    feedback["t2"]["kernel_died"] = True
    result = Result("ann", "graded", "", {"t1": 1.0, "t2": 0.0}, feedback, limits=["memory"])
    settings = Settings(memory_needed="1280M")
    result = scoring.with_limits(result, settings)
    message = (
        "\u274c the kernel ran out of memory while this ran and was killed (this lab needs about "
        "1280M: give the autograder more)"
    )
    assert (result.feedback["t2"]["message"], result.feedback["t2"]["audience"]) == (
        message,
        "student",
    )
    assert result.reason.startswith("ran out of memory (this lab needs about 1280M")
    # a kernel that died of something else is left as it was
    died = entry("KernelDied: the kernel died here (...)") | {"kernel_died": True}
    other = Result("bob", "graded", "", {"t2": 0.0}, {"t2": died}, limits=[])
    assert scoring.with_limits(other, settings).feedback["t2"]["message"] != message


def test_a_points_only_change_rescores_the_stored_outcome():
    result = Result("ann", "graded", "", {"a": 2.0, "b": 0.0}, points={"a": 2.0, "b": 1.0})
    assert result.rescored({"a": 5.0, "b": 3.0}).scores == {"a": 5.0, "b": 0.0}
    assert result.rescored({"a": 5.0, "c": 1.0}) is None  # a new test: graded again
    missing = Result("zed", "missing", "no hand-in")
    assert missing.rescored({"a": 5.0}).scores == {"a": 0.0}


def test_the_solutions_records_after_the_hidden_mark_are_flagged_hidden():
    records = [{"check": "value", "name": "v"}, {"hidden_from_here": True},
               {"check": "value", "name": "h"}]  # fmt: skip
    assert hidden_marked(records) == [
        {"check": "value", "name": "v"},
        {"check": "value", "name": "h", "hidden": True},
    ]
