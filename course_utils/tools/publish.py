"""Re-running lessons and solutions to refresh their published outputs, then cleaning them
(:mod:`course_utils.tools.cleaning`) and rebuilding the labs (:mod:`course_utils.tools.labs`).
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat

from . import labs
from .cleaning import folder_of, strip
from .normalize import read_notebook


def execute(path: Path, timeout: int = 900) -> None:
    """Run a notebook top to bottom in a fresh kernel of this environment, in its own folder,
    and save it with its new outputs and the final state of its widgets."""
    from nbclient import NotebookClient

    path = Path(path)
    _text, nb = read_notebook(path)
    # Idle OpenMP threads sleep instead of spinning: on a busy machine spinning threads wait for
    # each other's time slices at every small op, and a training lesson crawls. The kernel
    # inherits this unless the caller chose otherwise.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,  # ipywidgets' notebook widget state, as JupyterLab saves it
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    nbformat.write(nb, path)


def publish(paths: list[Path]) -> None:
    """Re-execute lessons and solutions, clean them, then rebuild the labs from the solutions.
    Every path is checked before the first notebook runs."""
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"no notebook at {path}: give paths to .ipynb files")
        if folder_of(path) == "labs":
            raise ValueError(f"{path}: labs are generated; publish its solution instead")
    for path in paths:
        print(f"executing {path} ...", flush=True)
        execute(path)
        result = strip(path)
        if result.returncode:
            raise RuntimeError(f"nbstripout failed on {path}: {result.stderr}")
    labs.build_all()


def configure(parser) -> None:
    """The ``publish`` command: notebooks to re-run and clean."""
    parser.description = (
        "Re-run lessons or solutions top to bottom in a fresh kernel, clean them, and rebuild "
        "the labs from the solutions."
    )
    parser.epilog = (
        "example:\n  python -m course_utils publish notebooks/02_attention.ipynb "
        "solutions/02_attention.ipynb"
    )
    parser.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK")
    parser.set_defaults(func=lambda args: publish(args.notebooks))
