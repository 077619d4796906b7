"""Finding the hand-ins in a folder and reading each one: a notebook of this lab, or a row
saying why not (corrupt, not a notebook, another lab's notebook, missing)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .gradebook import CORRUPT, MISSING, NOT_A_NOTEBOOK


@dataclass
class Submission:
    """One student's hand-in: the notebook to grade, or why there is none."""

    student: str
    path: Path | None
    status: str = ""  # set when it cannot be graded at all
    reason: str = ""
    note: str = ""  # something the instructor should know even when it is graded


def find_submissions(folder: Path, lab: str, skip: list[Path] = ()) -> list[Submission]:
    """One Submission per student: ``<student>.ipynb`` files and ``<student>/`` folders.

    Other files become rows too (status not_a_notebook) so nothing handed in goes unnoticed;
    hidden files and the paths in ``skip`` are ignored."""
    skipped = {Path(p).resolve() for p in skip}
    found: dict[str, list[Submission]] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.resolve() in skipped:
            continue
        if entry.is_dir():
            sub = _from_folder(entry, lab)
        elif entry.suffix == ".ipynb":
            sub = Submission(entry.stem, entry)
        else:
            reason = f"{entry.name} is not a notebook; expected {entry.stem}.ipynb"
            sub = Submission(entry.stem, None, NOT_A_NOTEBOOK, reason)
        found.setdefault(sub.student, []).append(_readable(sub))
    return [_one_per_student(subs) for _, subs in sorted(found.items())]


def _readable(sub: Submission) -> Submission:
    """``sub``, or a not_a_notebook row when its file cannot be opened (a broken link, no
    permission): one unreadable hand-in must not stop the class's grading."""
    if sub.path is None:
        return sub
    try:
        with open(sub.path, "rb"):
            pass
    except OSError as exc:
        reason = (
            f"{sub.path.name} cannot be read ({exc.strerror}); check the file and its permissions"
        )
        return Submission(sub.student, None, NOT_A_NOTEBOOK, reason, sub.note)
    return sub


def _from_folder(folder: Path, lab: str) -> Submission:
    """The lab notebook in a student's folder (nested as nbgrader collects it, or misnamed when
    it is the only notebook there)."""
    notebooks = sorted(
        p
        for p in folder.rglob("*.ipynb")
        if not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    named = [p for p in notebooks if p.name == f"{lab}.ipynb"]
    if named:
        return Submission(folder.name, named[0])
    if len(notebooks) == 1:
        relative = notebooks[0].relative_to(folder).as_posix()
        note = f"graded {folder.name}/{relative} (expected {lab}.ipynb)"
        return Submission(folder.name, notebooks[0], note=note)
    others = ", ".join(p.name for p in notebooks[:3]) or "no notebook"
    return Submission(folder.name, None, MISSING, f"no {lab}.ipynb in {folder.name}/ ({others})")


def _one_per_student(subs: list[Submission]) -> Submission:
    """A student with several entries (alice.ipynb and alice/): grade the first gradable one and
    name the others in its note."""
    chosen = next((s for s in subs if s.path is not None), subs[0])
    others = [s.path.name if s.path else s.reason for s in subs if s is not chosen]
    if others:
        also = f"also found: {', '.join(others)}"
        chosen.note = "; ".join([chosen.note] * bool(chosen.note) + [also])
    return chosen


def load_submission(path: Path):
    """(notebook, "", "") or (None, status, reason) for a file that is not a readable notebook.

    Older notebook formats (4.0-4.4, as older JupyterLabs save) are read as they are; the
    repairs bring them up to date."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None, NOT_A_NOTEBOOK, f"{path.name} is not text (a binary file?), not a notebook"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("{"):
            where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            return None, CORRUPT, f"{path.name} is not valid JSON ({where}): cut short or edited?"
        return None, NOT_A_NOTEBOOK, f"{path.name} is not a notebook (not JSON)"
    if not isinstance(data, dict) or "nbformat" not in data:
        return None, NOT_A_NOTEBOOK, f"{path.name} is JSON but not a notebook"
    try:  # not nbformat.validate: labs lose kernelspec.display_name, which nbgrader puts back
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, CORRUPT, f"{path.name} is not a valid notebook: {message}"
    if not isinstance(nb.get("cells"), list):
        return None, CORRUPT, f"{path.name} is not a valid notebook: it has no list of cells"
    return nb, "", ""


def grade_ids(nb) -> list[str]:
    """The nbgrader ids of a notebook's cells, in order (cells without one are skipped)."""
    ids = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            ids.append(meta["grade_id"])
    return ids


def wrong_lab_reason(nb, release, lab: str) -> str:
    """Why ``nb`` is not a copy of this lab ("" when it is): it shares no nbgrader cell with it."""
    ids = set(grade_ids(nb))
    if ids & set(grade_ids(release)):
        return ""
    if not ids:
        return (
            f"none of the cells of {lab} are in it (no nbgrader cells at all): "
            f"was it started from labs/{lab}.ipynb?"
        )
    sample = ", ".join(sorted(ids)[:3])
    return f"its cells ({sample}, ...) are not those of {lab}: a notebook of another lab?"
