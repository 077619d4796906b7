"""Keeping notebooks clean in git: nbstripout's flags per folder and the git filters.

One policy per folder: lessons and solutions keep outputs and execution counts (nbval compares
against them) and their widget state (so JupyterLab draws quizzes, sliders and finished progress
bars before anything runs) but lose volatile metadata; labs keep nothing. The git filters, the
cleanliness test, ``labs build`` and ``publish`` all read the flags from here.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: course_utils/tools/ is two down

# Volatile metadata stripped everywhere, on top of nbstripout's own defaults. (The kernelspec's
# display_name stays: the notebook schema, and so nbgrader, requires it.)
EXTRA_KEYS = "metadata.language_info.version"
# ipywidgets' saved widget state, which nbstripout strips by default: published notebooks keep it.
WIDGET_STATE = "metadata.widgets"

KEEP_PUBLISHED = ["--keep-output", "--keep-count", "--keep-metadata-keys", WIDGET_STATE]
STRIP_FLAGS = {
    "notebooks": [*KEEP_PUBLISHED, "--extra-keys", EXTRA_KEYS],
    "solutions": [*KEEP_PUBLISHED, "--extra-keys", EXTRA_KEYS],
    "labs": ["--extra-keys", EXTRA_KEYS],
}

GIT_FILTERS = {"notebooks": "nbstripout-keep", "solutions": "nbstripout-keep", "labs": "nbstripout"}


def folder_of(path: Path) -> str:
    """The course folder a notebook lives in, which decides how it is cleaned."""
    folder = Path(path).resolve().parent.name
    if folder not in STRIP_FLAGS:
        raise ValueError(f"{path} is not in one of {sorted(STRIP_FLAGS)}: no cleaning policy")
    return folder


def nbstripout_command(folder: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nbstripout", *STRIP_FLAGS[folder], *extra]


def strip(path: Path, verify: bool = False) -> subprocess.CompletedProcess:
    """Clean ``path`` in place with its folder's flags (or, with ``verify``, only report)."""
    command = nbstripout_command(folder_of(path), *(["--verify"] if verify else []), str(path))
    return subprocess.run(command, capture_output=True, text=True)


def course_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in STRIP_FLAGS for p in (root / folder).glob("*.ipynb"))


def setup_git(root: Path = ROOT) -> None:
    """Point git at the per-folder nbstripout filters (the attributes are in .gitattributes)."""
    for folder, name in GIT_FILTERS.items():
        clean = " ".join(shlex.quote(part) for part in nbstripout_command(folder))
        subprocess.run(["git", "config", f"filter.{name}.clean", clean], cwd=root, check=True)
        subprocess.run(["git", "config", f"filter.{name}.smudge", "cat"], cwd=root, check=True)
    textconv = f"{shlex.quote(sys.executable)} -m nbstripout -t"
    subprocess.run(["git", "config", "diff.ipynb.textconv", textconv], cwd=root, check=True)
    print("git filters set: lessons and solutions keep outputs, labs are stripped on commit")


def configure_setup_git(parser) -> None:
    """The ``setup-git`` command (no arguments)."""
    parser.description = (
        "Point this clone's git at the per-folder nbstripout filters: lessons and solutions "
        "keep outputs, labs are stripped on commit."
    )
    parser.epilog = "example:\n  python -m course_utils setup-git"
    parser.set_defaults(func=lambda args: setup_git())
