"""A lab a student runs on another Python (3.12, 3.13) stays unchanged in git: the labs' git
filter drops the kernel's Python version that JupyterLab writes, and labs are stored without one
(course_utils/tools/cleaning.py, normalize.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import nbformat

from course_utils.tools.cleaning import nbstripout_command
from course_utils.tools.normalize import FOLDERS, course_notebooks

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "01_tokens_and_embeddings.ipynb"


def test_labs_are_stored_without_a_python_version():
    labs = [p for p in course_notebooks() if p.parent.name == "labs"]
    assert len(labs) > 10 and "labs" in FOLDERS
    versioned = [p.name for p in labs if "version" in nbformat.read(p, 4).metadata.language_info]
    assert not versioned, f"{versioned}: run `python -m course_utils labs build`"


def test_a_lab_run_on_another_python_is_clean_for_git():
    """What git's clean filter makes of a lab JupyterLab saved under Python 3.12 after running it
    untouched: the committed lab, byte for byte."""
    committed = LAB.read_text(encoding="utf-8")
    nb = nbformat.reads(committed, as_version=4)
    nb.metadata.language_info["version"] = "3.12.1"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = 1
            cell.outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    cleaned = subprocess.run(nbstripout_command("labs"), input=nbformat.writes(nb) + "\n",
                             capture_output=True, text=True, check=True)  # fmt: skip
    assert cleaned.stdout == committed
