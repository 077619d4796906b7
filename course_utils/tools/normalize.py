"""The form course notebooks are stored in: exactly what JupyterLab 4 writes when it opens them.

JupyterLab rewrites three things the moment a notebook opens, which dirties the tab and lets
autosave change the file (so ``git status`` shows it modified and ``git pull`` refuses): the
kernel's ``language_info.version``, ``"collapsed": true`` beside every code cell whose outputs are
hidden, and, with the course's setting that saves widget state, an empty widget state (no model
is live before a run; the stored widget outputs show their static HTML). Storing all three makes
opening a no-op. Lessons also link their lab with a
relative link that JupyterLab and the website both follow. Only metadata and Markdown text
change; nothing is re-executed, and normalizing twice changes nothing.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
from pathlib import Path

import nbformat

from ..core.paths import ROOT

FOLDERS = ("notebooks", "solutions", "labs")  # the course's notebook folders


def folder_of(path: Path) -> str:
    """The course folder a notebook lives in, which decides how it is stored and cleaned."""
    folder = Path(path).resolve().parent.name
    if folder not in FOLDERS:
        raise ValueError(
            f"{path} is not in one of {sorted(FOLDERS)}: no cleaning policy; pass a notebook "
            f"of the course's {', '.join(f'{f}/' for f in sorted(FOLDERS))}"
        )
    return folder


def course_notebooks(root: Path = ROOT) -> list[Path]:
    """Every lesson, solution and lab of the course."""
    return sorted(p for folder in FOLDERS for p in (root / folder).glob("*.ipynb"))


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# The widget state the course's JupyterLab (which saves widget state) writes for a notebook opened
# and not yet run: no models. Any other stored state is replaced on open, so the tab goes dirty.
STATE_BEFORE_A_RUN = {"state": {}, "version_major": 2, "version_minor": 0}

# A lab named as code (`labs/NN_slug.ipynb`) and not already a link's text.
LAB_AS_CODE = re.compile(r"(?<!\[)`(labs/\d\d_[a-z0-9_]+\.ipynb)`")


def kernel_python_version() -> str:
    """The ``language_info.version`` the course's kernel reports: this environment's Python
    (publishing runs the lessons in a kernel of this environment). A notebook that already
    names one keeps it: the version it was published with, so that normalizing or building
    the labs under another Python (3.12, 3.13) changes nothing."""
    return platform.python_version()


def link_labs(source: str) -> str:
    """Markdown with every `labs/NN_x.ipynb` made a relative link from ``notebooks/``."""
    return LAB_AS_CODE.sub(lambda m: f"[`{m.group(1)}`](../{m.group(1)})", source)


def _hide_like_jupyterlab(cell) -> None:
    """JupyterLab 4 keeps ``collapsed`` and ``jupyter.outputs_hidden`` equal on code cells."""
    meta = cell.metadata
    if meta.get("collapsed") or meta.get("jupyter", {}).get("outputs_hidden"):
        meta["collapsed"] = True
        meta.setdefault("jupyter", {})["outputs_hidden"] = True


def normalize(nb, folder: str) -> None:
    """Bring ``nb`` (of the course folder ``folder``) into its stored form, in place."""
    language = nb.metadata.get("language_info")
    if language is not None and language.get("name") == "python" and folder != "labs":
        language.setdefault("version", kernel_python_version())  # labs are stored without one
    if WIDGET_STATE in nb.metadata.get("widgets", {}):
        nb.metadata["widgets"] = {WIDGET_STATE: dict(STATE_BEFORE_A_RUN)}
    for cell in nb.cells:
        if cell.cell_type == "code":
            _hide_like_jupyterlab(cell)
        elif cell.cell_type == "markdown" and folder == "notebooks":
            cell.source = link_labs(cell.source)


def read_notebook(path: Path) -> tuple[str, nbformat.NotebookNode]:
    """The notebook at ``path``: its text as stored and its content (nbformat 4); ValueError in
    one line when the file is not a notebook."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    try:
        return text, nbformat.reads(text, as_version=4)
    except nbformat.reader.NotJSONError:
        raise ValueError(
            f"{path} is not a notebook (not JSON); give paths to .ipynb files"
        ) from None


def _texts(path: Path) -> tuple[str, str]:
    """The notebook's text as stored and in its normal form."""
    before, nb = read_notebook(path)
    normalize(nb, folder_of(path))
    return before, nbformat.writes(nb) + "\n"  # a trailing newline, as JupyterLab writes


def normalize_file(path: Path, check: bool = False) -> bool:
    """Normalize the notebook at ``path`` in place (or, with ``check``, only compare); True
    when its text is not (or was not) in the normal form."""
    before, after = _texts(path)
    if after != before and not check:
        Path(path).write_text(after, encoding="utf-8")
    return after != before


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``normalize`` command: notebooks to bring into their stored form."""
    parser.description = (
        "Store notebooks as JupyterLab writes them on open (kernel version, collapsed flags) "
        "and link each lesson's lab; metadata and text only, nothing is re-run."
    )
    parser.epilog = (
        "examples:\n  python -m course_utils normalize   (every lesson, solution and lab)\n"
        "  python -m course_utils normalize --check notebooks/03_block_assembly.ipynb"
    )
    parser.add_argument("notebooks", nargs="*", type=Path, metavar="NOTEBOOK")
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = args.notebooks or course_notebooks()
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise ValueError(f"no notebook at {missing[0]}: give paths to .ipynb files")
    changed = [path for path in paths if normalize_file(path, check=args.check)]
    verb = "would change" if args.check else "normalized"
    for path in changed:
        print(f"{verb} {path}")
    print(f"{len(changed)} of {len(paths)} notebooks {verb}", file=sys.stderr)
    return 1 if args.check and changed else 0
