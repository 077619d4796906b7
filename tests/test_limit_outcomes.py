"""Limits hit, recorded where they happen: a cell past --timeout by the executor that interrupted
it, a kernel killed for memory by its cgroup's count of OOM kills. A hand-in that raises an error
named like the grader's timeout, or kills its own kernel with SIGKILL, hits no limit. One
sandboxed grading run (the memory cases need a limiter: on this project's cgroup v1 host, the
v1 path; cgroup v2 is shown in tests/test_vm.py)."""

from __future__ import annotations

import json

import pytest
from grading_helpers import (
    FULL,
    TIMEOUT,
    cell,
    feedback_of,
    grade_folder,
    lab,
    points,
    save,
    solution,
    solved,
)

from course_utils.grading import gradebook, limiter

# an error of the grader's timeout's name and words, and the words printed: no timeout
IMPOSTOR = """

class CellTimeoutError(Exception):
    pass


print("timed out after 20 s and was interrupted")
raise CellTimeoutError("timed out after 20 s and was interrupted")"""

LOOP = """

import time

while True:
    time.sleep(0.1)"""

# an endless loop that ignores the timeout's interrupt: stopped with its kernel
DEAF = """

import signal
import time

signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    time.sleep(0.1)"""

# the kernel kills itself with SIGKILL, the signal the OOM killer sends: no memory hit
SUICIDE = """

import os
import signal

os.kill(os.getpid(), signal.SIGKILL)"""

# 3 GiB of shared memory touched under a 2G cap: charged to the hand-in's cgroup, not to the
# per-process RLIMIT_DATA (which a private allocation meets first, as a MemoryError)
OOM = """

import mmap

shared = mmap.mmap(-1, 3 * 2**30)
block = b"x" * 2**20
for start in range(0, len(shared), len(block)):
    shared[start : start + len(block)] = block"""

MEMORY = "2G"


def with_ex2(extra: str):
    """The solved lab, its exercise 2 answer (defined first) followed by ``extra``."""
    nb = solved(lab())
    cell(nb, "ex2_answer").source = cell(solution(), "ex2_answer").source + extra
    return nb


@pytest.fixture(scope="module")
def hits(tmp_path_factory):
    root = tmp_path_factory.mktemp("limits")
    hand_ins = {"impostor": IMPOSTOR, "looper": LOOP, "deaf": DEAF}
    if limiter.find_limiter().kind:
        hand_ins |= {"suicide": SUICIDE, "oom": OOM}
    for name, extra in hand_ins.items():
        save(with_ex2(extra), root / "submissions" / f"{name}.ipynb")
    run = grade_folder(root, "--memory", MEMORY)
    data = json.loads(gradebook.outcomes_path(run["out"]).read_text(encoding="utf-8"))
    return run | {"outcomes": {row["student"]: row for row in data["rows"]}}


def require_limiter() -> None:
    found = limiter.find_limiter()
    if not found.kind:
        pytest.skip(f"no limiter here ({found.why or 'no systemd-run, no writable cgroup'})")


def test_an_error_named_as_the_graders_timeout_is_no_timeout(hits):
    row, outcome = hits["rows"]["impostor"], hits["outcomes"]["impostor"]
    assert (points(row), row["reason"], outcome["limits"]) == (FULL, "", [])
    assert "limit" not in outcome["feedback"]["ex2_test"]
    text = feedback_of(hits, "impostor")
    assert "- before it: ex2_answer: CellTimeoutError: timed out after 20 s and was" in text


def test_a_cell_past_its_timeout_is_recorded_as_a_time_limit_hit(hits):
    row, outcome = hits["rows"]["looper"], hits["outcomes"]["looper"]
    assert (points(row), row["reason"]) == (FULL, f"timed out after {TIMEOUT} s: ex2_answer")
    assert outcome["limits"] == ["time"]
    limit = {"kind": "time", "cell": "ex2_answer", "seconds": TIMEOUT}
    assert outcome["feedback"]["ex2_test"]["limit"] == limit
    text = feedback_of(hits, "looper")
    assert f"- before it: ex2_answer: timed out after {TIMEOUT} s and was interrupted" in text


def test_a_cell_that_ignores_the_timeouts_interrupt_is_a_time_limit_hit_too(hits):
    row, outcome = hits["rows"]["deaf"], hits["outcomes"]["deaf"]
    assert points(row) == {**FULL, "ex2_test": 0, "ex3_test": 0}
    assert row["reason"] == (
        f"timed out after {TIMEOUT} s: ex2_answer; the kernel died in ex2_answer; the cells "
        "after it did not run"
    )
    assert outcome["limits"] == ["time"]
    limit = {"kind": "time", "cell": "ex2_answer", "seconds": TIMEOUT}
    assert outcome["feedback"]["ex2_test"]["limit"] == limit  # the first of its two records
    text = feedback_of(hits, "deaf")
    assert (
        f"ex2_answer: timed out after {TIMEOUT} s, ran on when interrupted and was stopped" in text
    )


def test_a_kernel_killed_by_sigkill_without_an_oom_kill_hit_no_memory_limit(hits):
    require_limiter()
    row, outcome = hits["rows"]["suicide"], hits["outcomes"]["suicide"]
    assert points(row) == {**FULL, "ex2_test": 0, "ex3_test": 0}
    assert row["reason"] == "the kernel died in ex2_answer; the cells after it did not run"
    assert outcome["limits"] == []
    assert "memory" not in feedback_of(hits, "suicide")


def test_without_a_limiter_a_kernel_killed_by_sigkill_is_probably_out_of_memory(tmp_path):
    # unsandboxed, nothing counts OOM kills: the SIGKILL the OOM killer sends is all there is
    save(with_ex2(SUICIDE), tmp_path / "submissions" / "suicide.ipynb")
    run = grade_folder(tmp_path, "--no-sandbox")
    row = run["rows"]["suicide"]
    assert points(row) == {**FULL, "ex2_test": 0, "ex3_test": 0}
    assert row["reason"] == (
        "probably ran out of memory (killed; no limiter counts OOM kills); the kernel died in "
        "ex2_answer; the cells after it did not run"
    )
    text = feedback_of(run, "suicide")
    assert (
        "## Exercise 2: 0 / 1\n\n\u274c the kernel was killed while this ran, probably for " in text
    )


def test_a_kernel_the_oom_killer_ended_is_a_memory_hit_counted_by_its_cgroup(hits):
    require_limiter()
    row, outcome = hits["rows"]["oom"], hits["outcomes"]["oom"]
    assert points(row) == {**FULL, "ex2_test": 0, "ex3_test": 0}
    assert row["reason"] == (
        f"ran out of memory (the limit: {MEMORY}; --memory raises it); the kernel died in "
        "ex2_answer; the cells after it did not run"
    )
    assert outcome["limits"] == ["memory"]
    limit = outcome["feedback"]["ex2_test"]["limit"]
    assert (limit["kind"], limit["cell"], limit["oom_kills"] >= 1) == ("memory", "ex2_answer", True)
    assert (
        f"\u274c the kernel ran out of memory while this ran and was killed (the limit: {MEMORY};"
        in feedback_of(hits, "oom")
    )
