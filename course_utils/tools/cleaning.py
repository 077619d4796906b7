"""Keeping notebooks clean in git: nbstripout's flags per folder and the git filters.

One policy per folder: lessons and solutions keep outputs and execution counts (nbval compares
against them) and their widget state (so JupyterLab draws quizzes, sliders and finished progress
bars before anything runs) but lose volatile metadata; labs keep nothing. Every folder keeps what
JupyterLab writes on open (:mod:`.normalize`), so opening a notebook does not change it. The git
filters, the cleanliness test, ``labs build`` and ``publish`` all read the flags from here.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from .normalize import ROOT, course_notebooks, folder_of, normalize_file

__all__ = ["ROOT", "STRIP_FLAGS", "course_notebooks", "folder_of", "setup_git", "strip"]

# Kept although nbstripout strips them by default: the collapsed flag JupyterLab 4 writes beside
# a hidden output (course_utils.tools.normalize stores it, so opening a notebook changes nothing;
# the kernel's language_info.version, which JupyterLab also writes, nbstripout keeps anyway).
JUPYTERLAB_KEYS = "cell.metadata.collapsed"
# ipywidgets' saved widget state, which nbstripout strips by default: published notebooks keep it.
WIDGET_STATE = "metadata.widgets"

LAB_VERSION_KEY = "metadata.language_info.version"
KEEP_PUBLISHED = ["--keep-output", "--keep-count", "--keep-metadata-keys"]
STRIP_FLAGS = {  # (the kernelspec's display_name stays: the schema, and so nbgrader, needs it)
    "notebooks": [*KEEP_PUBLISHED, f"{WIDGET_STATE} {JUPYTERLAB_KEYS}"],
    "solutions": [*KEEP_PUBLISHED, f"{WIDGET_STATE} {JUPYTERLAB_KEYS}"],
    # labs also lose the kernel's Python version: a lab a student runs on another Python (3.12,
    # 3.13) then stays unchanged in git
    "labs": ["--keep-metadata-keys", JUPYTERLAB_KEYS, "--extra-keys", LAB_VERSION_KEY],
}

GIT_FILTERS = {"notebooks": "nbstripout-keep", "solutions": "nbstripout-keep", "labs": "nbstripout"}


def nbstripout_command(folder: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nbstripout", *STRIP_FLAGS[folder], *extra]


def strip(*paths: Path, verify: bool = False) -> subprocess.CompletedProcess:
    """Clean ``paths`` (all in one course folder) in place with that folder's flags, in one
    nbstripout run, then store each in JupyterLab's form (:mod:`.normalize`); with ``verify``,
    only report (a non-zero return code when one is unclean)."""
    folders = {folder_of(path) for path in paths}
    if len(folders) != 1:
        raise ValueError(f"strip() takes notebooks of one course folder, not {sorted(folders)}")
    command = nbstripout_command(folders.pop(), *(["--verify"] if verify else []))
    result = subprocess.run([*command, *map(str, paths)], capture_output=True, text=True)
    if result.returncode:
        return result
    for path in paths:
        if normalize_file(path, check=verify) and verify:
            result.returncode = 1
            result.stdout += f"{path}: not in its stored form: python -m course_utils normalize\n"
    return result


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
