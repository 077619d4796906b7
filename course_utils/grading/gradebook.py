"""What grading produces: a row per student (Result), the CSV gradebook and the feedback files.

The CSV is written once, atomically, sorted by student, with nothing in it that changes between
runs, so grading the same hand-ins again gives the same file byte for byte.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..engine.io import atomic_write_text
from .outcomes import for_student

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

# Terminal escape sequences (CSI like screen clears and colours, OSC like a clipboard write,
# and the other ESC forms) and every other control character but newline and tab: a hand-in's
# output must not drive the terminal or editor that shows its feedback.
ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST (clipboard, titles, links)
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"  # DCS, PM, APC, SOS strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: cursor, clear, colour
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # the other control characters, CR included
)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets read as a formula (OWASP)


@dataclass
class Result:
    """One gradebook row, plus what the feedback file shows."""

    student: str
    status: str
    reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    feedback: dict[str, dict] = field(default_factory=dict)
    name: str = ""  # the student's name (the roster's, else read from the file name)
    file: str = ""  # what was handed in, as the submissions folder names it
    # what the LMS and the file say of the hand-in (Submission.hand_in): LMS id, late mark, time
    hand_in: dict = field(default_factory=dict)
    # changes to the graded points, each {kind: "late" or "adjustment", test: an exercise's test
    # id or "" for the lab, points, reason}: the late policy's and the adjustments file's
    adjustments: list[dict] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)  # the limits it ran into (outcomes.TIME...)
    points: dict[str, float] = field(default_factory=dict)  # each test's points when graded
    answers: dict[str, str] = field(default_factory=dict)  # answer id -> digest of its code

    def to_json(self) -> dict:
        return asdict(self)

    def rescored(self, tests: dict[str, float]) -> Result | None:
        """This result under other points for the same tests, from what each test scored of
        the points it was graded with (no kernel runs); None when a test was not graded."""
        if set(tests) - set(self.points) and self.status == GRADED:
            return None
        scores = {}
        for test, points in tests.items():
            was, got = self.points.get(test, 0.0), self.scores.get(test, 0.0)
            scores[test] = points * got / was if was else 0.0
        return replace(self, scores=scores, points=dict(tests))


@dataclass(frozen=True)
class Lab:
    """What generate_assignment made of the solution: the gradebook, the student version and
    the graded test cells (grade_id -> points, in notebook order: the CSV's columns)."""

    name: str
    db: Path
    release: Path
    tests: dict[str, float]
    # answer grade_id -> {"forbidden": [what it must not use], "test": its test cell}
    forbidden: dict[str, dict] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)  # test -> its exercise's heading
    hidden: dict[str, str] = field(default_factory=dict)  # test with hidden tests -> visible part

    def title(self, test: str) -> str:
        return self.titles.get(test) or test

    @property
    def max_score(self) -> float:
        return sum(self.tests.values())


def total(result: Result, lab: Lab) -> float:
    """The row's points: its exercises' scores, then its adjustments and late penalty (never
    below 0)."""
    graded = sum(result.scores.get(test, 0.0) for test in lab.tests)
    if not result.adjustments:
        return graded
    return max(0.0, round(graded + sum(a["points"] for a in result.adjustments), 2))


# The columns a run with adjustments adds: their sum, the late penalty (points off), both noted
ADJUSTED, LATE_PENALTY, NOTES = "adjusted", "late", "notes"


def adjustment_notes(result: Result, lab: Lab) -> list[str]:
    """The row's adjustments as the instructor and the student read them: "2 days late (...):
    -1.2 (10% a day)", "Exercise 1: +1 (regrade request)"."""
    notes = []
    for entry in result.adjustments:
        if entry["kind"] == "late":
            notes.append(entry["reason"])
        else:
            where = lab.title(entry["test"]) if entry["test"] else "total"
            notes.append(f"{where}: {entry['points']:+g} ({entry['reason'] or 'adjusted'})")
    return notes


def without_controls(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (newlines and tabs
    kept): what a hand-in printed, made safe to show in a terminal, an editor or a browser."""
    return ESCAPES.sub("", str(text))


def spreadsheet_safe(cell: str) -> str:
    """A CSV cell no spreadsheet runs as a formula: one starting with ``= + - @``, a tab or a
    carriage return gets a leading ``'`` (OWASP's advice for CSV injection)."""
    return f"'{cell}" if cell.startswith(FORMULA_START) else cell


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, without control characters, cut to ``limit`` characters."""
    text = " ".join(without_controls(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def gradebook_rows(results: list[Result], lab: Lab) -> list[list[str]]:
    """Header and rows of the gradebook, sorted by student, with no run-dependent values."""
    adjusted = any(r.adjustments for r in results)  # the columns of adjustments, if any
    extra = [ADJUSTED, LATE_PENALTY] * adjusted
    header = ["student", "name", "file", *lab.tests, *extra, "total", "max", "status", "reason"]
    rows = [header + [NOTES] * adjusted]
    for r in sorted(results, key=lambda r: r.student):
        points = [f"{r.scores.get(test, 0.0):g}" for test in lab.tests]
        reason = one_line(r.reason, MAX_REASON_CHARS)
        who = [r.student, r.name or r.student, r.file]
        late = -sum(a["points"] for a in r.adjustments if a["kind"] == "late")  # points off
        added = sum(a["points"] for a in r.adjustments if a["kind"] != "late")
        changes = [f"{round(k, 2):g}" if k else "" for k in (added, late)] * adjusted
        notes = [one_line("; ".join(adjustment_notes(r, lab)), MAX_REASON_CHARS)] * adjusted
        rows.append([*who, *points, *changes, f"{total(r, lab):g}", f"{lab.max_score:g}",
                     r.status, reason, *notes])  # fmt: skip
    return rows


def write_gradebook(results: list[Result], lab: Lab, out: Path) -> None:
    """Write the CSV through a temporary file and os.replace: a reader (or a crash) never sees
    half a gradebook, and the previous one survives a failed run. No cell is a formula."""
    write_csv(out, gradebook_rows(results, lab))


def write_csv(out: Path, rows: list[list[str]]) -> None:
    """``rows`` as a spreadsheet-safe CSV, written atomically."""
    buffer = io.StringIO()
    safe = [[spreadsheet_safe(without_controls(cell)) for cell in row] for row in rows]
    csv.writer(buffer, lineterminator="\n").writerows(safe)
    atomic_write_text(out, buffer.getvalue())


def summary_rows(results: list[Result], lab: Lab) -> list[list[str]]:
    """The class at a glance: per exercise its points, the mean score of the graded hand-ins,
    how many scored 0 and how many were graded; then the totals and a count per status."""
    graded = [r for r in results if r.status == GRADED]
    rows = [["exercise", "title", "points", "mean", "zeros", "count"]]
    for test, points in lab.tests.items():
        scores = [r.scores.get(test, 0.0) for r in graded]
        mean = f"{sum(scores) / len(scores):.2f}" if scores else ""
        zeros = sum(score == 0 for score in scores)
        rows.append([test, lab.title(test), f"{points:g}", mean, str(zeros), str(len(scores))])
    totals = [total(r, lab) for r in graded]
    mean = f"{sum(totals) / len(totals):.2f}" if totals else ""
    zeros = str(sum(t == 0 for t in totals))
    rows.append(["total", "", f"{lab.max_score:g}", mean, zeros, str(len(totals))])
    for status in sorted({r.status for r in results}):
        count = sum(r.status == status for r in results)
        rows.append([f"status: {status}", "", "", "", "", str(count)])
    for answer, students in identical_answers(results):
        rows.append(
            [f"hint: identical {answer}", ", ".join(students), "", "", "", str(len(students))]
        )
    return rows


def identical_answers(results: list[Result]) -> list[tuple[str, list[str]]]:
    """(answer id, students) for each answer that two or more hand-ins hold identically (the
    same code, comments and layout aside): a hint to look, not a verdict."""
    groups: dict[tuple[str, str], list[str]] = {}
    for result in sorted(results, key=lambda r: r.student):
        for answer, digest in result.answers.items():
            groups.setdefault((answer, digest), []).append(result.student)
    return sorted((answer, students) for (answer, _), students in groups.items()
                  if len(students) > 1)  # fmt: skip


def summary_text(rows: list[list[str]]) -> str:
    """The summary as the grader prints it: an aligned table."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def outcomes_path(out: Path) -> Path:
    """The outcome of every row, beside the gradebook: ``gradebook.outcomes.json``."""
    return out.with_name(f"{out.stem}.outcomes.json")


def write_outcomes(results: list[Result], lab: Lab, out: Path) -> None:
    """Every row's outcome as data (scores, feedback with its audiences, limits hit), written
    atomically beside the gradebook: a later run that re-grades one student reads the others'
    rows from it, feedback and all. The CSV is output, never input."""
    rows = [r.to_json() for r in sorted(results, key=lambda r: r.student)]
    text = json.dumps({"lab": lab.name, "rows": rows}, indent=1, sort_keys=True)
    atomic_write_text(outcomes_path(out), text + "\n")


def read_outcomes(out: Path, lab: Lab) -> dict[str, Result] | None:
    """student -> outcome, from the file beside the gradebook ``out``; None when there is none
    (or it is of another lab, or unreadable)."""
    try:
        data = json.loads(outcomes_path(out).read_text(encoding="utf-8"))
        if data.get("lab") != lab.name:
            return None
        return {row["student"]: Result(**row) for row in data["rows"]}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_feedback(results: list[Result], lab: Lab, folder: Path, instructor: Path | None = None):
    """One Markdown file per student: the total, then each exercise's points and message; what
    hidden tests saw stays out of it. ``instructor`` gets copies that keep everything."""
    folder.mkdir(parents=True, exist_ok=True)
    for result in results:
        name = file_name(result.student)
        atomic_write_text(folder / f"{name}.md", feedback_markdown(result, lab))
        if instructor:
            instructor.mkdir(parents=True, exist_ok=True)
            text = feedback_markdown(result, lab, student_facing=False)
            atomic_write_text(instructor / f"{name}.md", text)


def file_name(student: str) -> str:
    """A student id made safe as a file name (no folders, no hidden files)."""
    name = re.sub(r"[/\\\x00]", "_", without_controls(student)).strip() or "_"
    return "_" + name if name.startswith(".") else name


def feedback_markdown(result: Result, lab: Lab, student_facing: bool = True) -> str:
    """A student's feedback file: the score, then a section per exercise, headed by its title.
    ``student_facing``: a failed hidden test says so without its inputs, values or output."""
    lines = [
        f"# {lab.name}: feedback for {without_controls(result.name or result.student)}",
        "",
        f"Score: **{total(result, lab):g} / {lab.max_score:g}**",
        "",
    ]
    if result.adjustments:
        lines += [f"- {note}" for note in adjustment_notes(result, lab)] + [""]
    if result.status != GRADED:
        lines += [f"Not graded ({result.status}): {result.reason}"]
    else:
        lines += [f"Note: {result.reason}", ""] * bool(result.reason)
        for test, points in lab.tests.items():
            info = (
                student_view(result, lab, test) if student_facing else result.feedback.get(test, {})
            )
            score = result.scores.get(test, 0.0)
            lines += _exercise_lines(lab.title(test), score, points, info)
    return without_controls("\n".join(lines)).rstrip() + "\n"


def student_view(result: Result, lab: Lab, test: str) -> dict:
    """A test cell's feedback as its student may see it, read from the audience fields set where
    each message was made (:mod:`.outcomes`): the feedback files and Gradescope's results show
    this."""
    return for_student(result.feedback.get(test, {}))


def _exercise_lines(title: str, score: float, points: float, info: dict) -> list[str]:
    """A test cell's section: points, message, what went wrong before it, its output."""
    lines = [f"## {title}: {score:g} / {points:g}", "", info.get("message", "not run"), ""]
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
