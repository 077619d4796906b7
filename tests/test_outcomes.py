"""Outcomes as data: the limits a hand-in hit (by kind, set where it happened), a kernel killed
for memory told so, a points-only change re-scored from the stored outcome, the solution's
hidden records flagged. No kernel runs here."""

from __future__ import annotations

import types
from dataclasses import asdict

import nbformat
import pytest

from course_utils.grading import autograde, limiter, scoring
from course_utils.grading.autograde import (
    DIED,
    OUTPUT_CUT,
    TIMED_OUT,
    hidden_marked,
    limits_hit,
)
from course_utils.grading.gradebook import Result
from course_utils.grading.outcomes import entry
from course_utils.grading.settings import Settings


def errored(ename: str, evalue: str = "") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("y"), cell])


def event(what, limit="", cell=1, **detail):
    return {"what": what, "cell": cell, "limit": limit, **detail}


@pytest.mark.parametrize(
    ("nb", "events", "kinds"),
    [
        (errored("MemoryError"), [], ["memory"]),
        (errored("RuntimeError", "DefaultCPUAllocator: can't allocate memory: you tried"),
         [], ["memory"]),
        (errored("BlockingIOError", "[Errno 11] Resource temporarily unavailable"), [],
         ["tasks"]),
        (errored("RuntimeError", "can't start new thread"), [], ["tasks"]),
        (errored("ValueError", "out of memory?"),
         [event(TIMED_OUT, "time", seconds=5), event(OUTPUT_CUT, "output")], ["output", "time"]),
        (errored("KernelDied", "the kernel died here"), [event(DIED, "memory", oom_kills=1)],
         ["memory"]),
        # what the hand-in named its errors decides nothing: only what the executor recorded
        (errored("CellTimeoutError", "timed out after 5 s"), [], []),
        (errored("KernelDied", "the kernel died here (killed by SIGKILL)"), [event(DIED)], []),
        (errored("ValueError", "no"), [event("whatever", "whatever")], []),
    ],
)  # fmt: skip
def test_the_limits_a_notebook_hit_are_read_from_what_happened(nb, events, kinds):
    assert limits_hit(nb, events) == kinds


def memory_hit(**how) -> dict:
    died = entry("KernelDied: the kernel died here (...)")
    return died | {"limit": {"kind": "memory", "cell": "t2", **how}}


def test_a_kernel_killed_for_memory_says_so_to_the_student_and_the_instructor():
    feedback = {"t1": entry("passed"), "t2": memory_hit(oom_kills=1)}
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
    died = entry("KernelDied: the kernel died here (...)")
    other = Result("bob", "graded", "", {"t2": 0.0}, {"t2": died}, limits=["memory"])
    assert scoring.with_limits(other, settings).feedback["t2"]["message"] != message
    # killed where no limiter group counts OOM kills: SIGKILL, so "probably"
    guess = Result("cy", "graded", "", {"t2": 0.0}, {"t2": memory_hit(probably=True)},
                   limits=["memory"])  # fmt: skip
    guess = scoring.with_limits(guess, settings)
    assert guess.feedback["t2"]["message"] == (
        "\u274c the kernel was killed while this ran, probably for memory (this lab needs about "
        "1280M: give the autograder more)"
    )
    assert guess.reason.startswith("probably ran out of memory (killed; no limiter counts OOM ")


def executor(group: dict, exit_code: int) -> types.SimpleNamespace:
    """What SandboxedExecute._memory_kill reads: its group, and its dead kernel's exit code."""
    process = types.SimpleNamespace(wait=lambda timeout: exit_code)
    return types.SimpleNamespace(group=group, km=types.SimpleNamespace(
        provisioner=types.SimpleNamespace(process=process)))  # fmt: skip


def test_a_dead_kernel_is_a_memory_kill_by_its_groups_count_else_probably_by_sigkill(tmp_path):
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "memory.oom_control").write_text("under_oom 0\noom_kill 0\n")
    group = asdict(limiter.Group(folders=[str(memory)]))
    memory_kill = autograde.SandboxedExecute._memory_kill
    assert memory_kill(executor(group, -9)) == {}  # a SIGKILL its group did not count
    (memory / "memory.oom_control").write_text("under_oom 0\noom_kill 2\n")
    assert memory_kill(executor(group, 1)) == {"oom_kills": 2}
    # no group counts kills: a SIGKILL (of the kernel, or bwrap's 128 + 9) is "probably"
    assert memory_kill(executor({}, 128 + 9)) == {"probably": True}
    assert memory_kill(executor(asdict(limiter.Group()), -9)) == {"probably": True}
    assert memory_kill(executor({}, 1)) == {}


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
