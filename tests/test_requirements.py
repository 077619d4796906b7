"""Installs by role: one dependency list (pyproject.toml) that the other copies must match."""

import re
import tomllib
from pathlib import Path

from course_utils.tools import doctor, torch_setup

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CONDA_NAMES = {"pytorch": "torch"}


def normalized(requirement: str) -> tuple[str, frozenset]:
    """(name, set of version clauses): ``torch<3,>=2.4`` == ``torch >=2.4,<3``."""
    name, spec = re.match(r"\s*([A-Za-z0-9._-]+)\s*(.*)", requirement).groups()
    return CONDA_NAMES.get(name, name).lower(), frozenset(c.strip() for c in spec.split(",") if c)


def environment_yml() -> set:
    """The packages under ``dependencies:`` (conda's and pip's), without python, pip and -e ."""
    text = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    items = re.findall(r"^\s+- ([^\s:]+)$", text, flags=re.M)
    return {normalized(i) for i in items if i != "pip" and not i.startswith(("python>", "python<"))}


def test_environment_yml_lists_the_students_packages_with_the_same_ranges():
    assert environment_yml() == {normalized(r) for r in PROJECT["dependencies"]}


def test_requirements_txt_is_the_students_install_without_instructor_tools():
    lines = [
        line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines == ["-e ."]
    base = {normalized(r)[0] for r in PROJECT["dependencies"]}
    assert "nbgrader" not in base and "transformers" not in base  # no nbgrader menu for students
    assert "nbgrader" in {normalized(r)[0] for r in PROJECT["optional-dependencies"]["instructor"]}


def test_doctor_checks_exactly_the_packages_of_pyproject_by_role():
    groups = doctor.requirements()
    assert {normalized(r) for r in groups[""]} == {normalized(r) for r in PROJECT["dependencies"]}
    for extra, listed in PROJECT["optional-dependencies"].items():
        assert {normalized(r) for r in groups[extra]} == {normalized(r) for r in listed}


def test_doctor_flags_a_missing_or_too_old_package():
    assert doctor.check("numpy>=1.0") is None
    assert doctor.check("no-such-package-here>=1") == "not installed"
    assert "does not satisfy" in doctor.check("numpy>=999")


def test_the_torch_setup_installs_the_courses_torch_range():
    assert normalized(torch_setup.torch_requirement()) == normalized(
        next(r for r in PROJECT["dependencies"] if r.startswith("torch"))
    )
    assert torch_setup.installed_torch().startswith("torch ")  # this environment has one


def test_doctor_says_what_dtype_auto_trains_in_here(monkeypatch, capsys):
    from course_utils.core import device

    for amx, dtype in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(device, "has_amx", lambda amx=amx: amx)
        monkeypatch.setenv("COURSE_DEVICE", "cpu")
        assert doctor.torch_report() == 0
        assert f"--dtype auto trains in {dtype} here" in capsys.readouterr().out
