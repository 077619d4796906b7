"""``gpt-course open [DIR]``: a student's own copy of the course, opened in JupyterLab.

For students without git or make (most Windows and macOS laptops): ``pip install`` of the
course's wheel, then this one command copies the lessons and the labs into a folder of theirs
(never over a file already there, so their work stays) and opens JupyterLab on that folder at
lesson 01. The wheel carries the lessons and the labs, not the solutions. From a checkout (an
editable install) the copy is taken from the checkout's ``notebooks/`` and ``labs/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import kernel_env

FOLDERS = ("notebooks", "labs")  # what a student gets: the lessons and the labs
FIRST_LESSON = "notebooks/01_tokens_and_embeddings.ipynb"
DEFAULT_DIR = Path("gpt-course")
# The course's JupyterLab defaults (overrides.json): the widget manager saves widget state with the
# notebook, so a lesson saved after a run draws its widgets when reopened (JupyterLab's own
# default drops it: "model not found"). A student's own settings still take precedence.
SETTINGS_DIR = Path(__file__).resolve().parent / "jupyterlab_settings"
# The course's JupyterLab extensions (plain JavaScript, no build step): restoring that saved
# widget state when a lesson opens no longer marks it unsaved (a real edit still does), and a
# lab's tab starts with "lab", as a lab has its lesson's file name.
EXTENSIONS_DIR = Path(__file__).resolve().parent / "jupyterlab_extensions"
EXAMPLE = "gpt-course open ~/gpt-course"


def course_source() -> Path:
    """The folder holding ``notebooks/`` and ``labs/``: inside the installed wheel
    (``course_utils/course``), else the checkout the package was installed from."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "course", package.parent):
        if all((candidate / folder).is_dir() for folder in FOLDERS):
            return candidate
    raise FileNotFoundError(
        f"no lessons found next to the course package ({package}): reinstall the course "
        "(pip install of its wheel, or make setup in a checkout)"
    )


def copy_course(dest: Path, source: Path | None = None) -> tuple[list[Path], list[Path]]:
    """Copy every lesson and lab into ``dest/notebooks`` and ``dest/labs``; a file already
    there is kept as it is. Returns ``(copied, kept)``, as paths inside ``dest``."""
    source = source or course_source()
    copied, kept = [], []
    for folder in FOLDERS:
        (dest / folder).mkdir(parents=True, exist_ok=True)
        for notebook in sorted((source / folder).glob("*.ipynb")):
            target = dest / folder / notebook.name
            if target.exists():
                kept.append(target)
                continue
            shutil.copyfile(notebook, target)
            copied.append(target)
    return copied, kept


def lab_command(dest: Path, browser: bool = True) -> list[str]:
    """JupyterLab serving the whole of ``dest`` (lessons and labs) with the course's settings
    and extensions, opened at lesson 01: the browser it opens (the file argument) and both URLs it
    prints (which a student copies where no browser opened) go to lesson 01, not the Launcher
    (its ``default_url``, which the printed URLs and ``/`` take); as root (a container) it needs
    ``--allow-root``."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={dest}"]
    command += [f"--LabApp.app_settings_dir={SETTINGS_DIR}"]
    command += [f"--LabApp.extra_labextensions_path={EXTENSIONS_DIR}"]
    command += [f"--LabApp.default_url=/lab/tree/{FIRST_LESSON}"]
    command += [] if browser else ["--no-browser"]
    command += ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [*command, str(dest / FIRST_LESSON)]


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``open`` command (``gpt-course open [DIR]``)."""
    parser.description = (
        "Copy the lessons and labs into DIR (a file already there is never overwritten, so "
        "your work stays) and open JupyterLab there at lesson 01."
    )
    parser.epilog = f"examples:\n  {EXAMPLE}\n  gpt-course open   (into ./gpt-course)"
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR, help="your folder")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser tab")
    parser.add_argument("--copy-only", action="store_true", help="copy, do not start JupyterLab")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dest = args.dir.expanduser().resolve()
    if dest == course_source():  # the checkout itself (make course): nothing to copy
        print(f"gpt-course: opening the course in {dest}")
    else:
        copied, kept = copy_course(dest)
        print(f"gpt-course: {len(copied)} notebooks copied into {dest}" + (
            f", {len(kept)} of yours kept as they are" if kept else ""))  # fmt: skip
    print(f"gpt-course: {kernel_env.ensure()}")
    if args.copy_only:
        return 0
    return subprocess.call(lab_command(dest, browser=not args.no_browser))
