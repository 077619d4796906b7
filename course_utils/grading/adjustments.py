"""The instructor's own changes to scores, kept in a file of their own that every run applies.

``--adjustments adjustments.csv`` holds one change a row: ``student,exercise,points,reason``
(exercise: a test cell's id, its exercise's title, or ``total``/empty for the lab as a whole).
The gradebook is output, never input: a gradebook changed by hand since the grader wrote it is
found (its hash is kept beside it) and the next run refuses to overwrite it, saying where the
change belongs.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..engine.io import atomic_write_text

ADJUSTMENT = "adjustment"  # the kind of a Result.adjustments entry this file adds
COLUMNS = ("student", "exercise", "points", "reason")
WHOLE_LAB = ("", "total")


class AdjustmentError(ValueError):
    """An adjustments file, or a gradebook edited by hand, that the run cannot use as it is."""


@dataclass(frozen=True)
class Adjustment:
    line: int  # in the file, for the instructor to find it
    student: str
    exercise: str
    points: float
    reason: str


def read_adjustments(path: Path) -> list[Adjustment]:
    """The rows of ``path``; an AdjustmentError naming the line and the fix for a bad one."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise AdjustmentError(f"cannot read the adjustments file {path}: {exc}") from None
    reader = csv.DictReader(text.splitlines())
    header = [c.strip().casefold() for c in reader.fieldnames or []]
    if not {"student", "points"} <= set(header):
        raise AdjustmentError(
            f"{path} needs a header row {','.join(COLUMNS)} (exercise: a test id, or total)"
        )
    found = []
    for line, row in enumerate(reader, start=2):
        row = {k.strip().casefold(): (v or "").strip() for k, v in row.items() if k}
        if not any(row.values()):
            continue
        try:
            points = float(row["points"])
        except ValueError:
            raise AdjustmentError(
                f"{path} line {line}: points {row['points']!r} is not a number (like 2 or -0.5)"
            ) from None
        found.append(Adjustment(line, row["student"], row.get("exercise", ""), points,
                                row.get("reason", "")))  # fmt: skip
    return found


def apply_adjustments(results, adjustments: list[Adjustment], lab, path: Path) -> list[str]:
    """Each result's adjustments entries made from the file's rows (what a previous run put
    there replaced); one line for each row that names no student or no exercise of the lab."""
    problems = []
    for result in results:
        result.adjustments = [a for a in result.adjustments if a.get("kind") != ADJUSTMENT]
    by_id = {r.student.casefold(): r for r in results}
    by_name = {(r.name or r.student).casefold(): r for r in results}
    for row in adjustments:
        key = row.student.casefold()
        result = by_id.get(key) or by_name.get(key)
        test = exercise_id(row.exercise, lab)
        if result is None:
            problems.append(f"{path.name} line {row.line}: no student {row.student!r} in the "
                            "gradebook (use its student column); not applied")  # fmt: skip
        elif test is None:
            known = ", ".join(lab.tests)
            problems.append(f"{path.name} line {row.line}: no exercise {row.exercise!r} in "
                            f"{lab.name} ({known}, or total); not applied")  # fmt: skip
        else:
            result.adjustments.append({"kind": ADJUSTMENT, "test": test, "points": row.points,
                                       "reason": row.reason})  # fmt: skip
    return problems


def exercise_id(exercise: str, lab) -> str | None:
    """The test id ``exercise`` names ("" for the whole lab): the id or the exercise's title."""
    text = exercise.strip()
    if text.casefold() in WHOLE_LAB:
        return ""
    if text in lab.tests:
        return text
    return next((t for t in lab.tests if lab.title(t).casefold() == text.casefold()), None)


# ---------------------------------------------------------------------------------------------
# The gradebook is output: a hand edit is found before it is overwritten


def hash_path(out: Path) -> Path:
    """Where the hash of the gradebook the grader last wrote is kept: beside it, hidden."""
    return out.with_name(f".{out.name}.sha256")


def remember_written(out: Path) -> None:
    atomic_write_text(hash_path(out), hashlib.sha256(out.read_bytes()).hexdigest() + "\n")


def refuse_hand_edits(out: Path) -> None:
    """An AdjustmentError when the gradebook at ``out`` is not the one the grader wrote last:
    the next run would silently undo the change."""
    try:
        kept = hash_path(out).read_text(encoding="utf-8").strip()
        now = hashlib.sha256(out.read_bytes()).hexdigest()
    except OSError:  # no gradebook yet, or one from before hashes were kept
        return
    if kept != now:
        raise AdjustmentError(
            f"{out} was changed since the grader wrote it, and grading again would undo that: "
            f"put score changes in an adjustments file (--adjustments FILE, columns "
            f"{','.join(COLUMNS)}), then delete {out.name} and run again"
        )
