"""The Gradescope export: a bundle with setup.sh, run_autograder, the course and the lab, and
run_autograder grading a submission on a fake /autograder tree into results.json."""

import json
import os
import subprocess
import sys
import zipfile

import pytest
from grading_helpers import FIXTURE, lab, require_sandbox, save, solved

from course_utils.tools import gradescope


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(out), "--timeout", "20"]) == 0
    return out


def autograder_tree(tmp_path, bundle, notebook_name, write):
    """A fake /autograder: the unzipped bundle in source/, one submission, an empty results/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    write(root / "submission" / notebook_name)
    return root


def run_autograder(root):
    require_sandbox()
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
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
    assert "course/course_utils/tools/grading.py" in names
    assert not [n for n in names if n.startswith(("course/solutions", "course/tests"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".ipynb") and "lab/" not in n]
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert settings == {"lab": "grading_fixture", "memory": "4G", "sandbox": True, "timeout": 20}
    assert "apt-get install" in setup and "bubblewrap" in setup
    assert "download.pytorch.org/whl/cpu" in setup and '"./course[instructor]"' in setup


def test_the_bundle_is_the_same_bytes_every_time(bundle, tmp_path):
    again = tmp_path / "again.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(again), "--timeout", "20"]) == 0
    assert again.read_bytes() == bundle.read_bytes()


def test_the_course_in_the_bundle_installs(bundle, tmp_path):
    with zipfile.ZipFile(bundle) as z:
        z.extractall(tmp_path / "source")
    wheel = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheels"), str(tmp_path / "source" / "course")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert wheel.returncode == 0, wheel.stderr[-2000:]
    built = list((tmp_path / "wheels").glob("course_utils-*.whl"))
    with zipfile.ZipFile(built[0]) as z:
        assert "course_utils/tools/gradescope.py" in z.namelist()


def test_run_autograder_writes_a_test_per_graded_cell(bundle, tmp_path):
    partial = solved(lab(), "ex1_answer", "ex3_answer")
    root = autograder_tree(tmp_path, bundle, "my lab.ipynb", lambda path: save(partial, path))
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


def test_a_corrupt_submission_scores_0_and_says_why(bundle, tmp_path):
    root = autograder_tree(
        tmp_path, bundle, "grading_fixture.ipynb", lambda path: path.write_text('{"cells": [')
    )
    done, results = run_autograder(root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0
    assert results["output"].startswith("Not graded (corrupt): grading_fixture.ipynb is not valid")
    assert [t["score"] for t in results["tests"]] == [0, 0, 0]


def test_a_bundle_command_without_out_is_a_usage_error(capsys):
    assert gradescope.main([str(FIXTURE)]) == 2
    assert "pass a lab and --out, for example:" in capsys.readouterr().err
