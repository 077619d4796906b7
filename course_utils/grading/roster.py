"""The class list, read as the LMS exports it, and the hand-ins matched to it.

Three shapes are read as they come: Canvas's gradebook export (Student, ID, SIS User ID, SIS
Login ID, Section, a column per assignment, and a "Points Possible" row), Moodle's grading
worksheet (Identifier "Participant 4711", Full name, Email address, ...) and a plain CSV with
an id and a name column. A hand-in named by an LMS is matched by that LMS's id where the roster
holds one (Canvas's user id, Blackboard's username as Canvas's SIS Login ID, Moodle's
participant id); otherwise by id or name, accents, case and name order aside.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from .gradebook import MISSING
from .lms_names import BLACKBOARD, CANVAS, MOODLE, LmsName
from .submissions import Submission, one_per_student, student_id

ID_COLUMNS = ("id", "student_id", "student id", "sis user id", "username", "login", "student")
NAME_COLUMNS = ("name", "student name", "full name", "display name")
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"
MOODLE_PARTICIPANT = re.compile(r"^\s*Participant\s+(\d+)\s*$", re.IGNORECASE)
NOT_ON_ROSTER = "not on the roster"


class RosterError(ValueError):
    """A roster that cannot be read; the message says how to fix it."""


@dataclass
class RosterStudent:
    """One student of the roster: the gradebook's id and name, the id each LMS's file names
    carry, and the export's row as read (what the LMS's import file writes back)."""

    id: str
    name: str
    lms_ids: dict[str, str] = field(default_factory=dict)  # LMS -> id in its file names
    row: dict[str, str] = field(default_factory=dict)


@dataclass
class Roster:
    """A roster as read: which LMS exported it ("" for a plain CSV), its header, its students
    (one each) and, for Canvas, its Points Possible row."""

    path: Path
    lms: str
    header: list[str]
    students: list[RosterStudent]
    points_row: dict[str, str] | None = None

    def knows(self, lms: str) -> bool:
        """Whether the roster holds ``lms``'s ids, so that a hand-in it named matches by id."""
        return any(lms in s.lms_ids for s in self.students)


def read_roster(path: Path) -> Roster:
    """The roster at ``path``: Canvas's gradebook export, Moodle's grading worksheet or a
    plain CSV with an id column (id, student_id, username, ...) and a name column."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"cannot read the roster {path}: {exc}") from None
    reader = csv.DictReader(text.splitlines())
    header = [c.strip() for c in reader.fieldnames or []]
    rows = [{k.strip(): (v or "").strip() for k, v in r.items() if k} for r in reader]
    if {"Student", "ID"} <= set(header) and "SIS Login ID" in header:
        return _canvas(path, header, rows)
    if {"Identifier", "Full name"} <= set(header):
        return _moodle(path, header, rows)
    return _plain(path, header, rows)


def _canvas(path: Path, header: list[str], rows: list[dict]) -> Roster:
    """Canvas's gradebook export: ID is Canvas's user id (its file names carry it), SIS Login
    ID the login an LMS like Blackboard names files by; the Points Possible row is kept aside
    and rows without an ID ("(read only)", "Manual Posting") are skipped."""
    points = next((r for r in rows if r["Student"] == POINTS_POSSIBLE), None)
    students = []
    for row in rows:
        if row is points or not row["ID"].isdigit():
            continue
        ids = {CANVAS: row["ID"], BLACKBOARD: row["SIS Login ID"]}
        ids = {lms: value for lms, value in ids.items() if value}
        students.append(RosterStudent(row["ID"], row["Student"], ids, row))
    return Roster(path, CANVAS, header, _one_each(students), points)


def _moodle(path: Path, header: list[str], rows: list[dict]) -> Roster:
    """Moodle's grading worksheet: "Participant 4711" is the id its file names carry."""
    students = []
    for row in rows:
        match = MOODLE_PARTICIPANT.match(row["Identifier"])
        if match:
            number = match.group(1)
            students.append(RosterStudent(number, row["Full name"], {MOODLE: number}, row))
    return Roster(path, MOODLE, header, _one_each(students))


def _plain(path: Path, header: list[str], rows: list[dict]) -> Roster:
    columns = {c.casefold(): c for c in header}
    ids = next((columns[c] for c in ID_COLUMNS if c in columns), None)
    if ids is None:
        raise RosterError(
            f"the roster {path} has no id column; give it a header row with an 'id' column "
            "(and a 'name' column), one student a row, or pass the LMS's own export (Canvas's "
            "gradebook CSV, Moodle's grading worksheet)"
        )
    names = next((columns[c] for c in NAME_COLUMNS if c in columns), ids)
    students = [RosterStudent(r[ids], r[names] or r[ids], row=r) for r in rows if r[ids]]
    return Roster(path, "", header, _one_each(students))


def _one_each(students: list[RosterStudent]) -> list[RosterStudent]:
    """Each student once: a row repeated in the export (same id) counts once."""
    seen: dict[str, RosterStudent] = {}
    for student in students:
        seen.setdefault(student.id, student)
    return list(seen.values())


def name_keys(name: str) -> set[str]:
    """Ways one name is written: "Smith, Jane", "Jane Smith" and Canvas's "smithjane" all give
    "jane-smith" or "smithjane" (accents and case aside)."""

    def squashed(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", student_id(text).casefold())

    keys = {student_id(name).casefold(), squashed(name)}
    if "," in name:
        last, first = name.split(",", 1)
        keys |= {student_id(f"{first} {last}").casefold(), squashed(last + first)}
    elif len(words := name.split()) > 1:
        keys.add(squashed(words[-1] + "".join(words[:-1])))
    return keys - {"", "_"}


def find_student(sub: Submission, roster: Roster) -> RosterStudent | None:
    """The roster student ``sub`` is: by the id of the LMS that named it, where the roster
    holds that LMS's ids (two students of one name stay two); else by id, then by a name only
    one roster student has."""
    lms = sub.hand_in.get("lms")
    if lms and roster.knows(lms):
        wanted = sub.hand_in["lms_id"].casefold()
        same = (s for s in roster.students if s.lms_ids.get(lms, "").casefold() == wanted)
        return next(same, None)
    ids = {sub.student.casefold(), student_id(sub.student).casefold()}
    for student in roster.students if not (lms and roster.lms) else []:  # one LMS's ids only
        if student.id.casefold() in ids or student_id(student.id).casefold() in ids:
            return student
    mine = name_keys(sub.name) | {student_id(sub.student).casefold()}
    named = [s for s in roster.students if name_keys(s.name) & mine]
    return named[0] if len(named) == 1 else None  # two of one name: only an id can tell


def apply_roster(found: list[Submission], roster: Roster) -> list[Submission]:
    """Each hand-in named by its roster student (several of one student graded as one, the
    newest); a roster student with none is a row with status missing; a hand-in matched to no
    one keeps its own id and says so. Both are marked in ``hand_in["roster"]``."""
    claimed: dict[str, Submission] = {}
    rows = []
    for sub in found:
        student = find_student(sub, roster)
        if student is None:
            sub.note = "; ".join(filter(None, [sub.note, NOT_ON_ROSTER]))
            sub.hand_in = sub.hand_in | {"roster": "unmatched"}
            rows.append(sub)
            continue
        sub.student, sub.name = student.id, student.name
        if student.id in claimed:
            rows.remove(claimed[student.id])
            sub = one_per_student([claimed[student.id], sub])
        claimed[student.id] = sub
        rows.append(sub)
    for student in roster.students:
        if student.id not in claimed:
            reason = "no hand-in found for this student"
            rows.append(Submission(student.id, None, MISSING, reason, name=student.name,
                                   hand_in={"roster": "missing"}))  # fmt: skip
    return rows


ATTENTION = 3  # the exit status of a run whose gradebook is written but needs a look


def closing_block(results, problems: list[str] = ()) -> list[str]:
    """The one block a run ends with when the hand-ins and the roster disagree: each hand-in on
    no roster row, each roster student with no hand-in, then ``problems`` (adjustments that
    apply to no one); empty when there is nothing to say."""
    unmatched = [r for r in results if r.hand_in.get("roster") == "unmatched"]
    missing = [r for r in results if r.hand_in.get("roster") == "missing"]
    if not (unmatched or missing or problems):
        return []
    lines = [f"needs your attention (exit status {ATTENTION}):"]
    if unmatched:
        lines.append(f"  {len(unmatched)} hand-in(s) match no roster student (in the gradebook, "
                     "not in the LMS file): add them to the roster or rename them")  # fmt: skip
        for r in unmatched:
            who = _lms_words(r.hand_in) or f"id {r.student}"
            lines.append(f"    {r.file} ({who}): {r.status}")
    if missing:
        lines.append(f"  {len(missing)} roster student(s) with no hand-in (status missing, "
                     "empty in the LMS file):")  # fmt: skip
        lines += [f"    {r.student} {r.name}" for r in missing]
    if problems:
        lines.append(f"  {len(problems)} adjustment(s) not applied:")
        lines += [f"    {p}" for p in problems]
    return lines


def _lms_words(hand_in: dict) -> str:
    if not hand_in.get("lms"):
        return ""
    return LmsName(hand_in["lms"], hand_in["lms_id"], "", "").describe()
