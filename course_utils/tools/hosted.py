"""A lesson or lab opened alone in a hosted Jupyter (Colab, Binder, a JupyterHub) that has torch
but not the course: the top of its first code cell installs the course's package, pinned to the
course's version, and does nothing (printing nothing, so published outputs stay as they are)
where the package is already installed.

The lines are written into each lesson and solution by ``python -m course_utils hosted`` (labs
get them from their solution through ``labs build``); writing them twice changes nothing, and a
new version replaces the old pin. They sit at the top of the existing first code cell, not in a
cell of their own, so that cell ids and execution counts stay as they are. pip reads its index
from its own settings (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``), so a hub or a test can point the
install at its own wheel index.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import nbformat

from ..core.paths import ROOT

FOLDERS = ("notebooks", "solutions")  # labs/ is generated from solutions/
MARK = "# Opened alone (Colab, Binder, a JupyterHub)? Install the course's package first."
# the block the marker opens: its lines up to the first line that is not part of the install
BLOCK = re.compile(
    re.escape(MARK)
    + r"\ntry:\n    import course_utils  # noqa: F401\nexcept ModuleNotFoundError:\n"
    + r"    %pip install [^\n]*\n"
)


def course_requirement(root: Path = ROOT) -> str:
    """The pinned requirement of the course's package, e.g. ``course-utils==0.1.0``, from
    pyproject.toml."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return f"{project['name']}=={project['version']}"


def install_lines(requirement: str) -> str:
    """The lines at the top of each notebook's first code cell."""
    return (
        f"{MARK}\ntry:\n    import course_utils  # noqa: F401\nexcept ModuleNotFoundError:\n"
        f"    %pip install -q {requirement}\n"
    )


def first_code_cell(nb):
    return next(cell for cell in nb.cells if cell.cell_type == "code")


def with_install_lines(source: str, requirement: str) -> str:
    """``source`` with the install lines at its top: added once, or their pin brought up to
    date."""
    lines = install_lines(requirement)
    if BLOCK.match(source):
        return BLOCK.sub(lambda _: lines, source, count=1)
    return lines + source


def without_install_lines(source: str) -> str:
    """``source`` with the install lines taken off its top (as it was before they went in)."""
    return BLOCK.sub("", source, count=1) if BLOCK.match(source) else source


def carries_install_lines(nb, requirement: str) -> bool:
    return first_code_cell(nb).source.startswith(install_lines(requirement))


def add_install_lines(path: Path, requirement: str) -> bool:
    """Put the install lines at the top of the notebook's first code cell; True when the file
    changed. Only that cell's source is touched."""
    text = Path(path).read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    cell = first_code_cell(nb)
    source = with_install_lines(cell.source, requirement)
    if source == cell.source:
        return False
    cell.source = source
    Path(path).write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return True


def course_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (root / folder).glob("*.ipynb"))


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``hosted`` command."""
    parser.description = (
        "Put the lines that install the course's package (pinned to its version) at the top of "
        "each lesson's and solution's first code cell, for Colab, Binder and JupyterHubs; "
        "then `labs build` carries them into the labs. Twice changes nothing."
    )
    parser.epilog = "example:\n  python -m course_utils hosted && python -m course_utils labs build"
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    requirement = course_requirement()
    paths = course_files()
    changed = [path for path in paths if add_install_lines(path, requirement)]
    for path in changed:
        print(f"install lines ({requirement}) put in {path.relative_to(ROOT)}")
    print(f"{len(changed)} of {len(paths)} notebooks changed")
    return 0
