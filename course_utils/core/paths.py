"""Where the course's folders are: the repository and its notebook folders, named once below
every layer so that the grader and the tools find the labs and solutions the same way."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: course_utils/core/ is two down
SOLUTIONS = ROOT / "solutions"
LABS = ROOT / "labs"
