"""The LMS's import file, written from the graded rows and the LMS's own roster export.

* Canvas (``--format canvas``): its five identity columns as the export gave them, then one
  column for the lab headed exactly as the export named the assignment ("Lab 03: block
  assembly (1234)"), else the lab's title (Canvas then makes a new assignment). No other column:
  Canvas would make each one an assignment.
* Moodle (``--format moodle``): the grading worksheet as exported, its Grade column filled.

Totals are after the late policy and the adjustments. A roster student with no hand-in gets an
empty cell (the LMS leaves that grade as it is); a hand-in on no roster row cannot be imported
and is named in the run's closing block instead.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ..engine.io import atomic_write_text
from .gradebook import Lab, Result, total
from .lms_names import CANVAS, MOODLE
from .roster import CANVAS_IDENTITY, Roster

FORMATS = {"canvas": CANVAS, "moodle": MOODLE}
ASSIGNMENT_COLUMN = re.compile(r"^(?P<name>.+?)\s*\((?P<id>\d+)\)$")


class ExportError(ValueError):
    """An import file that cannot be written from this roster; the message says what to pass."""


def export_path(out: Path, fmt: str) -> Path:
    """Beside the gradebook: ``gradebook.csv`` -> ``gradebook.canvas.csv``."""
    return out.with_name(f"{out.stem}.{fmt}.csv")


def check_roster(fmt: str, roster: Roster | None) -> None:
    """Refuse, before grading, an export the roster cannot feed: each needs its LMS's export."""
    lms = FORMATS[fmt]
    if roster is None or roster.lms != lms:
        what = "its gradebook export" if lms == CANVAS else "its grading worksheet"
        raise ExportError(
            f"--format {fmt} writes {lms}'s import file from {lms}'s own roster: pass "
            f"--roster with {what} (the rows it imports are that file's)"
        )


def grade_text(result: Result | None, lab: Lab) -> str:
    """The cell an LMS imports: the total, or empty for a student with no hand-in."""
    if result is None or result.hand_in.get("roster") == "missing":
        return ""
    return f"{round(total(result, lab), 2):g}"


def assignment_column(roster: Roster, title: str, lab_name: str) -> str:
    """The export's column for this lab: the assignment named like the lab's title, else the
    one named "Lab N" with the lab's number; the title itself when none is."""
    columns = [c for c in roster.header if ASSIGNMENT_COLUMN.match(c)]

    def name(column: str) -> str:
        return " ".join(ASSIGNMENT_COLUMN.match(column)["name"].casefold().split())

    same = [c for c in columns if name(c) == " ".join(title.casefold().split())]
    number = re.match(r"\d+", lab_name)
    if not same and number:
        lab_n = re.compile(rf"\blab\s*0*{int(number.group())}\b")
        same = [c for c in columns if lab_n.search(name(c))]
    return same[0] if len(same) == 1 else title


def canvas_rows(results: list[Result], lab: Lab, roster: Roster, title: str) -> list[list[str]]:
    column = assignment_column(roster, title, lab.name)
    by_id = {r.student: r for r in results}
    rows = [[*CANVAS_IDENTITY, column]]
    if roster.points_row is not None:
        points = [roster.points_row.get(c, "") for c in CANVAS_IDENTITY]
        rows.append([*points, f"{lab.max_score:g}"])
    for student in roster.students:
        identity = [student.row.get(c, "") for c in CANVAS_IDENTITY]
        rows.append([*identity, grade_text(by_id.get(student.id), lab)])
    return rows


def moodle_rows(results: list[Result], lab: Lab, roster: Roster) -> list[list[str]]:
    by_id = {r.student: r for r in results}
    rows = [list(roster.header)]
    for student in roster.students:
        row = dict(student.row, Grade=grade_text(by_id.get(student.id), lab))
        rows.append([row.get(c, "") for c in roster.header])
    return rows


def write_import(fmt: str, results: list[Result], lab: Lab, roster: Roster, title: str,
                 path: Path) -> None:  # fmt: skip
    """Write ``fmt``'s import file at ``path``, atomically, cells exactly as the LMS gave them."""
    rows = (
        canvas_rows(results, lab, roster, title)
        if fmt == "canvas"
        else moodle_rows(results, lab, roster)
    )
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    atomic_write_text(path, buffer.getvalue())
