"""Repository-wide pytest hooks: a preflight at the start (what decides which tests can run), the
threads of each parallel worker (``make test`` runs ``pytest -n 2``), the slowest files handed
out first, and a per-file time table at the end of a run (each notebook's cells add up to its
file, and each test file's fixtures count with its tests), so CI prints how long every lesson and
test file took."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

PHASES = ("setup", "call", "teardown")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

# The files that take longest on 2 cores (CI's table, seconds per file), handed out first when
# pytest-xdist runs files side by side (`--dist loadfile --no-loadscope-reorder`), so that no
# worker starts a three-minute lesson while the other has nothing left to do. The rest follow in
# collection order; a file missing here only runs later.
SLOWEST_FIRST = (  # the longest first, as measured on the CUDA build of torch 2.14
    "notebooks/11_sumgpt.ipynb",
    "tests/test_labs.py",
    "tests/test_site.py",
    "tests/test_gradescope.py",
    "tests/test_benchmarks.py",
    "tests/test_wrong_answers.py",
    "notebooks/12_bookgpt.ipynb",
    "tests/test_tamper.py",
    "tests/test_sandbox.py",
    "tests/test_class_size.py",
    "tests/test_bookgpt.py",
    "tests/test_grading.py",
    "tests/test_jupyterlab.py",
)


def cpu_count() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def worker_threads(workers: int, cpus: int) -> int:
    """Torch threads for each of ``workers`` parallel workers, so that together they use the
    CPUs without oversubscribing them (two workers with two threads each on 2 cores ran 2-3x
    slower than one thread each)."""
    return max(1, cpus // max(1, workers))


def settle_worker_threads(environ=os.environ) -> str | None:
    """In a pytest-xdist worker: unless the run chose a thread count, give torch (here and in
    every kernel and command a test starts, which inherit the environment) this worker's share
    of the CPUs, and let idle OpenMP threads sleep rather than spin (OMP_WAIT_POLICY=PASSIVE).
    Returns the share it set (None when it set none)."""
    workers = environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return None
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if any(name in environ for name in THREAD_VARIABLES):
        return None
    threads = str(worker_threads(int(workers), cpu_count()))
    for name in THREAD_VARIABLES:
        environ[name] = threads
    return threads


# The lessons that train, run as a student's kernel runs them: on every CPU (waiting without
# spinning, as the course's kernels do), not on the worker's share, so the suite checks them no
# slower than a student runs them. A thread count the run chose is kept.
STUDENT_THREADS = ("notebooks/11_sumgpt.ipynb", "notebooks/12_bookgpt.ipynb")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a file's first item starts its kernel: all CPUs for the lessons of
    ``STUDENT_THREADS``, the worker's share for everything else."""
    if WORKER_SHARE is None:
        return
    threads = str(cpu_count()) if file_of(item.nodeid) in STUDENT_THREADS else WORKER_SHARE
    for name in THREAD_VARIABLES:
        os.environ[name] = threads


WORKER_SHARE = settle_worker_threads()  # before anything imports torch, which reads them once


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def slowest_first(paths: list[str], slow: tuple[str, ...] = SLOWEST_FIRST) -> dict[str, int]:
    """Each file's place when handing out work: the files of ``slow`` in its order, then the
    rest as collected."""
    rank = {path: i for i, path in enumerate(slow)}
    collected = list(dict.fromkeys(paths))  # each file once, as collected
    order = sorted(collected, key=lambda path: rank.get(path, len(slow)))  # stable
    return {path: i for i, path in enumerate(order)}


def pytest_collection_modifyitems(session, config, items):
    """In a pytest-xdist worker, the slowest files first (a file's own items keep their order:
    a notebook's cells run in order in one kernel). Every worker sorts alike, as xdist needs."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    place = slowest_first([file_of(item.nodeid) for item in items])
    items.sort(key=lambda item: place[file_of(item.nodeid)])  # stable within a file


def seconds_per_file(reports) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds per test file (setup, call and teardown) and per pytest-xdist worker (its
    gateway id; none without xdist), from the test reports."""
    files: dict[str, float] = defaultdict(float)
    workers: dict[str, float] = defaultdict(float)
    for report in reports:
        if getattr(report, "when", None) in PHASES and hasattr(report, "duration"):
            files[file_of(report.nodeid)] += report.duration
            node = getattr(report, "node", None)  # set by xdist on the reports it forwards
            if node is not None:
                workers[node.gateway.id] += report.duration
    return files, workers


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Seconds per test file, slowest first, for the files that took at least a second: setup,
    call and teardown, so a fixture that trains a model counts for the file that uses it. Under
    pytest-xdist the controller receives every worker's reports, so the table covers them all,
    with each worker's busy seconds after it."""
    reports = [r for rs in terminalreporter.stats.values() for r in rs]
    files, workers = seconds_per_file(reports)
    rows = sorted(((s, f) for f, s in files.items() if s >= 1.0), reverse=True)
    if rows:
        terminalreporter.write_sep(
            "-", "seconds per file (fixtures included; cells of a notebook add up)"
        )
        for s, f in rows:
            terminalreporter.write_line(f"{s:8.1f}  {f}")
        total = f"{sum(files.values()):8.1f}  all files"
        if workers:
            busy = ", ".join(f"{w} {s:.0f} s" for w, s in sorted(workers.items()))
            total += f" ({len(workers)} workers side by side, busy: {busy})"
        terminalreporter.write_line(total)


def pytest_report_header(config):
    """The preflight, first thing in every run: what lies outside Python and decides which tests
    can run (the grading sandbox, user namespaces, a browser for the website's test)."""
    from course_utils.tools.doctor import preflight_lines

    return [f"preflight: {line}" for line in preflight_lines()]
