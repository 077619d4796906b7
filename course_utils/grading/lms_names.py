"""The file names an LMS's bulk download gives hand-ins, read into who handed each in and when.

One named-group pattern per LMS, as nbgrader's ``zip_collect`` reads names (data, not a branch
of code per LMS):

* Canvas: ``<lastfirst>_<user id>_<submission id>_<file>``, with ``LATE`` after the name for a
  hand-in Canvas counts late (``smithjane_LATE_12345_67890_03_block_assembly-1.ipynb``; the
  ``-1`` is Canvas's mark of a re-upload). The user id is the ``ID`` column of its gradebook.
* Moodle: ``<Full Name>_<participant id>_assignsubmission_file_<file>`` (or a folder of that
  name); its grading worksheet names the participant ``Participant <id>``.
* Blackboard: ``<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>``, beside a
  ``.txt`` receipt named without the ``_<file>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

CANVAS, MOODLE, BLACKBOARD = "Canvas", "Moodle", "Blackboard"

# Tried in this order: Moodle's and Blackboard's fixed words first, Canvas's digits last.
PATTERNS = {
    MOODLE: re.compile(
        r"^(?P<name>.+?)_(?P<user_id>\d+)_assignsubmission_[a-z]+_(?P<original>.*)$"
    ),
    BLACKBOARD: re.compile(
        r"^(?P<assignment>.+)_(?P<user_id>[^_]+)_attempt_"
        r"(?P<submitted>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)(?:_(?P<original>.+)|(?P<receipt>\.txt))?$"
    ),
    CANVAS: re.compile(
        r"^(?P<name>[^_]+?)(?P<late>_(?i:late))?_(?P<user_id>\d+)_\d+_(?P<original>.+)$"
    ),
}
BLACKBOARD_TIME = "%Y-%m-%d-%H-%M-%S"


@dataclass(frozen=True)
class LmsName:
    """What an LMS's file name says of a hand-in."""

    lms: str  # CANVAS, MOODLE or BLACKBOARD
    user_id: str  # Canvas's user id, Moodle's participant id, Blackboard's username
    name: str  # the student's name as the LMS wrote it ("smithjane", "Jane Smith"), or ""
    original: str  # the file as the student uploaded it ("" for a Moodle folder)
    late: bool | None = None  # the LMS's own late mark; None where it writes none
    submitted: datetime | None = None  # when the LMS says it was handed in (Blackboard)
    receipt: bool = False  # Blackboard's .txt receipt, not a hand-in

    def describe(self) -> str:
        """How an instructor recognises the student in the LMS: "Canvas user id 12345"."""
        what = {CANVAS: "user id", MOODLE: "participant", BLACKBOARD: "username"}[self.lms]
        return f"{self.lms} {what} {self.user_id}"


def parse(file_name: str) -> LmsName | None:
    """The LMS's reading of ``file_name`` (a file's or a folder's), or None for a plain name."""
    for lms, pattern in PATTERNS.items():
        match = pattern.match(file_name)
        if not match:
            continue
        fields = match.groupdict()
        submitted = None
        if fields.get("submitted"):
            try:
                submitted = datetime.strptime(fields["submitted"], BLACKBOARD_TIME)
            except ValueError:  # a 13th month: not Blackboard's name after all
                continue
        late = bool(fields["late"]) if lms == CANVAS else None
        receipt = bool(fields.get("receipt"))
        name = fields.get("name") or ""
        return LmsName(lms, fields["user_id"], name, fields.get("original") or "", late,
                       submitted, receipt)  # fmt: skip
    return None
