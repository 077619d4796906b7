"""What grading produces: a row per student (Result), the CSV gradebook and the feedback files.

The CSV is written once, atomically, sorted by student, with nothing in it that changes between
runs, so grading the same hand-ins again gives the same file byte for byte.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..engine.io import atomic_write_text

# Row statuses: only GRADED rows were executed; the others score 0 and say why in `reason`.
GRADED = "graded"
CORRUPT = "corrupt"  # a notebook file that is no longer valid JSON / a valid notebook
NOT_A_NOTEBOOK = "not_a_notebook"
NOT_REGULAR = "not_regular"  # a link, a FIFO, a device: not opened
WRONG_LAB = "wrong_lab"
MISSING = "missing"  # a student folder without the lab's notebook
KILLED = "killed"  # ran past the total wall-time limit, or past the disk cap
ERROR = "error"  # nbgrader or the worker failed; the reason has the last error line

# Feedback limits: a student's print loop must not produce a megabyte of Markdown.
MAX_OUTPUT_LINES = 40
MAX_OUTPUT_CHARS = 4000
MAX_LINE_CHARS = 300
MAX_MESSAGE_CHARS = 500
MAX_REASON_CHARS = 300


@dataclass
class Result:
    """One gradebook row, plus what the feedback file shows."""

    student: str
    status: str
    reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    feedback: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Lab:
    """What generate_assignment made of the solution: the gradebook, the student version and
    the graded test cells (grade_id -> points, in notebook order: the CSV's columns)."""

    name: str
    db: Path
    release: Path
    tests: dict[str, float]
    # answer grade_id -> {"reference": [names it must not call], "test": its test cell}
    references: dict[str, dict] = field(default_factory=dict)

    @property
    def max_score(self) -> float:
        return sum(self.tests.values())


def total(result: Result, lab: Lab) -> float:
    return sum(result.scores.get(test, 0.0) for test in lab.tests)


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def gradebook_rows(results: list[Result], lab: Lab) -> list[list[str]]:
    """Header and rows of the gradebook, sorted by student, with no run-dependent values."""
    header = ["student", *lab.tests, "total", "max", "status", "reason"]
    rows = [header]
    for r in sorted(results, key=lambda r: r.student):
        points = [f"{r.scores.get(test, 0.0):g}" for test in lab.tests]
        reason = one_line(r.reason, MAX_REASON_CHARS)
        rows.append(
            [r.student, *points, f"{total(r, lab):g}", f"{lab.max_score:g}", r.status, reason]
        )
    return rows


def write_gradebook(results: list[Result], lab: Lab, out: Path) -> None:
    """Write the CSV through a temporary file and os.replace: a reader (or a crash) never sees
    half a gradebook, and the previous one survives a failed run."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(gradebook_rows(results, lab))
    atomic_write_text(out, buffer.getvalue())


def write_feedback(results: list[Result], lab: Lab, folder: Path) -> None:
    """One Markdown file per student: the total, then each exercise's points and message."""
    folder.mkdir(parents=True, exist_ok=True)
    for result in results:
        atomic_write_text(folder / f"{result.student}.md", feedback_markdown(result, lab))


def feedback_markdown(result: Result, lab: Lab) -> str:
    """A student's feedback file: the score, then a section per exercise."""
    lines = [
        f"# {lab.name}: feedback for {result.student}",
        "",
        f"Score: **{total(result, lab):g} / {lab.max_score:g}**",
        "",
    ]
    if result.status != GRADED:
        lines += [f"Not graded ({result.status}): {result.reason}"]
    else:
        lines += [f"Note: {result.reason}", ""] * bool(result.reason)
        for test, points in lab.tests.items():
            lines += _exercise_lines(test, result.scores.get(test, 0.0), points, result.feedback)
    return "\n".join(lines).rstrip() + "\n"


def _exercise_lines(test: str, score: float, points: float, feedback: dict) -> list[str]:
    """A test cell's section: points, message, what went wrong before it, its output."""
    info = feedback.get(test, {})
    lines = [f"## {test}: {score:g} / {points:g}", "", info.get("message", "not run"), ""]
    if info.get("before"):
        lines += [f"- before it: {problem}" for problem in info["before"]] + [""]
    if info.get("output"):
        lines += _fenced(info["output"])
    return lines


def _fenced(text: str) -> list[str]:
    """A code block whose fence no backtick run in ``text`` can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", text, fence, ""]


def truncate(text: str) -> str:
    """At most MAX_OUTPUT_LINES lines of MAX_LINE_CHARS, MAX_OUTPUT_CHARS in all, saying how
    much was left out."""
    lines = text.splitlines()
    kept, size = [], 0
    for line in lines[:MAX_OUTPUT_LINES]:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" \u2026 [{len(line) - MAX_LINE_CHARS} chars cut]"
        if size + len(line) > MAX_OUTPUT_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"\u2026 [output truncated: {len(lines) - len(kept)} more lines]")
    return "\n".join(kept)
