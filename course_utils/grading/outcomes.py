"""What happened to a hand-in, kept as data where it happens: each exercise's message with its
audience (the student, or the instructor alone), and each limit the hand-in ran into, by kind.

The worker, the verifier and the rules set these fields; the gradebook, the feedback files, the
cache and Gradescope's results.json read them and never search a message's text. A message a
hidden test's run could have shaped (its check's values, an error raised on its inputs, what was
printed while it ran) is the instructor's alone: the student reads a line the grader chose.
"""

from __future__ import annotations

STUDENT = "student"  # the student may read it: the grader's own words, a visible check's
INSTRUCTOR = "instructor"  # shaped by a hidden test's run: the instructor's copy only

# The kinds of limit a hand-in can run into, each with the option that raises it.
TIME = "time"  # a cell past --timeout, or the hand-in past --total-timeout
MEMORY = "memory"  # a MemoryError, or a kernel killed at --memory
TASKS = "tasks"  # processes and threads past --tasks
DISK = "disk"  # what it wrote past the disk cap
OUTPUT = "output"  # what it printed past the output caps
LIMIT_KINDS = (TIME, MEMORY, TASKS, DISK, OUTPUT)

HIDDEN_FAILED = (
    "\u274c a hidden test failed (what hidden tests check and print is not shown: test your "
    "answer on more cases than the visible checks)"
)
NOT_RUN = "not run"
PASSED = "passed"


def entry(message: str = NOT_RUN, *, output: str = "", before: list | None = None) -> dict:
    """One test cell's feedback: its message (for the student, until a step says otherwise),
    what it printed (likewise) and the problems of the cells run since the previous test."""
    return {"message": message, "audience": STUDENT, "shown": "", "output": output,
            "output_audience": STUDENT, "before": list(before or [])}  # fmt: skip


def set_message(info: dict, message: str, audience: str = STUDENT, shown: str = "") -> dict:
    """Give ``info`` a new message and its audience; ``shown`` is what the student reads where
    the message is the instructor's (a hidden check's line when left empty)."""
    info |= {"message": message, "audience": audience, "shown": shown}
    return info


def for_student(info: dict) -> dict:
    """A test cell's feedback as its student may see it: an instructor's message replaced by
    the line the grader chose, an instructor's output left out. Read from the fields only; an
    entry without them (written before they existed) shows neither."""
    view = dict(info)
    if view.get("audience") != STUDENT and view.get("message", NOT_RUN) not in (NOT_RUN, PASSED):
        view["message"] = view.get("shown") or HIDDEN_FAILED
    if view.get("output_audience") != STUDENT:
        view["output"] = ""
    return view
