"""The late policy: how late a hand-in is, read from the LMS's late mark or the hand-in's time,
and the points it costs (``--due``, ``--late-penalty`` per day begun, ``--late-cap`` at most).

An LMS that marks lateness itself (Canvas's ``LATE`` in the file name) decides whether a
hand-in is late, its extensions included: a hand-in it does not mark is on time. The days late
are counted from the time the LMS gives (Blackboard's file name) or the file's modification
time; one Canvas marks late whose time is not after ``--due`` counts as one day.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")
LATE = "late"  # the kind of a Result.adjustments entry this policy adds


@dataclass(frozen=True)
class Amount:
    """Points, or a percentage of the lab's points ("10%")."""

    value: float
    percent: bool

    def points(self, max_score: float) -> float:
        return self.value * max_score / 100 if self.percent else self.value

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{self.value:g} points"


def parse_amount(text: str, option: str) -> Amount:
    """``"10%"`` or ``"1.5"``; a ValueError naming ``option`` and the forms it takes."""
    match = AMOUNT.match(text)
    if not match:
        raise ValueError(f"{option} {text!r}: give points (1.5) or a share of the lab's (10%)")
    return Amount(float(match.group(1)), bool(match.group(2)))


def parse_due(text: str) -> datetime:
    """``--due`` as local time without a zone ("2026-12-01 23:59", or with an offset, which is
    turned into this machine's local time); a ValueError saying the form."""
    try:
        due = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--due {text!r}: give a date and time like 2026-12-01T23:59") from None
    return due.astimezone().replace(tzinfo=None) if due.tzinfo else due


@dataclass(frozen=True)
class LatePolicy:
    """The due date and what each day late costs (None: nothing), at most ``cap``."""

    due: datetime | None = None
    per_day: Amount | None = None
    cap: Amount | None = None

    def entry(self, hand_in: dict, max_score: float) -> dict | None:
        """The late entry for a hand-in (kind, points, reason), or None when it is on time or
        nothing says it is late."""
        mark = hand_in.get("late_mark")
        if mark is False:
            return None
        lms = hand_in.get("lms", "the LMS")
        if self.due is None:
            return _entry(0.0, f"late ({lms}'s mark); no penalty without --due") if mark else None
        when = datetime.fromisoformat(hand_in["time"]) if hand_in.get("time") else None
        if when and when > self.due:
            days = math.ceil((when - self.due) / timedelta(days=1))
            why = (f"handed in {when:%Y-%m-%d %H:%M} by {hand_in['time_from']}; "
                   f"due {self.due:%Y-%m-%d %H:%M}")  # fmt: skip
        elif mark:
            days, why = 1, f"{lms} marks it late; its time is not after --due, so one day"
        else:
            return None
        penalty = days * self.per_day.points(max_score) if self.per_day else 0.0
        rule = f"{self.per_day} a day" if self.per_day else "no --late-penalty"
        if self.cap and penalty > self.cap.points(max_score):
            penalty, rule = self.cap.points(max_score), f"{rule}, at most {self.cap}"
        late = f"{days} day{'s' * (days != 1)} late"
        return _entry(-round(penalty, 2), f"{late} ({why}): {-round(penalty, 2):+g}, {rule}")


def _entry(points: float, reason: str) -> dict:
    return {"kind": LATE, "test": "", "points": points + 0.0, "reason": reason}
