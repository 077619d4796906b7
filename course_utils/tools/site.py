"""The course website: ``make site`` builds ``site/`` with Sphinx from the committed notebooks.

Nothing is executed: every page shows the outputs that CI checked. The README's lesson map
decides the lessons (one row each, its notebook found by number); ``stage`` lays the sources out
in a temporary folder (the pages of ``docs/``, README.md and LICENSE beside them, each lesson and
lab made a page by :mod:`.site_notebook`), and ``sphinx_build`` runs Sphinx with warnings as
errors, naming the repository file each warning is about.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..engine.io import atomic_folder
from .cleaning import ROOT
from .site_notebook import page

MAP_HEADER = re.compile(r"^\|\s*#\s*\|\s*lesson\s*\|\s*what you see\s*\|\s*CPU minutes\s*\|\s*$")
BUILDER = ("sphinx", "myst_nb", "sphinx_book_theme")  # the `site` extra
ORIGINALS = "_originals"  # the committed notebooks, untouched, for the download links


class SiteError(RuntimeError):
    """The site cannot be built as things are; the message names the file and the fix."""


@dataclass(frozen=True)
class Lesson:
    """One row of the README's lesson map and the files it stands for (paths from the root)."""

    number: str
    title: str
    what: str
    minutes: str
    notebook: Path
    lab: Path | None


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row (a ``\\|`` inside a cell is not a separator)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def lesson_map(readme: str) -> list[tuple[str, str, str, str]]:
    """The rows ``(number, lesson, what you see, CPU minutes)`` of the README's lesson map."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if MAP_HEADER.match(line)), None)
    if start is None:
        raise SiteError(
            "README.md has no lesson map (a table headed '| # | lesson | what you see | CPU "
            "minutes |'): the site takes its list of lessons from it"
        )
    rows = []
    for line in lines[start + 2 :]:  # skip the header and its | --- | line
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if len(cells) != 4 or not re.fullmatch(r"\d\d", cells[0]):
            raise SiteError(f"README.md lesson map: cannot read the row {line!r} (want | NN | ...)")
        rows.append(tuple(cells))
    if not rows:
        raise SiteError("README.md lesson map has no rows")
    return rows


def course_lessons(root: Path = ROOT) -> list[Lesson]:
    """The lesson map matched with ``notebooks/NN_*.ipynb`` and ``labs/NN_*.ipynb``; every lesson
    notebook must have a row and every row exactly one notebook."""
    rows = lesson_map((root / "README.md").read_text(encoding="utf-8"))
    lessons, numbers = [], set()
    for number, title, what, minutes in rows:
        found = sorted((root / "notebooks").glob(f"{number}_*.ipynb"))
        if len(found) != 1:
            raise SiteError(
                f"README.md lesson map row {number} ({title}) needs exactly one "
                f"notebooks/{number}_*.ipynb, found {len(found)}"
            )
        lab = root / "labs" / found[0].name
        lessons.append(
            Lesson(
                number,
                title,
                what,
                minutes,
                found[0].relative_to(root),
                lab.relative_to(root) if lab.exists() else None,
            )
        )
        numbers.add(number)
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        if path.name[:2] not in numbers:
            raise SiteError(
                f"notebooks/{path.name} is not in README.md's lesson map: add its row "
                f"'| {path.name[:2]} | lesson | what you see | CPU minutes |'"
            )
    return lessons


def map_table(lessons: list[Lesson]) -> str:
    """The home page's lesson map: the README's table with links to each lesson and lab."""
    lines = ["| # | lesson | what you see | CPU minutes | lab |", "| --- | --- | --- | --- | --- |"]
    for lesson in lessons:
        lab = f"[lab {lesson.number}]({lesson.lab.as_posix()})" if lesson.lab else "–"
        link = f"[{lesson.title}]({lesson.notebook.as_posix()})"
        lines.append(f"| {lesson.number} | {link} | {lesson.what} | {lesson.minutes} | {lab} |")
    return "\n".join(lines) + "\n"


def _download(path: Path) -> str:
    return f"{{download}}`Download this notebook </{ORIGINALS}/{path.as_posix()}>`"


def _header(lesson: Lesson, lab: bool) -> str:
    """The line under a page's introduction: the download link and the page's neighbour."""
    if lab:
        parts = [
            _download(lesson.lab),
            "the lab as students get it: no outputs, no solutions, no hidden tests; its checks "
            "import `course_utils`, so run it in the course environment",
            f"[lesson {lesson.number}](../{lesson.notebook.as_posix()})",
        ]
    else:
        parts = [_download(lesson.notebook), f"CPU minutes: {lesson.minutes}"]
        if lesson.lab:
            parts.append(f"[lab {lesson.number}](../{lesson.lab.as_posix()})")
        parts.append("every output below was re-computed by CI and compared")
    return ":::{container} course-page-links\n" + " · ".join(parts) + "\n:::\n"


def stage(src: Path, root: Path = ROOT) -> list[str]:
    """Lay out Sphinx's sources in ``src`` (which must not exist); returns notes about outputs
    left off a page (widgets without saved state)."""
    shutil.copytree(root / "docs", src)
    for name in ("README.md", "LICENSE", "ARCHITECTURE.md"):
        shutil.copy2(root / name, src / name)
    lessons = course_lessons(root)
    (src / "_lesson_map.md").write_text(map_table(lessons), encoding="utf-8")
    notes = []
    for lesson in lessons:
        for path, lab in ((lesson.notebook, False), (lesson.lab, True)):
            if path is None:
                continue
            original = src / ORIGINALS / path
            original.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / path, original)
            nb = nbformat.read(root / path, as_version=4)
            notes += [f"{path}: {note}" for note in page(nb, _header(lesson, lab), str(path), lab)]
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, src / path)
    return notes


def _repo_name(staged: str) -> str:
    """The repository file a staged source stands for."""
    if staged == "_lesson_map.md":
        return "README.md (lesson map)"
    if staged.startswith(f"{ORIGINALS}/"):
        return staged.removeprefix(f"{ORIGINALS}/")
    if staged.split("/")[0] in ("notebooks", "labs", "README.md", "LICENSE", "ARCHITECTURE.md"):
        return staged
    return f"docs/{staged}"


def _name_repo_files(text: str, src: Path) -> str:
    pattern = re.compile(re.escape(str(src)) + r"/([^\s:]+)")
    return pattern.sub(lambda m: _repo_name(m.group(1)), text)


def sphinx_build(src: Path, out: Path, doctrees: Path) -> None:
    """Run Sphinx's HTML builder on ``src`` into ``out``, any warning failing the build. (One
    process: the whole site takes seconds, and the MathJax extension is not parallel-safe.)"""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-N"]
    command += ["-d", str(doctrees), str(src), str(out)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        report = _name_repo_files(result.stderr.strip() or result.stdout.strip(), src)
        raise SiteError(f"the site build failed (warnings are errors):\n{report}")


def _refuse_to_replace(out: Path) -> None:
    """Only an empty folder or a previous build may be replaced by a build."""
    if out.exists() and any(out.iterdir()) and not (out / ".buildinfo").exists():
        raise SiteError(f"{out} exists and is not a built site: choose another --out")


def build(out: Path, root: Path = ROOT) -> tuple[float, list[str]]:
    """Build the website into ``out``, replacing a previous build only once this one has
    succeeded; returns the seconds it took and the staging notes."""
    start = time.perf_counter()
    missing = [name for name in BUILDER if importlib.util.find_spec(name) is None]
    if missing:
        raise SiteError(
            f"the site builder is not installed ({', '.join(missing)}): "
            "pip install -e '.[site]' (make site does it)"
        )
    out = Path(out).resolve()
    _refuse_to_replace(out)
    with tempfile.TemporaryDirectory(prefix="course-site-") as tmp:
        src, html = Path(tmp) / "src", Path(tmp) / "build" / "html"  # myst-nb writes beside it
        notes = stage(src, root)
        sphinx_build(src, html, Path(tmp) / "doctrees")
        atomic_folder(out, lambda folder: shutil.copytree(html, folder, dirs_exist_ok=True))
    return time.perf_counter() - start, notes


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``site`` command: ``build``."""
    from ..core.cli import add_subcommand

    parser.description = "The course website: build site/ from the committed notebooks."
    parser.epilog = "example:\n  python -m course_utils site build --out site"
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = add_subcommand(
        sub, "build", "build the static website from the committed notebooks",
        "Build the static website (Sphinx, myst-nb, offline) from the committed notebooks and "
        "their published outputs, without re-running them.",
        "python -m course_utils site build --out site",
    )  # fmt: skip
    run.add_argument("--out", type=Path, default=ROOT / "site", help="output folder (site/)")
    run.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    try:
        seconds, notes = build(args.out)
    except SiteError as err:
        print(err, file=sys.stderr)
        return 1
    for note in notes:
        print(f"note: {note}; left off its page (republish it to save its widget state)")
    print(f"site built in {seconds:.0f} s: {args.out / 'index.html'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils site")
    configure(parser)
    return run_build(parser.parse_args(argv))
