"""Finding the hand-ins in a folder and reading each one: a notebook of this lab, or a row
saying why not (not a regular file, corrupt, not a notebook, another lab's notebook, missing).

Only regular files are hand-ins. A symbolic link (an LMS export unpacked with ``unzip`` restores
the links it holds, so a student can ship one to ``solutions/LAB.ipynb``), a hard link to a file
outside the submissions folder, a FIFO, a device or a socket is reported and never opened, and a
hand-in is read through file descriptors opened without following links, from the submissions
folder down (:func:`read_hand_in`).
"""

from __future__ import annotations

import json
import os
import re
import stat
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import nbformat

from . import lms_names
from .gradebook import CORRUPT, MISSING, NOT_A_NOTEBOOK, NOT_REGULAR

NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
NOT_OPENED = "it was not opened; hand in (or copy in) the notebook file itself"


class NotRegular(OSError):
    """A hand-in that is not a regular file (found so only when it was opened)."""


@dataclass
class Submission:
    """One student's hand-in: the notebook to grade, or why there is none."""

    student: str
    path: Path | None
    status: str = ""  # set when it cannot be graded at all
    reason: str = ""
    note: str = ""  # something the instructor should know even when it is graded
    name: str = ""  # the student's name: the roster's, else read from the file name
    file: str = ""  # what was handed in, as the submissions folder names it (readable)
    # what the LMS's file name and the file say of it: lms, lms_id, late_mark, time, time_from,
    # and roster ("unmatched" or "missing") once matched to one (:mod:`.roster`)
    hand_in: dict = field(default_factory=dict)


def readable(name: str) -> str:
    """A file name as text that can be printed and written anywhere: bytes that are not UTF-8
    (a zip unpacked from a Windows LMS) and control characters (tabs, escapes) shown as
    backslash escapes (``caf\\xe9.ipynb``)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


LMS_SUFFIXES = re.compile(r"(\s*\([^()]*\)|\s*\[[^\[\]]*\])+$")  # " (final) (1)", " [late]"


def display_name(stem: str, lab: str = "") -> str:
    """The student's name as read from a hand-in's file name: "José Müller - Lab 2 (final)
    (1)" -> "José Müller" (copies' and LMS suffixes, the lab's name and what follows " - "
    dropped); the name itself when nothing is left."""
    text = readable(stem).strip()
    name = LMS_SUFFIXES.sub("", text).strip()
    if lab:
        name = re.sub(rf"[\s_-]*{re.escape(lab)}$", "", name, flags=re.IGNORECASE).strip()
    name = name.split(" - ")[0].strip()
    return name or text or "_"


def student_id(name: str) -> str:
    """An id made of a name: accents folded, runs of anything but letters, digits, ``_`` and
    ``.`` turned into one ``-`` ("José Müller" -> "Jose-Muller")."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", folded).strip("-.")
    return slug or re.sub(r"\s+", "-", name.strip()) or "_"


def _named(stem: str, lab: str, file: str, **fields) -> Submission:
    """A hand-in named by its file name: the LMS's user id where an LMS named it, else an id
    made of the name read from it."""
    lms = lms_names.parse(file.rstrip("/"))
    if lms:
        hand_in = {"lms": lms.lms, "lms_id": lms.user_id}
        if lms.late is not None:
            hand_in["late_mark"] = lms.late
        if lms.submitted:
            hand_in |= {"time": lms.submitted.isoformat(), "time_from": f"{lms.lms}'s file name"}
        name = lms.name or lms.user_id
        return Submission(lms.user_id, name=name, file=file, hand_in=hand_in, **fields)
    name = display_name(stem, lab)
    return Submission(student_id(name), name=name, file=file, **fields)


def find_submissions(
    folder: Path,
    lab: str,
    skip: list[Path] = (),
    student: str | None = None,
    only: Path | None = None,
) -> list[Submission]:
    """One Submission per student: ``<student>.ipynb`` files and ``<student>/`` folders (or,
    with ``student``, the whole folder as that student's).

    Other files become rows too (status not_a_notebook, or not_regular for links and special
    files) so nothing handed in goes unnoticed; hidden files and the paths in ``skip`` are
    ignored. Each is named by the LMS's id where an LMS's bulk download named it
    (:mod:`.lms_names`; Blackboard's receipts are skipped), else by a student id read from its
    file name (:func:`display_name`); one student's several entries are one row. ``only``:
    that one entry of ``folder``."""
    links = links_inside(folder)
    if student is not None:
        return [_from_folder(folder, lab, links, student)]
    skipped = {Path(os.path.abspath(p)) for p in skip} | {Path(p).resolve() for p in skip}
    found: dict[tuple[str, str], list[Submission]] = {}
    entries = [only] if only is not None else sorted(folder.iterdir())
    for entry in entries:
        if entry.name.startswith(".") or _skipped(entry, skipped) or _receipt(entry.name):
            continue
        shown = readable(entry.name)
        refused = refusal(entry, links)
        if refused:
            reason = f"{shown} is {refused}, not a regular file: {NOT_OPENED}"
            sub = _named(entry.stem, lab, shown, path=None, status=NOT_REGULAR, reason=reason)
        elif entry.is_dir():
            sub = _from_folder(entry, lab, links)
        elif entry.suffix == ".ipynb":
            sub = _named(entry.stem, lab, shown, path=entry)
        else:
            reason = f"{shown} is not a notebook; expected {readable(entry.stem)}.ipynb"
            sub = _named(entry.stem, lab, shown, path=None, status=NOT_A_NOTEBOOK, reason=reason)
        key = (sub.hand_in.get("lms", ""), sub.student.casefold())  # one LMS's ids only
        found.setdefault(key, []).append(sub)
    return [_timed(one_per_student(subs)) for _, subs in sorted(found.items())]


def _receipt(name: str) -> bool:
    """Whether ``name`` is an LMS's receipt beside a hand-in (Blackboard's .txt), not one."""
    lms = lms_names.parse(name)
    return bool(lms and lms.receipt)


def _timed(sub: Submission) -> Submission:
    """``sub`` with the time it was handed in: the LMS's (from its file name) or the file's
    modification time (an LMS's zip keeps it), read before the hand-in is copied."""
    if sub.path is not None and "time" not in sub.hand_in:
        try:
            when = datetime.fromtimestamp(os.lstat(sub.path).st_mtime).replace(microsecond=0)
        except OSError:
            return sub
        sub.hand_in |= {"time": when.isoformat(), "time_from": "the file's time"}
    return sub


def _skipped(entry: Path, skipped: set[Path]) -> bool:
    """Whether ``entry`` is one of the grader's own paths (a link never is: it is reported)."""
    if Path(os.path.abspath(entry)) in skipped:
        return True
    return not entry.is_symlink() and entry.resolve() in skipped


def links_inside(folder: Path) -> Counter:
    """How many names each multiply-linked regular file has inside ``folder`` (links not
    followed): a file with more links than that is a hard link to a file outside it."""
    counts: Counter = Counter()
    for where, _, files in os.walk(folder):
        for name in files:
            try:
                info = os.lstat(os.path.join(where, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                counts[(info.st_dev, info.st_ino)] += 1
    return counts


def refusal(path: Path, links: Counter) -> str:
    """What ``path`` is when it is not a regular file or a folder ("" when it is one), read
    from the entry itself (``lstat``): nothing it points to is opened."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return f"a symbolic link (to {os.readlink(path)})"
    if stat.S_ISDIR(mode):
        return ""
    if stat.S_ISREG(mode):
        inside = links.get((info.st_dev, info.st_ino), 1)
        if info.st_nlink > inside:
            return f"a hard link to a file outside the submissions folder ({info.st_nlink} links)"
        return ""
    kinds = [(stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]  # fmt: skip
    return next((what for test, what in kinds if test(mode)), "a special file")


def _from_folder(folder: Path, lab: str, links: Counter, student: str | None = None):
    """The lab notebook in a student's folder (nested as nbgrader collects it, or misnamed when
    it is the only notebook there); links inside it are not followed."""
    shown = readable(folder.name)
    fields = {"name": student, "student": student} if student else {}
    make = (
        (lambda **kw: Submission(**fields, **kw))
        if student
        else (lambda **kw: _named(folder.name, lab, f"{shown}/", **kw))
    )
    notebooks = _notebooks_in(folder)
    named = [p for p in notebooks if p.name == f"{lab}.ipynb"]
    chosen = named or (notebooks if len(notebooks) == 1 else [])
    if not chosen:
        others = ", ".join(readable(p.name) for p in notebooks[:3]) or "no notebook"
        return make(path=None, status=MISSING, reason=f"no {lab}.ipynb in {shown}/ ({others})")
    chosen.sort(key=lambda p: bool(refusal(p, links)))  # a regular file first
    relative = f"{shown}/{readable(chosen[0].relative_to(folder).as_posix())}"
    if refused := refusal(chosen[0], links):
        reason = f"{relative} is {refused}, not a regular file: {NOT_OPENED}"
        return make(path=None, status=NOT_REGULAR, reason=reason)
    note = "" if named else f"graded {relative} (expected {lab}.ipynb)"
    sub = make(path=chosen[0], note=note)
    if not student:
        sub.file = relative
    return sub


def _notebooks_in(folder: Path) -> list[Path]:
    """Every ``*.ipynb`` entry under ``folder`` (files, links, anything), hidden ones left out,
    without descending into linked folders."""
    found = []
    for where, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        linked = [d for d in dirs if os.path.islink(os.path.join(where, d))]
        for name in [*files, *linked]:
            if name.endswith(".ipynb") and not name.startswith("."):
                found.append(Path(where) / name)
    return sorted(found)


def one_per_student(subs: list[Submission]) -> Submission:
    """A student with several entries (alice.ipynb and alice/, or an LMS's "(1)" copy): grade
    the newest gradable one and say which, and why, in its note."""
    if len(subs) == 1:
        return subs[0]
    gradable = [s for s in subs if s.path is not None]
    chosen = max(gradable, key=_modified) if gradable else subs[0]
    others = [s.file for s in subs if s is not chosen]
    why = "the newest of its hand-ins" if len(gradable) > 1 else "its only notebook"
    also = f"graded {chosen.file} ({why}); not graded: {', '.join(others)}"
    chosen.note = "; ".join([also] + [chosen.note] * bool(chosen.note))
    return chosen


def _modified(sub: Submission) -> tuple[float, str]:
    try:
        return os.lstat(sub.path).st_mtime, sub.file
    except OSError:
        return 0.0, sub.file


def read_hand_in(root: Path, path: Path) -> bytes:
    """The bytes of the hand-in ``path`` under the submissions folder ``root``, every folder on
    the way and the file itself opened without following links; :class:`NotRegular` (an
    OSError) when one of them is a link or the file is not regular."""
    parts = path.relative_to(root).parts
    if not NO_FOLLOW or os.open not in os.supports_dir_fd:  # no such calls: check, then open
        if refusal(path, Counter()):
            raise NotRegular(f"{path.name} is {refusal(path, Counter())}")
        return path.read_bytes()
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | NO_FOLLOW)
    try:
        for part in parts[:-1]:
            inner = _open_no_follow(part, os.O_DIRECTORY, folder, path)
            os.close(folder)
            folder = inner
        fd = _open_no_follow(parts[-1], os.O_NONBLOCK, folder, path)  # a FIFO must not block
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise NotRegular(f"{path.name} is not a regular file")
        return file.read()


def _open_no_follow(name: str, flags: int, folder: int, path: Path) -> int:
    """``name`` in the open folder ``folder``; NotRegular when it is a symbolic link."""
    try:
        return os.open(name, os.O_RDONLY | NO_FOLLOW | flags, dir_fd=folder)
    except OSError:
        if stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            raise NotRegular(f"{path.name}: {name} is a symbolic link") from None
        raise


def private_copy(sub: Submission, root: Path, folder: Path) -> Submission:
    """``sub`` pointing at a copy of its hand-in in ``folder`` (the grader's own), read by
    :func:`read_hand_in`; or a row saying why it could not be read."""
    try:
        content = read_hand_in(root, sub.path)
    except NotRegular as exc:
        reason = f"{readable(str(exc))}, not a regular file: {NOT_OPENED}"
        return replace(sub, path=None, status=NOT_REGULAR, reason=reason)
    except OSError as exc:
        reason = f"{readable(sub.path.name)} cannot be read ({exc.strerror}); check the file and "
        return replace(sub, path=None, status=NOT_A_NOTEBOOK, reason=reason + "its permissions")
    folder.mkdir(parents=True)
    copy = folder / readable(sub.path.name).replace("/", "_")  # a name any log can print
    copy.write_bytes(content)
    return replace(sub, path=copy)


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
    """Why ``nb`` is not a copy of this lab ("" when it is): it shares no nbgrader cell with it,
    or (every lab numbering its exercises alike) none of its locked cells, the tests, reads as
    this lab's and its title is another's."""
    ids = set(grade_ids(nb))
    if ids & set(grade_ids(release)):
        if _shares_a_locked_cell(nb, release) or title_of(nb) == title_of(release):
            return ""
        theirs = title_of(nb) or "another lab"
        return (
            f"its test cells are not those of {lab}: a notebook of another lab ({theirs!r})? "
            f"hand in the notebook started from labs/{lab}.ipynb"
        )
    if not ids:
        return (
            f"none of the cells of {lab} are in it (no nbgrader cells at all): "
            f"was it started from labs/{lab}.ipynb?"
        )
    sample = ", ".join(sorted(ids)[:3])
    return f"its cells ({sample}, ...) are not those of {lab}: a notebook of another lab?"


def _shares_a_locked_cell(nb, release) -> bool:
    """Whether a test cell of the lab is in ``nb`` as it was handed out (whitespace aside),
    under its id (instructions and set-up cells may be alike from lab to lab; tests are not).
    A lab with no test cells shares them trivially."""

    def squeezed(cell) -> str:
        return " ".join(str(cell.get("source", "")).split())

    locked = {
        grade_id: squeezed(c) for c in release.cells if (grade_id := _locked_id(c)) is not None
    }
    if not locked:
        return True
    for cell in nb.cells:
        grade_id = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
        if isinstance(grade_id, str) and locked.get(grade_id) == squeezed(cell):
            return True
    return False


def _locked_id(cell) -> str | None:
    """The grade_id of a test cell (graded, locked, not an answer), else None."""
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    test = meta.get("grade") and not meta.get("solution") and cell.get("cell_type") == "code"
    return meta.get("grade_id") if test and meta.get("grade_id") else None


def title_of(nb) -> str:
    """The notebook's first Markdown heading ("Lab 02: attention"), "" if it has none."""
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown":
            for line in str(cell.get("source", "")).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return ""
