"""The course website: ``make site`` builds ``site/`` with Sphinx from the committed notebooks.

Nothing is executed: every page shows the outputs that CI checked. ``stage`` lays the sources out
in a temporary folder that mirrors the repository: README.md as the home page (followed by
``docs/navigation.md``, the site's menus), the guides under ``docs/``, ARCHITECTURE.md and
LICENSE, and each lesson and lab as git's ``HEAD`` holds it (:func:`committed`), made a page by
:mod:`.site_notebook`, whatever the working tree holds. The README's lesson map decides the
lessons (one row each, linking its notebook and its lab); ``sphinx_build`` runs Sphinx with
warnings as errors, naming the repository file each warning is about.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..engine.io import atomic_folder
from .cleaning import ROOT
from .site_notebook import page

MAP_HEADER = re.compile(
    r"^\|\s*#\s*\|\s*lesson\s*\|\s*what you see\s*\|\s*CPU minutes\s*\|\s*lab\s*\|\s*$"
)
MAP_HEADER_TEXT = "| # | lesson | what you see | CPU minutes | lab |"
LINK = re.compile(r"^\[(?P<text>[^\]]+)\]\((?P<path>[^)\s]+)\)$")
BUILDER = ("sphinx", "myst_nb", "sphinx_book_theme")  # the `site` extra
ORIGINALS = "_originals"  # the committed notebooks, untouched, for the download links
NOTEBOOK_FOLDERS = ("notebooks", "labs")  # read from git's HEAD
PAGES = ("LICENSE", "ARCHITECTURE.md")  # beside docs/, from the working tree
REPUBLISH = "republish it to save its widget state"
NAVIGATION = "docs/navigation.md"  # the site's menus, appended to the README on the home page


# The repository URL pyproject.toml ships with: a placeholder naming no real repository. Launch
# links built from it lead nowhere, so a site built with it says so (docs/maintainers.md).
PLACEHOLDER_REPOSITORY = "https://github.com/gpt-course/gpt-course"


def placeholder_note(root: Path = ROOT, environ=os.environ) -> str | None:
    """A note when the site's launch links would come from the placeholder repository URL: the
    one docs/conf.py takes (``COURSE_REPOSITORY``, else pyproject.toml's Repository)."""
    pyproject = root / "pyproject.toml"
    urls = {}
    if pyproject.is_file():
        urls = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("urls", {})
    repository = environ.get("COURSE_REPOSITORY", urls.get("Repository", ""))
    if repository.strip().rstrip("/") != PLACEHOLDER_REPOSITORY:
        return None
    return (
        f"the launch links (Colab, Binder, JupyterHub) point at {PLACEHOLDER_REPOSITORY}, the "
        "placeholder in pyproject.toml's [project.urls] Repository: set it to the course's real "
        "repository before publishing the site (docs/maintainers.md, The website)"
    )


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


def _link(cell: str, row: str) -> tuple[str, str]:
    """``(text, path)`` of a cell that is one Markdown link."""
    found = LINK.match(cell)
    if not found:
        raise SiteError(
            f"README.md lesson map: {cell!r} in the row {row!r} should be a link, "
            "[title](notebooks/NN_x.ipynb) or [lab NN](labs/NN_x.ipynb)"
        )
    return found["text"], found["path"]


def lesson_map(readme: str) -> list[tuple[str, str, str, str, str, str | None]]:
    """The rows ``(number, lesson, notebook, what you see, CPU minutes, lab or None)`` of the
    README's lesson map, whose lesson and lab cells link the notebooks."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if MAP_HEADER.match(line)), None)
    if start is None:
        raise SiteError(
            f"README.md has no lesson map (a table headed '{MAP_HEADER_TEXT}'): "
            "the site takes its list of lessons from it"
        )
    rows = []
    for line in lines[start + 2 :]:  # skip the header and its | --- | line
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if len(cells) != 5 or not re.fullmatch(r"\d\d", cells[0]):
            raise SiteError(f"README.md lesson map: cannot read the row {line!r} (want | NN | ...)")
        number, lesson, what, minutes, lab = cells
        title, notebook = _link(lesson, line)
        lab_path = None if lab in ("", "–", "-") else _link(lab, line)[1]
        rows.append((number, title, notebook, what, minutes, lab_path))
    if not rows:
        raise SiteError("README.md lesson map has no rows")
    return rows


def course_lessons(root: Path = ROOT, notebooks: Path | None = None) -> list[Lesson]:
    """The README's lesson map (in ``root``) matched with the notebooks and labs (under
    ``notebooks``, default ``root``): every lesson notebook must have a row, and every row link
    the one ``notebooks/NN_*.ipynb`` and, where there is one, its lab."""
    tree = root if notebooks is None else notebooks
    rows = lesson_map((root / "README.md").read_text(encoding="utf-8"))
    lessons, numbers = [], set()
    for number, title, link, what, minutes, lab_link in rows:
        found = sorted((tree / "notebooks").glob(f"{number}_*.ipynb"))
        if len(found) != 1:
            raise SiteError(
                f"README.md lesson map row {number} ({title}) needs exactly one committed "
                f"notebooks/{number}_*.ipynb, found {len(found)}"
            )
        notebook = found[0].relative_to(tree)
        lab = tree / "labs" / found[0].name
        lab = lab.relative_to(tree) if lab.exists() else None
        for linked, actual in ((link, notebook), (lab_link, lab)):
            if linked != (actual.as_posix() if actual else None):
                raise SiteError(
                    f"README.md lesson map row {number} links {linked or 'no lab'}: make it "
                    f"{actual.as_posix() if actual else '–'}"
                )
        lessons.append(Lesson(number, title, what, minutes, notebook, lab))
        numbers.add(number)
    for path in sorted((tree / "notebooks").glob("*.ipynb")):
        if path.name[:2] not in numbers:
            raise SiteError(
                f"notebooks/{path.name} is not in README.md's lesson map: add its row "
                f"'| {path.name[:2]} | [lesson](notebooks/{path.name}) | what you see | "
                f"CPU minutes | [lab {path.name[:2]}](labs/{path.name}) |'"
            )
    return lessons


def committed(root: Path, dest: Path) -> str | None:
    """Write git ``HEAD``'s ``notebooks/`` and ``labs/`` of ``root`` into ``dest`` (what CI
    checked, whatever the working tree holds); returns None, or, where ``root`` is no git
    checkout with them, a note saying the working tree's files are used instead."""
    fallback = "building from the working tree's notebooks, as they are"
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True)  # fmt: skip
        if top.returncode or Path(top.stdout.strip()).resolve() != Path(root).resolve():
            return f"{root} is not a git checkout: {fallback}"
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", "--format=tar", "HEAD", "--", *NOTEBOOK_FOLDERS],
            capture_output=True,
        )
    except OSError:
        return f"git is not installed: {fallback}"
    if archive.returncode:
        reason = archive.stderr.decode(errors="replace").strip().splitlines()
        return f"git has no committed notebooks ({reason[0] if reason else 'no HEAD'}): {fallback}"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return None


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
    """Lay out Sphinx's sources in ``src`` (which must not exist), mirroring the repository;
    returns notes (where the notebooks came from, widgets without saved state)."""
    shutil.copytree(root / "docs", src / "docs")
    if (root / "pyproject.toml").is_file():  # docs/conf.py reads the repository URL there
        shutil.copy2(root / "pyproject.toml", src / "pyproject.toml")
    for name in PAGES:
        shutil.copy2(root / name, src / name)
    home = (root / "README.md").read_text(encoding="utf-8").rstrip("\n")
    navigation = (root / NAVIGATION).read_text(encoding="utf-8")
    (src / "index.md").write_text(f"{home}\n\n{navigation}", encoding="utf-8")
    tree = src.parent / "committed"
    tree.mkdir()
    fallback = committed(root, tree)
    notes = [fallback] if fallback else []
    if fallback:
        tree = root
    for lesson in course_lessons(root, tree):
        for path, lab in ((lesson.notebook, False), (lesson.lab, True)):
            if path is None:
                continue
            original = src / ORIGINALS / path
            original.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(tree / path, original)
            nb = nbformat.read(tree / path, as_version=4)
            left_off = page(nb, _header(lesson, lab), str(path), lab)
            notes += [f"{path}: {note}; left off its page ({REPUBLISH})" for note in left_off]
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, src / path)
    return notes


def _repo_name(staged: str) -> str:
    """The repository file a staged source stands for (the staging mirrors the repository)."""
    if staged == "index.md":
        return f"README.md (the home page, with {NAVIGATION})"
    return staged.removeprefix(f"{ORIGINALS}/")


def _name_repo_files(text: str, src: Path) -> str:
    pattern = re.compile(re.escape(str(src)) + r"/([^\s:]+)")
    return pattern.sub(lambda m: _repo_name(m.group(1)), text)


def sphinx_build(src: Path, out: Path, doctrees: Path) -> None:
    """Run Sphinx's HTML builder on ``src`` into ``out``, any warning failing the build. (One
    process: the whole site takes seconds, and the MathJax extension is not parallel-safe.)"""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-N"]
    if (src / "docs" / "conf.py").exists():  # a staged repository: the settings live in docs/
        command += ["-c", str(src / "docs")]
    command += ["-d", str(doctrees), str(src), str(out)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        report = _name_repo_files(result.stderr.strip() or result.stdout.strip(), src)
        raise SiteError(f"the site build failed (warnings are errors):\n{report}")


# The theme's markup that accessibility checkers (axe-core) flag, and what each becomes: the
# output toggle and the search button named by what they show (their aria-labels said something
# else), a sidebar section's expand toggle named after its page, and the primary sidebar (the
# site's title and search box) a navigation landmark, so no content sits outside a landmark.
ACCESSIBLE = (
    ('<summary aria-label="Toggle hidden content">', "<summary>"),
    ('title="Search" aria-label="Search" data-bs-placement', 'title="Search" data-bs-placement'),
    (
        'class="bd-sidebar-primary bd-sidebar">',
        'class="bd-sidebar-primary bd-sidebar" role="navigation" aria-label="Course">',
    ),
)
SECTION_TOGGLE = re.compile(r'(>([^<>]+)</a><details(?: open="open")?><summary)>')


def accessible(html: str) -> str:
    """One built page with the theme's unnamed controls named (:data:`ACCESSIBLE`)."""
    for old, new in ACCESSIBLE:
        html = html.replace(old, new)
    return SECTION_TOGGLE.sub(
        lambda m: f'{m[1]} aria-label="the pages under {m[2].strip()}">', html
    )


def make_accessible(out: Path) -> None:
    """:func:`accessible` over every page of a built site, in place."""
    for path in out.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        fixed = accessible(text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")


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
        notes = [note for note in [placeholder_note(root)] if note] + stage(src, root)
        sphinx_build(src, html, Path(tmp) / "doctrees")
        make_accessible(html)
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
        print(f"note: {note}")
    print(f"site built in {seconds:.0f} s: {args.out / 'index.html'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils site")
    configure(parser)
    return run_build(parser.parse_args(argv))
