"""The way in without git or make: the course builds into a wheel that carries the lessons and
the labs (not the solutions), and after ``pip install`` of it in a fresh virtual environment
``gpt-course open DIR`` copies them into the student's folder, never over their work, and lesson
01 passes nbval from that copy.

The fresh environment gets the wheel alone (``--no-deps``); its dependencies are read from this
environment's site-packages through a ``.pth`` line, so the test needs no network and no second
gigabyte of torch, and what it checks is the wheel and its command, not pip's resolver.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from course_utils.tools import open_course
from course_utils.tools.cleaning import ROOT

pytest.importorskip("build", reason="the dev extra's `build` makes the wheel (make test)")

IMPORTED_FROM = "import course_utils; print(course_utils.__file__)"
BIN = "Scripts" if sys.platform == "win32" else "bin"  # where a venv keeps its commands
SOURCES = ["pyproject.toml", "setup.py", "README.md", "LICENSE", "course_utils", "notebooks",
           "labs"]  # fmt: skip


def _copy_tree(tree: Path) -> Path:
    tree.mkdir(exist_ok=True)
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    return tree


def _build(tree: Path, out: Path, *options: str) -> tuple[Path, str]:
    """The wheel ``python -m build`` makes of ``tree`` and what it printed on stderr."""
    command = [sys.executable, "-m", "build", *options, "--no-isolation", "--outdir", str(out)]
    done = subprocess.run([*command, str(tree)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (found,) = out.glob("*.whl")
    return found, done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The course's wheel, built from a copy of the tree (the checkout stays clean)."""
    tree = _copy_tree(tmp_path_factory.mktemp("tree"))
    found, stderr = _build(tree, tmp_path_factory.mktemp("dist"), "--wheel")
    assert "is not a git checkout: the package takes the lessons and labs as they are" in stderr
    return found


@pytest.fixture(scope="module")
def fresh_env(wheel, tmp_path_factory) -> Path:
    """A new virtual environment holding only the wheel; its dependencies come from ours."""
    env = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(env, with_pip=False)
    python = env / BIN / "python"
    site_packages = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            text=True,
        ).strip()
    )
    (site_packages / "course_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True)
    return env


def test_the_wheel_carries_the_package_lessons_and_labs_but_no_solutions(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "course_utils").rglob("*.py")}
    assert package <= names, f"left out of the wheel: {sorted(package - names)[:5]}"
    settings = open_course.SETTINGS_DIR / "overrides.json"
    assert settings.relative_to(ROOT).as_posix() in names, "the JupyterLab settings are missing"
    extension = {p.relative_to(ROOT).as_posix() for p in open_course.EXTENSIONS_DIR.rglob("*.*")}
    assert extension and extension <= names, "the course's JupyterLab extension is missing"
    for folder in open_course.FOLDERS:
        expected = {
            f"course_utils/course/{folder}/{p.name}" for p in (ROOT / folder).glob("*.ipynb")
        }
        assert expected and expected <= names
    assert not [n for n in names if "solutions" in n or "BEGIN SOLUTION" in n]
    solution_cells = [
        n for n in names if n.endswith(".ipynb") and b"### BEGIN SOLUTION" in zipfile.ZipFile(
            wheel).read(n)
    ]  # fmt: skip
    assert solution_cells == []


def test_gpt_course_open_copies_the_course_and_keeps_the_students_work(fresh_env, tmp_path):
    command = fresh_env / BIN / "gpt-course"
    where = subprocess.run(
        [str(fresh_env / BIN / "python"), "-c", IMPORTED_FROM],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert where.startswith(str(fresh_env)), where  # the wheel's package, not the checkout's
    student = tmp_path / "my course"
    first = subprocess.run([str(command), "open", str(student), "--copy-only"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in (student / "notebooks").glob("*.ipynb")) == lessons
    assert (student / "labs" / "01_tokens_and_embeddings.ipynb").is_file()
    assert not (student / "solutions").exists()
    assert f"{2 * len(lessons)} notebooks copied" in first.stdout
    mine = student / "labs" / "01_tokens_and_embeddings.ipynb"
    mine.write_text("my work", encoding="utf-8")
    again = subprocess.run([str(command), "open", str(student), "--copy-only"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert mine.read_text(encoding="utf-8") == "my work"
    assert "0 notebooks copied" in again.stdout and "kept as they are" in again.stdout


def test_lesson_01_passes_nbval_from_the_students_copy(fresh_env, tmp_path):
    student = tmp_path / "student"
    python = fresh_env / BIN / "python"
    subprocess.run([str(fresh_env / BIN / "gpt-course"), "open", str(student), "--copy-only"],
                   check=True, capture_output=True)  # fmt: skip
    lesson = student / "notebooks" / "01_tokens_and_embeddings.ipynb"
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
         "--nbval-current-env", f"--nbval-sanitize-with={ROOT / 'nbval_sanitize.cfg'}",
         f"--rootdir={student}", str(lesson)],
        capture_output=True, text=True, cwd=student,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout.splitlines()[-1]


def test_jupyterlab_serves_the_whole_copy_and_opens_lesson_01(tmp_path):
    command = open_course.lab_command(tmp_path, browser=False)
    assert f"--ServerApp.root_dir={tmp_path}" in command and "--no-browser" in command
    assert command[-1] == str(tmp_path / open_course.FIRST_LESSON)
    assert f"--LabApp.app_settings_dir={open_course.SETTINGS_DIR}" in command
    assert f"--LabApp.extra_labextensions_path={open_course.EXTENSIONS_DIR}" in command
    overrides = json.loads((open_course.SETTINGS_DIR / "overrides.json").read_text())
    assert overrides["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}


def test_the_wheel_takes_the_committed_notebooks_not_the_working_trees_run_state(tmp_path):
    """A clone with a lesson run (its outputs changed, unsaved state) and a lab begun but not
    committed: the sdist and the wheel built from it (python -m build's way) carry HEAD's."""
    tree = _copy_tree(tmp_path / "clone")
    git = ["git", "-c", "user.name=s", "-c", "user.email=s@example.org", "-C", str(tree)]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the course"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    lesson = tree / "notebooks" / "11_sumgpt.ipynb"
    committed = lesson.read_bytes()
    run = json.loads(committed)
    run["metadata"]["widgets"] = {"state": "a moved slider"}
    timing = {"output_type": "stream", "name": "stdout", "text": "training wall: 953.6 s\n"}
    run["cells"][-1].setdefault("outputs", []).append(timing)
    lesson.write_text(json.dumps(run), encoding="utf-8")
    (tree / "labs" / "99_mine.ipynb").write_text("{}", encoding="utf-8")
    found, stderr = _build(tree, tmp_path / "dist")  # sdist, then the wheel from the sdist
    packed = zipfile.ZipFile(found)
    assert packed.read("course_utils/course/notebooks/11_sumgpt.ipynb") == committed
    assert "course_utils/course/labs/99_mine.ipynb" not in packed.namelist()
    assert "labs/99_mine.ipynb is not committed: left out" in stderr
    assert b"953.6" in lesson.read_bytes(), "the working tree keeps the student's run"
