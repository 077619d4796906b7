"""Repository-wide pytest hooks: a preflight at the start (what decides which tests can run) and a
per-file time table at the end of a run (each notebook's cells add up to its file, and each test
file's fixtures count with its tests), so CI prints how long every lesson and test file took."""

from __future__ import annotations

from collections import defaultdict

PHASES = ("setup", "call", "teardown")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Seconds per test file, slowest first, for the files that took at least a second: setup,
    call and teardown, so a fixture that trains a model counts for the file that uses it."""
    seconds: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) in PHASES and hasattr(report, "duration"):
                seconds[report.nodeid.split("::")[0]] += report.duration
    rows = sorted(((s, f) for f, s in seconds.items() if s >= 1.0), reverse=True)
    if rows:
        terminalreporter.write_sep(
            "-", "seconds per file (fixtures included; cells of a notebook add up)"
        )
        for s, f in rows:
            terminalreporter.write_line(f"{s:8.1f}  {f}")


def pytest_report_header(config):
    """The preflight, first thing in every run: what lies outside Python and decides which tests
    can run (the grading sandbox, user namespaces, a browser for the website's test)."""
    from course_utils.tools.doctor import preflight_lines

    return [f"preflight: {line}" for line in preflight_lines()]
