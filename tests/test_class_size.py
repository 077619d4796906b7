"""A class of 24 hand-ins (full, partial, blank, wrong and broken ones, made from lab 01's
solution and student version) graded with --jobs 2; the grader is killed with SIGKILL a third of
the way through, and the same command, run again, grades only what was not finished and writes
the gradebook an uninterrupted run would, byte for byte."""

import csv
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from grading_helpers import require_sandbox

ROOT = Path(__file__).resolve().parents[1]
LAB = "01_tokens_and_embeddings"
CLASS_SIZE = 24  # the cycle of eight kinds (benchmarks/grading.py) three times
KILL_AFTER = 8  # results in the cache when the grader is killed
TESTS = ["ex1-check", "ex2-check", "ex3-check", "ex4-check"]
SCORES = {  # per kind of hand-in (see benchmarks/grading.py)
    "full": [2, 2, 2, 2],
    "partial": [2, 0, 2, 0],
    "blank": [0, 0, 0, 0],
    "wrong": [2, 2, 2, 0],
    "raising": [2, 0, 2, 2],
}
NO_LAB_CELLS = (
    f"none of the cells of {LAB} are in it (no nbgrader cells at all): "
    f"was it started from labs/{LAB}.ipynb?"
)


def load_benchmark(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def graded_students(log: str) -> list[str]:
    """The hand-ins a run graded (cached ones are not printed)."""
    return re.findall(r"^graded \d+/\d+: (s\d{3}): ", log, re.MULTILINE)


def cached_results(cache: Path) -> int:
    return sum(1 for p in cache.glob("*/*.json") if p.name != "reference.json")


def expected_gradebook(kinds: dict[str, str], subs: Path) -> str:
    """The gradebook an uninterrupted run gives, written out from the kinds of hand-ins."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", "name", "file", *TESTS, "total", "max", "status", "reason"])
    for student, kind in sorted(kinds.items()):
        if kind in SCORES:
            scores, status, reason = SCORES[kind], "graded", ""
        elif kind == "corrupt":
            text = (subs / f"{student}.ipynb").read_text(encoding="utf-8")
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            reason = f"{student}.ipynb is not valid JSON ({where}): cut short or edited?"
            scores, status = [0] * 4, "corrupt"
        else:
            scores, status, reason = [0] * 4, "wrong_lab", NO_LAB_CELLS
        file = f"{student}.ipynb"
        writer.writerow([student, student, file, *scores, sum(scores), 8, status, reason])
    return out.getvalue()


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def still_running(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of ``processes`` still running after ``timeout`` seconds (a zombie, dead but not
    yet reaped by a container's init, is not running)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    require_sandbox()
    root = tmp_path_factory.mktemp("class")
    bench = load_benchmark("grading")
    solution, lab = ROOT / "solutions" / f"{LAB}.ipynb", ROOT / "labs" / f"{LAB}.ipynb"
    kinds = bench.make_class(root / "subs", CLASS_SIZE, solution, lab)
    out, cache = root / "gradebook.csv", root / "gradebook.cache"
    command = [sys.executable, "-m", "course_utils", "grade", LAB, str(root / "subs"),
               "--out", str(out), "--jobs", "2"]  # fmt: skip
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    started = time.monotonic()
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while cached_results(cache) < KILL_AFTER and first.poll() is None:
        time.sleep(0.2)
    running = descendants(first.pid)  # workers and sandboxed kernels, just before the kill
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    left_behind = list(Path(tempfile.gettempdir()).glob(f"course-grade-{first.pid}-*"))
    finished_before_kill = cached_results(cache)
    survivors = still_running(running, timeout=30)
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    seconds = time.monotonic() - started
    print(f"{CLASS_SIZE} hand-ins graded (killed once, resumed) in {seconds:.0f} s")
    resumed_gradebook = out.read_text(encoding="utf-8")  # before the third run rewrites it
    third = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    return {
        "kinds": kinds, "subs": root / "subs", "out": out, "first": first,
        "finished_before_kill": finished_before_kill, "survivors": survivors,
        "second": second, "third": third, "gradebook": resumed_gradebook,
        "left_behind": left_behind,
    }  # fmt: skip


def test_the_grader_was_killed_in_the_middle(klass):
    assert klass["first"].returncode == -signal.SIGKILL
    assert KILL_AFTER <= klass["finished_before_kill"] < CLASS_SIZE


def test_killing_the_grader_leaves_no_worker_or_kernel_running(klass):
    assert klass["survivors"] == []


def test_the_next_run_removes_the_killed_runs_temporary_folder(klass):
    assert len(klass["left_behind"]) == 1  # kill -9 leaves it
    assert not klass["left_behind"][0].exists()


def test_the_same_command_again_grades_only_what_was_not_finished(klass):
    assert klass["second"].returncode == 0, klass["second"].stderr[-2000:]
    graded = graded_students(klass["second"].stdout)
    assert len(graded) == len(set(graded)) == CLASS_SIZE - klass["finished_before_kill"]
    assert {klass["kinds"][s] for s in graded} == set(klass["kinds"].values())  # every kind


def test_the_resumed_gradebook_is_what_an_uninterrupted_run_gives_byte_for_byte(klass):
    assert klass["gradebook"] == expected_gradebook(klass["kinds"], klass["subs"])


def test_a_third_run_grades_nothing_and_writes_the_same_bytes(klass):
    assert klass["third"].returncode == 0
    assert graded_students(klass["third"].stdout) == []
    assert klass["out"].read_text(encoding="utf-8") == klass["gradebook"]  # the resumed run's
