"""What a class's grading adds to the graded rows, from the command line: the late policy, the
instructor's adjustments file and the LMS's import file (the LMS at the way out)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from .adjustments import Adjustment, AdjustmentError, apply_adjustments, read_adjustments
from .gradebook import Lab, Result
from .late import LATE, LatePolicy, parse_amount, parse_due
from .lms_export import FORMATS, ExportError, check_roster, export_path, write_import
from .roster import Roster, apply_roster
from .submissions import Submission


class CourseOptionError(ValueError):
    """--due, --late-*, --adjustments or --format that cannot be used; one line says why."""


@dataclass
class CourseRules:
    """The late policy, the adjustments (and their file) and the import format asked for."""

    late: LatePolicy = field(default_factory=LatePolicy)
    adjustments: list[Adjustment] = field(default_factory=list)
    adjustments_path: Path | None = None
    fmt: str | None = None
    roster: Roster | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``grade`` command's options for the LMS's way out and the class's rules."""
    parser.add_argument(
        "--due", help="due date and time (like 2026-12-01T23:59, local time): a hand-in after "
        "it, or one the LMS marks late (Canvas), is late; see --late-penalty",
    )  # fmt: skip
    parser.add_argument(
        "--late-penalty", help="what each day late (or part of one) costs: points (1) or a "
        "share of the lab's points (10%%); default nothing, the lateness only noted",
    )  # fmt: skip
    parser.add_argument("--late-cap", help="the most a late penalty takes: points or 50%%")
    parser.add_argument(
        "--adjustments", type=Path, help="CSV of your changes to scores (student,exercise,"
        "points,reason; exercise: a test id or total), applied on every run",
    )  # fmt: skip
    parser.add_argument(
        "--format", choices=sorted(FORMATS), help="also write the LMS's import file beside "
        "the gradebook (OUT.canvas.csv, OUT.moodle.csv); needs that LMS's export as --roster",
    )  # fmt: skip


def rules_from(args: argparse.Namespace, roster: Roster | None) -> CourseRules:
    """The options checked before anything is graded; a CourseOptionError saying the fix."""
    try:
        due = parse_due(args.due) if getattr(args, "due", None) else None
        penalty, cap = getattr(args, "late_penalty", None), getattr(args, "late_cap", None)
        per_day = parse_amount(penalty, "--late-penalty") if penalty else None
        cap = parse_amount(cap, "--late-cap") if cap else None
        if (per_day or cap) and due is None:
            raise ValueError("--late-penalty and --late-cap need --due (the due date)")
        path = getattr(args, "adjustments", None)
        adjustments = read_adjustments(path) if path else []
        fmt = getattr(args, "format", None)
        if fmt:
            check_roster(fmt, roster)
    except (ValueError, AdjustmentError, ExportError) as problem:
        raise CourseOptionError(str(problem)) from None
    return CourseRules(LatePolicy(due, per_day, cap), adjustments, path, fmt, roster)


def lms_paths(out: Path) -> list[Path]:
    """The import files a run may write beside the gradebook: never hand-ins."""
    return [export_path(out, fmt) for fmt in FORMATS]


def fill_hand_ins(results: list[Result], found: list[Submission], roster: Roster | None) -> None:
    """Rows kept from the gradebook (one student re-graded) given what their hand-ins say
    (time, late mark, roster match), found again in the folder without being graded."""
    subs = apply_roster(found, roster) if roster else found
    by_student = {sub.student: sub.hand_in for sub in subs}
    for result in results:
        if not result.hand_in:
            result.hand_in = by_student.get(result.student, {})


def apply_rules(results: list[Result], lab: Lab, rules: CourseRules) -> list[str]:
    """Each row's late entry (from its hand-in) and adjustments; the adjustments that apply
    to no one, one line each."""
    for result in results:
        result.adjustments = [a for a in result.adjustments if a["kind"] != LATE]
        entry = rules.late.entry(result.hand_in, lab.max_score)
        if entry and result.hand_in.get("roster") != "missing":
            result.adjustments.append(entry)
    if rules.adjustments_path is None:
        return []
    return apply_adjustments(results, rules.adjustments, lab, rules.adjustments_path)


def write_lms_file(
    results: list[Result], lab: Lab, rules: CourseRules, out: Path, solution: Path
) -> Path | None:
    """The LMS's import file beside the gradebook, when --format asked for one; its column is
    named after the lab's title, read from the solution."""
    if not rules.fmt:
        return None
    import nbformat

    from .submissions import title_of

    title = title_of(nbformat.read(solution, as_version=4)) or lab.name
    path = export_path(out, rules.fmt)
    write_import(rules.fmt, results, lab, rules.roster, title, path)
    return path
