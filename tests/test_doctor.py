"""`doctor` in a student's environment reports the student's role only, each line once: no list
of the instructor, maintainer and website packages it does not need, no empty fix, and the bf16
verdict of a first probe printed once (course_utils/tools/doctor.py)."""

from __future__ import annotations

from collections import Counter

from course_utils.core import cpu
from course_utils.tools import doctor


def test_a_students_doctor_reports_the_students_role_once_each(monkeypatch, capsys, tmp_path):
    base = {r.split(">")[0].split("<")[0].split("=")[0] for r in doctor.requirements()[""]}
    installed = doctor.check

    def as_a_student(requirement: str):
        name = requirement.split(">")[0].split("<")[0].split("=")[0]
        return installed(requirement) if name in base else "not installed"

    monkeypatch.setattr(doctor, "check", as_a_student)
    monkeypatch.setattr(cpu, "cache_file", lambda: tmp_path / "bf16.json")  # probe afresh
    monkeypatch.setattr(cpu, "_MEMO", {})
    doctor.main()
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
    repeated = [line for line, n in Counter(lines).items() if n > 1]
    assert not repeated, repeated
    text = "\n".join(lines)
    for other in ("nbgrader", "sphinx", "ruff", "selenium", "only needed", "sandbox"):
        assert other not in text, (other, text)
    assert "packages (for the course):" in text and text.count("not installed") == 1, text
    assert sum("bf16" in line for line in lines) <= 1, text
