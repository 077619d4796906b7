"""Per-hand-in results kept next to the gradebook, so that a run stopped half-way (Ctrl-C, a
crash, ``kill -9``) picks up where it stopped: the same command grades only what is missing.

A result is stored under a key made of what decides a score: the hand-in's bytes, the solution's
cells (sources and nbgrader metadata; not its outputs, not the points), the options that change
scores and the grader's own source. Change any of them and the hand-in is graded again. A
change of points only re-scores the stored outcomes (what each test scored of the points it was
graded with) without running a kernel. The limits (time, memory, tasks, disk; and so
``--jobs``, which splits the memory) are not in the key: a result that hit one (its ``limits``
field, set where it happened) is graded again when that kind of limit changes, the others are
kept. Each file is written atomically, so a result is whole or absent.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from ..engine.io import atomic_write_text
from .gradebook import Result

CACHE_VERSION = "3"
KEY_NAME = re.compile(r"[0-9a-f]{20}")  # what run_key returns: the only folders it removes


def grader_fingerprint() -> str:
    """A hash of the course package's Python source: a changed grader or check is a new key."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(CACHE_VERSION.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def solution_fingerprint(solution: Path) -> str:
    """A hash of what in the solution decides scores: each cell's type, source and grading
    metadata (a re-published solution with new outputs keeps the cache; a changed test or its
    points does not)."""
    import nbformat

    nb = nbformat.read(solution, as_version=4)
    cells = [[c.cell_type, c.source, _without_points(c.get("metadata", {}).get("nbgrader", {})),
              c.get("metadata", {}).get("course_utils", {})] for c in nb.cells]  # fmt: skip
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def _without_points(meta: dict) -> dict:
    """A cell's nbgrader metadata but its points (and the checksum that covers them): points
    re-score stored results, they never need a kernel."""
    return {k: v for k, v in meta.items() if k not in ("points", "checksum")}


def run_key(solution: Path, options: dict) -> str:
    """The key shared by every hand-in of one grading run: solution, options, grader."""
    digest = hashlib.sha256(solution_fingerprint(solution).encode())
    digest.update(json.dumps(options, sort_keys=True).encode())
    digest.update(grader_fingerprint().encode())
    return digest.hexdigest()[:20]


def limits_to_check(result: Result) -> list[str]:
    """The kinds of limit that may have decided this result: those it hit (its ``limits``),
    every kind for a grading that was killed or failed."""
    from .gradebook import ERROR, KILLED
    from .outcomes import LIMIT_KINDS

    return list(LIMIT_KINDS) if result.status in (KILLED, ERROR) else list(result.limits)


class ResultCache:
    """Results of one run's key in ``folder/<key>/``; other keys' folders are removed (only
    folders named like a key: a cache pointed at a folder of anything else deletes nothing)."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder = Path(folder) / key
        self.folder.mkdir(parents=True, exist_ok=True)
        for other in Path(folder).iterdir():
            if other.is_dir() and other.name != key and KEY_NAME.fullmatch(other.name):
                shutil.rmtree(other, ignore_errors=True)
        for leftover in self.folder.glob(".*.tmp"):  # a write cut short by kill -9
            leftover.unlink(missing_ok=True)

    def _path(self, student: str, content: bytes) -> Path:
        digest = hashlib.sha256(student.encode() + b"\0" + content).hexdigest()[:24]
        return self.folder / f"{digest}.json"

    def get(
        self, student: str, content: bytes, limits: dict | None = None, tests: dict | None = None
    ) -> Result | None:
        """The stored result, unless a kind of limit it hit is not set as it ran under
        (``limits``: kind -> setting); re-scored for ``tests``' points when given."""
        try:
            data = json.loads(self._path(student, content).read_text(encoding="utf-8"))
            result = Result(**data["result"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        ran_under, now = data.get("limits") or {}, limits or {}
        if any(ran_under.get(kind) != now.get(kind) for kind in limits_to_check(result)):
            return None
        return result.rescored(tests) if tests is not None else result

    def put(self, student: str, content: bytes, result: Result, limits: dict | None = None):
        text = json.dumps({"result": result.to_json(), "limits": limits}, sort_keys=True)
        atomic_write_text(self._path(student, content), text)

    def get_reference(self):
        try:
            return json.loads((self.folder / "reference.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put_reference(self, reference: dict) -> None:
        atomic_write_text(self.folder / "reference.json", json.dumps(reference, sort_keys=True))
