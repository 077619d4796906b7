"""Any supported Python, chosen plainly: `make ... PYTHON=python3.X` refuses a Python outside
3.11-3.13 in one line before anything is installed, and finds and rebuilds a `.venv` made by
another Python (course_utils/tools/python_check.py); torch_setup.py and `gpt-course` refuse too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.tools import python_check

ROOT = Path(__file__).resolve().parents[1]


def find_python(minor: int) -> str | None:
    """An absolute path to a working python3.<minor> (on PATH, or pyenv's), or None."""
    name = f"python3.{minor}"
    candidates = [shutil.which(name)] + sorted(
        str(p) for p in (Path.home() / ".pyenv" / "versions").glob(f"3.{minor}.*/bin/{name}")
    )
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[1])"],
                               capture_output=True, text=True)  # fmt: skip
        if probe.returncode == 0 and probe.stdout.strip() == str(minor):
            return candidate
    return None


def need_python(minor: int) -> str:
    found = find_python(minor)
    if found is None:
        pytest.skip(f"no python3.{minor} on this machine")
    if shutil.which("make") is None:
        pytest.skip("no make")
    return found


def make(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VENV", "MAKEFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def venv_minor(venv: Path) -> int:
    return python_check.venv_version(str(venv))[1]


def test_python_310_is_refused_in_one_line_naming_the_fix(tmp_path):
    py310 = need_python(10)
    venv = tmp_path / ".venv"
    done = make("check-python", f"PYTHON={py310}", f"VENV={venv}")
    ours = [line for line in done.stderr.splitlines() if line.startswith("setup:")]
    assert done.returncode != 0 and len(ours) == 1, done.stderr
    assert "3.10" in ours[0] and "needs 3.11 to 3.13" in ours[0] and "PYTHON=" in ours[0], ours
    assert not venv.exists() and done.stdout == ""


def test_a_python_that_does_not_run_is_named_in_one_line_with_the_fix(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("no make")
    venv = tmp_path / ".venv"
    done = make("check-python", "PYTHON=python3.99", f"VENV={venv}")
    ours = [line for line in done.stderr.splitlines() if line.startswith("setup:")]
    assert done.returncode != 0 and len(ours) == 1, done.stderr
    assert "python3.99 does not run on this machine" in ours[0] and "PYTHON=" in ours[0], ours
    assert not venv.exists() and done.stdout == ""


def test_every_entry_point_checks_the_python_before_it_installs_anything(tmp_path):
    venv = tmp_path / ".venv"
    for goal in ("setup", "course", "instructor", "dev", "test", "site"):
        plan = make("-n", goal, f"VENV={venv}").stdout
        assert "python_check.py" in plan, goal
        steps = (" -m venv ", " pip ", "torch_setup")
        first_install = min(plan.find(w) for w in steps if w in plan)
        assert plan.find("python_check.py") < first_install, (goal, plan)


def test_a_venv_made_by_another_python_is_rebuilt_with_the_one_named(tmp_path):
    py310, py312 = need_python(10), need_python(12)
    venv = tmp_path / ".venv"
    subprocess.run([py310, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = make("check-python", f"{venv}/bin/python", f"PYTHON={py312}", f"VENV={venv}")
    assert done.returncode == 0, done.stderr
    assert "was made by Python 3.10" in done.stdout and venv_minor(venv) == 12, done.stdout


def test_a_good_venv_is_kept_unless_another_python_is_named(tmp_path):
    py312, py310 = need_python(12), need_python(10)
    venv = tmp_path / ".venv"
    subprocess.run([py312, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / "mine").write_text("installed packages")
    kept = make("check-python", f"VENV={venv}")  # plain python3, whatever its version
    assert kept.returncode == 0 and kept.stdout == "" and (venv / "mine").exists(), kept.stderr
    refused = make("check-python", f"PYTHON={py310}", f"VENV={venv}")
    assert refused.returncode != 0 and (venv / "mine").exists(), refused.stderr


def test_a_folder_that_is_not_a_venv_is_never_removed(tmp_path):
    py312 = need_python(12)
    venv = tmp_path / ".venv"
    venv.mkdir()
    (venv / "precious").write_text("keep")
    done = make("check-python", f"PYTHON={py312}", f"VENV={venv}")
    assert done.returncode != 0 and "rm -rf" in done.stderr and (venv / "precious").exists()


def test_torch_setup_refuses_an_old_python_in_one_line():
    py310 = need_python(10)
    done = subprocess.run([py310, "course_utils/tools/torch_setup.py"], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and "3.11 to 3.13" in done.stderr, done.stderr


def test_the_wheels_way_in_refuses_an_unsupported_python_naming_a_fresh_venv(monkeypatch):
    line = python_check.refusal((3, 14, 0), "python3", how=python_check.venv_fix())
    assert "Python 3.14.0" in line and "-m venv" in line, line
    assert python_check.refusal(sys.version_info[:3]) is None
    from course_utils.tools import cli

    monkeypatch.setattr(cli, "refusal", lambda **_: "setup: wrong")
    assert cli.main(["doctor"]) == 2
