"""A lesson or lab opened alone in a hosted Jupyter (Colab, Binder, a JupyterHub) that has torch but
not the course: its first code cell installs the course's package, pinned to the course's
version (course_utils/tools/hosted.py), and the notebook runs top to bottom.

The end-to-end test makes that Jupyter: a fresh virtual environment with only torch, nbclient
and ipykernel; lesson 01 and lab 01 copied out alone; the course's wheel, built from this
checkout, in a local folder standing for the public index (pip's PIP_FIND_LINKS, which the
install cell's pip reads like any pip setting). It skips, saying why, where that environment
cannot be built (no torch wheel or package index at hand).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.tools import hosted
from course_utils.tools.torch_setup import CPU_INDEX, index_reachable

ROOT = Path(__file__).resolve().parents[1]
COURSE_FOLDERS = ("notebooks", "solutions", "labs")
ALONE = ("notebooks/01_tokens_and_embeddings.ipynb", "labs/01_tokens_and_embeddings.ipynb")


def test_every_lesson_solution_and_lab_installs_the_course_in_its_first_code_cell():
    requirement = hosted.course_requirement()
    assert requirement.startswith("course-utils==")
    missing = [
        str(path.relative_to(ROOT))
        for folder in COURSE_FOLDERS
        for path in sorted((ROOT / folder).glob("*.ipynb"))
        if not hosted.carries_install_lines(nbformat.read(path, as_version=4), requirement)
    ]
    assert not missing, (
        f"{missing}: no install lines for {requirement} atop the first code cell: run "
        "`python -m course_utils hosted && python -m course_utils labs build`"
    )


def test_the_install_lines_go_in_once_and_follow_the_version():
    once = hosted.with_install_lines("import torch\n", "course-utils==0.1.0")
    assert once.endswith("\nimport torch\n") and once.count("%pip install") == 1
    assert hosted.with_install_lines(once, "course-utils==0.1.0") == once
    bumped = hosted.with_install_lines(once, "course-utils==0.2.0")
    assert bumped == once.replace("0.1.0", "0.2.0") and bumped.count("%pip install") == 1


def test_the_script_touches_only_the_first_code_cells_source(tmp_path):
    path = tmp_path / "lesson.ipynb"
    shutil.copy2(ROOT / "solutions" / "01_tokens_and_embeddings.ipynb", path)
    before = nbformat.read(path, as_version=4)
    first = before.cells.index(hosted.first_code_cell(before))
    for cell in before.cells:  # the lesson as it was before the lines went in
        cell.source = hosted.without_install_lines(cell.source)
    nbformat.write(before, path)
    assert hosted.add_install_lines(path, "course-utils==9.9") is True
    assert hosted.add_install_lines(path, "course-utils==9.9") is False
    after = nbformat.read(path, as_version=4)
    for index, (old, new) in enumerate(zip(before.cells, after.cells, strict=True)):
        assert (old.get("id"), old.get("execution_count")) == (
            new.get("id"),
            new.get("execution_count"),
        )
        if index == first:
            assert new.source == hosted.install_lines("course-utils==9.9") + old.source
        else:
            assert new == old


def run_quietly(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def last_line(done: subprocess.CompletedProcess) -> str:
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


RUN_ALONE = """
import sys, nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3")
    client.execute(cwd=".")
    nbformat.write(nb, path)
    print("ran", path)
"""


@pytest.fixture(scope="module")
def hosted_jupyter(tmp_path_factory):
    """A fresh environment with only torch, nbclient and ipykernel (no course), and a folder
    holding the course's wheel: (its python, the wheel folder)."""
    where = tmp_path_factory.mktemp("hosted")
    venv = where / "venv"
    made = run_quietly([sys.executable, "-m", "venv", str(venv)])
    if made.returncode:
        pytest.skip(f"cannot make a virtual environment: {last_line(made)}")
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # torch as a hosted Jupyter has it: a CPU wheel at hand (in pip's find-links), else one from
    # PyPI's CPU index where it answers (never the default index's multi-GB CUDA build)
    at_hand = [
        wheel
        for folder in os.environ.get("PIP_FIND_LINKS", "").split()
        for wheel in sorted(Path(folder).glob("torch-*.whl"))
    ]
    if at_hand:
        got = run_quietly([*pip, str(at_hand[-1])], timeout=900)
    elif index_reachable():
        got = run_quietly([*pip, "--index-url", CPU_INDEX, "torch"], timeout=900)
    else:
        pytest.skip(f"no CPU torch wheel in PIP_FIND_LINKS, and {CPU_INDEX} does not answer")
    if got.returncode:
        pytest.skip(f"cannot install a CPU torch: {last_line(got)}")
    got = run_quietly([*pip, "nbclient", "ipykernel"], timeout=900)
    if got.returncode:
        pytest.skip(f"cannot install nbclient and ipykernel: {last_line(got)}")
    wheels = where / "wheels"
    built = run_quietly(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheels), str(ROOT)],
        timeout=300,
    )  # fmt: skip
    if built.returncode:
        pytest.skip(f"cannot build the course's wheel: {last_line(built)}")
    return python, wheels


def test_lesson_01_and_lab_01_opened_alone_install_the_course_and_run(hosted_jupyter, tmp_path):
    python, wheels = hosted_jupyter
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    assert run_quietly([python, "-c", "import course_utils"], env=env, cwd=tmp_path).returncode
    # (not installed yet)
    names = [Path(relative).name for relative in ALONE]  # a lesson and its lab: one name
    for folder, relative in zip(("lesson", "lab"), ALONE, strict=True):
        (tmp_path / folder).mkdir()
        shutil.copy2(ROOT / relative, tmp_path / folder)
    env["PIP_FIND_LINKS"] = " ".join(filter(None, [str(wheels), env.get("PIP_FIND_LINKS")]))
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env['PATH']}"
    for folder, name in (("lesson", names[0]), ("lab", names[1])):
        done = run_quietly([python, "-c", RUN_ALONE, name], cwd=tmp_path / folder, env=env,
                           timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    shown = run_quietly([python, "-m", "pip", "show", "course-utils"], env=env, cwd=tmp_path).stdout
    assert f"Version: {hosted.course_requirement().split('==')[1]}" in shown, shown
    lab = nbformat.read(tmp_path / "lab" / names[1], as_version=4)
    errors = [o for c in lab.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]  # fmt: skip
    assert errors, "an untouched lab's answer cells say they are not done yet"
    raw = [e for e in errors if not "".join(e.traceback).startswith("\u274c Exercise")]
    assert not raw, raw  # only the course's one-line "not done yet", no traceback
