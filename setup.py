"""The wheel's (and the sdist's) lessons and labs are the committed notebooks, not the working tree.

A student's checkout holds run state: a moved slider, lesson 11's own timing, a half-done lab.
``python -m build`` packs what lies in ``notebooks/`` and ``labs/``, so after the usual build step
these hooks put git's ``HEAD`` version of each notebook in its place (``git show HEAD:path``: the
blob as committed, cleaned by the nbstripout filters) and leave out a notebook that is not
committed. Without git (a tree that is not a checkout) the working tree's notebooks are packed,
with a warning; a wheel built from an sdist takes the sdist's, which were already the committed
ones. Everything else about the package is in ``pyproject.toml``. Standard library only: this
runs inside the build, before anything of the course is installed.
"""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
# the folders the package carries, and the packages they become (pyproject's package-dir)
COURSE_FOLDERS = {"notebooks": "course_utils.course.notebooks", "labs": "course_utils.course.labs"}


def head_reader(root: Path):
    """``read(relative_path) -> bytes | None`` (None: not in HEAD) for the git checkout whose top
    is ``root``; None when ``root`` is not the top of a checkout (or git is missing)."""
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True)  # fmt: skip
    except OSError:
        return None
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root.resolve():
        return None

    def read(relative: str) -> bytes | None:
        shown = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{relative}"],
                               capture_output=True)  # fmt: skip
        return shown.stdout if shown.returncode == 0 else None

    return read


def use_committed(root: Path, targets: dict[str, Path]) -> None:
    """Replace every notebook in ``targets`` (folder name -> where the build put its notebooks)
    with its committed version in ``root``'s git; one that is not committed is left out."""
    read = head_reader(root)
    if read is None:
        if not (root / "PKG-INFO").exists():  # an sdist's notebooks are the committed ones
            warnings.warn(
                f"{root} is not a git checkout: the package takes the lessons and labs as they "
                "are in the working tree, run state and all (build from a clone to pack the "
                "committed notebooks)",
                stacklevel=2,
            )
        return
    for folder, target in targets.items():
        for notebook in sorted(Path(target).glob("*.ipynb")):
            blob = read(f"{folder}/{notebook.name}")
            notebook.unlink()  # never write through a link into the working tree
            if blob is None:
                warnings.warn(f"{folder}/{notebook.name} is not committed: left out", stacklevel=2)
            else:
                notebook.write_bytes(blob)


class CommittedBuildPy(build_py):
    """build_py, then the committed notebooks in place of the working tree's."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install serves the checkout
            return
        lib = Path(self.build_lib)
        use_committed(ROOT, {f: lib.joinpath(*p.split(".")) for f, p in COURSE_FOLDERS.items()})


class CommittedSdist(sdist):
    """sdist, with the committed notebooks in its tree."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        use_committed(ROOT, {f: Path(base_dir) / f for f in COURSE_FOLDERS})


setup(cmdclass={"build_py": CommittedBuildPy, "sdist": CommittedSdist})
